"""The learned ranker: a LambdaMART model per playbook and group of corpora, trained on the
recorded feedback (from the playbook's boost), ordering the fused candidates of searches
with feedback. `features` makes the rows, `model` fits (in `child`, a process of its own),
`collect` gathers the training data, `job` trains on demand and by itself, `serve` reads
the current models and orders a search's hits; `train` and `status` serve the routes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from internal.api.ranker import RankerStatus, RankerTraining, StoredRanker, TrainRanker
from internal.api.validate import corpus_name
from internal.common.access import Scope
from internal.common.auth import as_service
from internal.common.errors import NotFound
from internal.common.suggest import did_you_mean
from internal.matrixd.deps import Deps
from internal.matrixd.ranker import collect, serve
from internal.matrixd.ranker.job import Trainer


@contextlib.asynccontextmanager
async def running(deps: Deps) -> AsyncIterator[Trainer]:
    """The trainer, with the ranker's background tasks (every replica's read of the current
    models into deps.rankers; the check that trains by itself when `ranker_auto`), stopped
    on the way out."""
    trainer = Trainer(deps)
    tasks = [asyncio.create_task(serve.run_forever(deps))]
    if deps.cfg.ranker_auto:
        tasks.append(asyncio.create_task(trainer.run_forever()))
    try:
        yield trainer
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await trainer.close()


async def _seen(deps: Deps, scope: Scope | None) -> list[str]:
    """The corpora the caller sees: listed as the service and held to the caller's scope (a
    feedback key may train, and may not list corpora through vectord itself)."""
    with as_service():
        rows = await deps.vectord.list_corpora()
    return [c.name for c in rows if scope is None or scope.sees(c.name)]


async def _check_corpora(deps: Deps, names: list[str], scope: Scope | None) -> None:
    """404 corpus_not_found naming `corpora` for a corpus that does not exist (or that the
    caller cannot see: the same answer)."""
    known = await _seen(deps, scope)
    for name in names:
        if name not in known or (scope is not None and not scope.sees(name)):
            raise NotFound(f"corpora: corpus {name!r} not found{did_you_mean(name, known)}",
                           field="corpora", code="corpus_not_found")


async def train(deps: Deps, trainer: Trainer, body: TrainRanker, scope: Scope | None,
                by: str) -> StoredRanker | RankerTraining:
    """Start (or join) a training; the stored model when `wait`, else the training."""
    name = body.playbook_corpus or deps.cfg.playbook_corpus
    corpus_name(name, "playbook_corpus")
    if body.corpora is not None:
        await _check_corpora(deps, body.corpora, scope)
    visible = None
    if scope is not None and not scope.all_corpora:
        visible = await _seen(deps, scope)
    with as_service():  # the playbook is the stack's; the caller's corpora decided above
        recs = await collect.records(deps, name, body.corpora, visible)
    run = trainer.start(recs, named=body.corpora is not None, by=by)
    if not body.wait:
        return run.info
    return await asyncio.shield(run.task)


async def status(deps: Deps, trainer: Trainer, playbook_corpus: str | None, scope: Scope | None,
                 limit: int) -> RankerStatus:
    """The models (newest first) of the corpora the caller sees entirely, what trains now."""
    if playbook_corpus is not None:
        corpus_name(playbook_corpus, "playbook_corpus")
    with as_service():
        rows = await deps.vectord.list_rankers(playbook_corpus, limit)
        # Which are current: the store's word, not this matrixd's cache (just after a start
        # its first read may not have come yet, and a model restored looked retired).
        current = {m.id for m in await deps.vectord.current_rankers()}

    def sees(corpora: list[str] | None) -> bool:
        return scope is None or corpora is None or all(scope.sees(c) for c in corpora)

    return RankerStatus(
        playbook_corpus=playbook_corpus, auto=deps.cfg.ranker_auto,
        models=[m.public(m.id in current) for m in rows if sees(m.corpora)],
        training=[run.info for run in trainer.running.values()
                  if (playbook_corpus in (None, run.info.playbook_corpus))
                  and sees(run.info.corpora)],
        failures=[f for f in trainer.failures.values()
                  if playbook_corpus in (None, f.playbook_corpus) and sees(f.corpora)])
