"""Mode keyword: each corpus's newest k matches, merged newest first."""

from __future__ import annotations

from internal.api.vectord import Corpus, Hit
from internal.vectord.search import hits, union_merge
from internal.vectord.search.options import Options
from internal.vectord.search.outcome import Federation, Outcome, each
from internal.vectord.search.registry import searches
from internal.vectord.storage.store import Store


@searches("keyword")
async def keyword_search(store: Store, p: Options, outcomes: list[Outcome],
                         fed: Federation) -> list[Hit]:
    """Mode keyword (corpus weights, `include` and factors do not apply: newest first)."""
    text = p.text.strip()
    if not text:
        return []  # a blank query matches everything: answer nothing, scan nothing

    async def run(corpus: Corpus) -> list[Hit]:
        rows = await store.keyword_search(corpus, text, p.k, p.where, p.params)
        return hits.from_keyword_rows(corpus, rows)

    found = await each(store, outcomes, run)
    return union_merge.merged_hits(((o.position, 1.0, h) for o, h in found), "newest")[:p.k]
