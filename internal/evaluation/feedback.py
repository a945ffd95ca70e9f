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

import contextlib
import dataclasses
import hashlib
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import structlog
from aiohttp import web

from internal.clients.embed import EmbedClient
from internal.clients.matrixd import MatrixdClient
from internal.clients.vectord import VectordClient
from internal.common.errors import LakehouseError
from internal.config import Config
from internal.evaluation import beir, ranker_runs
from internal.evaluation.asking import Side, ask_both
from internal.evaluation.ingest import IngestReport, Progress, ingest
from internal.evaluation.metrics import evaluate
from internal.evaluation.modes import table_modes
from internal.evaluation.ranker_eval import RankerReport
from internal.evaluation.runner import DEPTH, SearchOptions, embed_queries
from internal.evaluation.services import services

log = structlog.get_logger()

HOLDOUT = 0.2


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
    ranker: RankerReport | None = None

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
            "ranker": None if self.ranker is None else self.ranker.to_json(),
        }

    def table(self) -> str:
        """Markdown: one line per mode and group, nDCG@10 without and with the playbook;
        then the learned ranker's rows."""
        folds = self.ranker.folds if self.ranker is not None else 0
        split = (f"{folds} folds by query-id hash" if folds else
                 f"{round(100 * (1 - self.holdout))}/{round(100 * self.holdout)} by query-id hash")
        lines = [
            f"{self.dataset} ({self.split}), feedback {Path(self.feedback_file).name} "
            f"({split}): {self.recorded} pairs recorded"
            f"{f' in {self.record_seconds:.1f} s' if self.record_seconds else ''}"
            f"{f', {self.record_skipped} skipped (answer not in the corpus)' if self.record_skipped else ''}",
        ]
        if self.modes:
            lines += ["", "| mode | queries | n | nDCG@10 without | with playbook | lift | boosted |",
                      "|---|---|---:|---:|---:|---:|---:|"]
        for m in self.modes:
            if m.error is not None:
                lines.append(f"| {m.mode} | failed: {m.error} |")
                continue
            for r in m.rows:
                lines.append(f"| {m.mode} | {r.group} | {r.queries} | {r.without:.4f} | "
                             f"{r.with_:.4f} | {r.lift:+.4f} | {100 * r.boosted_share:.0f}% |")
        if self.modes:
            lines += ["", "| mode | ms/query without | with playbook | playbook lookup ms (mean) |",
                      "|---|---:|---:|---:|"]
        for m in self.modes:
            if m.error is None:
                lines.append(f"| {m.mode} | {m.ms_without:.1f} | {m.ms_with:.1f} | {m.lookup_ms:.1f} |")
        if self.ranker is not None:
            lines += ["", self.ranker.table()]
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


@contextlib.asynccontextmanager
async def _matrixd(cfg: Config, vectord_url: str, embedd_url: str, choose_alpha: bool = False
                   ) -> AsyncIterator[str]:
    """matrixd in-process on a free loopback port, wired to the given vectord and embedd;
    its ranker trains only when asked (choose_alpha: the boost's weight chosen on the
    records, the honest check of the fixed one)."""
    from internal.matrixd.server import make_app

    mcfg = dataclasses.replace(cfg.matrixd, vectord_url=(vectord_url,), embedd_url=(embedd_url,),
                               ranker_auto=False, ranker_choose_alpha=choose_alpha)
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


def _check(modes: Sequence[str] | None, holdout: float, ranker: bool, folds: int,
           curve: Sequence[int]) -> tuple[list[str], bool]:
    """The modes (None: every table mode) and whether the ranker's rows are measured;
    ValueError naming the argument."""
    table = table_modes()
    modes = list(table) if modes is None else list(modes)
    for mode in modes:
        if mode not in table:
            raise ValueError(f"mode {mode!r}: expected one of {', '.join(table)}")
    if not 0.0 <= holdout < 1.0:
        raise ValueError(f"holdout: expected a share in [0, 1), got {holdout}")
    if folds == 1 or folds < 0:
        raise ValueError(f"folds: expected 0 (one split) or at least 2, got {folds}")
    with_ranker = ranker and ranker_runs.MODE in modes
    if (folds or curve) and not with_ranker:
        raise ValueError(f"folds and curve measure the learned ranker: give mode "
                         f"{ranker_runs.MODE!r}")
    return modes, with_ranker


async def evaluate_feedback(cfg: Config, folder: str | Path, split: str, feedback_file: str | Path,
                            modes: Sequence[str] | None = None, *, holdout: float = HOLDOUT,
                            options: SearchOptions | None = None, corpus: str | None = None,
                            in_process: bool = False, progress: Progress | None = None,
                            cache_dir: Path | None = None, ranker: bool = True,
                            folds: int = 0, curve: Sequence[int] = ()) -> FeedbackReport:
    """Record FILE's judged pairs, then score the split's queries with and without them;
    with `ranker` and the default hybrid among the modes, the learned ranker's rows too.
    folds > 1: the ranker's rows only, by cross-validation over the questions; curve: the
    held-out figure with the first n pairs recorded, for each n."""
    modes, with_ranker = _check(modes, holdout, ranker, folds, curve)
    dataset = beir.load(folder, split)
    fb_qrels = beir.load_qrels(Path(feedback_file))
    all_queries = beir.load_queries(folder)
    missing = sorted(set(fb_qrels) - set(all_queries))
    if missing:
        raise beir.DatasetError(f"{feedback_file}: judges queries absent from queries.jsonl: {missing[:5]}")
    name = corpus or beir.corpus_name(dataset)
    playbook = playbook_name(name)
    options = options or SearchOptions()
    pairs = feedback_pairs(fb_qrels, 0.0 if folds else holdout)
    recorded_q = {q for q, _ in feedback_pairs(fb_qrels, holdout)}
    asked_again = {q for q in dataset.queries if q in recorded_q}
    new = {q for q in dataset.queries if q not in recorded_q}

    async with services(cfg, in_process=in_process) as ends, \
            _matrixd(cfg, ends.vectord_url, ends.embedd_url) as murl, \
            _matrixd(cfg, ends.vectord_url, ends.embedd_url, choose_alpha=True) as murl_cv, \
            aiohttp.ClientSession() as session:
        # Embedding a large batch on a shared CPU can take minutes.
        vc = VectordClient(session, ends.vectord_url, timeout=600.0)
        ec = EmbedClient(session, ends.embedd_url, timeout=600.0)
        matrix = MatrixdClient(session, murl, timeout=600.0)
        ing = await ingest(vc, ec, name, dataset.docs, progress=progress, cache_dir=cache_dir)
        vectors = await embed_queries(ec, dataset.queries, ing.model)
        ask = ranker_runs.Ask(vc, matrix, MatrixdClient(session, murl_cv, timeout=600.0), name,
                              {**all_queries, **dataset.queries}, vectors, options)
        started = time.perf_counter()
        results: list[ModeFeedback] = []
        ranked: RankerReport | None = None
        if folds:
            ranked, recorded, skipped = await ranker_runs.cross_validated(
                ask, name, pairs, set(dataset.queries), dataset.qrels, folds)
            record_seconds = 0.0
        else:
            recorded, skipped = await ask.fresh(playbook, pairs)  # a fresh playbook every run
            record_seconds = time.perf_counter() - started
            log.info("eval_feedback_recorded", pairs=recorded, skipped=skipped,
                     seconds=round(record_seconds, 1))
            groups = [("held out", new), ("asked again", asked_again),
                      ("all", set(dataset.queries))]
            sides = {}
            for mode in modes:
                result, got = await _mode(matrix, name, playbook, mode, dataset, vectors, options,
                                          groups)
                results.append(result)
                if got is not None:
                    sides[mode] = got
            if with_ranker and ranker_runs.MODE in sides:
                without, boost = sides[ranker_runs.MODE]
                ranked = await ranker_runs.on_the_split(ask, playbook, without, boost, groups,
                                                        dataset.qrels)
                if curve:
                    await ranker_runs.curve(ask, ranked, name, pairs, new, dataset.qrels, curve)
        settings = {"corpus": name, "model": ing.model, "depth": DEPTH, "started": list(ends.started),
                    "playbook_top_k": cfg.matrixd.playbook_top_k,
                    "playbook_max_distance": cfg.matrixd.playbook_max_distance,
                    "hybrid_options": dict(options.hybrid)}
    return FeedbackReport(dataset=dataset.name, split=split, feedback_file=str(feedback_file),
                          holdout=holdout, recorded=recorded, record_skipped=skipped,
                          record_seconds=record_seconds, ingest=ing, playbook_corpus=playbook,
                          modes=results, settings=settings, ranker=ranked)


async def _mode(matrix: MatrixdClient, name: str, playbook: str, mode: str,
                dataset: beir.Dataset, vectors: Mapping[str, list[float]],
                options: SearchOptions, groups: Sequence[tuple[str, set[str]]]
                ) -> tuple[ModeFeedback, tuple[Side, Side] | None]:
    """One mode's rows (the boost alone: no model of the fresh playbook exists yet)."""
    try:
        without, with_ = await ask_both(matrix, name, playbook, mode, dataset.queries, vectors,
                                        options)
    except LakehouseError as exc:
        log.error("eval_feedback_mode_failed", mode=mode, error=exc.message)
        return ModeFeedback(mode, [], 0.0, 0.0, 0.0, error=f"{exc.code}: {exc.message}"), None
    no_entry = {q for q in dataset.queries if not with_.entries.get(q)}
    rows = _rows(without, with_, dataset.qrels,
                 [*groups[:2], ("no matching entry", no_entry), *groups[2:]])
    n = max(1, len(dataset.queries))
    lookup = sum(with_.lookup_ms) / len(with_.lookup_ms) if with_.lookup_ms else 0.0
    log.info("eval_feedback_mode_done", mode=mode,
             **{r.group.replace(" ", "_"): round(r.lift, 4) for r in rows})
    return ModeFeedback(mode, rows, 1000 * without.seconds / n, 1000 * with_.seconds / n,
                        lookup), (without, with_)
