"""Query intelligence with I/O: analyze, normalize, smart search, search_auto.

Every search here runs through `internal.matrixd.search.run_search`, the same path
as POST /v1/matrix/search; the decisions are the I/O-free modules analyze, plan,
reflect, normalize and strategy. The spaCy pipeline is loaded once per process, in
a thread (internal.understanding.nlp), and every call into it runs in a thread too.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import msgspec
import structlog

from internal.api.matrixd import (
    MAX_OBSERVATIONS,
    AnalyzeRequest,
    MatrixSearchRequest,
    NormalizeRequest,
    SearchAutoRequest,
    SearchOptions,
    SmartSearchRequest,
)
from internal.api.responses import (
    AnalyzeResponse,
    AutoAnswer,
    FailedCorpus,
    MatrixAnswer,
    RankedHit,
    SkippedCorpus,
    SmartAnswer,
    SmartAutoAnswer,
)
from internal.api.validate import corpus_name
from internal.api.vectord import Filter
from internal.common.errors import InvalidArgument, PayloadTooLarge
from internal.matrixd.deps import Deps
from internal.matrixd.search import run_search
from internal.understanding import context, nlp, reflect, strategy, temporal
from internal.understanding.analyze import Analysis, analyze
from internal.understanding.normalize import Normalized, Observation, normalize
from internal.understanding.plan import (
    Plan,
    SubQuery,
    fuse,
    make_plan,
    persons_of,
    prefer_speakers,
    waves,
)
from lakehouse.wire.modes import MODES

log = structlog.get_logger()

MAX_ITERATIONS = 10
# Each sub-query fetches this many hits (at least k) so the fusion has depth to work with,
# and a turn's neighbours are in the list to lend it context (LoCoMo's dev half, context
# re-ranking of hybrid's list: overall R@10 0.715 from the top 30, 0.730 from the top 50).
SUB_QUERY_DEPTH = 50


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


def _query_text(value: str) -> str:
    text = " ".join(value.split())
    if not text:
        raise InvalidArgument("query_text: must not be empty or blank", field="query_text")
    return text


def _instant(value: str | None, field: str) -> datetime:
    if value is None:
        return temporal.utc_now()
    try:
        return temporal.parse_instant(value)
    except temporal.DateError as exc:
        raise InvalidArgument(f"{field}: {exc}", field=field) from None


def _check_k(k: int, deps: Deps) -> None:
    if not 1 <= k <= deps.cfg.max_k:
        raise InvalidArgument(f"k: must be in 1..{deps.cfg.max_k}, got {k}", field="k")


# ---- analyze ------------------------------------------------------------------------------

async def analyze_text(text: str, now: datetime) -> Analysis:
    pipeline = await nlp.get()
    return await asyncio.to_thread(analyze, pipeline, text, now)


async def analyze_query(body: AnalyzeRequest) -> AnalyzeResponse:
    """The analyze route's answer."""
    text = _query_text(body.query_text)
    now = _instant(body.now, "now")
    return (await analyze_text(text, now)).to_wire()


# ---- normalize ----------------------------------------------------------------------------

async def normalize_observations(deps: Deps, body: NormalizeRequest) -> list[Normalized]:
    """Validate (413 past the limits, 400 on a bad reference_time), then normalise."""
    if len(body.observations) > MAX_OBSERVATIONS:
        raise PayloadTooLarge(f"observations: at most {MAX_OBSERVATIONS}, got "
                              f"{len(body.observations)}", field="observations")
    limit = deps.cfg.normalize_max_chars
    obs: list[Observation] = []
    for i, o in enumerate(body.observations):
        if len(o.text) > limit:
            raise PayloadTooLarge(f"observations[{i}].text: {len(o.text)} characters, at most "
                                  f"{limit}", field=f"observations[{i}].text")
        ref = None
        if o.reference_time is not None:
            ref = _instant(o.reference_time, f"observations[{i}].reference_time")
        obs.append(Observation(o.text, ref, o.speaker))
    if not obs:
        return []
    pipeline = await nlp.get()
    return await asyncio.to_thread(normalize, pipeline, obs, list(body.context))


# ---- smart search -------------------------------------------------------------------------

async def resolve_corpora(deps: Deps, corpora: list[str] | None) -> list[str]:
    """The corpora named, or every corpus but the playbook when none are."""
    if corpora is not None:
        return corpora
    rows = await deps.vectord.list_corpora()
    names = [r.name for r in rows if r.name != deps.cfg.playbook_corpus]
    if not names:
        raise InvalidArgument("corpora: there is no corpus to search yet", field="corpora")
    return names


_SEARCH_FIELDS = MatrixSearchRequest.__struct_fields__


def _search(body: SearchOptions, corpora: list[str], text: str, k: int, mode: str,
            prefer: Filter | None = None) -> MatrixSearchRequest:
    """One search that smart_search or search_auto runs: the caller's matrix search with
    its text, depth and mode (and, in a mode that fuses, its preferences) set."""
    fields = {f: getattr(body, f) for f in _SEARCH_FIELDS}
    fields.update(corpora=corpora, query_text=text, k=k, mode=mode,
                  prefer=prefer if MODES[mode].fusion else None)
    return MatrixSearchRequest(**fields)


def _request(body: SmartSearchRequest, corpora: list[str], sq: SubQuery, k: int
             ) -> MatrixSearchRequest:
    prefer = None if sq.prefer is None else msgspec.convert(sq.prefer, Filter)
    return _search(body, corpora, sq.text, k, sq.layer, prefer)


def _with_answers(sq: SubQuery, results: dict[int, list[RankedHit]]) -> SubQuery:
    """A dependent sub-query gets the terms of its dependencies' best hits (their answer)."""
    if not sq.depends_on:
        return sq
    extra: list[str] = []
    for d in sq.depends_on:
        words = set(sq.text.lower().split())
        extra += reflect.feedback_terms(results.get(d, []), words, n=3)
    if not extra:
        return sq
    return SubQuery(sq.id, f"{sq.text} {' '.join(dict.fromkeys(extra))}", sq.layer, sq.purpose,
                    sq.weight, sq.prefer, sq.must_match, sq.depends_on, sq.refines)


def check_options(deps: Deps, body: SearchOptions) -> tuple[str, datetime]:
    """The options smart_search and search_auto share, checked once: the stripped query
    text and the instant `now` means; 400 naming the field. Each search they run is
    checked as any matrix search (run_search)."""
    for name in ("mode", "query_vector"):
        if getattr(body, name) is not None:
            raise InvalidArgument(f"{name}: chosen for each search it runs, not given",
                                  field=name)
    text = _query_text(body.query_text or "")
    _check_k(body.k, deps)
    if body.corpora is not None:
        for i, name in enumerate(body.corpora):
            corpus_name(name, f"corpora[{i}]")
    return text, _instant(body.now, "now")


def validate_smart(deps: Deps, body: SmartSearchRequest) -> tuple[str, datetime, float]:
    text, now = check_options(deps, body)
    if not 1 <= body.max_iterations <= MAX_ITERATIONS:
        raise InvalidArgument(f"max_iterations: must be in 1..{MAX_ITERATIONS}, got "
                              f"{body.max_iterations}", field="max_iterations")
    bar = deps.cfg.smart_min_confidence if body.min_confidence is None else body.min_confidence
    if not (math.isfinite(bar) and 0 <= bar <= 1):
        raise InvalidArgument("min_confidence: must be in [0, 1]", field="min_confidence")
    return text, now, bar


@dataclass
class _Run:
    """A smart search's searches so far: each sub-query's hits (by id, and in the order
    they ran), the answers, and what each iteration did."""

    deps: Deps
    body: SmartSearchRequest
    corpora: list[str]
    depth: int
    results: dict[int, list[RankedHit]] = field(default_factory=dict)
    ran: list[tuple[SubQuery, list[RankedHit]]] = field(default_factory=list)
    responses: list[MatrixAnswer] = field(default_factory=list)
    iterations: list[dict[str, Any]] = field(default_factory=list)

    async def search(self, pending: list[SubQuery]) -> list[dict[str, Any]]:
        """The pending sub-queries searched, a wave at a time (a wave's dependencies ran
        before it, their answers added to its text); what each query did."""
        cfg, queries = self.deps.cfg, []
        for wave in waves(pending, set(self.results)):
            wave = [_with_answers(q, self.results) for q in wave]
            outs = await asyncio.gather(*(run_search(self.deps, _request(
                self.body, self.corpora, q, self.depth)) for q in wave))
            for q, resp in zip(wave, outs, strict=True):
                hits = resp.hits
                if self.body.context:
                    hits = context.smooth(hits, group=cfg.context_group,
                                          position=cfg.context_position)
                self.results[q.id] = hits
                self.ran.append((q, hits))
                self.responses.append(resp)
                queries.append({**q.to_dict(), "hits": len(hits), "took_ms": resp.took_ms,
                                "best_confidence": round(max(
                                    (reflect.confidence(h) for h in hits), default=0.0), 4)})
        return queries


async def smart_search(deps: Deps, body: SmartSearchRequest,
                       analysis: Analysis | None = None) -> SmartAnswer:
    """Plan, run the sub-queries, merge, reflect, refine; until adequate or max_iterations."""
    started = time.perf_counter()
    text, now, bar = validate_smart(deps, body)
    a = analysis or await analyze_text(text, now)
    plan = make_plan(a, date_field=body.date_field,
                     user_prefer=None if body.prefer is None else _plain(body.prefer))
    run = _Run(deps, body, await resolve_corpora(deps, body.corpora),
               min(deps.cfg.max_k, max(body.k, SUB_QUERY_DEPTH)))
    tried = {q.text.lower() for q in plan.sub_queries}
    pending = list(plan.sub_queries)
    fused: list[RankedHit] = []
    stopped = "max_iterations"
    for n in range(1, body.max_iterations + 1):
        t0 = time.perf_counter()
        queries = await run.search(pending)
        fused = fuse(run.ran, plan)
        found = reflect.assess(a, plan, run.results, fused, bar, body.k)
        new: list[SubQuery] = []
        if found.adequate:
            stopped = "adequate"
        elif n == body.max_iterations:
            stopped = "max_iterations"
        else:
            new = reflect.refine(a, plan, found, run.results, fused, tried)
            stopped = "" if new else "no_new_queries"
        run.iterations.append({
            "iteration": n, "queries": queries, "missing": [m.to_dict() for m in found.missing],
            "adequate": found.adequate, "took_ms": _ms(t0), "stopped": stopped or None})
        log.info("smart_iteration", iteration=n, queries=[q["query"] for q in queries],
                 missing=[m.target for m in found.missing], adequate=found.adequate,
                 stopped=stopped or None, ms=run.iterations[-1]["took_ms"])
        if stopped:
            break
        plan.sub_queries.extend(new)
        pending = new
    out = _smart_answer(run, a, plan, fused[:body.k], stopped)
    out.took_ms = _ms(started)
    log.info("smart_search_done", iterations=len(run.iterations), searches=len(run.responses),
             stopped=stopped, hits=len(out.hits), ms=out.took_ms)
    return out


def _smart_answer(run: _Run, a: Analysis, plan: Plan, hits: list[RankedHit], stopped: str
                  ) -> SmartAnswer:
    """The answer: the fused hits with what every search said (the first one's corpora,
    every failure and skip once, every degradation)."""
    responses = run.responses
    return SmartAnswer(
        mode=strategy.SMART, requested_mode=strategy.SMART, k=run.body.k, hits=hits,
        corpora=responses[0].corpora,
        failed_corpora=_union([r.failed_corpora for r in responses]),
        skipped_corpora=_union([r.skipped_corpora for r in responses]),
        degraded=sorted({d for r in responses for d in r.degraded}),
        playbook_boosted=_boosted(hits),
        embed_ms=round(sum(r.embed_ms or 0.0 for r in responses), 2),
        analysis=a.to_wire(), plan=plan.to_dict(), iterations=run.iterations,
        stopped=stopped, searches=len(responses), took_ms=0.0)


def _boosted(hits: list[RankedHit]) -> int:
    """How many of the hits the playbook moved (matrixd's `playbook_boosted`)."""
    return sum(1 for h in hits if h.boost_factor != 1.0)


def _ranked(hits: list[RankedHit]) -> list[RankedHit]:
    for i, h in enumerate(hits):
        h.rank = i + 1
    return hits


C = TypeVar("C", FailedCorpus, SkippedCorpus)


def _union(lists: list[list[C]]) -> list[C]:
    """Each corpus's first row among the searches' lists."""
    seen: dict[str, C] = {}
    for rows in lists:
        for row in rows:
            seen.setdefault(row.corpus, row)
    return list(seen.values())


def _plain(value: msgspec.Struct) -> dict[str, Any]:
    """An option struct as the plan's JSON object: the fields given."""
    out: dict[str, Any] = {k: v for k, v in msgspec.to_builtins(value).items() if v is not None}
    return out


# ---- search_auto --------------------------------------------------------------------------

def _context_score(hit: RankedHit) -> float | None:
    return hit.context_score if isinstance(hit.context_score, float) else None


async def search_auto(deps: Deps, body: SearchAutoRequest, costs: strategy.CostModel
                      ) -> AutoAnswer | SmartAutoAnswer:
    """Pick a strategy for the query (within the budget), run it, and learn its cost."""
    started = time.perf_counter()
    text, now = check_options(deps, body)
    if body.budget_ms is not None and not (math.isfinite(body.budget_ms) and body.budget_ms > 0):
        raise InvalidArgument("budget_ms: must be a positive number of milliseconds",
                              field="budget_ms")
    budget = body.budget_ms if body.budget_ms is not None else (deps.cfg.auto_budget_ms or None)
    a: Analysis | None = None
    if strategy.needs_analysis(text):
        a = await analyze_text(text, now)
    choice = strategy.choose(text, a.question_type if a else None,
                             bool(a and any(e.type != "unknown" for e in a.entities)),
                             costs, budget)
    corpora = await resolve_corpora(deps, body.corpora)
    t0 = time.perf_counter()
    ran: strategy.Strategy = choice.strategy
    reason = choice.reason
    # The chosen search's answer, then the choice (a shallow copy of its fields).
    searched: MatrixAnswer | SmartAnswer
    hits: list[RankedHit] | None = None  # smoothed by context: with their context_score
    if choice.strategy == strategy.SMART:
        shared = {f: getattr(body, f) for f in SearchOptions.__struct_fields__}
        searched = await smart_search(deps, SmartSearchRequest(
            **{**shared, "query_text": text, "corpora": corpora}), analysis=a)
    else:
        q = strategy.quoted(text) if choice.strategy == "keyword" else None
        mode = choice.strategy  # a mode's name (every strategy but smart)
        deep = choice.strategy == "hybrid" and body.context
        searched = await run_search(deps, _search(
            body, corpora, q or text,
            min(deps.cfg.max_k, max(body.k, SUB_QUERY_DEPTH)) if deep else body.k, mode))
        if deep:
            smoothed = context.smooth(searched.hits, group=deps.cfg.context_group,
                                      position=deps.cfg.context_position)
            ranked = prefer_speakers(smoothed, persons_of(a) if a else [], _context_score)
            hits = _ranked(ranked[:body.k])
        if choice.strategy == "keyword" and not searched.hits:
            costs.observe("keyword", _ms(t0))
            t0 = time.perf_counter()
            ran, reason = "lexical", f"{reason}; no exact match, so lexical"
            searched = await run_search(deps, _search(body, corpora, q or text, body.k,
                                                      "lexical"))
    costs.observe(ran, _ms(t0))
    fields = msgspec.structs.asdict(searched)
    fields.update(strategy=ran, reason=reason, estimated_ms=choice.estimated_ms,
                  estimate_source=choice.estimate_source, budget_ms=budget,
                  took_ms=_ms(started))
    if hits is not None:
        fields.update(hits=hits, k=body.k, playbook_boosted=_boosted(hits))
    out = (SmartAutoAnswer(**fields) if isinstance(searched, SmartAnswer)
           else AutoAnswer(**fields))
    log.info("search_auto_done", strategy=ran, wanted=choice.wanted, estimated_ms=choice.estimated_ms,
             budget_ms=budget, ms=out.took_ms)
    return out
