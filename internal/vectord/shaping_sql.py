"""The statements that shape a search's results (storage; the policy is ordering.py and
fragments.py, the plan shaping.py): hits' headlines, candidates' vectors, facet counts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import sql

from internal.api.vectord import Corpus
from internal.vectord import fragments, lexical, schema
from internal.vectord.ordering import Facet
from internal.vectord.store import Store

# The query's lexemes (as the lexical layer matched them) OR-ed into a tsquery; each
# item's words are stemmed in its own language by ts_headline. translate() takes the
# sentinels out of the stored text before ts_headline marks it (fragments.py: a stored
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
    stmt = sql.SQL(_HEADLINES).format(table=schema.items_table(corpus.id))
    async with store.reads.connection() as conn:
        cur = await conn.execute(stmt, {
            "hl_ids": list(ids), "hl_lexemes": list(lexemes), "hl_opts": options,
            "hl_sentinels": fragments.SENTINELS, "hl_spaces": " " * len(fragments.SENTINELS)})
        return {row[0]: (row[1], row[2]) for row in await cur.fetchall()}


# The match set: the items that pass the filter and hold a query lexeme (the lexical
# layer's postings, so exactly the items a lexical search can score), or that pass the
# filter alone when there is no query text.
_MATCHED = """
m AS MATERIALIZED (
  SELECT tags, metadata, updated_at FROM {table}
  WHERE {where}{lexemes})"""
_WITH_LEXEME = """
    AND id IN (SELECT item_id FROM {postings} WHERE lexeme = ANY(%(fc_lexemes)s::text[]))"""


def _part(f: Facet, i: int) -> sql.Composable:
    """SELECT facet index, value, count over m for one facet."""
    idx = sql.Literal(i)
    if f.kind == "corpus":
        return sql.SQL("SELECT {i}, '', count(*) FROM m").format(i=idx)
    if f.kind == "tags":
        return sql.SQL("SELECT {i}, t, count(*) FROM m, unnest(m.tags) t GROUP BY t").format(i=idx)
    if f.kind == "month":
        date = (sql.SQL("to_char(m.updated_at AT TIME ZONE 'UTC', 'YYYY-MM')")
                if f.key == "updated_at" else
                sql.SQL("substring(m.metadata->>{k} from '^\\d{{4}}-\\d{{2}}')").format(
                    k=sql.Literal(f.key)))
        return sql.SQL("SELECT {i}, v, count(*) FROM m, LATERAL (SELECT {d}) x(v) "
                       "WHERE v IS NOT NULL GROUP BY v").format(i=idx, d=date)
    # A metadata value counts once per element when it is a list.
    return sql.SQL(
        "SELECT {i}, v, count(*) FROM m, LATERAL jsonb_array_elements_text(CASE jsonb_typeof("
        "m.metadata->{k}) WHEN 'array' THEN m.metadata->{k} ELSE jsonb_build_array("
        "m.metadata->{k}) END) x(v) WHERE m.metadata ? {k} AND v IS NOT NULL GROUP BY v"
    ).format(i=idx, k=sql.Literal(f.key))


async def facet_counts(store: Store, corpus: Corpus, facets: Sequence[Facet],
                       where: sql.Composable, params: dict[str, Any],
                       lexemes: Sequence[str] | None) -> list[list[tuple[str, int]]]:
    """Per facet, (value, count) over this corpus's match set; one statement."""
    with_lexeme = (sql.SQL(_WITH_LEXEME).format(postings=lexical.postings_table(corpus.id))
                   if lexemes is not None else sql.SQL(""))
    stmt = sql.SQL("WITH {m} {parts}").format(
        m=sql.SQL(_MATCHED).format(table=schema.items_table(corpus.id), where=where,
                                   lexemes=with_lexeme),
        parts=sql.SQL(" UNION ALL ").join(_part(f, i) for i, f in enumerate(facets)))
    out: list[list[tuple[str, int]]] = [[] for _ in facets]
    async with store.reads.connection() as conn:
        cur = await conn.execute(stmt, {**params, "fc_lexemes": list(lexemes or [])})
        for i, value, n in await cur.fetchall():
            out[i].append((value, int(n)))
    return out
