"""matrixd's search policy, apart from HTTP: validate, embed, fan out, merge, boost, filter.

`run_search` takes a decoded request and returns the response body, so smart search,
the tests and the handler all run the very same path.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec
import structlog

from internal.api import validate
from internal.api.matrixd import MatrixSearchRequest, PassedOptions, RelevanceOption
from internal.api.ranker import HitFeatures, QueryStats, RankerUse
from internal.api.responses import (
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
from internal.api.validate import corpus_name
from internal.api.vectord import (
    Highlight,
    IncludeRef,
    Mode,
    MultiSearchRequest,
    SearchError,
)
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
from internal.common.web import validation_field
from internal.config import MatrixdConfig
from internal.matrixd import boost, downgrade, merge, playbook, relevance, semantic, spaces
from internal.matrixd.deps import Deps, embed_query
from internal.matrixd.ranker import serve as ranker_serve
from internal.matrixd.relevance import Chunk

log = structlog.get_logger()

# vectord 400s on these fields are faults of the request, the same for every corpus.
_REQUEST_FIELDS = ("filter", "language", "ef_search", "corpus_weights")
# Hybrid fusion options, passed to vectord unchanged; a 400 on them is the request's.
_FUSION_FIELDS = ("fusion", "rrf_k", "weights", "candidates", "prefer", "prf")
# How the results are shaped (internal.vectord.shaping.shaped), passed to vectord unchanged.
_SHAPING_FIELDS = ("highlight", "group_by", "group_size", "facets", "facet_size", "diversity",
                   "recency")
# vectord's request fields that are the caller's own, wrong for every corpus.
_CALLERS_FIELDS = {f: f for f in (*_REQUEST_FIELDS, *_FUSION_FIELDS, *_SHAPING_FIELDS,
                                  "query_text")}

# ---- helpers --------------------------------------------------------------------------

def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


def _is_down(exc: LakehouseError) -> bool:
    """An error meaning the service cannot answer now (not that the request was wrong)."""
    return isinstance(exc, (Unavailable, UpstreamTimeout)) or exc.status >= 500


def _check_range(value: int, lo: int, hi: int, field: str) -> None:
    if not lo <= value <= hi:
        raise InvalidArgument(f"{field}: must be in {lo}..{hi}, got {value}", field=field)


# ---- search -----------------------------------------------------------------------------

@dataclass
class CorpusResult:
    corpus: str
    hits: int  # how many of the merged hits are this corpus's
    ms: float
    error: LakehouseError | None = None
    skipped: str | None = None  # why its vector branch did not run (no vector of its model)


async def _search_all(deps: Deps, req: MultiSearchRequest, meta: dict[str, Any] | None = None
                      ) -> tuple[list[RankedHit], list[CorpusResult]]:
    """One vectord call over every corpus: the merged hits and each corpus's outcome.

    A corpus's error is vectord's answer for it, as the per-corpus route gives it; a
    failure of the whole call (vectord down, a request-wide 400) is every named corpus's
    (with corpora absent there is no list to blame, so it is raised as it is). meta, when
    given, receives vectord's `include_missing` count.
    """
    started = time.perf_counter()
    try:
        out = await deps.vectord.search_many(req, RankedHit)
    except LakehouseError as exc:
        if req.corpora is None:
            raise
        ms = _ms(started)
        return [], [CorpusResult(c, 0, ms, exc) for c in req.corpora]
    if meta is not None:
        meta["include_missing"] = out.include_missing
        if isinstance(out.query_stats, QueryStats):
            meta["query_stats"] = out.query_stats
        if isinstance(out.facets, dict):
            meta["facets"] = out.facets
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
                skipped=row.skipped if isinstance(row.skipped, str) else None))
    return out.hits, results


_NONE_PASSED = PassedOptions()


def _passed(body: MatrixSearchRequest, mode: Mode) -> PassedOptions:
    """filter (and in hybrid mode prefer, prf: sent only then) as vectord's structs; a bad
    one is a 400 naming its field, with the words vectord's own decoding would use."""
    given = {key: value for key, value in (("filter", body.filter), ("prefer", body.prefer),
                                           ("prf", body.prf))
             if value is not None and (key == "filter" or mode == "hybrid")}
    if not given:
        return _NONE_PASSED
    try:
        return msgspec.convert(given, PassedOptions)
    except msgspec.ValidationError as exc:
        field = validation_field(str(exc))
        raise InvalidArgument(f"{field or 'body'}: {exc}", field=field) from None


def _validate_search(body: MatrixSearchRequest, cfg: MatrixdConfig
                     ) -> tuple[Mode, str, int, PassedOptions]:
    """matrixd's one check of a search: what its decoding cannot know (the configured
    limits, fields that depend on each other) and the free-form options as vectord's
    structs. Returns the effective mode, the stripped query text, the depth and those
    options; 400 on bad input. vectord checks its request once more, on its own."""
    validate.corpora(body.corpora, cfg.max_corpora)
    if body.corpus_weights is not None:
        validate.corpus_weights(body.corpus_weights, body.corpora if body.corpora is not None
                                else list(body.corpus_weights))
    _check_range(body.k, 1, cfg.max_k, "k")
    per_corpus_k = body.per_corpus_k if body.per_corpus_k is not None else body.k
    _check_range(per_corpus_k, 1, cfg.max_k, "per_corpus_k")
    text = (body.query_text or "").strip()
    if body.query_vector is not None and not body.query_vector:
        raise InvalidArgument("query_vector: must not be empty", field="query_vector")
    if not text and body.query_vector is None:
        raise InvalidArgument("query_text: give query_text or query_vector", field="query_text")
    mode: Mode = body.mode or ("hybrid" if text else "vector")
    if mode != "vector" and not text:
        raise InvalidArgument(f"query_text: mode {mode!r} needs query text", field="query_text")
    if body.playbook_corpus is not None:
        corpus_name(body.playbook_corpus, "playbook_corpus")
    if body.playbook_top_k is not None:
        _check_range(body.playbook_top_k, 1, cfg.max_k, "playbook_top_k")
    if body.playbook_max_distance is not None and body.playbook_max_distance < 0:
        raise InvalidArgument("playbook_max_distance: must not be negative",
                              field="playbook_max_distance")
    if body.relevance is not None and not body.relevance.focus.path.strip():
        raise InvalidArgument("relevance.focus.path: must not be empty", field="relevance.focus.path")
    return mode, text, per_corpus_k, _passed(body, mode)


def _downgrade_rules(body: MatrixSearchRequest, cfg: MatrixdConfig) -> downgrade.Rules:
    """`[matrixd] downgrade_*` with the request's `downgrade` keys over them; 400 naming a key."""
    defaults = downgrade.Rules(cfg.downgrade_max_distance, cfg.downgrade_min_score,
                               cfg.downgrade_max_age_days, cfg.downgrade_disputed)
    if body.downgrade is None:
        return defaults
    given = {k: v for k, v in msgspec.structs.asdict(body.downgrade).items() if v is not None}
    try:
        return downgrade.combine(defaults, given)
    except downgrade.RuleError as exc:
        raise InvalidArgument(f"downgrade.{exc}", field=f"downgrade.{exc.key}") from None


def _raise_request_fault(results: list[CorpusResult], body: MatrixSearchRequest) -> None:
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
        mine = in_callers_fields(e, _CALLERS_FIELDS)
        if mine is not None:
            raise mine
        if e.field.split("[")[0] == "query_vector" and body.query_vector is not None:
            if not body.allow_partial:
                raise InvalidArgument(f"corpus {r.corpus!r}: {e.message}", field=e.field)
            vector_faults += 1
    if vector_faults and vector_faults == len(results):
        raise InvalidArgument(f"query_vector: fits none of the corpora ({results[0].error})",
                              field="query_vector")


def _skipped(results: list[CorpusResult], vectors: spaces.Vectors | None, mode: str,
             body: MatrixSearchRequest) -> list[SkippedCorpus]:
    """The corpora searched without their vector branch, each with the reason (an
    embedding that failed, else vectord's) and what was searched instead. A corpus named
    in `corpora` is the caller's explicit ask: without allow_partial, its skip is a 502."""
    out: list[SkippedCorpus] = []
    for r in results:
        if r.skipped is None:
            continue
        reason = (vectors.failed.get(r.corpus) if vectors is not None else None) or r.skipped
        out.append(SkippedCorpus(corpus=r.corpus, reason=reason,
                                 searched="lexical" if mode == "hybrid" else "none"))
    if out and body.corpora is not None and not body.allow_partial:
        detail = "; ".join(f"corpus {s.corpus!r}: {s.reason}" for s in out)
        raise UpstreamError(f"{detail} (allow_partial answers without its vector branch)")
    return out


async def _raise_not_found(deps: Deps, failed: list[CorpusResult], total: int,
                           body: MatrixSearchRequest) -> None:
    """A named corpus that does not exist is the caller's mistake: 404 `corpus_not_found`
    naming it and, when one is close, the nearest existing name. With allow_partial and
    another corpus answering, it stays in failed_corpora like any corpus that failed."""
    missing = [r.corpus for r in failed if isinstance(r.error, NotFound)]
    if not missing or (body.allow_partial and len(failed) < total):
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


async def run_search(deps: Deps, body: MatrixSearchRequest) -> MatrixAnswer:
    """One matrix search: validate, embed, fan out, merge, boost, filter; the answer."""
    cfg = deps.cfg
    started = time.perf_counter()
    mode, text, per_corpus_k, passed = _validate_search(body, cfg)
    rules = _downgrade_rules(body, cfg)
    requested_mode = mode
    degraded: list[str] = []

    vector = body.query_vector
    default: Embedding | None = None
    embed_ms: float | None = None
    # Only a vector branch embeds: keyword and lexical searches (and their playbook
    # lookup, by the question's words) never wait for embedd.
    if vector is None and mode in ("vector", "hybrid"):
        # A corpus that does not exist is refused before its question costs an embedding.
        missing = [] if body.allow_partial else await spaces.unknown_corpora(deps, body.corpora or [])
        if missing:
            raise corpus_not_found(missing[0], await _visible_names(deps))
        t0 = time.perf_counter()
        try:
            default = await embed_query(deps, text)
            vector = default.vectors[0]
        except LakehouseError as exc:
            if mode == "vector" or not _is_down(exc):
                raise
            log.warning("embedding_unavailable", error=exc.message, mode=mode)
            degraded.append("embedding_unavailable")
            if mode == "hybrid":
                mode = "lexical"
        embed_ms = _ms(t0)
    playbook_name = body.playbook_corpus or cfg.playbook_corpus
    # Every corpus but the playbooks: recorded questions are not answers.
    excluded = sorted({cfg.playbook_corpus, playbook_name}) if body.corpora is None else []
    # The query embedded once more per other model the searched corpora record.
    vectors: spaces.Vectors | None = None
    if body.query_vector is None and vector is not None and mode in ("vector", "hybrid"):
        t0 = time.perf_counter()
        assert default is not None
        vectors = await spaces.embed_all(deps, text, default, body.corpora, excluded)
        embed_ms = round((embed_ms or 0.0) + _ms(t0), 2)

    # The playbook: looked up before the fan-out, so that the answers its
    # entries raise ride along as `include` and are scored even when retrieval misses them.
    use_playbook = body.use_playbook
    lookup = playbook.Lookup(playbook_name)
    playbook_ms: float | None = None
    if body.use_playbook or rules.disputed:
        t0 = time.perf_counter()
        # The playbook is the stack's: read as such. What its entries raise is fetched by
        # vectord under the caller's scope (`include`, dropped under a tenant filter).
        with as_service():
            lookup = await playbook.lookup(
                deps, playbook_name, vector, text, body.playbook_top_k or cfg.playbook_top_k,
                body.playbook_max_distance if body.playbook_max_distance is not None
                else cfg.playbook_max_distance, body.allow_partial)
        playbook_ms = _ms(t0)
        if lookup.unavailable:
            degraded.append("playbook_unavailable")
    # Hybrid: the boost is applied inside the fusion (vectord), so a recalled answer
    # competes at its boosted strength; other modes boost the merged list below.
    in_fusion = mode == "hybrid"
    include = lookup.include(body.corpora, with_factors=in_fusion) if use_playbook else []
    req = _vectord_request(body, mode, text, per_corpus_k, passed, vector, vectors,
                           include, excluded)
    # The learned ranker: the playbook's models this caller may be ranked with (None: none).
    ranked_by: ranker_serve.Plan | None = None
    if use_playbook:
        await ranker_serve.ready(deps.rankers)
        ranked_by = ranker_serve.plan(deps.rankers, playbook_name, caller(), mode, body.fusion)
        if ranked_by is not None and ranked_by.applies:
            req = msgspec.structs.replace(req, k=max(req.k, cfg.ranker_depth), features=True)
    search_meta: dict[str, Any] = {}
    merged, results = await _search_all(deps, req, search_meta)

    _raise_request_fault(results, body)
    skipped = _skipped(results, vectors, mode, body)
    failed = [r for r in results if r.error is not None]
    if failed and (not body.allow_partial or len(failed) == len(results)):
        await _raise_not_found(deps, failed, len(results), body)
        _raise_unavailable(failed, len(results))
        detail = "; ".join(f"corpus {r.corpus!r}: {describe(r.error)}"
                           for r in failed if r.error is not None)
        raise UpstreamError(detail)

    hits = merge.annotate(merged, mode, cfg.rrf_k)
    ranking = merge.ranking_of(mode)
    if use_playbook:
        playbook.mark_recalled(hits)

    # relevance, downgrade, playbook: the order of the matrix components.
    relevance_info: RelevanceSummary | None = None
    if body.relevance is not None:
        hits, relevance_info = _filter_hits(hits, body.relevance)
    downgraded = downgrade.apply(hits, rules, ranking, datetime.now(UTC),
                                 boost.disputed(lookup.matches))
    boosted = boost.apply(hits, lookup.matches if use_playbook else [], ranking,
                          in_fusion=in_fusion)
    ranker_use = _rerank(deps, ranked_by, hits, lookup.matches, search_meta, body.explain)

    hits = hits[:body.k]
    for i, h in enumerate(hits):
        h.rank = i + 1
    if body.highlight:
        chars = body.highlight.fragment_chars if isinstance(body.highlight, Highlight) else (
            Highlight().fragment_chars)
        await semantic.apply(deps, hits, chars, default, vectors)

    out = MatrixAnswer(
        mode=mode, requested_mode=requested_mode, k=body.k, hits=hits,
        corpora=[CorpusStatus(corpus=r.corpus, hits=r.hits, ms=r.ms,
                              status="ok" if r.error is None else "failed") for r in results],
        failed_corpora=[FailedCorpus(corpus=r.corpus, error=describe(r.error),
                                     status=r.error.status, code=r.error.code)
                        for r in failed if r.error is not None],
        skipped_corpora=skipped, degraded=degraded, playbook_boosted=boosted,
        embed_ms=embed_ms, took_ms=_ms(started))
    if body.use_playbook:
        out.playbook = PlaybookSummary(
            corpus=playbook_name, entries=len(lookup.matches), boosted=boosted,
            demoted=sum(1 for h in hits if h.boost_factor > 1.0), included=len(include),
            recalled=sum(1 for h in hits if h.from_playbook is True),
            missing=int(search_meta.get("include_missing", 0)), ms=playbook_ms,
            match="lexical" if lookup.lexical else "vector")
    if ranker_use is not None:
        out.ranker = ranker_use
    if "facets" in search_meta:
        out.facets = search_meta["facets"]
    if rules.active:
        out.downgrade = rules.summary(downgraded)
    if relevance_info is not None:
        out.relevance = relevance_info
    log.info("search_done", corpora=len(results), failed=len(failed), mode=mode, k=body.k,
             hits=len(hits), boosted=boosted, ms=out.took_ms)
    return out


def _rerank(deps: Deps, plan: ranker_serve.Plan | None, hits: list[RankedHit],
            matches: list[boost.Match], meta: dict[str, Any], explain: bool
            ) -> RankerUse | None:
    """The learned ranker's order of the hits (in place) and what the answer says of it;
    the values vectord gave it are not part of the answer."""
    if plan is None:
        return None
    if not plan.applies:
        return RankerUse(applied=False, reason=plan.reason)
    extras = [h.features if isinstance(h.features, HitFeatures) else None for h in hits]
    for h in hits:
        h.features = msgspec.UNSET
    return ranker_serve.rerank(deps.rankers, plan, hits, extras, matches,
                               meta.get("query_stats"), explain)


def _vectord_request(body: MatrixSearchRequest, mode: Mode, text: str, per_corpus_k: int,
                     passed: PassedOptions, vector: list[float] | None,
                     vectors: spaces.Vectors | None, include: list[IncludeRef],
                     excluded: list[str]) -> MultiSearchRequest:
    """The one request sent to vectord, built from values matrixd's check passed (a
    struct built, not decoded: nothing is checked again on this side)."""
    hybrid = mode == "hybrid"
    with_vector = mode in ("vector", "hybrid")
    return MultiSearchRequest(
        mode=mode,
        # The depth of the merged list: room for the boost and the filters to reorder it.
        k=max(body.k, per_corpus_k),
        query_vector=vector if with_vector else None,
        query_vectors=vectors.query_vectors if with_vector and vectors is not None else None,
        query_text=text if mode != "vector" else None,
        filter=passed.filter, language=body.language, ef_search=body.ef_search,
        fusion=body.fusion if hybrid else None, rrf_k=body.rrf_k if hybrid else None,
        weights=body.weights if hybrid else None,
        candidates=body.candidates if hybrid else None,
        prefer=passed.prefer, prf=passed.prf,
        corpora=body.corpora,
        exclude_corpora=excluded if body.corpora is None else [],
        corpus_weights=body.corpus_weights or None,
        include=include,
        # Shaping as asked; a field not given keeps vectord's default.
        **{key: getattr(body, key) for key in _SHAPING_FIELDS if getattr(body, key) is not None})


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
