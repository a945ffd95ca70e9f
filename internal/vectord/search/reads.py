"""The statements a search reads with besides its branches' own: the union's BM25
statistics, the `include` items' rows with their branch scores, the hits' rows read back
(one UNION ALL over several corpora, with the lexical versions a search scored at
checked on the same rows), and what feedback reads (documents' vectors and lexemes,
document frequencies). Storage: every statement here; the search's plan and merge are
in search/engine.py and the modes (search/modes/), search/fusion.py and union_merge.py, feedback's pass in
search/feedback.py."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from internal.api.vectord import Corpus
from internal.pg import union
from internal.vectord import tables
from internal.vectord.lexical import sql_index, versions
from internal.vectord.search import fusion_sql
from internal.vectord.search.lexical_options import query_languages, union_languages
from internal.vectord.search.options import Options
from internal.vectord.storage import schema
from internal.vectord.storage.store import Store


class Stale(Exception):
    """A corpus's lexical version moved while a search scored from the cache: run again."""


async def union_stats(store: Store, p: Options, corpora: Sequence[Corpus]
                      ) -> sql_index.QueryStats | None:
    """The query side of BM25 over the union of corpora (None: no query lexeme matches)."""
    langs, auto = union_languages(p, corpora)
    src = sql_index.stats_sources([c.id for c in corpora])
    # auto corpora: the languages they hold, not every one plus `simple` (sql_index.held_languages)
    stmt = sql.SQL(sql_index.UNION_STATS).format(held=sql_index.held_languages(
        [c.id for c, a in zip(corpora, auto, strict=True) if a]))
    w = p.field_weights
    async with store.reads.connection() as conn:
        cur = await conn.execute(stmt, {
            **src, "langs": langs, "q": p.text,
            "wa": w["title"], "wb": w["text"], "wc": w["tags"]})
        row = await cur.fetchone()
    if row is None or row[0] is None:
        return None
    return sql_index.QueryStats(lexemes=list(row[0]), weights=[float(x) for x in row[1]],
                              dfs=[float(x) for x in row[2]], avgdl=float(row[3]),
                              n=float(row[4]))


_INCLUDED = """
WITH {bm25}
SELECT {columns}, lex.score AS lex_score, {distance} AS distance, {symbolic} AS sym_score
FROM {table} i LEFT JOIN lex ON lex.id = i.id
WHERE i.id = ANY(%(inc_ids)s::text[])"""


async def included(store: Store, p: Options, corpus: Corpus, ids: Sequence[str],
                    query: npt.NDArray[np.float32] | None, text: str, federated: bool,
                    stats: sql_index.QueryStats | None,
                    lex_scores: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """The rows of `include` items with their true distance, BM25 and symbolic share.

    The same statistics as the natural candidates (the union's when federated); the hard
    filter does not apply (the caller asked for these items by id). Missing ids: no row.
    lex_scores: their BM25, scored in memory (an id not in it has none).
    """
    table = tables.items_table(corpus.id)
    langs = query_languages(p, corpus)
    lexical_branch = lex_scores is None and bool(text.strip()) and (
        stats is not None or not federated)
    bm25: sql.Composable = (
        sql.SQL(fusion_sql.LEX_GIVEN) if lex_scores is not None
        else sql_index.bm25_sql(table, corpus.id, langs, sql.SQL("TRUE"), False, given=federated,
                           only_ids=True) if lexical_branch
        else sql.SQL(fusion_sql.LEX_NONE))
    distance = (sql.SQL("i.embedding {} %(vec_q)s").format(
        sql.SQL(schema.OPERATOR[corpus.metric])) if query is not None else sql.SQL("NULL::float8"))
    symbolic: sql.Composable = sql.SQL("NULL::float8")
    if p.symbolic is not None:
        symbolic = sql.SQL("(SELECT {e} FROM {t} WHERE {t}.id = i.id)").format(
            e=p.symbolic, t=table)
    stmt = sql.SQL(_INCLUDED).format(bm25=bm25, columns=sql.SQL(sql_index.ITEM_COLUMNS),
                                     distance=distance, symbolic=symbolic, table=table)
    args: dict[str, Any] = {**p.sym_params, "inc_ids": list(ids), "vec_q": query}
    if lex_scores is not None:
        args.update({"lex_ids": list(lex_scores), "lex_scores": list(lex_scores.values())})
    elif lexical_branch:
        args.update(sql_index.bm25_params(text, langs, p.k1, p.b, p.field_weights, len(ids),
                                        stats))
        args["lex_ids"] = list(ids)
    async with store.reads.connection() as conn:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(stmt, args)
        return list(await cur.fetchall())


@functools.lru_cache(maxsize=4096)
def _items_sql(corpus_id: int) -> bytes:
    """The statement reading hits' rows back, rendered once per corpus (~50 us each)."""
    return sql.SQL(fusion_sql.ITEMS).format(columns=sql.SQL(sql_index.ITEM_COLUMNS),
                                               table=tables.items_table(corpus_id)).as_bytes(None)


@functools.lru_cache(maxsize=4096)
def _items_at_version_sql(corpus_id: int) -> bytes:
    return sql.SQL(fusion_sql.ITEMS_AT_VERSION).format(
        columns=sql.SQL(sql_index.ITEM_COLUMNS), version=sql.SQL(versions.VERSION_OF),
        table=tables.items_table(corpus_id)).as_bytes(None)


async def read_items(store: Store, corpora: dict[int, Corpus], wanted: dict[int, list[str]],
                      expect: dict[int, int] | None = None, *, verified: bool = False
                      ) -> dict[tuple[int, str], dict[str, Any]]:
    """The rows of the wanted items, per corpus position (several: one statement).

    expect: the lexical versions (corpus id -> version) a search scored at without reading
    them; read here with the rows (a corpus with no row read on its own), and Stale raised
    when one moved. verified: the search read them current after it started already
    (check_versions): rows kept at them are taken with no statement, rows read now must
    still be at them."""
    expect = expect or {}
    seen: dict[int, int] = {}
    if len(wanted) > 1:
        return await _read_items_at_once(store, corpora, wanted, expect)

    async def read(pos: int) -> list[tuple[tuple[int, str], dict[str, Any]]]:
        cid = corpora[pos].id
        checked = cid in expect
        kept = store.lex.rows if checked and store.replicas is None else None
        if kept is not None and (rows := kept.get(cid, expect[cid], wanted[pos])) is not None:
            # Rows read before at the version the search scored at: only that version is
            # checked (unless verified already), in a statement shared with the searches
            # asking meanwhile.
            if not verified:
                seen.update(await store.lex.versions.current(store.reads, [cid]))
            return [((pos, row["id"]), row) for row in rows]
        stmt = _items_at_version_sql(cid) if checked else _items_sql(cid)
        async with store.reads.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(stmt, {"ids": wanted[pos], "lex_corpus_id": cid})
            rows = await cur.fetchall()
        if checked and rows:
            seen[cid] = int(rows[0].pop("lex_version"))
            for row in rows[1:]:
                row.pop("lex_version")
            if kept is not None and len(rows) == len(wanted[pos]):
                kept.put(cid, seen[cid], rows)
        return [((pos, row["id"]), row) for row in rows]

    out: dict[tuple[int, str], dict[str, Any]] = {}
    try:
        for pos in wanted:  # one at most: several go through _read_items_at_once
            out.update(await read(pos))
    except psycopg.errors.UndefinedTable:
        if not expect:
            raise
        raise Stale from None  # dropped by another replica: the checked run says so
    if versions.moved(expect, seen):
        raise Stale
    if not verified:
        await check_versions(store, {cid: v for cid, v in expect.items() if cid not in seen})
    return out


# Every corpus's lexical version, on each row of a multi-corpus read (jsonb: id -> version).
_VERSIONS = ("(SELECT jsonb_object_agg(corpus_id, version) FROM vectord_lex_versions "
             "WHERE corpus_id = ANY(%(lex_corpus_ids)s))")


def _items_union(parts: Sequence[tuple[int, int]], template: str,
                 versions: bool = False) -> list[bytes]:
    """The parts of one statement reading rows of several corpora (UNION ALL of each
    table's read), each row with its corpus's position as `pos`: one round trip, not one
    a corpus."""
    return [_items_union_part(pos, cid, template, versions) for pos, cid in parts]


@functools.lru_cache(maxsize=4096)
def _items_union_part(pos: int, corpus_id: int, template: str, versions: bool) -> bytes:
    """One corpus's part of _items_union, rendered once (composing them all for each
    search was a third of a millisecond)."""
    return sql.SQL("SELECT {pos} AS pos, q.*{versions} FROM ({read}) q").format(
        pos=sql.Literal(pos),
        versions=sql.SQL(f", {_VERSIONS} AS lex_versions" if versions else ""),
        read=sql.SQL(template.replace("%(ids)s", f"%(ids_{pos})s")).format(
            columns=sql.SQL(sql_index.ITEM_COLUMNS), table=tables.items_table(corpus_id)),
    ).as_bytes(None)


async def _read_items_at_once(store: Store, corpora: dict[int, Corpus],
                              wanted: dict[int, list[str]], expect: dict[int, int]
                              ) -> dict[tuple[int, str], dict[str, Any]]:
    """_read_items over several corpora in one statement, with the versions checked."""
    parts = _items_union([(pos, corpora[pos].id) for pos in wanted], fusion_sql.ITEMS,
                         versions=bool(expect))
    args: dict[str, Any] = {f"ids_{pos}": ids for pos, ids in wanted.items()}
    args["lex_corpus_ids"] = list(expect)
    try:
        async with store.reads.connection() as conn:
            rows = await union.fetch(conn, parts, args, row_factory=dict_row)
    except psycopg.errors.UndefinedTable:
        if not expect:
            raise
        raise Stale from None  # dropped by another replica: the checked run says so
    out: dict[tuple[int, str], dict[str, Any]] = {}
    row_versions: dict[str, Any] | None = None
    for row in rows:
        pos = int(row.pop("pos"))
        got = row.pop("lex_versions", None)
        row_versions = got if got is not None else row_versions
        out[(pos, row["id"])] = row
    if expect:
        if not rows:
            await check_versions(store, expect)
        elif versions.moved(expect, {cid: int((row_versions or {}).get(str(cid), 0))
                                     for cid in expect}):
            raise Stale
    return out


async def check_versions(store: Store, expect: dict[int, int] | None) -> None:
    """Raise Stale when a corpus's lexical version is not the one the search scored at
    (read in the statement shared with the searches asking meanwhile, versions.Versions)."""
    if expect and versions.moved(
            expect, await store.lex.versions.current(store.reads, list(expect))):
        raise Stale


FEEDBACK_VECTORS = "SELECT id, embedding FROM {table} WHERE id = ANY(%(ids)s)"
# Each feedback document's lexemes and their counts over title, text and tags (the
# tsvector the postings are made of), as its text: one row a document, read by
# lexindex.tsvector_counts (unnesting it in SQL was 7 ms of a 37 ms default search).
FEEDBACK_LEXEMES = "SELECT i.id, i.lex::text AS lex FROM {table} i WHERE i.id = ANY(%(ids)s)"
# Candidates' titles as the lexical index counts them (search/names.py, with the SQL
# engine): each title lexeme's positions, and the title's length in positions.
TITLE_LEXEMES = """
SELECT i.id, (SELECT l.a FROM vectord_lex_lengths(i.lex) l) AS title_len,
       ARRAY(SELECT x.lexeme FROM unnest(i.lex) x WHERE 'A' = ANY(x.weights)) AS lexemes,
       ARRAY(SELECT cardinality(array_positions(x.weights, 'A')) FROM unnest(i.lex) x
             WHERE 'A' = ANY(x.weights)) AS tfs
FROM {table} i WHERE i.id = ANY(%(ids)s)"""
_FEEDBACK_DFS = ("(SELECT {cid}::bigint, lexeme, df::float8 FROM {dfs} "
                 "WHERE lexeme = ANY({lexemes}::text[]))")


async def read_rows(store: Store, corpora: dict[int, Corpus], wanted: dict[int, list[str]],
                    template: str) -> list[dict[str, Any]]:
    if len(wanted) > 1:  # one statement for them all
        parts = _items_union([(pos, corpora[pos].id) for pos in wanted], template)
        async with store.reads.connection() as conn:
            rows = await union.fetch(conn, parts, {f"ids_{pos}": ids
                                                   for pos, ids in wanted.items()},
                                     row_factory=dict_row)
        for row in rows:
            row["key"] = (row["id"], int(row.pop("pos")))
        return list(rows)

    async def read(pos: int) -> list[dict[str, Any]]:
        stmt = sql.SQL(template).format(table=tables.items_table(corpora[pos].id))
        async with store.reads.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(stmt, {"ids": wanted[pos]})
            return [{**row, "key": (row["id"], pos)}
                    for row in await cur.fetchall()]

    return [row for part in await asyncio.gather(*(read(pos) for pos in wanted)) for row in part]

async def read_dfs(store: Store, wanted: dict[int, list[str]]) -> dict[int, dict[str, float]]:
    """Each corpus's document frequency of its wanted lexemes (0 when it holds none), in
    one statement for every corpus."""
    parts = tuple(sorted(wanted))
    async with store.reads.connection() as conn:
        rows = await union.fetch(conn, [_dfs_part(cid) for cid in parts],
                                 {f"lexemes_{cid}": wanted[cid] for cid in parts})
    out = {cid: dict.fromkeys(wanted[cid], 0.0) for cid in parts}
    for cid, lexeme, df in rows:
        out[int(cid)][str(lexeme)] = float(df)
    return out


@functools.lru_cache(maxsize=4096)
def _dfs_part(corpus_id: int) -> bytes:
    return sql.SQL(_FEEDBACK_DFS).format(
        cid=sql.Literal(int(corpus_id)), dfs=sql_index.dfs_table(corpus_id),
        lexemes=sql.Placeholder(f"lexemes_{int(corpus_id)}")).as_bytes(None)
