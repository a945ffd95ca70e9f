"""Load a data set's corpus into vectord, embedding only what is not there already.

The corpus is a cache: items whose content hash (vectord's /ids listing) equals the
document's are kept as they are, changed or missing ones are embedded and upserted,
and items no longer in the data set are deleted. A corpus made with another model
or dimension is dropped and rebuilt, since its vectors cannot be compared.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import structlog

from internal.clients.embed import EmbedClient, Embedding
from internal.clients.vectord import VectordClient
from internal.evaluation.beir import Doc
from internal.ingest import Doc as StoredDoc
from internal.ingest import Pipeline, changed

log = structlog.get_logger()

LANGUAGE = "english"  # every shared data set is English; fixed so hashes are stable
EMBED_BATCH = 64
INFLIGHT = 2  # batches embedded at once: keeps embedd busy while vectord writes

Progress = Callable[[int, int], None]


# A text embedded beside every cached file: a model id whose numerics changed (a new build
# of the same weights, docs/decisions/0210) gives another vector, and the file is not read.
PROBE = "The vector cache's probe: are these the numerics that embedded the file?"


class VectorCache:
    """Document vectors on disk keyed by model and sha256 of the embedded text.

    vectord is the cache of record (its content hashes decide what is re-embedded);
    this file only spares the embedding when a corpus must be rebuilt (a new
    database, a schema change), which for SciFact is minutes of CPU. probe: the model's
    vector of PROBE now; a file holding another (or none) is stale and not read.
    """

    def __init__(self, path: Path | None, model: str, probe: list[float] | None = None) -> None:
        self.path = path
        self.model = model
        self.probe = probe
        self.vectors: dict[str, list[float]] = {}
        self.dirty = False
        if path is not None and path.is_file():
            with np.load(path, allow_pickle=False) as data:
                if str(data["model"]) == model and self._same_numerics(data):
                    for key, vec in zip(data["keys"].tolist(), data["vectors"], strict=True):
                        self.vectors[str(key)] = [float(x) for x in vec]

    def _same_numerics(self, data: Any) -> bool:
        if self.probe is None:
            return True
        if "probe" not in data.files or data["probe"].shape != (len(self.probe),):
            return False
        return bool(np.allclose(data["probe"], np.asarray(self.probe, np.float32), atol=1e-5))

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def get(self, text: str) -> list[float] | None:
        return self.vectors.get(self.key(text))

    def put(self, text: str, vector: list[float]) -> None:
        self.vectors[self.key(text)] = vector
        self.dirty = True

    def save(self) -> None:
        if self.path is None or not self.dirty or not self.vectors:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp.npz")
        arrays: dict[str, Any] = {
            "model": np.array(self.model), "keys": np.array(list(self.vectors)),
            "vectors": np.array(list(self.vectors.values()), dtype=np.float32)}
        if self.probe is not None:
            arrays["probe"] = np.asarray(self.probe, np.float32)
        np.savez(tmp, **arrays)
        os.replace(tmp, self.path)
        self.dirty = False


@dataclass(frozen=True)
class IngestReport:
    corpus: str
    model: str
    docs: int
    empty: int  # documents with neither title nor text: nothing to embed, not stored
    embedded: int  # upserted: new or changed content
    from_cache: int  # of those, vectors read from the cache file instead of embedded
    reused: int
    deleted: int
    rebuilt: bool
    seconds: float


def embed_text(doc: Doc) -> str:
    """What the model reads for a document: title and text, as BEIR's dense baselines do."""
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text


def _doc(doc: Doc) -> StoredDoc:
    """A data set's document as stored: its title, text and metadata, in English."""
    return StoredDoc(id=doc.id, text=doc.text, title=doc.title or None,
                     metadata=doc.metadata, language=LANGUAGE, embedded_from=embed_text(doc))


async def _open_corpus(vc: VectordClient, name: str, model: str, dim: int) -> tuple[bool, bool]:
    """Make sure the corpus exists for this model: (created, rebuilt)."""
    corpus, created = await vc.ensure_corpus(name, dim, "cosine", language=LANGUAGE, model=model)
    if created or (corpus.model == model and corpus.dim == dim):
        return created, False
    log.info("eval_corpus_rebuild", corpus=name, had_model=corpus.model, model=model)
    await vc.delete_corpus(name)
    await vc.create_corpus(name, dim, "cosine", language=LANGUAGE, model=model)
    return True, True


async def _listed(ec: EmbedClient, model: str) -> tuple[str, int]:
    """model's id and dimension as embedd lists them."""
    for m in (await ec.models()).models:
        if model in (m.id, m.backend) and m.dim:
            return m.id, m.dim
    probe = await ec.embed(["dimension probe"], model=model)
    return probe.model, probe.dim


def cache_path(cache_dir: Path, corpus: str, model: str) -> Path:
    """The vector cache file of a corpus embedded by model."""
    slug = "".join(c if c.isalnum() else "_" for c in model)
    return cache_dir / f"{corpus}.{slug}.npz"


async def ingest(vc: VectordClient, ec: EmbedClient, name: str, docs: Sequence[Doc],
                 progress: Progress | None = None, cache_dir: Path | None = None,
                 cache_name: str | None = None, model: str | None = None) -> IngestReport:
    """Bring corpus `name` in line with docs; embed (input_type document) only what changed.

    cache_dir: where document vectors are kept between runs (None: not kept); cache_name:
    the corpus whose cache file to use (default: name); model: the one embedd serves to
    embed with (None: its default; a corpus of another model is made anew).
    """
    started = time.perf_counter()
    model, dim = await (ec.default_model() if model is None else _listed(ec, model))
    cache = VectorCache(None, model) if cache_dir is None else VectorCache(
        cache_path(cache_dir, cache_name or name, model), model,
        (await ec.embed([PROBE], model=model)).vectors[0])
    _, rebuilt = await _open_corpus(vc, name, model, dim)
    wanted = [_doc(d) for d in docs]
    stored = {row.id: row.content_hash async for row in vc.iter_ids(name)}
    todo, empty, _ = changed(wanted, stored)
    kept = {d.id for d in wanted} - {d.id for d in empty}
    stale = sorted(set(stored) - kept)
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None:
            progress(done, len(todo))

    embedder = _Cached(ec, cache)
    pipe = Pipeline(vc, embedder, name, model=model, batch=EMBED_BATCH, concurrency=INFLIGHT,
                    progress=advance)
    try:
        await pipe.write(todo)
    finally:
        cache.save()
    await pipe.delete_stale({i: [i] for i in stale})
    if pipe.report.failed:  # a data set the stack refuses is a broken harness, not a result
        doc_id, (_, exc) = next(iter(pipe.report.failed.items()))
        raise RuntimeError(f"{name}: document {doc_id!r} refused: {exc}")
    report = IngestReport(corpus=name, model=model, docs=len(docs) - len(empty),
                          empty=len(empty), embedded=len(todo), from_cache=embedder.hits,
                          reused=len(docs) - len(empty) - len(todo), deleted=len(stale),
                          rebuilt=rebuilt, seconds=time.perf_counter() - started)
    log.info("eval_ingested", corpus=name, embedded=report.embedded, reused=report.reused,
             deleted=report.deleted, seconds=round(report.seconds, 1))
    return report


class _Cached:
    """embedd with the vector cache in front: cached texts are not embedded again."""

    def __init__(self, ec: EmbedClient, cache: VectorCache) -> None:
        self.ec = ec
        self.cache = cache
        self.hits = 0

    async def embed(self, texts: list[str], *, input_type: Literal["document", "query"] = "document",
                    model: str | None = None) -> Embedding:
        vectors = [self.cache.get(t) for t in texts]
        missing = [i for i, v in enumerate(vectors) if v is None]
        self.hits += len(texts) - len(missing)
        if missing:
            emb = await self.ec.embed([texts[i] for i in missing], input_type=input_type,
                                      model=model)
            for i, v in zip(missing, emb.vectors, strict=True):
                vectors[i] = v
                self.cache.put(texts[i], v)
        got = [v for v in vectors if v is not None]
        return Embedding(model=model or self.cache.model, dim=len(got[0]) if got else 0,
                         vectors=got, truncated=[])
