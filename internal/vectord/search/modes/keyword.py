"""Mode keyword: each corpus's newest k matches, merged newest first."""

from __future__ import annotations

from internal.api.vectord import Corpus, Hit
from internal.vectord.search import hits
from internal.vectord.search.options import Options
from internal.vectord.search.outcome import Outcome, each
from internal.vectord.storage.store import Store


async def keyword_search(store: Store, p: Options, outcomes: list[Outcome],
                         weights: dict[str, float], inc: dict[str, list[str]],
                         factors: dict[tuple[str, str], float]) -> list[Hit]:
    """Mode keyword (weights, `include` and factors do not apply: newest first)."""
    req = p.req
    if not p.text.strip():
        return []  # a blank query matches everything: answer nothing, scan nothing

    async def run(corpus: Corpus) -> list[Hit]:
        rows = await store.keyword_search(corpus, p.text.strip(), req.k, p.where, p.params)
        return hits.from_keyword_rows(corpus, rows)

    rows: list[tuple[float, str, int, Hit]] = []
    for o, found in await each(store, outcomes, run):
        rows.extend((-h.updated_at.timestamp(), h.id, o.position, h) for h in found)
    rows.sort(key=lambda r: r[:3])  # newest first, over every corpus
    return [r[3] for r in rows[:req.k]]
