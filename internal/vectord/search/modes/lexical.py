"""Mode lexical: BM25 with the union's statistics, each corpus's top k, merged by score.

Two engines answer it behind one signature (`ENGINES`, chosen by the `lexical_engine`
setting): "sql" scores inside PostgreSQL (`sql_lexical`, the reference), "memory" from
the in-memory index (search/lexical_memory.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from psycopg.rows import dict_row

from internal.api.vectord import Corpus, Hit
from internal.vectord import tables
from internal.vectord.lexical import sql_index
from internal.vectord.search import hits, reads, union_merge
from internal.vectord.search.lexical_memory import memory_lexical
from internal.vectord.search.lexical_options import query_languages
from internal.vectord.search.options import Options
from internal.vectord.search.outcome import Federation, Outcome, each, keep_hits
from internal.vectord.search.registry import searches
from internal.vectord.storage.store import Store


async def federated_stats(store: Store, p: Options, outcomes: list[Outcome]
                 ) -> tuple[bool, sql_index.QueryStats | None]:
    """(federated, statistics): one corpus computes its own inside its statement."""
    live = [o.corpus for o in outcomes if o.error is None and o.corpus is not None]
    if len(live) <= 1:
        return False, None
    return True, await reads.union_stats(store, p, live)


async def sql_lexical(store: Store, p: Options, outcomes: list[Outcome],
                      fed: Federation) -> list[Hit]:
    """The "sql" engine: each corpus's top k scored inside PostgreSQL."""
    inc = fed.include
    federated, stats = await federated_stats(store, p, outcomes)
    unmatched = federated and stats is None  # no query lexeme in any corpus
    if unmatched and not inc:
        return []

    async def run(corpus: Corpus) -> list[Hit]:
        langs = query_languages(p, corpus)
        table = tables.items_table(corpus.id)
        rows: list[dict[str, Any]] = []
        if not unmatched:
            stmt = sql_index.lexical_sql(table, corpus.id, langs, p.where, p.filtered,
                                       given=federated)
            args = {**p.params, **sql_index.bm25_params(p.text, langs, p.k1, p.b,
                                                      p.field_weights, p.k, stats)}
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
            for row in await reads.included(store, p, corpus, extra, None, text, federated, stats):
                score = float(row["lex_score"] or 0.0)  # no query term: BM25 0
                h = hits.hit(corpus, row, score=score, scores={"lexical": score})
                h.included = True
                found.append(h)
        return found

    found = await each(store, outcomes, run)
    ranked = union_merge.merged_hits(((o.position, fed.weight(o), h) for o, h in found), "score")
    out = keep_hits(ranked, p.k, inc)
    rank = 0
    for h in out:  # ranks in the union's list, as one corpus would say
        if not h.included:
            rank += 1
            h.ranks["lexical"] = rank
    return out


# A BM25 engine: the corpora's top k by BM25 (and the `include` items), merged by score.
Engine = Callable[[Store, Options, list[Outcome], Federation], Awaitable[list[Hit]]]
ENGINES: dict[str, Engine] = {"memory": memory_lexical, "sql": sql_lexical}


@searches("lexical")
async def lexical_search(store: Store, p: Options, outcomes: list[Outcome],
                         fed: Federation) -> list[Hit]:
    """Mode lexical (the playbook's factors are hybrid's: unused here)."""
    if not p.text.strip():
        return []
    return await ENGINES[store.cfg.lexical_engine](store, p, outcomes, fed)
