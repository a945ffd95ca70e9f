"""Load a data set's corpus into vectord, embedding only what is not there already.

The corpus is a cache: items whose content hash (vectord's /ids listing) equals the
document's are kept as they are, changed or missing ones are embedded and upserted,
and items no longer in the data set are deleted. A corpus made with another model
or dimension is dropped and rebuilt, since its vectors cannot be compared.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import structlog

from internal.api.vectord import Item
from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.common.hashing import content_hash
from internal.evaluation.beir import Doc

log = structlog.get_logger()

LANGUAGE = "english"  # every shared data set is English; fixed so hashes are stable
EMBED_BATCH = 64
UPSERT_BATCH = 500
INFLIGHT = 2  # batches embedded at once: keeps embedd busy while vectord writes

Progress = Callable[[int, int], None]


class VectorCache:
    """Document vectors on disk keyed by model and sha256 of the embedded text.

    vectord is the cache of record (its content hashes decide what is re-embedded);
    this file only spares the embedding when a corpus must be rebuilt (a new
    database, a schema change), which for SciFact is minutes of CPU.
    """

    def __init__(self, path: Path | None, model: str) -> None:
        self.path = path
        self.model = model
        self.vectors: dict[str, list[float]] = {}
        self.dirty = False
        if path is not None and path.is_file():
            with np.load(path, allow_pickle=False) as data:
                if str(data["model"]) == model:
                    for key, vec in zip(data["keys"].tolist(), data["vectors"], strict=True):
                        self.vectors[str(key)] = [float(x) for x in vec]

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
        np.savez(tmp, model=np.array(self.model), keys=np.array(list(self.vectors)),
                 vectors=np.array(list(self.vectors.values()), dtype=np.float32))
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


def doc_hash(doc: Doc) -> str:
    """The content hash vectord reports for this document stored as ingest() stores it."""
    return content_hash(doc.title or None, doc.text, [], doc.metadata, LANGUAGE)


def embed_text(doc: Doc) -> str:
    """What the model reads for a document: title and text, as BEIR's dense baselines do."""
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text


def _item(doc: Doc, vector: list[float]) -> Item:
    return Item(id=doc.id, vector=vector, text=doc.text, title=doc.title or None,
                metadata=doc.metadata, language=LANGUAGE)


async def _open_corpus(vc: VectordClient, name: str, model: str, dim: int) -> tuple[bool, bool]:
    """Make sure the corpus exists for this model: (created, rebuilt)."""
    corpus, created = await vc.ensure_corpus(name, dim, "cosine", language=LANGUAGE, model=model)
    if created or (corpus.get("model") == model and int(corpus["dim"]) == dim):
        return created, False
    log.info("eval_corpus_rebuild", corpus=name, had_model=corpus.get("model"), model=model)
    await vc.delete_corpus(name)
    await vc.create_corpus(name, dim, "cosine", language=LANGUAGE, model=model)
    return True, True


def cache_path(cache_dir: Path, corpus: str, model: str) -> Path:
    """The vector cache file of a corpus embedded by model."""
    slug = "".join(c if c.isalnum() else "_" for c in model)
    return cache_dir / f"{corpus}.{slug}.npz"


async def ingest(vc: VectordClient, ec: EmbedClient, name: str, docs: Sequence[Doc],
                 progress: Progress | None = None, cache_dir: Path | None = None,
                 cache_name: str | None = None) -> IngestReport:
    """Bring corpus `name` in line with docs; embed (input_type document) only what changed.

    cache_dir: where document vectors are kept between runs (None: not kept); cache_name:
    the corpus whose cache file to use (default: name).
    """
    started = time.perf_counter()
    model, dim = await ec.default_model()
    cache = VectorCache(None if cache_dir is None else
                        cache_path(cache_dir, cache_name or name, model), model)
    _, rebuilt = await _open_corpus(vc, name, model, dim)
    empty = sum(1 for doc in docs if not embed_text(doc).strip())
    docs = [doc for doc in docs if embed_text(doc).strip()]
    stored = {row["id"]: row["content_hash"] async for row in vc.iter_ids(name)}
    wanted = {doc.id: doc_hash(doc) for doc in docs}
    todo = [doc for doc in docs if stored.get(doc.id) != wanted[doc.id]]
    stale = sorted(set(stored) - set(wanted))
    for i in range(0, len(stale), UPSERT_BATCH):
        await vc.delete_items(name, stale[i:i + UPSERT_BATCH])

    done = cached = 0
    gate = asyncio.Semaphore(INFLIGHT)

    async def one(batch: Sequence[Doc]) -> None:
        nonlocal done, cached
        async with gate:
            texts = [embed_text(d) for d in batch]
            vectors = [cache.get(t) for t in texts]
            missing = [i for i, v in enumerate(vectors) if v is None]
            cached += len(batch) - len(missing)
            if missing:
                emb = await ec.embed([texts[i] for i in missing], input_type="document", model=model)
                for i, v in zip(missing, emb.vectors, strict=True):
                    vectors[i] = v
                    cache.put(texts[i], v)
            await vc.upsert(name, [_item(d, v) for d, v in zip(batch, vectors, strict=True)
                                   if v is not None], model=model)
        done += len(batch)
        if progress is not None:
            progress(done, len(todo))

    batches = [todo[i:i + EMBED_BATCH] for i in range(0, len(todo), EMBED_BATCH)]
    try:
        await asyncio.gather(*(one(b) for b in batches))
    finally:
        cache.save()
    report = IngestReport(corpus=name, model=model, docs=len(docs), empty=empty, embedded=len(todo),
                          from_cache=cached,
                          reused=len(docs) - len(todo), deleted=len(stale), rebuilt=rebuilt,
                          seconds=time.perf_counter() - started)
    log.info("eval_ingested", corpus=name, embedded=report.embedded, reused=report.reused,
             deleted=report.deleted, seconds=round(report.seconds, 1))
    return report
