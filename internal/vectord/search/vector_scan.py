"""The vector candidates a search reads before its corpora's own statements: a space's
shared index over several corpora (`shared_scans`), a corpus's own graph unfiltered
(hybrid's first pass, `first_vectors`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import structlog

from internal.api import validate
from internal.api.vectord import Corpus, Hit
from internal.pg.replicas import ReplicaFailed
from internal.vectord.search import fusion_sql, hits, query_vectors, reads, union_merge
from internal.vectord.search.options import Options
from internal.vectord.search.outcome import Member, Outcome, choose
from internal.vectord.search.union_merge import Key
from internal.vectord.storage import schema
from internal.vectord.storage.store import Store

log = structlog.get_logger()


async def vectors_of(store: Store, p: Options, outcomes: list[Outcome],
                      inc: dict[str, list[str]], n: int
                      ) -> tuple[list[Outcome], dict[int, query_vectors.Choice],
                                 dict[int, list[tuple[Key, float]]]]:
    """The live outcomes, each one's query vector and space (by position), and the vector
    candidates of those a shared index serves (shared_scans; `include` corpora not)."""
    live = [o for o in outcomes if o.error is None and o.corpus is not None]
    choices = {o.position: choose(p, o, o.corpus) for o in live if o.corpus is not None}
    members = [(o.position, o.corpus, ch.vector, ch.space) for o in live
               if o.corpus is not None and (ch := choices[o.position]).vector is not None
               and not inc.get(o.name)]
    return live, choices, await shared_scans(store, p, members, n)


async def shared_scans(store: Store, p: Options, members: Sequence[Member], n: int
                        ) -> dict[int, list[tuple[Key, float]]]:
    """The vector candidates of the corpora their space's shared index serves: one scan
    per (space, query vector), the union's n nearest; position -> (key, distance),
    nearest first. The others (absent from the answer) search their own tables.

    Not for a hard filter or preferences (the shared index holds vectors only), nor
    where query_vectors.use_shared prefers the corpora's own graphs. A failed scan falls back
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
    out: dict[int, list[tuple[Key, float]]] = {}

    async def scan(space_id: int, group: list[Member]) -> None:
        known = sizes.get(space_id, {})
        searched = [known.get(c.id, -1.0) for _, c, _, _ in group]
        every = [*known.values(), *(-1.0 for _, c, _, _ in group if c.id not in known)]
        if not query_vectors.use_shared(searched, every):
            return
        first = group[0][1]
        q = validate.vector(group[0][2], first.dim, first.metric, "query_vector")
        try:
            rows = await store.space_search(space_id, first.metric, [c.id for _, c, _, _ in group],
                                            q, n, store.ef_search_of(
                                                p.ef_search, *(c for _, c, _, _ in group)))
        except ReplicaFailed:
            raise
        except Exception as exc:
            log.warning("space_scan_failed", space=space_id, error=str(exc))
            return
        if rows is None:
            return  # changes pending: the corpora's own graphs answer
        position = {c.id: pos for pos, c, _, _ in group}
        found: dict[int, list[tuple[Key, float]]] = {pos: [] for pos, _, _, _ in group}
        for cid, item_id, d in rows:
            found[position[cid]].append(((item_id, position[cid]), d))
        out.update(found)

    await asyncio.gather(*(scan(sid, g) for (sid, _), g in groups.items()))
    return out


async def shared_hits(store: Store, corpora: dict[int, Corpus],
                       shared: dict[int, list[tuple[Key, float]]]) -> dict[int, list[Hit]]:
    """The hits of a shared-index scan, their rows read from their corpora's tables."""
    wanted = {pos: [key[0] for key, _ in found]
              for pos, found in shared.items() if found and pos in corpora}
    rows = await reads.read_items(store, corpora, wanted) if wanted else {}
    out: dict[int, list[Hit]] = {}
    for pos, corpus in corpora.items():
        found = []
        for key, d in shared.get(pos, []):
            row = rows.get((pos, key[0]))
            if row is not None:  # deleted between the statements
                found.append({**row, "distance": d})
        out[pos] = hits.from_vector_rows(corpus, found)
    return out


async def first_vectors(store: Store, p: Options, outcomes: list[Outcome],
                         inc: dict[str, list[str]]
                         ) -> tuple[list[Outcome], dict[int, query_vectors.Choice],
                                    dict[int, list[tuple[Key, float]]], dict[int, int]]:
    """vectors_of, plus the vector candidates of the corpora searched on their own
    graphs (hybrid's first pass, read beside the lexical index) and those corpora's
    lexical versions, read in the same statements (corpus id -> version)."""
    live, choices, shared = await vectors_of(store, p, outcomes, inc, p.n)
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
                    ) -> tuple[list[tuple[Key, float]], int | None] | None:
    """One corpus's vector candidates from its own graph, unfiltered (the candidates
    statement's vector branch alone, fusion_sql.vector_only_sql), and the corpus's lexical
    version read with them (None: no row to read it from). None when it fails: the
    corpus's own search (corpus_candidates) runs the statement again and reports the
    failure as that corpus's."""
    if p.filtered:
        return None  # the candidates statement filters (and scans iteratively)
    try:
        q = validate.vector(vector, corpus.dim, corpus.metric, "query_vector")
        stmt = fusion_sql.vector_only_sql(corpus.id, schema.OPERATOR[corpus.metric])
        async with store.reads.connection() as conn:
            cur = conn.cursor(binary=True)  # a third less CPU reading 100 rows; exact floats
            await store.search_settings(conn, max(store.ef_search_of(p.ef_search, corpus), p.n),
                                        p.filtered)
            await cur.execute(stmt, {"vec_q": q, "vec_n": p.n, "lex_corpus_id": corpus.id})
            rows = await cur.fetchall()
        vec = union_merge.keyed(((i, float(d)) for i, d, _ in sorted(rows, key=_by_distance)), position)
        return vec, (int(rows[0][2]) if rows else None)
    except Exception as exc:
        log.debug("own_scan_failed", corpus=corpus.name, error=str(exc))
        return None


def _by_distance(row: tuple[str, float, int]) -> tuple[float, str]:
    return row[1], row[0]
