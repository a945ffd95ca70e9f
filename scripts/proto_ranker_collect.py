"""The ranker prototype's data: SciFact, Cranfield and CISI asked with and without their
judged pairs recorded, each question's fused candidates kept (scripts/proto_ranker.py runs
it: `collect`).

See scripts/proto_ranker.py for the steps and the splits.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import msgspec
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from internal.api.matrixd import RecordRequest  # noqa: E402
from internal.api.vectord import Hit, IncludeRef, MultiSearchRequest  # noqa: E402
from internal.clients.embed import EmbedClient  # noqa: E402
from internal.clients.matrixd import MatrixdClient  # noqa: E402
from internal.clients.vectord import VectordClient  # noqa: E402
from internal.common.errors import NotFound  # noqa: E402
from internal.evaluation import beir  # noqa: E402
from internal.evaluation.ingest import ingest  # noqa: E402
from internal.evaluation.runner import embed_queries  # noqa: E402

DATA = Path(os.environ.get("LAKEHOUSE_DATA", ROOT.parent / "shared")) / "data"
SETS = {"scifact": "train", "cranfield": "dev", "cisi": "dev"}
OUT = ROOT / "var" / "rankproto"
CACHE = ROOT / "var" / "eval-cache"
FOLDS = 5
DEPTH = 100
MAX_DISTANCE = 0.35  # [matrixd] playbook_max_distance
CURVE = (10, 50, 200)
CONCURRENCY = 4


def fold(qid: str) -> int:
    """sha256 of the query id as `feedback.held_out` buckets it; fold 0 is its held-out 20%."""
    bucket = int.from_bytes(hashlib.sha256(qid.encode("utf-8")).digest()[:8], "big") % 10_000
    return bucket * FOLDS // 10_000


def pairs_of(qrels: Mapping[str, Mapping[str, int]], qids: Sequence[str]) -> list[tuple[str, str]]:
    """(query, doc) of every positively judged pair of these questions."""
    return [(q, d) for q in qids for d, g in qrels[q].items() if g > 0]


def curve_pairs(pairs: Sequence[tuple[str, str]], n: int) -> list[tuple[str, str]]:
    """The first n pairs in sha256 order of 'query<TAB>doc': a stable sample."""
    key = {p: hashlib.sha256(f"{p[0]}\t{p[1]}".encode()).hexdigest() for p in pairs}
    return sorted(pairs, key=key.__getitem__)[:n]


class Collected(msgspec.Struct):
    """One data set's questions as a search saw them."""

    name: str
    corpus: str
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    vectors: dict[str, list[float]]
    hits: dict[str, list[Hit]]  # default hybrid top DEPTH, then the included extras
    bm25: dict[str, dict[str, tuple[float | None, int | None]]]  # plain BM25 (score, rank)
    boosted: dict[str, dict[str, list[str]]]  # context -> question -> ids, as matrixd ranked
    # held_out and again: matrixd's boosted hits themselves (the candidates a ranker would
    # re-order: true layer scores, the fused score with the boost inside)
    boosted_hits: dict[str, dict[str, list[Hit]]] = {}
    skipped: int = 0  # recorded pairs whose answer is not in the corpus


async def gather_limited(coros: Sequence[Any]) -> list[Any]:
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(c: Any) -> Any:
        async with gate:
            return await c

    return list(await asyncio.gather(*(one(c) for c in coros)))


def strip(h: Hit) -> Hit:
    """The hit without its text (taken from the data set again when features are made)."""
    h.text, h.title, h.metadata = "", None, {}
    return h


async def candidates(vc: VectordClient, corpus: str, text: str, vector: list[float],
                     extra: list[str]) -> tuple[list[Hit], dict[str, tuple[float | None, int | None]]]:
    """The default hybrid's top DEPTH, the extras scored through include, each one's BM25."""
    base = MultiSearchRequest(mode="hybrid", k=DEPTH, query_vector=vector, query_text=text,
                              corpora=[corpus])
    out = await vc.search_many(base, Hit)
    hits = [strip(h) for h in out.hits]
    have = {h.id for h in hits}
    todo = [i for i in extra if i not in have]
    for start in range(0, len(todo), 100):
        chunk = todo[start:start + 100]
        req = MultiSearchRequest(mode="hybrid", k=DEPTH, query_vector=vector, query_text=text,
                                 corpora=[corpus],
                                 include=[IncludeRef(corpus=corpus, id=i) for i in chunk])
        got = await vc.search_many(req, Hit)
        for h in got.hits:
            if h.id in chunk and h.id not in have:
                h.included = True  # a candidate only through the playbook's recall
                hits.append(strip(h))
                have.add(h.id)
    bm25: dict[str, tuple[float | None, int | None]] = {}
    ids = [h.id for h in hits]
    for start in range(0, len(ids), 100):
        chunk = ids[start:start + 100]
        req = MultiSearchRequest(mode="lexical", k=DEPTH, query_text=text, corpora=[corpus],
                                 include=[IncludeRef(corpus=corpus, id=i) for i in chunk])
        got = await vc.search_many(req, Hit)
        for h in got.hits:
            if h.id in have:
                bm25[h.id] = (h.score, h.ranks.get("lexical"))
    return hits, bm25


def near_answers(vectors: dict[str, list[float]], qrels: Mapping[str, Mapping[str, int]]
                 ) -> dict[str, list[str]]:
    """Per question: every answer recorded for a judged question within MAX_DISTANCE of it
    (its own among them): the most any playbook of these records could recall."""
    qids = list(vectors)
    m = np.asarray([vectors[q] for q in qids], dtype=np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    near = (1.0 - m @ m.T) <= MAX_DISTANCE
    out = {}
    for i, q in enumerate(qids):
        ids: dict[str, None] = {}
        for j in np.flatnonzero(near[i]):
            ids.update(dict.fromkeys(d for d, g in qrels[qids[j]].items() if g > 0))
        out[q] = list(ids)
    return out


async def record(matrix: MatrixdClient, corpus: str, playbook: str,
                 pairs: Sequence[tuple[str, str]], queries: Mapping[str, str]) -> int:
    """A fresh playbook holding these pairs (score 1); how many answers were missing."""
    with_missing = 0

    async def one(q: str, d: str) -> None:
        nonlocal with_missing
        try:
            await matrix.record(RecordRequest(query_text=queries[q], answer_id=d,
                                              answer_corpus=corpus, score=1.0,
                                              playbook_corpus=playbook))
        except NotFound:
            with_missing += 1

    await gather_limited([one(q, d) for q, d in pairs])
    return with_missing


async def boosted(matrix: MatrixdClient, corpus: str, playbook: str, qids: Sequence[str],
                  queries: Mapping[str, str], vectors: Mapping[str, list[float]],
                  keep: dict[str, list[Hit]] | None = None) -> dict[str, list[str]]:
    """Each question through matrixd with `use_playbook` (today's boost), as the eval asks;
    keep: receives the hits themselves."""
    async def one(q: str) -> tuple[str, list[str]]:
        out = await matrix.search({"mode": "hybrid", "corpora": [corpus], "k": DEPTH,
                                   "use_playbook": True, "playbook_corpus": playbook,
                                   "query_text": queries[q], "query_vector": vectors[q]})
        if keep is not None:
            keep[q] = [strip(msgspec.convert(msgspec.to_builtins(h), Hit)) for h in out.hits]
            for h, raw in zip(keep[q], out.hits, strict=True):
                h.included = raw.from_playbook is True
        return q, list(dict.fromkeys(h.id for h in out.hits))

    return dict(await gather_limited([one(q) for q in qids]))


async def collect_set(session: aiohttp.ClientSession, urls: Mapping[str, str], name: str
                      ) -> Collected:
    matrixd = urls["matrixd"]
    vc = VectordClient(session, urls["vectord"], timeout=600.0)
    ec = EmbedClient(session, urls["embedd"], timeout=600.0)
    matrix = MatrixdClient(session, matrixd, timeout=600.0)
    dataset = beir.load(DATA / name, SETS[name])
    corpus = beir.corpus_name(dataset)
    ing = await ingest(vc, ec, corpus, dataset.docs, cache_dir=CACHE)
    print(f"{name}: {ing.docs} docs ({ing.embedded} embedded, {ing.from_cache} from cache)",
          flush=True)
    vectors = await embed_queries(ec, dataset.queries, ing.model)
    near = near_answers(vectors, dataset.qrels)
    got = await gather_limited([candidates(vc, corpus, dataset.queries[q], vectors[q], near[q])
                                for q in dataset.queries])
    hits = {q: h for q, (h, _) in zip(dataset.queries, got, strict=True)}
    bm25 = {q: b for q, (_, b) in zip(dataset.queries, got, strict=True)}
    print(f"{name}: {len(hits)} questions' candidates", flush=True)
    qids = list(dataset.queries)
    runs: dict[str, dict[str, list[str]]] = {"held_out": {}}
    kept: dict[str, dict[str, list[Hit]]] = {"held_out": {}, "again": {}}
    skipped = 0
    for f in range(FOLDS):
        playbook = f"rp_{name}_f{f}"
        with_f = [q for q in qids if fold(q) != f]
        skipped += await record(matrix, corpus, playbook, pairs_of(dataset.qrels, with_f),
                                dataset.queries)
        runs["held_out"].update(await boosted(matrix, corpus, playbook,
                                              [q for q in qids if fold(q) == f],
                                              dataset.queries, vectors, kept["held_out"]))
        if f == 0:
            runs["again"] = await boosted(matrix, corpus, playbook, with_f, dataset.queries,
                                          vectors, kept["again"])
        print(f"{name}: fold {f} boosted", flush=True)
    if name == "scifact":
        every = pairs_of(dataset.qrels, [q for q in qids if fold(q) != 0])
        for n in CURVE:
            playbook = f"rp_{name}_c{n}"
            await record(matrix, corpus, playbook, curve_pairs(every, n), dataset.queries)
            kept[f"curve{n}"] = {}
            runs[f"curve{n}"] = await boosted(matrix, corpus, playbook,
                                              [q for q in qids if fold(q) == 0],
                                              dataset.queries, vectors, kept[f"curve{n}"])
    return Collected(name=name, corpus=corpus, queries=dataset.queries, qrels=dataset.qrels,
                     vectors=vectors, hits=hits, bm25=bm25, boosted=runs, skipped=skipped,
                     boosted_hits=kept)


def stack(tmp: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """bench_gateway's stack, with embedd's and vectord's own addresses too: a bulk embed
    through the gateway can outlast its upstream timeout on a loaded machine."""
    import bench_gateway

    given: list[int] = []
    pick = bench_gateway.free_port

    def free_port() -> int:
        given.append(pick())
        return given[-1]

    bench_gateway.free_port = free_port  # start_stack asks in the order GATEWAY, EMBEDD, VECTORD
    try:
        proc, urls = bench_gateway.start_stack(tmp)
    finally:
        bench_gateway.free_port = pick
    return proc, {**urls, "embedd": f"http://127.0.0.1:{given[1]}",
                  "vectord": f"http://127.0.0.1:{given[2]}"}


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()


async def collect(names: Sequence[str]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rankproto-") as tmp:
        proc, urls = stack(Path(tmp))
        try:
            async with aiohttp.ClientSession() as session:
                for name in names:
                    data = await collect_set(session, urls, name)
                    (OUT / f"{name}.json").write_bytes(msgspec.json.encode(data))
        finally:
            stop(proc)


def load(name: str) -> Collected:
    return msgspec.json.decode((OUT / f"{name}.json").read_bytes(), type=Collected)
