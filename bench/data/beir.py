"""BEIR's SciFact (train), Cranfield (dev) and CISI (dev) as the benchmarks load them.

"beir3" is the three sets' 8,041 documents in one corpus, ids prefixed by set (sf:, cr:,
ci:), embedded by the stack's own model; the vectors are cached in var/eval-cache under one
name, so every benchmark (and every checkout of the same model) embeds them once."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import aiohttp
import msgspec

from bench.harness.stacks import ROOT
from internal.api.responses import Corpus
from internal.api.vectord import CreateCorpus
from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.evaluation import beir
from internal.evaluation.ingest import ingest

SETS = (("scifact", "train", "sf"), ("cranfield", "dev", "cr"), ("cisi", "dev", "ci"))
CACHE = ROOT / "var" / "eval-cache"
CACHE_NAME = "bench_gateway_beir3"


def load(data: Path, name: str, split: str) -> beir.Dataset:
    return beir.load(data / "data" / name, split)


def documents(data: Path) -> list[beir.Doc]:
    """The three sets' documents, ids prefixed by set."""
    docs: list[beir.Doc] = []
    for name, split, tag in SETS:
        docs += [dataclasses.replace(d, id=f"{tag}:{d.id}") for d in load(data, name, split).docs]
    return docs


def queries(data: Path, n: int | None = None, name: str = "scifact", split: str = "train"
            ) -> list[str]:
    """The first n queries of a set as text (SciFact's by default)."""
    return list(load(data, name, split).queries.values())[:n]


def part_of(doc_id: str, parts: int) -> int:
    """The part a document falls in when a corpus is split by a hash of its id."""
    return hashlib.sha256(doc_id.encode()).digest()[0] % parts


class AnyVersion(VectordClient):
    """This checkout's vectord client against a baseline's vectord too: a corpus of a
    vectord from before precisions has none (its vectors are float32)."""

    async def get_corpus(self, name: str) -> Corpus:
        raw = await self.call("GET", self._c(name))
        return msgspec.convert({"precision": "float32", **raw}, Corpus)

    async def create_corpus(self, name: str, dim: int, metric: Any = "cosine",
                            language: str | None = None, model: str | None = None,
                            defer_index: bool = False) -> Corpus:
        body = CreateCorpus(name=name, dim=dim, metric=metric, language=language or None,
                            model=model or None, defer_index=defer_index)
        raw = await self.call("POST", "/v1/vectors/corpora", body)
        return msgspec.convert({"precision": "float32", **raw}, Corpus)


async def into(http: aiohttp.ClientSession, base: str, corpus: str, docs: list[beir.Doc],
               cache_name: str = CACHE_NAME) -> int:
    """The documents as a corpus of the stack at base (its model embeds them; cached)."""
    await ingest(AnyVersion(http, base, timeout=1800.0), EmbedClient(http, base, timeout=1800.0),
                 corpus, docs, cache_dir=CACHE, cache_name=cache_name)
    return len(docs)
