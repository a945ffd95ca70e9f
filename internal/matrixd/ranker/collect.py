"""What the learned ranker trains on: the playbook's records and, per recorded question, the
candidates a search with feedback would have given it had the playbook held only the other
folds' records (I/O: vectord, embedd).

Per recorded question with a right answer: the playbook's matches as a search's lookup
finds them (the `top_k` entries whose question is within `max_distance`, nearest first)
among the records of the other folds (`features.out_of_fold`: never its own), then
vectord's hybrid search of its depth with those matches' answers included with their
factors (the boost inside the fusion, as a search with feedback sends it) and the ranker's
per-candidate values; its rows are `features.rows`, its labels its own right answers.
The searches run a few at a time on the stack's own account, marked bulk (vectord runs
them on backends at the writes' lower OS priority); the questions are embedded in
embedd's bulk lane.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from internal.api.ranker import HitFeatures, QueryStats
from internal.api.vectord import Hit, MultiSearchRequest
from internal.common.errors import Conflict, NotFound, Unavailable
from internal.common.priority import BULK, PRIORITY
from internal.matrixd import playbook
from internal.matrixd.boost import Match, PlaybookEntry
from internal.matrixd.deps import Deps
from internal.matrixd.ranker import features
from internal.matrixd.ranker.model import Group

EMBED_BATCH = 64


@dataclass
class Records:
    """A playbook's entries for a group of corpora."""

    playbook_corpus: str
    corpora: list[str]
    entries: list[PlaybookEntry]  # every entry of the playbook (the lookup sees them all)
    total: int  # the playbook's entries

    @property
    def questions(self) -> list[str]:
        """The recorded questions with a right answer in the corpora, in a stable order."""
        group = set(self.corpora)
        return sorted({e.query_text for e in self.entries
                       if e.score > 0 and e.answer_corpus in group})

    def right(self, question: str) -> set[tuple[str, str]]:
        group = set(self.corpora)
        return {(e.answer_corpus, e.answer_id) for e in self.entries
                if e.query_text == question and e.score > 0 and e.answer_corpus in group}


async def records(deps: Deps, playbook_corpus: str, corpora: Sequence[str] | None,
                  visible: Sequence[str] | None) -> Records:
    """The playbook's entries and the corpora a model of them ranks: those named, else
    every corpus the entries answer (among `visible`, when the caller sees only some).
    404 naming playbook_corpus when it holds nothing; 409 `no_records` naming the field
    when it holds no right answer in the corpora."""
    entries = await playbook.all_entries(deps, playbook_corpus)
    if not entries:
        raise NotFound(f"playbook_corpus: no feedback recorded in playbook {playbook_corpus!r}",
                       field="playbook_corpus")
    if corpora is None:
        seen = sorted({e.answer_corpus for e in entries if e.score > 0})
        group = [c for c in seen if visible is None or c in set(visible)]
        field = "playbook_corpus"
    else:
        group = sorted(set(corpora))
        field = "corpora"
    out = Records(playbook_corpus, group, entries, len(entries))
    if not group or not out.questions:
        where = f" for corpora {', '.join(group)}" if corpora is not None else ""
        raise Conflict(f"{field}: playbook {playbook_corpus!r} holds no answer recorded as "
                       f"right{where}: nothing to train on", field=field, code="no_records")
    return out


async def _embed(deps: Deps, texts: Sequence[str]) -> dict[str, npt.NDArray[np.float32]]:
    """Each text's embedding (unit length), in embedd's bulk lane."""
    if deps.embed is None:
        raise Unavailable("embedd is not configured ([matrixd] embedd_url is empty)",
                          code="embedd_unavailable")
    out: dict[str, npt.NDArray[np.float32]] = {}
    for start in range(0, len(texts), EMBED_BATCH):
        batch = list(texts[start:start + EMBED_BATCH])
        got = await deps.embed.embed(batch, input_type="query", interactive=False)
        for text, vec in zip(batch, got.vectors, strict=True):
            v = np.asarray(vec, dtype=np.float32)
            out[text] = v / (float(np.linalg.norm(v)) or 1.0)
    return out


def matches_out_of_fold(recs: Records, vectors: dict[str, npt.NDArray[np.float32]],
                        top_k: int, max_distance: float) -> dict[str, list[Match]]:
    """Per training question: the lookup's matches among the other folds' entries, nearest
    first, at most top_k, within max_distance (the service's lookup over a playbook
    without the question's fold)."""
    texts = sorted({e.query_text for e in recs.entries})
    index = {t: i for i, t in enumerate(texts)}
    m = np.stack([vectors[t] for t in texts])
    by_text: dict[int, list[PlaybookEntry]] = {}
    for e in recs.entries:
        by_text.setdefault(index[e.query_text], []).append(e)
    fold = np.asarray([features.fold_of(t) for t in texts])
    out: dict[str, list[Match]] = {}
    for q in recs.questions:
        d = 1.0 - m @ vectors[q]
        near = np.flatnonzero((d <= max_distance) & (fold != features.fold_of(q)))
        found: list[Match] = []
        for j in near[np.argsort(d[near], kind="stable")]:
            found.extend(Match(e, max(float(d[j]), 0.0)) for e in by_text[int(j)])
            if len(found) >= top_k:
                break
        out[q] = found[:top_k]
    return out


async def groups(deps: Deps, recs: Records, depth: int, concurrency: int) -> list[Group]:
    """One training group per recorded question (features.FEATURES columns)."""
    cfg = deps.cfg
    vectors = await _embed(deps, sorted({e.query_text for e in recs.entries}))
    found = matches_out_of_fold(recs, vectors, cfg.playbook_top_k, cfg.playbook_max_distance)
    gate = asyncio.Semaphore(concurrency)
    group_of = set(recs.corpora)

    async def one(q: str) -> Group:
        matches = found[q]
        lookup = playbook.Lookup(recs.playbook_corpus, matches)
        req = MultiSearchRequest(
            mode="hybrid", k=depth, query_vector=vectors[q].tolist(), query_text=q,
            corpora=list(recs.corpora), features=True,
            include=lookup.include(recs.corpora, with_factors=True))
        async with gate:
            token = PRIORITY.set(BULK)  # vectord reads it at its backends' lower priority
            try:
                out = await deps.vectord.search_many(req, Hit)
            finally:
                PRIORITY.reset(token)
        hits = out.hits
        own = [m for m in matches if m.entry.answer_corpus in group_of]
        extras: list[HitFeatures | None] = [
            h.features if isinstance(h.features, HitFeatures) else None for h in hits]
        stats = out.query_stats if isinstance(out.query_stats, QueryStats) else None
        x = features.rows(hits, extras, own, stats)
        right = recs.right(q)
        y = np.asarray([(h.corpus, h.id) in right for h in hits], dtype=np.float64)
        base = np.asarray([h.score if h.score is not None else 0.0 for h in hits])
        return Group(features.fold_of(q), x, y, base)

    return list(await asyncio.gather(*(one(q) for q in recs.questions)))
