"""The statements that shape a search's results (storage; the policy is shaping/ordering.py and
shaping/fragments.py, the plan shaping/shaped.py): hits' headlines, candidates' vectors, facet counts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg import sql

from internal.api.vectord import Corpus
from internal.vectord import tables
from internal.vectord.lexical import sql_index
from internal.vectord.lexical.versions import VERSION_OF
from internal.vectord.shaping import fragments
from internal.vectord.shaping.ordering import Facet
from internal.vectord.storage.store import Store

# The query's lexemes (as the lexical layer matched them) OR-ed into a tsquery; each
# item's words are stemmed in its own language by ts_headline. translate() takes the
# sentinels out of the stored text before ts_headline marks it (shaping/fragments.py: a stored
# sentinel must never open a mark).
_HEADLINES = """
SELECT i.id,
       ts_headline(i.language, translate(coalesce(i.title, ''), %(hl_sentinels)s,
                   %(hl_spaces)s), q.q, %(hl_opts)s) AS title,
       ts_headline(i.language, translate(i.text, %(hl_sentinels)s, %(hl_spaces)s), q.q,
                   %(hl_opts)s) AS text
FROM {table} i, (SELECT string_agg(quote_literal(l), ' | ')::tsquery AS q
                 FROM unnest(%(hl_lexemes)s::text[]) l) q
WHERE i.id = ANY(%(hl_ids)s::text[])"""


async def headlines(store: Store, corpus: Corpus, ids: Sequence[str], lexemes: Sequence[str],
                    options: str) -> dict[str, tuple[str, str]]:
    """id -> (title, text) as ts_headline marks the words whose lexeme (in the item's
    language) is one of `lexemes` (not empty)."""
    stmt = sql.SQL(_HEADLINES).format(table=tables.items_table(corpus.id))
    async with store.reads.connection() as conn:
        cur = await conn.execute(stmt, {
            "hl_ids": list(ids), "hl_lexemes": list(lexemes), "hl_opts": options,
            "hl_sentinels": fragments.SENTINELS, "hl_spaces": " " * len(fragments.SENTINELS)})
        return {row[0]: (row[1], row[2]) for row in await cur.fetchall()}


# Each word's lexeme as PostgreSQL stems it in the language ("" for none, or for a word
# its parser would cut in more than one token: never marked from Python then).
LEXEMES_OF = """
SELECT w, (SELECT CASE WHEN count(*) = 1 THEN min(lexeme) ELSE '' END
           FROM unnest(to_tsvector(%(cfg)s::regconfig, w)))
FROM unnest(%(words)s::text[]) AS w"""


async def lexemes_of(store: Store, language: str, words: Sequence[str]) -> dict[str, str]:
    """word -> its lexeme in `language` (a regconfig name), as PostgreSQL stems it."""
    async with store.reads.connection() as conn:
        cur = await conn.execute(LEXEMES_OF, {"cfg": language, "words": list(words)})
        return {str(row[0]): str(row[1] or "") for row in await cur.fetchall()}


_VECTORS = "SELECT id, embedding FROM {table} WHERE id = ANY(%(ids)s::text[])"


async def vectors(store: Store, corpus: Corpus, ids: Sequence[str]
                  ) -> dict[str, npt.NDArray[np.float32]]:
    """The items' stored vectors (id -> vector; an item without one: absent), read in
    binary: parsing 100 vectors' text form was most of a diversity search's extra time."""
    stmt = sql.SQL(_VECTORS).format(table=tables.items_table(corpus.id))
    async with store.reads.connection() as conn:
        cur = conn.cursor(binary=True)
        await cur.execute(stmt, {"ids": list(ids)})
        return {row[0]: np.asarray(row[1].to_numpy(), dtype=np.float32)
                for row in await cur.fetchall() if row[1] is not None}


# The match set: the items that pass the filter and hold a query lexeme (the lexical
# layer's postings, so exactly the items a lexical search can score), or that pass the
# filter alone when there is no query text.
_MATCHED = """
m AS MATERIALIZED (
  SELECT tags, metadata, updated_at FROM {table}
  WHERE {where}{lexemes})"""
_WITH_LEXEME = """
    AND id IN (SELECT item_id FROM {postings} WHERE lexeme = ANY(%(fc_lexemes)s::text[]))"""


def _values(f: Facet) -> sql.Composable:
    """A row's values of a (non-corpus) facet as a text[] over `m`: its tags, the month of
    a date, or a metadata value (once per element when it is a list); NULLs are dropped
    where they are counted."""
    if f.kind == "tags":
        return sql.SQL("m.tags")
    if f.kind == "month":
        date = (sql.SQL("to_char(m.updated_at AT TIME ZONE 'UTC', 'YYYY-MM')")
                if f.key == "updated_at" else
                sql.SQL("substring(m.metadata->>{k} from '^\\d{{4}}-\\d{{2}}')").format(
                    k=sql.Literal(f.key)))
        return sql.SQL("ARRAY[{d}]").format(d=date)
    return sql.SQL(
        "ARRAY(SELECT jsonb_array_elements_text(CASE jsonb_typeof(m.metadata->{k}) "
        "WHEN 'array' THEN m.metadata->{k} ELSE jsonb_build_array(m.metadata->{k}) END) "
        "WHERE m.metadata ? {k})").format(k=sql.Literal(f.key))


def _part(f: Facet, i: int) -> sql.Composable:
    """SELECT facet index, value, count over m for one facet."""
    idx = sql.Literal(i)
    if f.kind == "corpus":
        return sql.SQL("SELECT {i}, '', count(*) FROM m").format(i=idx)
    return sql.SQL("SELECT {i}, v, count(*) FROM m, unnest({vals}) v WHERE v IS NOT NULL "
                   "GROUP BY v").format(i=idx, vals=_values(f))


# Every item's values of one facet, with the version of the corpus they are at (one
# snapshot: the version moves with every write that changes a row).
_VALUES = "SELECT m.id, {vals}, " + VERSION_OF + " FROM {table} m"


async def facet_values(store: Store, corpus: Corpus, f: Facet
                       ) -> tuple[int, list[tuple[str, list[str] | None]]]:
    """The corpus's version and each item's values of the facet, read at that version."""
    stmt = sql.SQL(_VALUES).format(vals=_values(f), table=tables.items_table(corpus.id))
    async with store.reads.connection() as conn:
        cur = await conn.execute(stmt, {"lex_corpus_id": corpus.id})
        rows = await cur.fetchall()
    if not rows:
        return -1, []  # no item: no version to hold them at (no match set either)
    return int(rows[0][2]), [(r[0], r[1]) for r in rows]


async def facet_counts(store: Store, corpus: Corpus, facets: Sequence[Facet],
                       where: sql.Composable, params: dict[str, Any],
                       lexemes: Sequence[str] | None) -> list[list[tuple[str, int]]]:
    """Per facet, (value, count) over this corpus's match set; one statement."""
    with_lexeme = (sql.SQL(_WITH_LEXEME).format(postings=sql_index.postings_table(corpus.id))
                   if lexemes is not None else sql.SQL(""))
    stmt = sql.SQL("WITH {m} {parts}").format(
        m=sql.SQL(_MATCHED).format(table=tables.items_table(corpus.id), where=where,
                                   lexemes=with_lexeme),
        parts=sql.SQL(" UNION ALL ").join(_part(f, i) for i, f in enumerate(facets)))
    out: list[list[tuple[str, int]]] = [[] for _ in facets]
    async with store.reads.connection() as conn:
        cur = await conn.execute(stmt, {**params, "fc_lexemes": list(lexemes or [])})
        for i, value, n in await cur.fetchall():
            out[i].append((value, int(n)))
    return out
