"""Hybrid's candidates: one corpus's branch lists (`corpus_candidates`), the union's
merged lists, and one branch run again over every corpus (`rerun`, feedback's pass)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg import sql
from psycopg.rows import dict_row

from internal.api import validate
from internal.api.vectord import Corpus
from internal.vectord import tables
from internal.vectord.lexical import postings, sql_index
from internal.vectord.search import fusion_sql, query_vectors, reads, union_merge
from internal.vectord.search.lexical_memory import (
    bm25_scores,
    filtered_top,
    score_of,
    union_lexical,
)
from internal.vectord.search.lexical_options import query_languages
from internal.vectord.search.options import Candidates, Options
from internal.vectord.search.union_merge import Key
from internal.vectord.search.vector_scan import shared_scans
from internal.vectord.storage import schema
from internal.vectord.storage.store import Store


async def corpus_candidates(store: Store, p: Options, corpus: Corpus, text: str, federated: bool,
                            stats: sql_index.QueryStats | None, position: int,
                            include: Sequence[str] = (),
                            query_vector: list[float] | None = None,
                            ix: postings.CorpusIndex | None = None,
                            scored_lex: list[tuple[str, float]] | None = None) -> Candidates:
    """One corpus's vector and BM25 candidates (ids and branch scores only), and the
    `include` items' scores in the branches that missed them.

    query_vector: the vector its space is searched with (the request's, or feedback's
    moved one), None for no vector branch; text blank: no BM25 branch; ix: BM25 from this
    in-memory index (with the given statistics) instead of inside the statement;
    scored_lex: its BM25 candidates already scored with the other corpora's
    (union_lexical).
    """
    query: npt.NDArray[np.float32] | None = None
    if query_vector is not None:
        query = validate.vector(query_vector, corpus.dim, corpus.metric, "query_vector")
    lexical_branch = bool(text.strip())
    scored: list[tuple[str, float]] | None = None
    s: postings.F64 | None = None
    if ix is not None and lexical_branch:
        scored, s = await _scored_in_memory(store, p, corpus, ix, stats, scored_lex)
        if query is None and p.symbolic is None and not include:
            # Nothing for PostgreSQL to add (feedback's lexical pass).
            return Candidates([], union_merge.keyed(scored, position), {})
    # BM25 scored in memory goes into the statement only when the symbolic layer must
    # score its candidates too; else the statement is the vector branch alone.
    lex_in_sql = scored is not None and p.symbolic is not None
    langs = query_languages(p, corpus)
    args: dict[str, Any] = {**p.params, **p.sym_params, "vec_q": query, "vec_n": p.n}
    if scored is None:
        args.update(sql_index.bm25_params(text, langs, p.k1, p.b, p.field_weights, p.n, stats))
    elif lex_in_sql:
        args.update({"lex_ids": [i for i, _ in scored], "lex_scores": [sc for _, sc in scored]})

    def statement(exact: bool) -> sql.Composed:
        return fusion_sql.candidates_sql(
            tables.items_table(corpus.id), corpus.id, langs, p.where, p.filtered,
            None if query is None else schema.OPERATOR[corpus.metric], p.symbolic,
            given=federated, lexical_branch=lexical_branch and (scored is None or lex_in_sql),
            lexical_scored=lex_in_sql, exact=exact)

    rows = await candidate_rows(store, p, corpus, statement, args, query is not None)
    out, in_vec, in_lex = _of_rows(p, rows, position, None if lex_in_sql else scored)
    extra = [i for i in include if i not in in_vec or i not in in_lex]
    if extra:
        given = None
        if ix is not None and s is not None:
            given = {i: sc for i in extra if (sc := score_of(ix, s, i)) is not None}
        rows = await reads.included(store, p, corpus, extra, query, text, federated, stats, given)
        _add_included(p, out, rows, position, in_vec, in_lex)
    return out


async def _scored_in_memory(store: Store, p: Options, corpus: Corpus, ix: postings.CorpusIndex,
                            stats: sql_index.QueryStats | None,
                            scored_lex: list[tuple[str, float]] | None
                            ) -> tuple[list[tuple[str, float]], postings.F64 | None]:
    """The corpus's BM25 candidates from its in-memory index (given already, or scored
    now with the statistics; none without them) and the scores when scored now."""
    if scored_lex is not None:
        return scored_lex, None
    if stats is None:
        return [], None
    s = bm25_scores(p, ix, stats)
    return await filtered_top(store, p, corpus, ix, s, p.n), s


async def candidate_rows(store: Store, p: Options, corpus: Corpus,
                         statement: Callable[[bool], sql.Composed], args: dict[str, Any],
                         vector: bool) -> list[dict[str, Any]]:
    """The candidates statement's rows. A filtered vector branch scans the filter's rows
    exactly when they are few (store.exact_cap: at most that many read, else the graph
    answers), and again exactly when the graph's filtered walk found fewer than k (unless
    exact_scan_rows is 0: the graph's answer as it is)."""
    async with store.reads.connection() as conn:
        cur = conn.cursor(row_factory=dict_row)
        cap = (await store.exact_cap(conn, corpus, p.where, p.params)
               if vector and p.filtered else 0)
        if cap:
            await cur.execute(statement(True), {**args, "vec_cap": cap + 1})
            rows = await cur.fetchall()
            if not rows or (rows[0]["vec_matched"] or 0) <= cap:
                return rows
        await store.search_settings(conn, max(store.ef_search_of(p.ef_search, corpus), p.n),
                                    p.filtered)
        await cur.execute(statement(False), args)
        rows = await cur.fetchall()
        if (vector and p.filtered and sum(r["vec_rank"] is not None for r in rows) < p.k
                and store.index_settings(corpus).exact_scan_rows):
            await cur.execute(statement(True), {**args, "vec_cap": None})
            rows = await cur.fetchall()
        return rows


def _of_rows(p: Options, rows: Sequence[dict[str, Any]], position: int,
             scored: list[tuple[str, float]] | None
             ) -> tuple[Candidates, set[str], set[str]]:
    """The candidates of a candidates statement's rows (the BM25 ones given when scored
    in memory), and the ids each branch found."""
    vec = vec_of(rows, position)
    if scored is not None:
        lex = union_merge.keyed(scored, position)
        in_lex = {i for i, _ in scored}
    else:
        lexical = sorted((r for r in rows if r["lex_rank"] is not None), key=lambda r: r["lex_rank"])
        lex = [((r["id"], position), float(r["lex_score"])) for r in lexical]
        in_lex = {r["id"] for r in lexical}
    sym = ({} if p.symbolic is None else
           {(r["id"], position): float(r["sym_score"] or 0.0) for r in rows})
    in_vec = {r["id"] for r in rows if r["vec_rank"] is not None}
    return Candidates(vec, lex, sym), in_vec, in_lex


def _add_included(p: Options, out: Candidates, rows: Sequence[dict[str, Any]], position: int,
                  in_vec: set[str], in_lex: set[str]) -> None:
    """The `include` items' rows as candidates of the branches that missed them."""
    for row in rows:
        item_id = row["id"]
        key = (item_id, position)
        if item_id not in in_vec and row["distance"] is not None:
            out.extra_vec.append((key, float(row["distance"])))
        if item_id not in in_lex and row["lex_score"] is not None:
            out.extra_lex.append((key, float(row["lex_score"])))
        if p.symbolic is not None:
            out.sym[key] = float(row["sym_score"] or 0.0)
        if item_id not in in_vec and item_id not in in_lex:
            out.included.add(key)


def vec_of(rows: Sequence[dict[str, Any]], position: int) -> list[tuple[Key, float]]:
    """The vector branch's candidates of a candidates statement, nearest first."""
    return [((r["id"], position), float(r["vec_distance"]))
            for r in sorted((r for r in rows if r["vec_rank"] is not None),
                            key=lambda r: r["vec_rank"])]


def merged_vec(parts: list[Candidates], n: int) -> list[tuple[Key, float]]:
    """The union's top n by distance, then the `include` items with their true distances,
    wherever those rank."""
    vec = union_merge.top_by_distance([r for c in parts for r in c.vec], n)
    extra = [r for c in parts for r in c.extra_vec]
    return union_merge.top_by_distance(vec + extra, len(vec) + len(extra)) if extra else vec


def merged_vec_spaces(parts: list[Candidates], n: int) -> list[list[tuple[Key, float]]]:
    """merged_vec within each embedding space (one list when every corpus shares one)."""
    by_space: dict[int, list[Candidates]] = {}
    for c in parts:
        by_space.setdefault(c.space, []).append(c)
    return [merged_vec(group, n) for _, group in sorted(by_space.items())] or [[]]


def merged_lex(parts: list[Candidates], n: int) -> list[tuple[Key, float]]:
    """The union's top n by BM25, then the `include` items with their true scores."""
    lex = union_merge.top_by_score([r for c in parts for r in c.lex], n)
    extra = [r for c in parts for r in c.extra_lex]
    return union_merge.top_by_score(lex + extra, len(lex) + len(extra)) if extra else lex


async def rerun(store: Store, p: Options, corpora: dict[int, Corpus], inc: dict[int, list[str]],
                 text: str, given: bool, stats: sql_index.QueryStats | None,
                 query: list[float] | None,
                 indexes: dict[int, postings.CorpusIndex] | None = None,
                 space: int = query_vectors.PLAIN) -> list[Candidates]:
    """One branch again (the vector one when `query` is given, else BM25) over every
    corpus: each corpus's candidates (BM25 from `indexes` when given)."""
    shared: dict[int, list[tuple[Key, float]]] = {}
    if query is not None:
        shared = await shared_scans(store, p, [(pos, c, query, space) for pos, c in corpora.items()
                                                if not inc.get(pos)], p.n)

    union: dict[int, list[tuple[str, float]]] = {}
    if query is None and indexes and text.strip():
        union = union_lexical(store, p, [(pos, indexes[c.id]) for pos, c in corpora.items()
                                          if c.id in indexes and not inc.get(pos)], stats)

    async def run(pos: int) -> Candidates:
        c = corpora[pos]
        found = await corpus_candidates(store, p, c, text, given, stats, pos,
                                         inc.get(pos, []), query_vector=query,
                                         ix=(indexes or {}).get(c.id) if query is None else None,
                                         scored_lex=union.get(pos))
        found.space = space
        return found

    out: dict[int, Candidates] = {}
    for pos in corpora:
        if pos in shared:
            out[pos] = Candidates(shared[pos], [], {}, space=space)
        elif (done := settled_candidates(p, pos, None, union.get(pos))) is not None:  # no `include`
            done.space = space
            out[pos] = done
    rest = [pos for pos in corpora if pos not in out]
    # One corpus (the usual search) is awaited as it is: no task to schedule and gather.
    ran = [await run(rest[0])] if len(rest) == 1 else await asyncio.gather(*(run(pos) for pos in rest))
    for pos, found in zip(rest, ran, strict=True):
        out[pos] = found
    return [out[pos] for pos in corpora]


def settled_candidates(p: Options, position: int, vec: list[tuple[Key, float]] | None,
             lex: list[tuple[str, float]] | None) -> Candidates | None:
    """A corpus's candidates when its BM25 was scored with the union's (`lex`) and no
    statement is left to run for it: no preferences to score, and its vector candidates
    given (`vec`) or none wanted. None: `corpus_candidates` runs. Built here, with no
    task a corpus: over 16 corpora, two passes of 16 tasks that only wrapped these lists
    cost about half a millisecond."""
    if lex is None or p.symbolic is not None:
        return None
    return Candidates(vec or [], union_merge.keyed(lex, position), {})
