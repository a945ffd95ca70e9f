"""`lakehouse eval --feedback-qrels FILE`: what recorded feedback does to retrieval quality.

Every judged (query, doc) pair of FILE (grade > 0) is recorded as a playbook entry with
score 1, in a fresh playbook corpus, through matrixd's own record route; then every
judged query of the eval split is asked through matrixd's search, in each mode, with
and without `use_playbook`. Queries of FILE are split by a hash of the query id into
feedback (recorded) and held out (not recorded), so with only one judged split (SciFact
train) one run reports both: "asked again" (the question was recorded) and "held out"
(a new question, helped only by recorded questions near it). "No entry" are the eval
queries for which no playbook entry matched: their results must not change.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import structlog
from aiohttp import web

from internal.api.matrixd import RecordRequest
from internal.api.responses import PlaybookSummary
from internal.clients.embed import EmbedClient
from internal.clients.matrixd import MatrixdClient
from internal.clients.vectord import VectordClient
from internal.common.errors import LakehouseError, NotFound, ServiceError
from internal.config import Config
from internal.evaluation import beir
from internal.evaluation.ingest import IngestReport, Progress, ingest
from internal.evaluation.metrics import evaluate
from internal.evaluation.modes import table_modes
from internal.evaluation.runner import DEPTH, SearchOptions, embed_queries, search_body
from internal.evaluation.services import services

log = structlog.get_logger()

HOLDOUT = 0.2
CONCURRENCY = 4


def held_out(qid: str, holdout: float = HOLDOUT) -> bool:
    """Whether a query id falls in the held-out share: sha256 of the id, so every run,
    machine and data-set order gives the same split."""
    bucket = int.from_bytes(hashlib.sha256(qid.encode("utf-8")).digest()[:8], "big") % 10_000
    return bucket < round(holdout * 10_000)


def feedback_pairs(qrels: Mapping[str, Mapping[str, int]], holdout: float = HOLDOUT
                   ) -> list[tuple[str, str]]:
    """(query id, doc id) of every positively judged pair whose query is not held out."""
    return [(qid, did) for qid, docs in qrels.items() if not held_out(qid, holdout)
            for did, grade in docs.items() if grade > 0]


@dataclass
class Side:
    """One mode, with or without the playbook: the run and what the playbook did per query."""

    run: dict[str, list[str]] = field(default_factory=dict)
    entries: dict[str, int] = field(default_factory=dict)
    boosted: dict[str, int] = field(default_factory=dict)
    recalled: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    lookup_ms: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Row:
    """nDCG@10 of one group of queries, without and with the playbook."""

    group: str
    queries: int
    without: float
    with_: float
    boosted_share: float

    @property
    def lift(self) -> float:
        return self.with_ - self.without


@dataclass(frozen=True)
class ModeFeedback:
    mode: str
    rows: list[Row]
    ms_without: float  # mean latency of one search, seen by the client
    ms_with: float
    lookup_ms: float  # mean time of the playbook lookup inside a search with the playbook
    error: str | None = None


@dataclass(frozen=True)
class FeedbackReport:
    dataset: str
    split: str
    feedback_file: str
    holdout: float
    recorded: int
    record_skipped: int
    record_seconds: float
    ingest: IngestReport
    playbook_corpus: str
    modes: list[ModeFeedback]
    settings: dict[str, Any]

    @property
    def ok(self) -> bool:
        return all(m.error is None for m in self.modes)

    def to_json(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset, "split": self.split, "feedback_file": self.feedback_file,
            "holdout": self.holdout, "recorded": self.recorded,
            "record_skipped": self.record_skipped, "record_seconds": round(self.record_seconds, 1),
            "playbook_corpus": self.playbook_corpus, "settings": self.settings,
            "modes": [{"mode": m.mode, "error": m.error, "ms_without": round(m.ms_without, 2),
                       "ms_with": round(m.ms_with, 2), "lookup_ms": round(m.lookup_ms, 2),
                       "rows": [{"group": r.group, "queries": r.queries,
                                 "ndcg@10_without": round(r.without, 4),
                                 "ndcg@10_with": round(r.with_, 4), "lift": round(r.lift, 4),
                                 "boosted_share": round(r.boosted_share, 4)} for r in m.rows]}
                      for m in self.modes],
        }

    def table(self) -> str:
        """Markdown: one line per mode and group, nDCG@10 without and with the playbook."""
        lines = [
            f"{self.dataset} ({self.split}), feedback {Path(self.feedback_file).name} "
            f"({round(100 * (1 - self.holdout))}/{round(100 * self.holdout)} by query-id hash): "
            f"{self.recorded} pairs recorded in {self.record_seconds:.1f} s"
            f"{f', {self.record_skipped} skipped (answer not in the corpus)' if self.record_skipped else ''}",
            "",
            "| mode | queries | n | nDCG@10 without | with playbook | lift | boosted |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for m in self.modes:
            if m.error is not None:
                lines.append(f"| {m.mode} | failed: {m.error} |")
                continue
            for r in m.rows:
                lines.append(f"| {m.mode} | {r.group} | {r.queries} | {r.without:.4f} | "
                             f"{r.with_:.4f} | {r.lift:+.4f} | {100 * r.boosted_share:.0f}% |")
        lines.append("")
        lines.append("| mode | ms/query without | with playbook | playbook lookup ms (mean) |")
        lines.append("|---|---:|---:|---:|")
        for m in self.modes:
            if m.error is None:
                lines.append(f"| {m.mode} | {m.ms_without:.1f} | {m.ms_with:.1f} | {m.lookup_ms:.1f} |")
        return "\n".join(lines)


def _rows(without: Side, with_: Side, qrels: Mapping[str, Mapping[str, int]],
          groups: Sequence[tuple[str, set[str]]]) -> list[Row]:
    rows = []
    for name, qids in groups:
        sub = {q: qrels[q] for q in qids}
        if not sub:
            continue
        a = evaluate({q: without.run.get(q, []) for q in sub}, sub)["ndcg@10"]
        b = evaluate({q: with_.run.get(q, []) for q in sub}, sub)["ndcg@10"]
        share = sum(1 for q in sub if with_.boosted.get(q)) / len(sub)
        rows.append(Row(name, len(sub), a, b, share))
    return rows


async def _record_all(matrix: MatrixdClient, corpus: str, playbook: str,
                      pairs: Sequence[tuple[str, str]], queries: Mapping[str, str]
                      ) -> tuple[int, int]:
    """Record every pair (score 1); a doc missing from the corpus is skipped and counted."""
    gate = asyncio.Semaphore(CONCURRENCY)
    skipped = 0

    async def one(qid: str, did: str) -> None:
        nonlocal skipped
        async with gate:
            try:
                await matrix.record(RecordRequest(
                    query_text=queries[qid], answer_id=did, answer_corpus=corpus, score=1.0,
                    playbook_corpus=playbook))
            except NotFound:  # the answer is not in the corpus
                skipped += 1

    await asyncio.gather(*(one(q, d) for q, d in pairs if queries.get(q, "").strip()))
    return len(pairs) - skipped, skipped


async def _ask_all(matrix: MatrixdClient, corpus: str, playbook: str, mode: str,
                   queries: Mapping[str, str], vectors: Mapping[str, list[float]],
                   options: SearchOptions) -> tuple[Side, Side]:
    """Every query without and with the playbook, back to back (alternating which goes
    first), so that the load of the shared machine falls on both sides alike."""
    sides = (Side(), Side())
    gate = asyncio.Semaphore(CONCURRENCY)

    async def ask(qid: str, use_playbook: bool) -> None:
        body = search_body(mode, queries[qid], vectors[qid], options)
        # The query vector always goes along: matrixd then embeds nothing, in any mode.
        body.update({"corpora": [corpus], "k": DEPTH, "use_playbook": use_playbook,
                     "playbook_corpus": playbook, "query_text": queries[qid],
                     "query_vector": vectors[qid]})
        side = sides[use_playbook]
        t0 = time.perf_counter()
        out = await matrix.search(body)
        side.seconds += time.perf_counter() - t0
        seen: dict[str, None] = {}
        for hit in out.hits:
            seen.setdefault(hit.id, None)
        side.run[qid] = list(seen)
        pb = out.playbook or PlaybookSummary(corpus=playbook, entries=0)
        side.entries[qid] = pb.entries
        side.boosted[qid] = pb.boosted
        side.recalled[qid] = pb.recalled
        if pb.ms is not None:
            side.lookup_ms.append(pb.ms)

    async def both(i: int, qid: str) -> None:
        async with gate:
            for use in ((False, True) if i % 2 == 0 else (True, False)):
                await ask(qid, use)

    await asyncio.gather(*(both(i, q) for i, q in enumerate(queries)))
    return sides


@contextlib.asynccontextmanager
async def _matrixd(cfg: Config, vectord_url: str, embedd_url: str) -> AsyncIterator[str]:
    """matrixd in-process on a free loopback port, wired to the given vectord and embedd."""
    from internal.matrixd.server import make_app

    mcfg = dataclasses.replace(cfg.matrixd, vectord_url=(vectord_url,), embedd_url=(embedd_url,))
    runner = web.AppRunner(make_app(dataclasses.replace(cfg, matrixd=mcfg)), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        yield f"http://127.0.0.1:{int(runner.addresses[0][1])}"
    finally:
        await runner.cleanup()


def playbook_name(corpus: str) -> str:
    """The eval's own playbook corpus, rebuilt every run (a vectord corpus name)."""
    return f"{corpus[:50]}_playbook"


async def evaluate_feedback(cfg: Config, folder: str | Path, split: str, feedback_file: str | Path,
                            modes: Sequence[str] | None = None, *, holdout: float = HOLDOUT,
                            options: SearchOptions | None = None, corpus: str | None = None,
                            in_process: bool = False, progress: Progress | None = None,
                            cache_dir: Path | None = None) -> FeedbackReport:
    """Record FILE's judged pairs, then score the split's queries with and without them."""
    table = table_modes()
    modes = list(table) if modes is None else modes
    for mode in modes:
        if mode not in table:
            raise ValueError(f"mode {mode!r}: expected one of {', '.join(table)}")
    if not 0.0 <= holdout < 1.0:
        raise ValueError(f"holdout: expected a share in [0, 1), got {holdout}")
    dataset = beir.load(folder, split)
    fb_qrels = beir.load_qrels(Path(feedback_file))
    all_queries = beir.load_queries(folder)
    missing = sorted(set(fb_qrels) - set(all_queries))
    if missing:
        raise beir.DatasetError(f"{feedback_file}: judges queries absent from queries.jsonl: {missing[:5]}")
    name = corpus or beir.corpus_name(dataset)
    playbook = playbook_name(name)
    options = options or SearchOptions()
    pairs = feedback_pairs(fb_qrels, holdout)
    recorded_q = {q for q, _ in pairs}
    asked_again = {q for q in dataset.queries if q in recorded_q}
    new = {q for q in dataset.queries if q not in recorded_q}

    async with services(cfg, in_process=in_process) as ends, \
            _matrixd(cfg, ends.vectord_url, ends.embedd_url) as murl, \
            aiohttp.ClientSession() as session:
        # Embedding a large batch on a shared CPU can take minutes.
        vc = VectordClient(session, ends.vectord_url, timeout=600.0)
        ec = EmbedClient(session, ends.embedd_url, timeout=600.0)
        matrix = MatrixdClient(session, murl, timeout=600.0)
        ing = await ingest(vc, ec, name, dataset.docs, progress=progress, cache_dir=cache_dir)
        with contextlib.suppress(ServiceError):
            await vc.delete_corpus(playbook)  # a fresh playbook every run
        started = time.perf_counter()
        recorded, skipped = await _record_all(matrix, name, playbook, pairs, all_queries)
        record_seconds = time.perf_counter() - started
        log.info("eval_feedback_recorded", pairs=recorded, skipped=skipped,
                 seconds=round(record_seconds, 1))
        vectors = await embed_queries(ec, dataset.queries, ing.model)
        results = []
        for mode in modes:
            try:
                without, with_ = await _ask_all(matrix, name, playbook, mode, dataset.queries,
                                                vectors, options)
            except LakehouseError as exc:
                log.error("eval_feedback_mode_failed", mode=mode, error=exc.message)
                results.append(ModeFeedback(mode, [], 0.0, 0.0, 0.0, error=f"{exc.code}: {exc.message}"))
                continue
            no_entry = {q for q in dataset.queries if not with_.entries.get(q)}
            rows = _rows(without, with_, dataset.qrels, [
                ("held out", new), ("asked again", asked_again),
                ("no matching entry", no_entry), ("all", set(dataset.queries))])
            n = max(1, len(dataset.queries))
            lookup = sum(with_.lookup_ms) / len(with_.lookup_ms) if with_.lookup_ms else 0.0
            results.append(ModeFeedback(mode, rows, 1000 * without.seconds / n,
                                        1000 * with_.seconds / n, lookup))
            log.info("eval_feedback_mode_done", mode=mode,
                     **{r.group.replace(" ", "_"): round(r.lift, 4) for r in rows})
        settings = {"corpus": name, "model": ing.model, "depth": DEPTH, "started": list(ends.started),
                    "playbook_top_k": cfg.matrixd.playbook_top_k,
                    "playbook_max_distance": cfg.matrixd.playbook_max_distance,
                    "hybrid_options": dict(options.hybrid)}
    return FeedbackReport(dataset=dataset.name, split=split, feedback_file=str(feedback_file),
                          holdout=holdout, recorded=recorded, record_skipped=skipped,
                          record_seconds=record_seconds, ingest=ing, playbook_corpus=playbook,
                          modes=results, settings=settings)
