"""Training the learned ranker, on the bulk side: on demand (POST /v1/matrix/ranker/train)
and by itself (a check every `ranker_check_seconds`).

A training collects its data through the stack (internal.matrixd.ranker.collect: a few
searches at a time, questions embedded in embedd's bulk lane), fits the model in a child
process at a lower OS priority with `ranker_threads` threads (model.fit: LightGBM's
cross-validation and the final trees), so matrixd's own loop and the searches it serves
never wait for it, and stores the result through vectord; then every matrixd reads it.
One training per (playbook, corpora) at a time: a second ask joins the running one.

By itself: for the default playbook and every playbook that has a model, when its entries
moved by `ranker_min_new_records` since its current model (or it has none and holds at
least `ranker_min_queries` entries), the playbook is trained again (each group of corpora
it has a model of; the default group when none). Several matrixd replicas may each train
the same change once; the newest model wins, which is the same data.
"""

from __future__ import annotations

import asyncio
import pickle
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog

from internal.api.ranker import NewRanker, RankerFailure, RankerTraining, StoredRanker
from internal.common.auth import as_service
from internal.common.errors import Conflict, LakehouseError, NotFound, describe
from internal.matrixd.deps import Deps
from internal.matrixd.ranker import collect, features, model, serve

log = structlog.get_logger()

Key = tuple[str, tuple[str, ...] | None]


async def fit_in_child(groups: Sequence[model.Group], **options: Any) -> model.Fit:
    """model.fit in a child process (internal.matrixd.ranker.child), killed if cancelled."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "internal.matrixd.ranker.child", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await proc.communicate(pickle.dumps((list(groups), options)))
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    if proc.returncode != 0:
        raise RuntimeError(f"the ranker's training process failed ({proc.returncode}): "
                           f"{err.decode(errors='replace')[-400:]}")
    fit: model.Fit = pickle.loads(out)
    return fit


@dataclass
class Running:
    info: RankerTraining
    task: asyncio.Task[StoredRanker]


@dataclass
class Trainer:
    deps: Deps
    running: dict[Key, Running] = field(default_factory=dict)
    failures: dict[str, RankerFailure] = field(default_factory=dict)

    def start(self, recs: collect.Records, named: bool, by: str) -> Running:
        """Train on these records in the background (or join the training of the same
        playbook and corpora already running)."""
        key: Key = (recs.playbook_corpus, tuple(recs.corpora) if named else None)
        run = self.running.get(key)
        if run is not None:
            return run
        info = RankerTraining(playbook_corpus=recs.playbook_corpus, corpora=list(recs.corpora),
                              started_at=datetime.now(UTC), trained_by=by)
        task = asyncio.create_task(self._train(recs, by))
        run = self.running[key] = Running(info, task)
        task.add_done_callback(lambda _: self._done(key, run))
        return run

    def _done(self, key: Key, run: Running) -> None:
        if self.running.get(key) is run:
            del self.running[key]
        if run.task.cancelled():
            return
        exc = run.task.exception()
        if exc is not None:
            self.failures[key[0]] = RankerFailure(
                playbook_corpus=key[0], corpora=run.info.corpora,
                at=datetime.now(UTC), error=describe(exc))
            log.error("ranker_training_failed", playbook=key[0], error=describe(exc))
        else:
            self.failures.pop(key[0], None)

    async def _train(self, recs: collect.Records, by: str) -> StoredRanker:
        cfg = self.deps.cfg
        started = time.perf_counter()
        with as_service():
            groups = await collect.groups(self.deps, recs, cfg.ranker_depth,
                                          cfg.ranker_concurrency)
            collected = time.perf_counter() - started
            fit = await fit_in_child(
                groups, alpha=cfg.ranker_alpha, choose_alpha=cfg.ranker_choose_alpha,
                min_queries=cfg.ranker_min_queries, threads=cfg.ranker_threads)
            new = NewRanker(
                playbook_corpus=recs.playbook_corpus, corpora=list(recs.corpora),
                trained_by=by, records=len([e for e in recs.entries
                                            if e.answer_corpus in set(recs.corpora)]),
                playbook_count=recs.total, queries=fit.queries, examples=fit.examples,
                seconds=round(time.perf_counter() - started, 3), trees=fit.trees,
                alpha=fit.alpha, reason=fit.reason, ndcg10_boost=fit.ndcg10_boost,
                ndcg10_ranker=fit.ndcg10_ranker, cv=fit.cv, features=list(features.FEATURES),
                model=fit.model)
            saved = await self.deps.vectord.save_ranker(new)
            try:
                await serve.refresh(self.deps)
            except LakehouseError as exc:  # the ticker reads it on its next round
                log.warning("ranker_refresh_failed", error=describe(exc))
        log.info("ranker_trained", ranker=saved.id, playbook=recs.playbook_corpus,
                 corpora=recs.corpora, queries=fit.queries, examples=fit.examples,
                 trees=fit.trees, collect_s=round(collected, 2), fit_s=round(fit.seconds, 2),
                 seconds=new.seconds, reason=fit.reason)
        return StoredRanker(**{f: getattr(new, f) for f in new.__struct_fields__},
                            id=saved.id, created_at=saved.created_at)

    # ---- by itself ----------------------------------------------------------------------

    async def check(self) -> int:
        """Start the trainings the records call for; how many started."""
        cfg = self.deps.cfg
        started = 0
        with as_service():
            playbooks = sorted({cfg.playbook_corpus} | {m.playbook_corpus
                                                        for m in self.deps.rankers.current})
            for name in playbooks:
                try:
                    count = (await self.deps.vectord.get_corpus(name)).count
                except NotFound:
                    continue
                mine = [m for m in self.deps.rankers.current if m.playbook_corpus == name]
                due = (abs(int(count) - max(m.playbook_count for m in mine))
                       >= cfg.ranker_min_new_records if mine
                       else int(count) >= cfg.ranker_min_queries)
                if due:
                    started += await self._start_all(name, [m.corpora for m in mine])
        return started

    async def _start_all(self, name: str, named: list[list[str]]) -> int:
        """Train the playbook's default group (every corpus its records answer) and each
        other group it has a model of."""
        started, default = 0, None
        for corpora in [None, *named]:
            key = (name, tuple(corpora) if corpora is not None else None)
            if key in self.running or (corpora is not None and corpora == default):
                continue
            try:
                recs = await collect.records(self.deps, name, corpora, None)
            except (NotFound, Conflict):
                continue
            if corpora is None:
                default = recs.corpora
            self.start(recs, named=corpora is not None, by="auto")
            started += 1
        return started

    async def run_forever(self) -> None:
        cfg = self.deps.cfg
        while True:
            await asyncio.sleep(cfg.ranker_check_seconds)
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except LakehouseError as exc:  # reported; the next round tries again
                log.warning("ranker_check_failed", error=describe(exc))

    async def close(self) -> None:
        """Cancel the trainings under way (their processes killed) and wait for them."""
        tasks = [run.task for run in self.running.values()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
