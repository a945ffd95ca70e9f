"""One search over one or several corpora, ranked as one corpus holding their union would be.

The per-corpus route (`POST /v1/vectors/corpora/{name}/search`) and the multi-corpus route
(`POST /v1/vectors/search`) both come here: a single corpus is a federation of one. The
request-wide options are checked once (`check`), every corpus runs its part concurrently
on its own pooled connection, a corpus's failure is kept with that corpus, and the merge
and the fusion (internal.vectord.merge, internal.vectord.fusion) run once over all
of them. Per mode:

- vector: each corpus's top k by distance, merged by distance;
- keyword: each corpus's newest k matches, merged newest first;
- lexical: the union's BM25 statistics (one statement, vectord_bm25_query) when several
  corpora are searched, each corpus's top k with them, merged by score;
- hybrid: each corpus's branch candidates (vector top n, BM25 top n with the union's
  statistics, the symbolic share), branch lists merged across corpora to the union's top
  n, fused once, then the top k items read back from their corpora.

Where each step lives: the checked request (`check` -> Options) and the branches here;
the statements of the reads besides the branches' own (statistics, `include` rows, hits
read back, feedback's documents) in search_reads.py, the branches' statements composed
in lexical.py and fusion_sql.py; the merge (merge.py) and the fusion (fusion.py) I/O-free;
feedback's second pass in feedback.py (its math in prf.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import psycopg
import structlog
from psycopg import sql
from psycopg.rows import dict_row

from internal.api import validate
from internal.api.vectord import MAX_K, MODES, Corpus, Hit, SearchRequest
from internal.common.errors import InvalidArgument
from internal.pg.replicas import ReplicaFailed
from internal.vectord import (
    feedback,
    fusion,
    fusion_sql,
    hits,
    lexical,
    lexindex,
    merge,
    postings,
    prf,
    schema,
    search_reads,
    spaces,
)
from internal.vectord.filters import build_where, is_filtered
from internal.vectord.lexical_options import (
    DEFAULT_CANDIDATES,
    bm25_options,
    query_languages,
    query_text,
    union_languages,
)
from internal.vectord.options import Options, _Candidates
from internal.vectord.store import Store, registry_moved

T = TypeVar("T")
log = structlog.get_logger()


@dataclass
class Outcome:
    """One corpus of a search: resolved, failed (error kept), timed, hits it placed."""

    name: str
    position: int
    corpus: Corpus | None = None
    error: Exception | None = None
    took_ms: float = 0.0
    hits: int = 0
    skipped: str | None = None  # why no query vector fits its space (query_vectors)


def check(store: Store, req: SearchRequest) -> Options:
    """Check every request-wide field (400 naming it); nothing here depends on a corpus."""
    validate.k(req.k)
    if req.mode not in MODES:
        raise InvalidArgument(f"mode: {req.mode!r} is not available", field="mode")
    if req.ef_search is not None and not 1 <= req.ef_search <= MAX_K:
        raise InvalidArgument(f"ef_search: must be in 1..{MAX_K}, got {req.ef_search}",
                              field="ef_search")
    where, params = build_where(req.filter)
    text = ""
    if req.mode == "keyword":
        text = query_text(req, "keyword") if req.query_text is not None else ""
    elif req.mode == "lexical":
        text = query_text(req, "lexical")
    elif req.mode == "hybrid":
        if req.query_text is None and req.query_vector is None and not req.query_vectors:
            raise InvalidArgument(
                "query_text: mode 'hybrid' needs query_text, query_vector or both",
                field="query_text")
        text = query_text(req, "hybrid") if req.query_text is not None else ""
    elif req.query_vector is None and not req.query_vectors:
        raise InvalidArgument("query_vector: required for mode 'vector'", field="query_vector")
    k1, b, fw = bm25_options(store, req)
    rrf_k = store.cfg.rrf_k if req.rrf_k is None else req.rrf_k
    if not 1 <= rrf_k <= 10_000:
        raise InvalidArgument(f"rrf_k: must be in 1..10000, got {rrf_k}", field="rrf_k")
    n = req.candidates if req.candidates is not None else max(DEFAULT_CANDIDATES, req.k)
    if not req.k <= n <= MAX_K:
        raise InvalidArgument(f"candidates: must be in k..{MAX_K} (k={req.k}), got {n}",
                              field="candidates")
    symbolic, sym_params = (None, {}) if req.prefer is None or req.mode != "hybrid" else (
        fusion_sql.symbolic_expr(req.prefer))
    return Options(req=req, where=where, params=params, filtered=is_filtered(where), text=text,
                k1=k1, b=b, field_weights=fw, n=n, rrf_k=rrf_k,
                method=req.fusion or fusion.DEFAULT_METHOD,
                fusion_weights=fusion_sql.fusion_weights(req), symbolic=symbolic,
                sym_params=sym_params,
                ef_search=req.ef_search if req.ef_search is not None else store.cfg.ef_search,
                prf=prf.settings(req.prf))


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


async def _on(store: Store, o: Outcome, fn: Callable[[Corpus], Awaitable[T]]) -> T | None:
    """fn on the outcome's corpus, timed; a failure is kept on the outcome (None returned).

    A table dropped by another replica shows as UndefinedTable: re-read the registry once.
    """
    started = time.perf_counter()
    try:
        if o.corpus is None:
            o.corpus = await store.corpus(o.name)
        try:
            return await fn(o.corpus)
        except (psycopg.errors.UndefinedTable, psycopg.errors.DataException) as exc:
            if not registry_moved(exc):
                raise
            if store.replicas is not None and store.replicas.on_replica():
                raise  # a standby behind the registry: the search runs on the primary
            o.corpus = await store.corpus(o.name, fresh=True)
            return await fn(o.corpus)
    except ReplicaFailed:
        raise  # the whole search runs again on the primary (Store.read_search)
    except psycopg.errors.UndefinedTable as exc:
        if store.replicas is not None and store.replicas.on_replica():
            raise
        o.error = exc
        return None
    except Exception as exc:  # kept for this corpus; the others still answer
        o.error = exc
        return None
    finally:
        o.took_ms = round(o.took_ms + _ms(started), 3)


U = TypeVar("U")


async def _side_by_side(a: Awaitable[T], b: Awaitable[U]) -> tuple[T, U]:
    """Both results, run concurrently; the first failure is raised as it is (not as an
    ExceptionGroup) once the other has been cancelled and has finished."""
    ta, tb = asyncio.ensure_future(a), asyncio.ensure_future(b)
    try:
        return await ta, await tb
    except BaseException:
        for t in (ta, tb):
            t.cancel()
        await asyncio.gather(ta, tb, return_exceptions=True)
        raise


async def _each(store: Store, outcomes: Sequence[Outcome],
                fn: Callable[[Corpus], Awaitable[T]]) -> list[tuple[Outcome, T]]:
    """fn on every corpus not failed yet, concurrently; the results of those that answered."""
    live = [o for o in outcomes if o.error is None]
    # One corpus (the usual search): awaited as it is, no task to schedule and gather.
    results = ([await _on(store, live[0], fn)] if len(live) == 1
               else await asyncio.gather(*(_on(store, o, fn) for o in live)))
    return [(o, r) for o, r in zip(live, results, strict=True)
            if o.error is None and r is not None]


def _weight(o: Outcome, weights: dict[str, float]) -> float:
    return weights.get(o.name, 1.0)


def _choose(p: Options, o: Outcome, corpus: Corpus) -> spaces.Choice:
    """The corpus's query vector and space; a skip is noted on its outcome."""
    choice = spaces.choose(corpus, p.req.query_vector, p.req.query_vectors)
    o.skipped = choice.skipped
    return choice


Member = tuple[int, Corpus, list[float], int]  # position, corpus, query vector, its space


async def _vectors_of(store: Store, p: Options, outcomes: list[Outcome],
                      inc: dict[str, list[str]], n: int
                      ) -> tuple[list[Outcome], dict[int, spaces.Choice],
                                 dict[int, list[tuple[str, float]]]]:
    """The live outcomes, each one's query vector and space (by position), and the vector
    candidates of those a shared index serves (_shared_scans; `include` corpora not)."""
    live = [o for o in outcomes if o.error is None and o.corpus is not None]
    choices = {o.position: _choose(p, o, o.corpus) for o in live if o.corpus is not None}
    members = [(o.position, o.corpus, ch.vector, ch.space) for o in live
               if o.corpus is not None and (ch := choices[o.position]).vector is not None
               and not inc.get(o.name)]
    return live, choices, await _shared_scans(store, p, members, n)


async def _shared_scans(store: Store, p: Options, members: Sequence[Member], n: int
                        ) -> dict[int, list[tuple[str, float]]]:
    """The vector candidates of the corpora their space's shared index serves: one scan
    per (space, query vector), the union's n nearest; position -> (key, distance),
    nearest first. The others (absent from the answer) search their own tables.

    Not for a hard filter or preferences (the shared index holds vectors only), nor
    where spaces.use_shared prefers the corpora's own graphs. A failed scan falls back
    to the corpora's own tables (the shared index is derived data)."""
    if p.filtered or p.symbolic is not None:
        return {}
    groups: dict[tuple[int, int], list[Member]] = {}
    for m in members:
        if m[1].space_id is not None:
            groups.setdefault((m[1].space_id, m[3]), []).append(m)
    if not any(len(g) > 1 for g in groups.values()):
        return {}
    sizes = await store.space_sizes()
    out: dict[int, list[tuple[str, float]]] = {}

    async def scan(space_id: int, group: list[Member]) -> None:
        known = sizes.get(space_id, {})
        searched = [known.get(c.id, -1.0) for _, c, _, _ in group]
        every = [*known.values(), *(-1.0 for _, c, _, _ in group if c.id not in known)]
        if not spaces.use_shared(searched, every):
            return
        first = group[0][1]
        q = validate.vector(group[0][2], first.dim, first.metric, "query_vector")
        try:
            rows = await store.space_search(space_id, first.metric, [c.id for _, c, _, _ in group],
                                            q, n, p.ef_search)
        except ReplicaFailed:
            raise
        except Exception as exc:
            log.warning("space_scan_failed", space=space_id, error=str(exc))
            return
        if rows is None:
            return  # changes pending: the corpora's own graphs answer
        position = {c.id: pos for pos, c, _, _ in group}
        found: dict[int, list[tuple[str, float]]] = {pos: [] for pos, _, _, _ in group}
        for cid, item_id, d in rows:
            found[position[cid]].append((merge.key(item_id, position[cid]), d))
        out.update(found)

    await asyncio.gather(*(scan(sid, g) for (sid, _), g in groups.items()))
    return out


@dataclass
class Result:
    hits: list[Hit]
    outcomes: list[Outcome]
    include_missing: int = 0


async def search(store: Store, names: Sequence[str], req: SearchRequest,
                 corpus_weights: dict[str, float] | None = None,
                 p: Options | None = None,
                 include: Sequence[tuple[str, str, float]] = ()) -> Result:
    """The top k over the named corpora, ranked as their union; one outcome per corpus.

    include: (corpus, id, factor) scored as candidates whatever retrieval finds and returned
    even below the top k (`included`), for the playbook's recall (keyword mode: ignored).
    In hybrid mode the factor is applied to the item's branch scores before the fusion
    (distance x factor, BM25 / factor): the playbook boost, inside the fusion.
    """
    p = p or check(store, req)
    weights = dict(corpus_weights or {})
    outcomes = [Outcome(name, i) for i, name in enumerate(names)]
    await _each(store, outcomes, _resolved)
    inc: dict[str, list[str]] = {}
    factors: dict[tuple[str, str], float] = {}
    for corpus, item_id, f in include:
        if item_id not in inc.setdefault(corpus, []):
            inc[corpus].append(item_id)
        if f != 1.0:
            factors[(corpus, item_id)] = f
    if req.mode == "vector":
        found = await _vector(store, p, outcomes, weights, inc)
    elif req.mode == "keyword":
        found = await _keyword(store, p, outcomes)
    else:
        run = _lexical if req.mode == "lexical" else _hybrid
        try:
            found = await run(store, p, outcomes, weights, inc, factors)
        except search_reads.Stale:  # a write landed while scoring from the cache: read it this time
            found = await run(store, replace(p, trust_cache=False), outcomes, weights, inc,
                              factors)
    by_name = {o.name: o for o in outcomes}
    for h in found:
        by_name[h.corpus].hits += 1
    wanted = sum(len(ids) for ids in inc.values())
    got = sum(1 for h in found if h.id in inc.get(h.corpus, ()))
    missing = wanted - got if req.mode != "keyword" else 0
    return Result(found, outcomes, max(0, missing))


def _keep(ranked: Sequence[Hit], k: int, inc: dict[str, list[str]]) -> list[Hit]:
    """The first k hits, plus every `include` item wherever it ranks."""
    out: list[Hit] = []
    natural = 0
    for h in ranked:
        if h.included or h.id in inc.get(h.corpus, ()):
            out.append(h)
        elif natural < k:
            out.append(h)
            natural += 1
    return out


async def _resolved(corpus: Corpus) -> Corpus:
    """Nothing but the registry lookup _on makes first: a missing corpus fails here."""
    return corpus


# ---- vector and keyword -------------------------------------------------------------

async def _vector(store: Store, p: Options, outcomes: list[Outcome],
                  weights: dict[str, float], inc: dict[str, list[str]]) -> list[Hit]:
    req = p.req
    started = time.perf_counter()
    by_name = {o.name: o for o in outcomes}
    space: dict[str, int] = {}
    live, by_pos, shared = await _vectors_of(store, p, outcomes, inc, req.k)
    choices = {o.name: by_pos[o.position] for o in live}
    grouped = await _shared_hits(store, {o.position: o.corpus for o in live
                                         if o.corpus is not None and o.position in shared}, shared)
    shared_ms = _ms(started)  # the time of a corpus its space's shared scan served

    async def run(corpus: Corpus) -> list[Hit]:
        o = by_name[corpus.name]
        choice = choices.get(corpus.name) or _choose(p, o, corpus)
        if choice.vector is None:
            return []
        space[corpus.name] = choice.space
        if o.position in grouped:
            o.took_ms += shared_ms
            return grouped[o.position]
        q = validate.vector(choice.vector, corpus.dim, corpus.metric, "query_vector")
        rows = await store.vector_search(corpus, q, req.k, p.ef_search, p.where, p.params)
        found = hits.from_vector_rows(corpus, rows)
        have = {h.id for h in found}
        extra = [i for i in inc.get(corpus.name, []) if i not in have]
        if extra:
            for row in await search_reads.included(store, p, corpus, extra, q, "", False, None):
                d = float(row["distance"])
                h = hits.hit(corpus, row, distance=d,
                             scores={"vector": hits.similarity(corpus.metric, d)})
                h.included = True
                found.append(h)
        return found

    per_space: dict[int, list[tuple[float, str, int, Hit]]] = {}
    for o, found in await _each(store, outcomes, run):
        w = _weight(o, weights)
        for h in found:
            assert h.distance is not None
            h.merge_distance = merge.weighted_distance(h.distance, w)
            per_space.setdefault(space[o.name], []).append(
                (h.merge_distance, h.id, o.position, h))
    for rows in per_space.values():
        rows.sort(key=lambda r: r[:3])
    if len(per_space) <= 1:
        return _keep([r[3] for rows in per_space.values() for r in rows], req.k, inc)
    # Several models: distances of different spaces do not compare; the spaces' lists
    # are interleaved by rank (each space's first, then each one's second...).
    ranked = sorted(((rank, r[2], r[1], r[3])
                     for rows in per_space.values() for rank, r in enumerate(rows)),
                    key=lambda r: r[:3])
    return _keep([r[3] for r in ranked], req.k, inc)


async def _shared_hits(store: Store, corpora: dict[int, Corpus],
                       shared: dict[int, list[tuple[str, float]]]) -> dict[int, list[Hit]]:
    """The hits of a shared-index scan, their rows read from their corpora's tables."""
    wanted = {pos: [merge.unkey(key)[0] for key, _ in found]
              for pos, found in shared.items() if found and pos in corpora}
    rows = await search_reads.read_items(store, corpora, wanted) if wanted else {}
    out: dict[int, list[Hit]] = {}
    for pos, corpus in corpora.items():
        found = []
        for key, d in shared.get(pos, []):
            row = rows.get((pos, merge.unkey(key)[0]))
            if row is not None:  # deleted between the statements
                found.append({**row, "distance": d})
        out[pos] = hits.from_vector_rows(corpus, found)
    return out


async def _keyword(store: Store, p: Options, outcomes: list[Outcome]) -> list[Hit]:
    req = p.req
    if not p.text.strip():
        return []  # a blank query matches everything: answer nothing, scan nothing

    async def run(corpus: Corpus) -> list[Hit]:
        rows = await store.keyword_search(corpus, p.text.strip(), req.k, p.where, p.params)
        return hits.from_keyword_rows(corpus, rows)

    rows: list[tuple[float, str, int, Hit]] = []
    for o, found in await _each(store, outcomes, run):
        rows.extend((-h.updated_at.timestamp(), h.id, o.position, h) for h in found)
    rows.sort(key=lambda r: r[:3])  # newest first, over every corpus
    return [r[3] for r in rows[:req.k]]


# ---- BM25 statistics of the union ---------------------------------------------------

async def _stats(store: Store, p: Options, outcomes: list[Outcome]
                 ) -> tuple[bool, lexical.QueryStats | None]:
    """(federated, statistics): one corpus computes its own inside its statement."""
    live = [o.corpus for o in outcomes if o.error is None and o.corpus is not None]
    if len(live) <= 1:
        return False, None
    return True, await search_reads.union_stats(store, p, live)


# ---- lexical ------------------------------------------------------------------------

async def _lexical(store: Store, p: Options, outcomes: list[Outcome],
                   weights: dict[str, float], inc: dict[str, list[str]],
                   factors: dict[tuple[str, str], float] | None = None) -> list[Hit]:
    req = p.req
    if not p.text.strip():
        return []
    if _in_memory(store):
        return await _lexical_memory(store, p, outcomes, weights, inc)
    federated, stats = await _stats(store, p, outcomes)
    unmatched = federated and stats is None  # no query lexeme in any corpus
    if unmatched and not inc:
        return []

    async def run(corpus: Corpus) -> list[Hit]:
        langs = query_languages(req, corpus)
        table = schema.items_table(corpus.id)
        rows: list[dict[str, Any]] = []
        if not unmatched:
            stmt = lexical.lexical_sql(table, corpus.id, langs, p.where, p.filtered,
                                       given=federated)
            args = {**p.params, **lexical.bm25_params(p.text, langs, p.k1, p.b,
                                                      p.field_weights, req.k, stats)}
            async with store.reads.connection() as conn:
                cur = conn.cursor(row_factory=dict_row)
                await cur.execute(stmt, args)
                rows = await cur.fetchall()
        found = [hits.hit(corpus, row, score=float(row["lex_score"]),
                          ranks={"lexical": int(row["lex_rank"])},
                          scores={"lexical": float(row["lex_score"])}) for row in rows]
        have = {h.id for h in found}
        extra = [i for i in inc.get(corpus.name, []) if i not in have]
        if extra:
            text = "" if unmatched else p.text
            for row in await search_reads.included(store, p, corpus, extra, None, text, federated, stats):
                score = float(row["lex_score"] or 0.0)  # no query term: BM25 0
                h = hits.hit(corpus, row, score=score, scores={"lexical": score})
                h.included = True
                found.append(h)
        return found

    rows: list[tuple[float, str, int, Hit]] = []
    for o, found in await _each(store, outcomes, run):
        w = _weight(o, weights)
        for h in found:
            assert h.score is not None
            h.merge_score = merge.weighted_score(h.score, w)
            rows.append((-h.merge_score, h.id, o.position, h))
    rows.sort(key=lambda r: r[:3])
    out = _keep([r[3] for r in rows], req.k, inc)
    rank = 0
    for h in out:  # ranks in the union's list, as one corpus would say
        if not h.included:
            rank += 1
            h.ranks["lexical"] = rank
    return out


# ---- BM25 from the in-memory index (postings.py, lexindex.py) -----------------------

def _in_memory(store: Store) -> bool:
    return store.cfg.lexical_engine == "memory"


def _fw(p: Options) -> tuple[float, float, float]:
    w = p.field_weights
    return (w["title"], w["text"], w["tags"])


async def _prepared(store: Store, p: Options, outcomes: list[Outcome]
                    ) -> tuple[dict[int, postings.CorpusIndex], lexical.QueryStats | None,
                               dict[int, int] | None]:
    """The live corpora's indexes (by corpus id), holding the query's lexemes, the union's
    statistics (None: no corpus holds a query lexeme), and the versions the search must
    still check (`search_reads.read_items`; None: read current already). A corpus dropped meanwhile
    fails alone (the registry is re-read once)."""
    live = [o for o in outcomes if o.error is None and o.corpus is not None]
    corpora = [o.corpus for o in live if o.corpus is not None]
    langs, auto = union_languages(p.req, corpora) if corpora else ([], [])
    try:
        prep = await store.lex.prepare(store.reads, corpora, p.text, langs, auto, _fw(p),
                                       trust=p.trust_cache)
    except psycopg.errors.UndefinedTable:
        if store.replicas is not None and store.replicas.on_replica():
            raise  # a standby behind the registry: the search runs on the primary
        for o in live:
            try:
                o.corpus = await store.corpus(o.name, fresh=True)
            except Exception as exc:  # kept for this corpus; the others still answer
                o.error = exc
        live = [o for o in live if o.error is None]
        corpora = [o.corpus for o in live if o.corpus is not None]
        langs, auto = union_languages(p.req, corpora) if corpora else ([], [])
        prep = await store.lex.prepare(store.reads, corpora, p.text, langs, auto, _fw(p),
                                       trust=p.trust_cache)
    return ({c.id: ix for c, ix in zip(corpora, prep.indexes, strict=True)}, prep.stats,
            None if prep.checked else prep.versions)


async def _lexical_ahead(store: Store, p: Options, outcomes: list[Outcome],
                         inc: dict[str, list[str]]
                         ) -> tuple[dict[int, postings.CorpusIndex], lexical.QueryStats | None,
                                    dict[int, int] | None, dict[int, list[tuple[str, float]]]]:
    """Hybrid's lexical side, run beside its vector statement: _prepared, then one
    corpus's BM25 candidates (by position), scored in memory while PostgreSQL walks the
    graph, as `_corpus_candidates` would score them (unfiltered, no `include`; several
    corpora are scored as a union once the vector side says which answered,
    `_union_lexical`). The versions to check are the vector side's to read."""
    indexes, stats, expect = await _prepared(store, p, outcomes)
    live = [o for o in outcomes if o.error is None and o.corpus is not None]
    ahead: dict[int, list[tuple[str, float]]] = {}
    if (stats is not None and not p.filtered and len(live) == 1 and live[0].corpus is not None
            and not inc.get(live[0].name) and (ix := indexes.get(live[0].corpus.id)) is not None):
        ahead[live[0].position] = postings.top(ix, _scores(p, ix, stats), p.n)
    return indexes, stats, expect, ahead


def _scores(p: Options, ix: postings.CorpusIndex, stats: lexical.QueryStats
            ) -> postings.F64:
    return postings.scores(ix, stats.lexemes, stats.weights, stats.avgdl, p.k1, p.b, _fw(p))


async def _top(store: Store, p: Options, corpus: Corpus, ix: postings.CorpusIndex,
               s: postings.F64, n: int) -> list[tuple[str, float]]:
    """The corpus's n best by BM25 among the items the filter admits (none: all)."""
    if not p.filtered:
        return postings.top(ix, s, n)
    m = max(4 * n, 64)
    while True:  # best first, the filter checked in PostgreSQL a widening slice at a time
        cand = postings.top(ix, s, m)
        ok = await store.matching_ids(corpus, [i for i, _ in cand], p.where, p.params)
        kept = [(i, sc) for i, sc in cand if i in ok]
        if len(kept) >= n or len(cand) < m:
            return kept[:n]
        m *= 4


def _union_lexical(store: Store, p: Options, members: Sequence[tuple[int, postings.CorpusIndex]],
                   stats: lexical.QueryStats | None) -> dict[int, list[tuple[str, float]]]:
    """The BM25 candidates of several corpora scored as one (postings.union_scores): per
    position, its share of the union's top n. Empty: each corpus scores alone (one corpus,
    a hard filter checked in PostgreSQL, field weights other than 1/1/1)."""
    if stats is None or len(members) < 2 or p.filtered or _fw(p) != (1.0, 1.0, 1.0):
        return {}
    idx = [ix for _, ix in members]
    s = postings.union_scores(idx, stats.lexemes, stats.weights, stats.avgdl, p.k1, p.b,
                              store.lex.unions)
    out: dict[int, list[tuple[str, float]]] = {pos: [] for pos, _ in members}
    for wi, item_id, score in postings.union_top(idx, s, p.n):
        out[members[wi][0]].append((item_id, score))
    return out


def _score_of(ix: postings.CorpusIndex, s: postings.F64, item_id: str) -> float | None:
    """An item's BM25 (None: no query lexeme in it)."""
    o = ix.ord_of.get(item_id)
    if o is None or o >= s.shape[0] or s[o] <= 0:
        return None
    return postings.rounded(float(s[o]))


async def _lexical_memory(store: Store, p: Options, outcomes: list[Outcome],
                          weights: dict[str, float], inc: dict[str, list[str]]) -> list[Hit]:
    req = p.req
    indexes, stats, expect = await _prepared(store, p, outcomes)
    if stats is None and not inc:
        await search_reads.check_versions(store, expect)
        return []

    async def run(corpus: Corpus) -> tuple[Corpus, list[tuple[str, float]], dict[str, float]]:
        ix = indexes[corpus.id]
        if stats is None:  # no query lexeme anywhere: `include` items score BM25 0
            return corpus, [], dict.fromkeys(inc.get(corpus.name, []), 0.0)
        s = _scores(p, ix, stats)
        found = await _top(store, p, corpus, ix, s, req.k)
        have = {i for i, _ in found}
        extra = {i: _score_of(ix, s, i) or 0.0 for i in inc.get(corpus.name, [])
                 if i not in have}
        return corpus, found, extra

    ranked: list[tuple[float, str, int, bool, float]] = []
    corpora: dict[int, Corpus] = {}
    for o, (corpus, found, extra) in await _each(store, outcomes, run):
        corpora[o.position] = corpus
        w = _weight(o, weights)
        for i, sc in found:
            ranked.append((-merge.weighted_score(sc, w), i, o.position, False, sc))
        for i, sc in extra.items():
            ranked.append((-merge.weighted_score(sc, w), i, o.position, True, sc))
    ranked.sort(key=lambda r: r[:3])
    keep: list[tuple[float, str, int, bool, float]] = []
    natural = 0
    for r in ranked:  # the top k, and every `include` item wherever it ranks
        if r[3]:
            keep.append(r)
        elif natural < req.k:
            keep.append(r)
            natural += 1
    wanted: dict[int, list[str]] = {}
    for r in keep:
        wanted.setdefault(r[2], []).append(r[1])
    rows = await search_reads.read_items(store, {pos: corpora[pos] for pos in wanted}, wanted, expect)
    out: list[Hit] = []
    rank = 0
    for neg, item_id, pos, asked, score in keep:
        row = rows.get((pos, item_id))
        if row is None:
            continue  # deleted since the index was read
        rank += 0 if asked else 1  # ranks in the union's list, as one corpus would say
        h = hits.from_lexical_row(corpora[pos], row, score, None if asked else rank)
        h.merge_score = -neg
        h.included = asked
        out.append(h)
    return out


# ---- hybrid -------------------------------------------------------------------------

async def _hybrid(store: Store, p: Options, outcomes: list[Outcome],
                  weights: dict[str, float], inc: dict[str, list[str]],
                  factors: dict[tuple[str, str], float] | None = None) -> list[Hit]:
    req = p.req
    started = time.perf_counter()
    indexes: dict[int, postings.CorpusIndex] = {}
    expect: dict[int, int] | None = None
    verified = False  # expect read current already (beside the vector statement)
    ahead: dict[int, list[tuple[str, float]]] = {}
    if _in_memory(store) and p.text.strip():
        # The lexical index's reads and the vector branch's statements are independent:
        # side by side on two connections, the shorter hides behind the longer (a new
        # query over 16 corpora: postings read ~3 ms, shared scan ~5 ms).
        resolved = {o.position: (o.corpus, o.error) for o in outcomes}
        # The vector side first: it runs to its statement's send, and the BM25 scoring
        # then runs while PostgreSQL answers it.
        (live, choices, shared, seen), (indexes, stats, expect, ahead) = await _side_by_side(
            _first_vectors(store, p, outcomes, inc), _lexical_ahead(store, p, outcomes, inc))
        if expect:
            # The versions the cache was trusted at: read by the vector statements, which
            # started after the search did (the rest read now, in a shared statement).
            if lexindex.moved(expect, seen):
                raise search_reads.Stale
            await search_reads.check_versions(
                store, {cid: v for cid, v in expect.items() if cid not in seen})
        verified = True
        if any((o.corpus, o.error) != resolved[o.position] for o in outcomes):
            # _prepared re-read a dropped or recreated corpus: scan the vectors again.
            live, choices, shared = await _vectors_of(store, p, outcomes, inc, p.n)
        federated = True  # the statistics are given, whatever the number of corpora
    else:
        federated, stats = await _stats(store, p, outcomes)
        live, choices, shared = await _vectors_of(store, p, outcomes, inc, p.n)
    text = p.text if (not federated or stats is not None) else ""

    by_name = {o.name: o for o in outcomes}

    union = _union_lexical(store, p, [
        (o.position, indexes[o.corpus.id]) for o in live
        if o.corpus is not None and o.corpus.id in indexes and not inc.get(o.name)],
        stats) if text.strip() else {}
    if not union and len(live) == 1 and live[0].position in ahead:
        union = ahead  # one corpus, scored while its vector statement ran

    async def run(corpus: Corpus) -> tuple[Corpus, _Candidates]:
        o = by_name[corpus.name]
        choice = choices.get(o.position) or _choose(p, o, corpus)
        choices[o.position] = choice
        vec = shared.get(o.position)
        if vec is not None and not text.strip():
            found = _Candidates(vec, [], {})
        else:
            found = await _corpus_candidates(
                store, p, corpus, text, federated, stats, o.position, inc.get(corpus.name, []),
                query_vector=choice.vector if vec is None else None, ix=indexes.get(corpus.id),
                scored_lex=union.get(o.position))
            if vec is not None:
                found.vec = vec
        found.space = choice.space
        return corpus, found

    def settled(o: Outcome) -> tuple[Corpus, _Candidates] | None:
        """A corpus's candidates when nothing is left to read for it: its vectors from
        the space's shared scan, its BM25 scored with the union, no preferences and no
        `include` (`union` leaves those out; 16 corpora: no task a corpus, see `_settled`)."""
        c, vec = o.corpus, shared.get(o.position)
        if c is None or vec is None or o.error is not None:
            return None
        found = _settled(p, o.position, vec, union.get(o.position))
        if found is None:
            return None
        choice = choices.get(o.position) or _choose(p, o, c)
        choices[o.position] = choice
        found.space = choice.space
        return c, found

    quick = {o.position: got for o in outcomes if (got := settled(o)) is not None}
    ran = {o.position: got for o, got in await _each(
        store, [o for o in outcomes if o.position not in quick], run)}
    per = [(o, quick[o.position] if o.position in quick else ran[o.position])
           for o in outcomes if o.position in quick or o.position in ran]
    metric = {o.position: c.metric for o, (c, _) in per}
    metrics = sorted(set(metric.values()))
    parts = [c for _, (_, c) in per]
    vec_lists, lex = _merged_vec_spaces(parts, p.n), _merged_lex(parts, p.n)
    included = {key for c in parts for key in c.included}
    asked = {merge.key(i, o.position) for o, _ in per for i in inc.get(o.name, [])}
    sym: dict[str, float] | None = None
    if p.symbolic is not None:
        sym = {}
        for c in parts:
            sym.update(c.sym)
    name_of = {o.position: o.name for o, _ in per}

    def fac(k: str) -> float:
        item_id, pos = merge.unkey(k)
        return (factors or {}).get((name_of[pos], item_id), 1.0)

    def fuse(vec_lists: list[list[tuple[str, float]]], lex: list[tuple[str, float]],
             limit: int | None) -> list[fusion.Fused]:
        if factors:  # the playbook's factor inside the fusion (true values stay shown)
            vec_lists = [merge.top_by_distance([(k, d * fac(k)) for k, d in vec], len(vec))
                         for vec in vec_lists]
            lex = merge.top_by_score([(k, s / fac(k)) for k, s in lex], len(lex))
        if len(metrics) == 1:  # one metric (one corpus, usually): no key to parse
            similarities = [[(k, hits.similarity(metrics[0], d)) for k, d in vec]
                            for vec in vec_lists]
        else:
            similarities = [[(k, hits.similarity(metric[merge.unkey(k)[1]], d)) for k, d in vec]
                            for vec in vec_lists]
        return fusion.fuse(p.method, {fusion.LEXICAL: lex}, k=p.rrf_k,
                           weights=p.fusion_weights, symbolic=sym, vector_spaces=similarities,
                           limit=limit)

    # A fused list is built only as far as it is read: feedback reads the first pass's
    # top `docs`, and the hits are the top k, unless an `include` item (kept wherever it
    # ranks) or a corpus weight (which reorders) reaches past them.
    final = (None if included or asked or any(_weight(o, weights) != 1.0 for o, _ in per)
             else req.k)
    fused = fuse(vec_lists, lex, p.prf.docs if p.prf.on else final)
    if p.prf.on and fused:
        corpora_at = {o.position: c for o, (c, _) in per}
        inc_at = {o.position: inc.get(o.name, []) for o, _ in per}
        first = {o.position: c for o, (_, c) in per}
        vec_parts, lex_parts = await feedback.run(store, p, corpora_at, inc_at, fused, text,
                                                  stats, choices, first, indexes, rerun=_rerun)
        # The second pass's candidates bring their own symbolic scores and `include`
        # extras, so a candidate new in this pass is scored as in the first. (`included`,
        # "found by no branch on its own", stays the first pass's: a rerun is one branch.)
        for new in (vec_parts, lex_parts):
            if sym is not None and new is not None:
                for c in new:
                    sym.update(c.sym)
        if vec_parts is not None:
            vec_lists = _merged_vec_spaces(vec_parts, p.n)
        if lex_parts is not None:
            lex = _merged_lex(lex_parts, p.n)
        fused = fuse(vec_lists, lex, final)
    # True values, shown on the hits (one space: the list as it is, built in C).
    distance = (dict(vec_lists[0]) if len(vec_lists) == 1
                else {k: d for vec in vec_lists for k, d in vec})
    lexical_score = dict(lex)
    by_pos = {o.position: o for o, _ in per}
    if all(_weight(o, weights) == 1.0 for o in by_pos.values()):
        # Every corpus weighs 1: score x 1 is the score, and the fused list is sorted by
        # it already (ties in its order), the very order the sort below would give.
        order = [(f.score, i, f) for i, f in enumerate(fused)]
    else:
        order = sorted(
            ((merge.weighted_score(f.score, _weight(by_pos[merge.unkey(f.id)[1]], weights)),
              i, f) for i, f in enumerate(fused)),
            key=lambda r: (-r[0], r[1]))
    ranked = []
    natural = 0
    for r in order:  # the top k retrieval found, and every included item wherever it ranks
        if r[2].id in included or r[2].id in asked:
            ranked.append(r)
        elif natural < req.k:
            ranked.append(r)
            natural += 1
    wanted: dict[int, list[str]] = {}
    for _, _, f in ranked:
        item_id, pos = merge.unkey(f.id)
        wanted.setdefault(pos, []).append(item_id)
    corpora = {o.position: c for o, (c, _) in per}
    items = await search_reads.read_items(store, {pos: corpora[pos] for pos in wanted}, wanted,
                                          expect, verified=verified)
    out: list[Hit] = []
    for merged, _, f in ranked:
        item_id, pos = merge.unkey(f.id)
        row = items.get((pos, item_id))
        if row is None:
            continue  # deleted between the statements
        scores = dict(f.scores)
        if f.id in distance:
            scores[fusion.VECTOR] = hits.similarity(corpora[pos].metric, distance[f.id])
        if f.id in lexical_score:
            scores[fusion.LEXICAL] = lexical_score[f.id]
        h = hits.hit(corpora[pos], row, distance=distance.get(f.id), score=f.score,
                     ranks=dict(f.ranks), scores=scores,
                     matched_layers=list(f.matched_layers))
        h.merge_score = merged
        h.included = f.id in included
        out.append(h)
    # Each corpus's answer was ready when the union's was: its time is the search's (a
    # corpus settled from shared reads ran no statement of its own to time).
    took = _ms(started)
    for o, _ in per:
        o.took_ms = max(o.took_ms, took)
    return out


async def _corpus_candidates(store: Store, p: Options, corpus: Corpus, text: str, federated: bool,
                             stats: lexical.QueryStats | None, position: int,
                             include: Sequence[str] = (),
                             query_vector: list[float] | None = None,
                             ix: postings.CorpusIndex | None = None,
                             scored_lex: list[tuple[str, float]] | None = None) -> _Candidates:
    """One corpus's vector and BM25 candidates (ids and branch scores only), and the
    `include` items' scores in the branches that missed them.

    query_vector: the vector its space is searched with (the request's, or feedback's
    moved one), None for no vector branch; text blank: no BM25 branch; ix: BM25 from this
    in-memory index (with the given statistics) instead of inside the statement;
    scored_lex: its BM25 candidates already scored with the other corpora's
    (_union_lexical).
    """
    req = p.req
    query: npt.NDArray[np.float32] | None = None
    if query_vector is not None:
        query = validate.vector(query_vector, corpus.dim, corpus.metric, "query_vector")
    langs = query_languages(req, corpus)
    lexical_branch = bool(text.strip())
    scored: list[tuple[str, float]] | None = None
    s: postings.F64 | None = None
    if ix is not None and lexical_branch:
        if scored_lex is not None:
            scored = scored_lex
        elif stats is not None:
            s = _scores(p, ix, stats)
            scored = await _top(store, p, corpus, ix, s, p.n)
        else:
            scored = []
        if query is None and p.symbolic is None and not include:
            # Nothing for PostgreSQL to add (feedback's lexical pass).
            return _Candidates([], merge.keyed(scored, position), {})
    table = schema.items_table(corpus.id)
    # BM25 scored in memory goes into the statement only when the symbolic layer must
    # score its candidates too; else the statement is the vector branch alone.
    lex_in_sql = scored is not None and p.symbolic is not None
    stmt = fusion_sql.candidates_sql(
        table, corpus.id, langs, p.where, p.filtered,
        None if query is None else schema.OPERATOR[corpus.metric], p.symbolic,
        given=federated, lexical_branch=lexical_branch and (scored is None or lex_in_sql),
        lexical_scored=lex_in_sql)
    args: dict[str, Any] = {**p.params, **p.sym_params, "vec_q": query, "vec_n": p.n}
    if scored is not None:
        if lex_in_sql:
            args.update({"lex_ids": [i for i, _ in scored],
                         "lex_scores": [sc for _, sc in scored]})
    else:
        args.update(lexical.bm25_params(text, langs, p.k1, p.b, p.field_weights, p.n, stats))
    rows = await _candidate_rows(store, p, stmt, args)
    vec = _vec_of(rows, position)
    if scored is not None and not lex_in_sql:
        lex = merge.keyed(scored, position)
        in_lex = {i for i, _ in scored}
    else:
        lex = [(merge.key(r["id"], position), float(r["lex_score"]))
               for r in sorted((r for r in rows if r["lex_rank"] is not None),
                               key=lambda r: r["lex_rank"])]
        in_lex = {r["id"] for r in rows if r["lex_rank"] is not None}
    sym = ({} if p.symbolic is None else
           {merge.key(r["id"], position): float(r["sym_score"] or 0.0) for r in rows})
    out = _Candidates(vec, lex, sym)
    in_vec = {r["id"] for r in rows if r["vec_rank"] is not None}
    extra = [i for i in include if i not in in_vec or i not in in_lex]
    if extra:
        given_scores = None
        if ix is not None and s is not None:
            given_scores = {i: sc for i in extra if (sc := _score_of(ix, s, i)) is not None}
        for row in await search_reads.included(store, p, corpus, extra, query, text, federated, stats,
                                   given_scores):
            key = merge.key(row["id"], position)
            if row["id"] not in in_vec and row["distance"] is not None:
                out.extra_vec.append((key, float(row["distance"])))
            if row["id"] not in in_lex and row["lex_score"] is not None:
                out.extra_lex.append((key, float(row["lex_score"])))
            if p.symbolic is not None:
                out.sym[key] = float(row["sym_score"] or 0.0)
            if row["id"] not in in_vec and row["id"] not in in_lex:
                out.included.add(key)
    return out


async def _candidate_rows(store: Store, p: Options, stmt: sql.Composed,
                          args: dict[str, Any]) -> list[dict[str, Any]]:
    async with store.reads.connection() as conn:
        cur = conn.cursor(row_factory=dict_row)
        await store.search_settings(conn, max(p.ef_search, p.n), p.filtered)
        await cur.execute(stmt, args)
        return await cur.fetchall()


def _by_distance(row: tuple[str, float, int]) -> tuple[float, str]:
    return row[1], row[0]


def _vec_of(rows: Sequence[dict[str, Any]], position: int) -> list[tuple[str, float]]:
    """The vector branch's candidates of a candidates statement, nearest first."""
    return [(merge.key(r["id"], position), float(r["vec_distance"]))
            for r in sorted((r for r in rows if r["vec_rank"] is not None),
                            key=lambda r: r["vec_rank"])]


async def _first_vectors(store: Store, p: Options, outcomes: list[Outcome],
                         inc: dict[str, list[str]]
                         ) -> tuple[list[Outcome], dict[int, spaces.Choice],
                                    dict[int, list[tuple[str, float]]], dict[int, int]]:
    """_vectors_of, plus the vector candidates of the corpora searched on their own
    graphs (hybrid's first pass, read beside the lexical index) and those corpora's
    lexical versions, read in the same statements (corpus id -> version)."""
    live, choices, shared = await _vectors_of(store, p, outcomes, inc, p.n)
    rest = [(o.position, o.corpus, vector) for o in live
            if o.corpus is not None and o.position not in shared and not inc.get(o.name)
            and (vector := choices[o.position].vector) is not None]
    versions: dict[int, int] = {}
    if rest and not p.filtered and p.symbolic is None:
        found = ([await _own_scan(store, p, *rest[0])] if len(rest) == 1
                 else await asyncio.gather(*(_own_scan(store, p, *r) for r in rest)))
        for (pos, corpus, _), got in zip(rest, found, strict=True):
            if got is not None:
                shared[pos] = got[0]
                if got[1] is not None:
                    versions[corpus.id] = got[1]
    return live, choices, shared, versions


async def _own_scan(store: Store, p: Options, position: int, corpus: Corpus,
                    vector: list[float]
                    ) -> tuple[list[tuple[str, float]], int | None] | None:
    """One corpus's vector candidates from its own graph, unfiltered (the candidates
    statement's vector branch alone, fusion_sql.vector_only_sql), and the corpus's lexical
    version read with them (None: no row to read it from). None when it fails: the
    corpus's own search (_corpus_candidates) runs the statement again and reports the
    failure as that corpus's."""
    if p.filtered:
        return None  # the candidates statement filters (and scans iteratively)
    try:
        q = validate.vector(vector, corpus.dim, corpus.metric, "query_vector")
        stmt = fusion_sql.vector_only_sql(corpus.id, schema.OPERATOR[corpus.metric])
        async with store.reads.connection() as conn:
            cur = conn.cursor(binary=True)  # a third less CPU reading 100 rows; exact floats
            await store.search_settings(conn, max(p.ef_search, p.n), p.filtered)
            await cur.execute(stmt, {"vec_q": q, "vec_n": p.n, "lex_corpus_id": corpus.id})
            rows = await cur.fetchall()
        vec = merge.keyed(((i, float(d)) for i, d, _ in sorted(rows, key=_by_distance)), position)
        return vec, (int(rows[0][2]) if rows else None)
    except Exception as exc:
        log.debug("own_scan_failed", corpus=corpus.name, error=str(exc))
        return None


def _merged_vec(parts: list[_Candidates], n: int) -> list[tuple[str, float]]:
    """The union's top n by distance, then the `include` items with their true distances,
    wherever those rank."""
    vec = merge.top_by_distance([r for c in parts for r in c.vec], n)
    extra = [r for c in parts for r in c.extra_vec]
    return merge.top_by_distance(vec + extra, len(vec) + len(extra)) if extra else vec


def _merged_vec_spaces(parts: list[_Candidates], n: int) -> list[list[tuple[str, float]]]:
    """_merged_vec within each embedding space (one list when every corpus shares one)."""
    by_space: dict[int, list[_Candidates]] = {}
    for c in parts:
        by_space.setdefault(c.space, []).append(c)
    return [_merged_vec(group, n) for _, group in sorted(by_space.items())] or [[]]


def _merged_lex(parts: list[_Candidates], n: int) -> list[tuple[str, float]]:
    """The union's top n by BM25, then the `include` items with their true scores."""
    lex = merge.top_by_score([r for c in parts for r in c.lex], n)
    extra = [r for c in parts for r in c.extra_lex]
    return merge.top_by_score(lex + extra, len(lex) + len(extra)) if extra else lex


async def _rerun(store: Store, p: Options, corpora: dict[int, Corpus], inc: dict[int, list[str]],
                 text: str, given: bool, stats: lexical.QueryStats | None,
                 query: list[float] | None,
                 indexes: dict[int, postings.CorpusIndex] | None = None,
                 space: int = spaces.PLAIN) -> list[_Candidates]:
    """One branch again (the vector one when `query` is given, else BM25) over every
    corpus: each corpus's candidates (BM25 from `indexes` when given)."""
    shared: dict[int, list[tuple[str, float]]] = {}
    if query is not None:
        shared = await _shared_scans(store, p, [(pos, c, query, space) for pos, c in corpora.items()
                                                if not inc.get(pos)], p.n)

    union: dict[int, list[tuple[str, float]]] = {}
    if query is None and indexes and text.strip():
        union = _union_lexical(store, p, [(pos, indexes[c.id]) for pos, c in corpora.items()
                                          if c.id in indexes and not inc.get(pos)], stats)

    async def run(pos: int) -> _Candidates:
        c = corpora[pos]
        found = await _corpus_candidates(store, p, c, text, given, stats, pos,
                                         inc.get(pos, []), query_vector=query,
                                         ix=(indexes or {}).get(c.id) if query is None else None,
                                         scored_lex=union.get(pos))
        found.space = space
        return found

    out: dict[int, _Candidates] = {}
    for pos in corpora:
        if pos in shared:
            out[pos] = _Candidates(shared[pos], [], {}, space=space)
        elif (done := _settled(p, pos, None, union.get(pos))) is not None:  # no `include`
            done.space = space
            out[pos] = done
    rest = [pos for pos in corpora if pos not in out]
    # One corpus (the usual search) is awaited as it is: no task to schedule and gather.
    ran = [await run(rest[0])] if len(rest) == 1 else await asyncio.gather(*(run(pos) for pos in rest))
    for pos, found in zip(rest, ran, strict=True):
        out[pos] = found
    return [out[pos] for pos in corpora]


def _settled(p: Options, position: int, vec: list[tuple[str, float]] | None,
             lex: list[tuple[str, float]] | None) -> _Candidates | None:
    """A corpus's candidates when its BM25 was scored with the union's (`lex`) and no
    statement is left to run for it: no preferences to score, and its vector candidates
    given (`vec`) or none wanted. None: `_corpus_candidates` runs. Built here, with no
    task a corpus: over 16 corpora, two passes of 16 tasks that only wrapped these lists
    cost about half a millisecond."""
    if lex is None or p.symbolic is not None:
        return None
    return _Candidates(vec or [], merge.keyed(lex, position), {})


