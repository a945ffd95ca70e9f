"""matrixd's search policy, apart from HTTP: check, embed, fan out, merge, boost, filter.

`run_search` takes a decoded request and returns the answer, so smart search, the tests
and the handler all run the very same path: the request checked once into a plan
(internal.matrixd.plan), then the steps named below, each reading the plan.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

import msgspec
import structlog

from internal.api.matrixd import MatrixSearchRequest, RelevanceOption
from internal.api.ranker import HitFeatures, QueryStats, RankerUse
from internal.api.responses import (
    CorpusSelection,
    CorpusStatus,
    DroppedHit,
    FailedCorpus,
    HitRelevance,
    MatrixAnswer,
    PlaybookSummary,
    RankedHit,
    RelevanceSummary,
    SkippedCorpus,
)
from internal.api.vectord import IncludeRef, MultiSearchRequest, SearchError
from internal.clients.embed import Embedding
from internal.common.auth import as_service, caller
from internal.common.errors import (
    InvalidArgument,
    LakehouseError,
    NotFound,
    ServiceError,
    Unavailable,
    UpstreamError,
    UpstreamTimeout,
    describe,
    from_service,
    in_callers_fields,
)
from internal.common.suggest import did_you_mean
from internal.matrixd import boost, downgrade, merge, playbook, relevance, semantic, spaces
from internal.matrixd.deps import Deps, embed_query
from internal.matrixd.plan import CALLERS_FIELDS, SearchPlan, check
from internal.matrixd.ranker import serve as ranker_serve
from internal.matrixd.relevance import Chunk
from lakehouse.wire.modes import MODES, ModeSpec

log = structlog.get_logger()


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


def _is_down(exc: LakehouseError) -> bool:
    """An error meaning the service cannot answer now (not that the request was wrong)."""
    return isinstance(exc, (Unavailable, UpstreamTimeout)) or exc.status >= 500


# ---- the search, step by step --------------------------------------------------------------

async def run_search(deps: Deps, body: MatrixSearchRequest) -> MatrixAnswer:
    """One matrix search: check, embed, the playbook, fan out, merge, gates, the answer."""
    started = time.perf_counter()
    plan = check(body, deps.cfg)
    query = await embed(deps, plan)
    found = await recall(deps, plan, query)
    req = plan.vectord(query.mode, query.vector,
                       query.vectors.query_vectors if query.vectors is not None else None,
                       found.include)
    ranked_by = await _ranker_plan(deps, plan, query)
    if ranked_by is not None and ranked_by.applies:  # the model's values, at its depth
        req = msgspec.structs.replace(req, k=max(req.k, deps.cfg.ranker_depth), features=True)
    merged, results, meta = await _search_all(deps, req)
    if _moved(query, results):  # a corpus switched model since matrixd read the spaces
        deps.spaces_at = float("-inf")
        query = await embed(deps, plan)
        req = msgspec.structs.replace(req, query_vectors=query.vectors.query_vectors
                                      if query.vectors is not None else None)
        merged, results, meta = await _search_all(deps, req)
    skipped, failed = await _judge(deps, plan, query, results)
    hits = merge.annotate(merged, query.mode, deps.cfg.keyword_merge_k)
    hits, gates = _gates(deps, plan, query.mode, hits, found, _Ranking(
        ranked_by, meta, {r.corpus: w for r in results if (w := r.weight(plan)) != 1.0}))
    if plan.highlight_chars is not None:
        await semantic.apply(deps, hits, plan.highlight_chars, query.default, query.vectors)
    out = _answer(plan, query, found, hits, gates, results, failed, skipped, meta)
    out.took_ms = _ms(started)
    log.info("search_done", corpora=len(results), failed=len(failed), mode=query.mode.name,
             k=plan.k, hits=len(hits), boosted=gates.boosted, ms=out.took_ms)
    return out


@dataclass
class Query:
    """The question as searched: its mode (the planned one, or the one it degraded to),
    the query vector, the default embedding and one per other model the corpora record."""

    mode: ModeSpec
    vector: list[float] | None
    default: Embedding | None = None
    vectors: spaces.Vectors | None = None
    embed_ms: float | None = None
    degraded: list[str] = field(default_factory=list)


async def embed(deps: Deps, plan: SearchPlan) -> Query:
    """The question embedded when its mode embeds and no vector was given: once by the
    default model, then once per other model the searched corpora record. Keyword and
    lexical searches (and their playbook lookup, by the question's words) never wait for
    embedd; a mode with a fallback degrades to it when embedd is down."""
    query = Query(plan.mode, plan.query_vector)
    if plan.query_vector is not None or not plan.mode.embeds:
        return query
    # A corpus that does not exist is refused before its question costs an embedding.
    missing = [] if plan.allow_partial else await spaces.unknown_corpora(deps, plan.corpora or [])
    if missing:
        raise corpus_not_found(missing[0], await _visible_names(deps))
    t0 = time.perf_counter()
    try:
        query.default = await embed_query(deps, plan.text)
        query.vector = query.default.vectors[0]
    except LakehouseError as exc:
        if plan.mode.needs == "vector" or not _is_down(exc):
            raise
        log.warning("embedding_unavailable", error=exc.message, mode=plan.mode.name)
        query.degraded.append("embedding_unavailable")
        if plan.mode.fallback is not None:
            query.mode = MODES[plan.mode.fallback]
    query.embed_ms = _ms(t0)
    if query.default is not None:
        t0 = time.perf_counter()
        query.vectors = await spaces.embed_all(deps, plan.text, query.default, plan.corpora,
                                               plan.excluded)
        query.embed_ms = round(query.embed_ms + _ms(t0), 2)
    return query


@dataclass
class Recall:
    """What the playbook said (looked up before the fan-out, so that the answers its
    entries raise ride along as `include` and are scored even when retrieval misses
    them) and what it adds to vectord's request."""

    lookup: playbook.Lookup
    include: list[IncludeRef]
    ms: float | None = None


async def recall(deps: Deps, plan: SearchPlan, query: Query) -> Recall:
    """The playbook's lookup (when used, or read by the disputed gate). In a mode that
    fuses the boost is applied inside the fusion (vectord), so a recalled answer
    competes at its boosted strength; other modes boost the merged list (`_gates`)."""
    pb = plan.playbook
    if not pb.read:
        return Recall(playbook.Lookup(pb.corpus), [])
    t0 = time.perf_counter()
    # The playbook is the stack's: read as such. What its entries raise is fetched by
    # vectord under the caller's scope (`include`, dropped under a tenant filter).
    with as_service():
        lookup = await playbook.lookup(deps, pb.corpus, query.vector, plan.text, pb.top_k,
                                       pb.max_distance, plan.allow_partial)
    if lookup.unavailable:
        query.degraded.append("playbook_unavailable")
    include = (lookup.include(plan.corpora, with_factors=query.mode.fusion) if pb.use else [])
    return Recall(lookup, include, _ms(t0))


async def _judge(deps: Deps, plan: SearchPlan, query: Query, results: list[CorpusResult]
                 ) -> tuple[list[SkippedCorpus], list[CorpusResult]]:
    """The corpora searched without their vector branch and those that failed; raised
    when the request is at fault (400, 404) or no corpus could answer (503, 502)."""
    _raise_request_fault(results, plan)
    skipped = _skipped(results, query, plan)
    failed = [r for r in results if r.error is not None]
    if failed and (not plan.allow_partial or len(failed) == len(results)):
        await _raise_not_found(deps, failed, len(results), plan)
        _raise_unavailable(failed, len(results))
        detail = "; ".join(f"corpus {r.corpus!r}: {describe(r.error)}"
                           for r in failed if r.error is not None)
        raise UpstreamError(detail)
    return skipped, failed


async def _ranker_plan(deps: Deps, plan: SearchPlan, query: Query) -> ranker_serve.Plan | None:
    """The learned ranker's models that order this search (with feedback only; None: the
    playbook has none this caller may be ranked with)."""
    if not plan.playbook.use:
        return None
    await ranker_serve.ready(deps.rankers)
    return ranker_serve.plan(deps.rankers, plan.playbook.corpus, caller(), query.mode,
                             plan.request.fusion)


@dataclass
class _Ranking:
    """The learned ranker's part in the gates: its plan, vectord's answer's values and
    the corpora's weights (which its order keeps)."""

    plan: ranker_serve.Plan | None
    meta: SearchMeta
    weights: dict[str, float] = field(default_factory=dict)


@dataclass
class Gates:
    relevance: RelevanceSummary | None
    downgraded: int
    boosted: int
    ranker: RankerUse | None = None


def _rerank(deps: Deps, r: _Ranking, hits: list[RankedHit], matches: list[boost.Match],
            explain: bool) -> RankerUse | None:
    """The learned ranker's order of the hits (in place) and what the answer says of it;
    the values vectord gave it are not part of the answer."""
    if r.plan is None:
        return None
    if not r.plan.applies:
        return RankerUse(applied=False, reason=r.plan.reason)
    extras = [h.features if isinstance(h.features, HitFeatures) else None for h in hits]
    for h in hits:
        h.features = msgspec.UNSET
    return ranker_serve.rerank(deps.rankers, r.plan, hits, extras, matches,
                               r.meta.query_stats, explain, r.weights)


def _gates(deps: Deps, plan: SearchPlan, mode: ModeSpec, hits: list[RankedHit], found: Recall,
           ranking_by: _Ranking) -> tuple[list[RankedHit], Gates]:
    """Recall marked, then relevance, downgrade, playbook, the learned ranker (the order of
    the matrix components); the top k ranked."""
    ranking = merge.ranking_of(mode)
    use = plan.playbook.use
    if use:
        playbook.mark_recalled(hits)
    relevance_info: RelevanceSummary | None = None
    if plan.relevance is not None:
        hits, relevance_info = _filter_hits(hits, plan.relevance)
    downgraded = downgrade.apply(hits, plan.rules, ranking, datetime.now(UTC),
                                 boost.disputed(found.lookup.matches))
    boosted = boost.apply(hits, found.lookup.matches if use else [], ranking,
                          in_fusion=mode.fusion)
    ranker_use = _rerank(deps, ranking_by, hits, found.lookup.matches, plan.explain)
    hits = hits[:plan.k]
    for i, h in enumerate(hits):
        h.rank = i + 1
    return hits, Gates(relevance_info, downgraded, boosted, ranker_use)


def _answer(plan: SearchPlan, query: Query, found: Recall, hits: list[RankedHit], gates: Gates,
            results: list[CorpusResult], failed: list[CorpusResult],
            skipped: list[SkippedCorpus], meta: SearchMeta) -> MatrixAnswer:
    out = MatrixAnswer(
        mode=query.mode.name, requested_mode=plan.mode.name, k=plan.k, hits=hits,
        corpora=[r.status(plan) for r in results],
        failed_corpora=[FailedCorpus(corpus=r.corpus, error=describe(r.error),
                                     status=r.error.status, code=r.error.code)
                        for r in failed if r.error is not None],
        skipped_corpora=skipped, degraded=query.degraded, playbook_boosted=gates.boosted,
        embed_ms=query.embed_ms, took_ms=0.0)
    if plan.playbook.use:
        out.playbook = PlaybookSummary(
            corpus=plan.playbook.corpus, entries=len(found.lookup.matches), boosted=gates.boosted,
            demoted=sum(1 for h in hits if h.boost_factor > 1.0), included=len(found.include),
            recalled=sum(1 for h in hits if h.from_playbook is True),
            missing=meta.include_missing, ms=found.ms,
            match="lexical" if found.lookup.lexical else "vector")
    if gates.ranker is not None:
        out.ranker = gates.ranker
    if meta.facets is not None:
        out.facets = meta.facets
    if meta.did_you_mean is not None:
        out.did_you_mean = meta.did_you_mean
    if plan.rules.active:
        out.downgrade = plan.rules.summary(gates.downgraded)
    if gates.relevance is not None:
        out.relevance = gates.relevance
    return out


# ---- vectord's answer ------------------------------------------------------------------------

@dataclass
class CorpusResult:
    corpus: str
    hits: int  # how many of the merged hits are this corpus's
    ms: float
    error: LakehouseError | None = None
    skipped: str | None = None  # why its vector branch did not run (no vector of its model)
    selection: CorpusSelection | None = None  # resource selection's, when it ran

    def weight(self, plan: SearchPlan) -> float:
        """The weight its hits were ranked with: the selection's (the request's wins
        there), else the request's."""
        return (self.selection.weight if self.selection is not None
                else (plan.request.corpus_weights or {}).get(self.corpus, 1.0))

    def status(self, plan: SearchPlan) -> CorpusStatus:
        """Its row of the answer: the weight its hits were ranked with when not 1, and
        with `explain` the selection's why."""
        weight = self.weight(plan)
        return CorpusStatus(
            corpus=self.corpus, hits=self.hits, ms=self.ms,
            status="ok" if self.error is None else "failed",
            weight=weight if weight != 1.0 else None,
            selection=self.selection if plan.explain else None)


@dataclass
class SearchMeta:
    """What vectord's answer says besides the hits: `include` items it did not find,
    facets, the question's stats (asked for the learned ranker)."""

    include_missing: int = 0
    facets: dict[str, dict[str, int]] | None = None
    query_stats: QueryStats | None = None
    did_you_mean: str | None = None


async def _search_all(deps: Deps, req: MultiSearchRequest
                      ) -> tuple[list[RankedHit], list[CorpusResult], SearchMeta]:
    """One vectord call over every corpus: the merged hits and each corpus's outcome.

    A corpus's error is vectord's answer for it, as the per-corpus route gives it; a
    failure of the whole call (vectord down, a request-wide 400) is every named corpus's
    (with corpora absent there is no list to blame, so it is raised as it is).
    """
    started = time.perf_counter()
    try:
        out = await deps.vectord.search_many(req, RankedHit)
    except LakehouseError as exc:
        if req.corpora is None:
            raise
        ms = _ms(started)
        return [], [CorpusResult(c, 0, ms, exc) for c in req.corpora], SearchMeta()
    meta = SearchMeta(out.include_missing, out.facets if isinstance(out.facets, dict) else None,
                      out.query_stats if isinstance(out.query_stats, QueryStats) else None,
                      out.did_you_mean if isinstance(out.did_you_mean, str) else None)
    results = []
    for row in out.results:
        if isinstance(row.error, SearchError):
            status = row.status if isinstance(row.status, int) else 502
            results.append(CorpusResult(row.corpus, 0, 0.0, from_service(
                status, row.error.code, row.error.message, service="vectord",
                field=row.error.field)))
        else:
            results.append(CorpusResult(
                row.corpus, row.hits if isinstance(row.hits, int) else 0,
                round(row.took_ms, 2) if isinstance(row.took_ms, float) else 0.0,
                skipped=row.skipped if isinstance(row.skipped, str) else None,
                selection=row.selection if isinstance(row.selection, CorpusSelection) else None))
    return out.hits, results, meta


def _raise_request_fault(results: list[CorpusResult], plan: SearchPlan) -> None:
    """A vectord 400 about a field of the caller's request is the caller's fault: 400, not 502.

    Request-wide fields (filter, language, the query text, fusion options) are wrong for
    every corpus. A query_vector the caller gave that does not fit a corpus (another
    dimension) is a 400 too, unless allow_partial asked for the other corpora's hits and
    some corpus answered.
    """
    vector_faults = 0
    for r in results:
        e = r.error
        if not (isinstance(e, ServiceError) and e.status == 400 and e.field):
            continue
        mine = in_callers_fields(e, CALLERS_FIELDS)
        if mine is not None:
            raise mine
        if e.field.split("[")[0] == "query_vector" and plan.query_vector is not None:
            if not plan.allow_partial:
                raise InvalidArgument(f"corpus {r.corpus!r}: {e.message}", field=e.field)
            vector_faults += 1
    if vector_faults and vector_faults == len(results):
        raise InvalidArgument(f"query_vector: fits none of the corpora ({results[0].error})",
                              field="query_vector")


def _moved(query: Query, results: list[CorpusResult]) -> bool:
    """Whether a corpus was skipped for want of its model's vector though its embedding did
    not fail: its model changed (a re-embedding switched it) after matrixd read vectord's
    spaces (SPACES_TTL_SECONDS), so the search goes again once with them read anew."""
    failed = query.vectors.failed if query.vectors is not None else {}
    return query.vectors is not None and any(
        r.skipped is not None and r.corpus not in failed for r in results)


def _skipped(results: list[CorpusResult], query: Query, plan: SearchPlan) -> list[SkippedCorpus]:
    """The corpora searched without their vector branch, each with the reason (an
    embedding that failed, else vectord's) and what was searched instead (a mode that
    does without a vector: its words). A corpus named in `corpora` is the caller's
    explicit ask: without allow_partial, its skip is a 502."""
    out: list[SkippedCorpus] = []
    searched: Literal["lexical", "none"] = "lexical" if query.mode.needs == "either" else "none"
    for r in results:
        if r.skipped is None:
            continue
        reason = (query.vectors.failed.get(r.corpus) if query.vectors is not None else None
                  ) or r.skipped
        out.append(SkippedCorpus(corpus=r.corpus, reason=reason, searched=searched))
    if out and plan.corpora is not None and not plan.allow_partial:
        detail = "; ".join(f"corpus {s.corpus!r}: {s.reason}" for s in out)
        raise UpstreamError(f"{detail} (allow_partial answers without its vector branch)")
    return out


async def _raise_not_found(deps: Deps, failed: list[CorpusResult], total: int,
                           plan: SearchPlan) -> None:
    """A named corpus that does not exist is the caller's mistake: 404 `corpus_not_found`
    naming it and, when one is close, the nearest existing name. With allow_partial and
    another corpus answering, it stays in failed_corpora like any corpus that failed."""
    missing = [r.corpus for r in failed if isinstance(r.error, NotFound)]
    if not missing or (plan.allow_partial and len(failed) < total):
        return
    raise corpus_not_found(missing[0], await _visible_names(deps))


async def _visible_names(deps: Deps) -> list[str]:
    """The corpora a suggestion may name: vectord's list, which it limits to the caller's
    scope (never the spaces cache, which holds every corpus)."""
    try:
        return [c.name for c in await deps.vectord.list_corpora()]
    except LakehouseError:
        return []  # the refusal stands without a suggestion


def corpus_not_found(name: str, names: list[str]) -> NotFound:
    """The 404 for a named corpus that does not exist, with the nearest existing name."""
    return NotFound(f"corpora: corpus {name!r} not found{did_you_mean(name, names)}",
                    field="corpora", code="corpus_not_found")


def _raise_unavailable(failed: list[CorpusResult], total: int) -> None:
    """Every corpus failed with the same 503 (PostgreSQL down): that 503, not a 502."""
    codes = {(r.error.status, r.error.code) for r in failed if r.error is not None}
    if len(failed) == total and len(codes) == 1:
        status, code = next(iter(codes))
        if status == 503 and failed[0].error is not None:
            raise Unavailable(describe(failed[0].error), code=code)


def _filter_hits(hits: list[RankedHit], opt: RelevanceOption
                 ) -> tuple[list[RankedHit], RelevanceSummary]:
    """Apply the relevance filter to merged hits; source is metadata path/source, else id."""
    chunks = []
    for h in hits:
        src = h.metadata.get("path") or h.metadata.get("source") or h.id
        chunks.append(Chunk(text=h.text, source=str(src)))
    scored = relevance.score(opt.focus, chunks, opt.threshold)
    kept: list[RankedHit] = []
    dropped: list[DroppedHit] = []
    for h, s in zip(hits, scored, strict=True):
        h.relevance = HitRelevance(score=s.total, signals=s.signals)
        if s.kept:
            kept.append(h)
        else:
            dropped.append(DroppedHit(corpus=h.corpus, id=h.id, score=s.total,
                                      signals=s.signals))
    return kept, RelevanceSummary(threshold=opt.threshold, kept=len(kept), dropped=dropped)
