"""The integer-kernel model: built from the installed wheel alone, the same bytes each
time, checked by its hash, and the one every stack of the suite runs came from set-up."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from internal.embedd import model_build
from internal.embedd.local import LocalModel, model_path, tokenizer_path
from tests.embedd.exact_products import exact_products, pooled, weight_storage

ROOT = Path(__file__).resolve().parents[2]


def test_the_build_is_deterministic_and_has_the_expected_hash() -> None:
    first = model_build.build_bytes(model_build.source_path())
    second = model_build.build_bytes(model_build.source_path())
    assert model_build.sha256(first) == model_build.sha256(second) == model_build.EXPECTED_SHA256
    assert first == second


def test_setup_built_the_model_the_stacks_run() -> None:
    """scripts/setup.sh builds it into the cache; embedd finds it there, as it is."""
    path = model_build.cache_dir() / model_build.FILE_NAME
    assert path.is_file(), "scripts/setup.sh did not build the model"
    assert model_build.sha256(path.read_bytes()) == model_build.EXPECTED_SHA256
    assert model_path("integer") == path


def test_a_fresh_cache_is_built_offline_by_the_command(tmp_path: Path) -> None:
    """What a fresh clone's set-up runs, with every proxy pointing nowhere: no network."""
    nowhere = "http://127.0.0.1:9"
    env = {**os.environ, "HTTP_PROXY": nowhere, "HTTPS_PROXY": nowhere, "ALL_PROXY": nowhere,
           "LAKEHOUSE_MODEL_CACHE": str(tmp_path / "models")}
    out = subprocess.run([sys.executable, "-m", "internal.embedd.model_build"], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=120, check=True)
    built = Path(out.stdout.strip())
    assert built == tmp_path / "models" / model_build.FILE_NAME
    assert model_build.sha256(built.read_bytes()) == model_build.EXPECTED_SHA256
    assert [p.name for p in built.parent.iterdir()] == [built.name]  # no temporary left


def test_a_damaged_file_is_built_again(tmp_path: Path) -> None:
    target = tmp_path / model_build.FILE_NAME
    target.write_bytes(b"not a model")
    assert model_build.ensure(tmp_path) == target
    assert model_build.sha256(target.read_bytes()) == model_build.EXPECTED_SHA256


def test_other_bytes_than_expected_are_refused_and_not_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_build, "EXPECTED_SHA256", "0" * 64)
    with pytest.raises(model_build.BuildError, match="expected 0000"):
        model_build.ensure(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_integer_vectors_stay_close_to_the_shipped_numerics() -> None:
    """The same weights, multiplied as integers (a few outlier channels in float): each
    vector near the float one (0.9946 on average before those channels), and a text's
    vector does not depend on the texts embedded beside it."""
    texts = ["How do I reset my password?",
             "Laminar flow over a flat plate at high Mach numbers, with heat transfer.",
             "Die Katze sitzt auf der Matte."]
    integer, shipped = LocalModel(1, "integer"), LocalModel(1, "float")
    got = integer.embed(texts).vectors
    ref = shipped.embed(texts).vectors
    assert float(np.min((got * ref).sum(axis=1))) > 0.999
    alone = np.stack([integer.embed([t]).vectors[0] for t in texts])
    np.testing.assert_allclose(got, alone, atol=1e-6)


# Texts whose activations are large: with int8 weights the x86 kernels without VNNI
# saturated their products, and these fell to 0.954 ("....") - 0.978 of the float vectors.
LOUD = ["....", "?", "How do I reset my password?", "!!!!!!!!"]


def test_the_integer_products_are_exact_on_every_cpu() -> None:
    """The weights are stored as uint8 around 128 (onnxruntime's u8u8 kernels, exact on
    every CPU; as int8 they took u8s8 kernels that saturate on x86 without VNNI), and this
    CPU computes what exact integer arithmetic does: the same vectors on every machine."""
    from tokenizers import Tokenizer

    data = model_path("integer").read_bytes()
    assert weight_storage(data) == {("uint8", 128)}
    tok = Tokenizer.from_file(str(tokenizer_path()))
    tok.no_padding()  # tokenizer.json pads to 128; embedd embeds a text alone, unpadded
    exact = pooled(exact_products(data), [tok.encode(t).ids for t in LOUD], token_types=True)
    got = LocalModel(1, "integer").embed(LOUD).vectors
    np.testing.assert_allclose(got, exact, atol=1e-5)
    # and near the float numerics, tightly (0.9986 at worst, "....")
    ref = LocalModel(1, "float").embed(LOUD).vectors
    assert float(np.min((got * ref).sum(axis=1))) > 0.998
