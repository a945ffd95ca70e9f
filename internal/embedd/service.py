"""The embedding service behind the HTTP handlers: limits, model choice, cache."""

from __future__ import annotations

import numpy as np

from internal.api.responses import ModelInfo, ModelsResponse
from internal.common.errors import InvalidArgument, PayloadTooLarge
from internal.embedd import cache as cache_mod
from internal.embedd.backends import Backend
from internal.embedd.cache import LRUCache
from internal.embedd.coalesce import Lane
from internal.embedd.local import Vectors


class EmbedResult:
    __slots__ = ("dim", "model", "truncated", "vectors", "wait_s")

    def __init__(self, model: str, dim: int, vectors: Vectors, truncated: list[int],
                 wait_s: float = 0.0) -> None:
        self.model = model
        self.dim = dim
        self.vectors = vectors
        self.truncated = truncated
        self.wait_s = wait_s  # how long its texts waited in their lane for a model call


class EmbedService:
    """Validates a request, serves what it can from the cache, asks a backend for the rest."""

    def __init__(self, backends: list[Backend], cache_size: int, max_texts: int) -> None:
        self.backends = backends
        self.default = backends[0]
        self.cache = LRUCache(cache_size)
        self.max_texts = max_texts

    def pick(self, model: str | None) -> Backend:
        """The backend serving model (its id or its backend kind); None: the default."""
        if model is None or model == "":
            return self.default
        for b in self.backends:
            if model in (b.model, b.kind):
                return b
        known = ", ".join(b.model for b in self.backends)
        raise InvalidArgument(f"model: unknown model {model!r}; known: {known}", field="model")

    def check(self, texts: list[str]) -> None:
        if len(texts) > self.max_texts:
            raise PayloadTooLarge(
                f"texts: {len(texts)} texts, at most {self.max_texts} per request", field="texts")
        for i, t in enumerate(texts):
            if not t.strip():
                raise InvalidArgument(f"texts[{i}]: must not be empty or blank",
                                      field=f"texts[{i}]")

    async def embed(self, texts: list[str], model: str | None = None,
                    input_type: str = "document", lane: Lane = Lane.BULK) -> EmbedResult:
        """Vectors for texts in request order, L2-normalised; truncated lists indices."""
        self.check(texts)
        backend = self.pick(model)
        prefix = backend.prefix(input_type)
        sent = [prefix + t for t in texts]
        keys = [cache_mod.key(backend.model, s) for s in sent]
        found: list[cache_mod.Entry | None] = [self.cache.get(k) for k in keys]
        # Each distinct missing text goes to the model once, whatever its repeats.
        missing: dict[cache_mod.Key, int] = {}
        for i, entry in enumerate(found):
            if entry is None and keys[i] not in missing:
                missing[keys[i]] = i
        wait_s = 0.0
        if missing:
            order = list(missing.values())
            got = await backend.embed([sent[i] for i in order], lane)
            enc, wait_s = got.encoded, got.wait_s
            cut = set(enc.truncated)
            fresh: dict[cache_mod.Key, cache_mod.Entry] = {}
            for row, i in enumerate(order):
                self.cache.put(keys[i], enc.vectors[row], row in cut)
                fresh[keys[i]] = cache_mod.Entry(enc.vectors[row], row in cut)
            found = [e if e is not None else fresh[keys[i]] for i, e in enumerate(found)]
        entries = [e for e in found if e is not None]
        dim = backend.dim or (entries[0].vector.shape[0] if entries else 0)
        vectors = (np.stack([e.vector for e in entries]) if entries
                   else np.zeros((0, dim), dtype=np.float32))
        truncated = [i for i, e in enumerate(entries) if e.truncated]
        return EmbedResult(backend.model, dim, vectors, truncated, wait_s)

    def lanes(self) -> dict[str, object]:
        """Each backend's lanes: texts waiting, calls, the longest wait and model call."""
        return {"models": [{"id": b.model, "backend": b.kind, "lanes": b.lanes()}
                           for b in self.backends]}

    def models(self) -> ModelsResponse:
        return ModelsResponse(default=self.default.model, models=[
            ModelInfo(id=b.model, backend=b.kind, dim=b.dim, superseded_by=b.superseded_by,
                      languages=None if b.languages is None else list(b.languages))
            for b in self.backends])
