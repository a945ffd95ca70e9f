"""One search over one or several corpora, ranked as one corpus holding their union would be.

The per-corpus route (`POST /v1/vectors/corpora/{name}/search`) and the multi-corpus route
(`POST /v1/vectors/search`) both come here: a single corpus is a federation of one. The
request-wide options are checked once (`check`), every corpus runs its part concurrently
on its own pooled connection, a corpus's failure is kept with that corpus, and the merge
and the fusion (internal.vectord.search.union_merge, internal.vectord.search.fusion) run once over all
of them. Per mode:

- vector: each corpus's top k by distance, merged by distance;
- keyword: each corpus's newest k matches, merged newest first;
- lexical: the union's BM25 statistics (one statement, vectord_bm25_query) when several
  corpora are searched, each corpus's top k with them, merged by score;
- hybrid: each corpus's branch candidates (vector top n, BM25 top n with the union's
  statistics, the symbolic share), branch lists merged across corpora to the union's top
  n, fused once, then the top k items read back from their corpora.

Where each step lives: the checked request (`check` -> Options, which nothing after it
reads the request for) in search/validation.py; a mode is declared in lakehouse.wire.modes
and runs as one function its module registers (search/registry.py: `SEARCHES`, one
signature, `Search`): search/modes/vector.py, search/modes/keyword.py,
search/modes/lexical.py (its two BM25 engines behind one signature: SQL there, in-memory
in search/lexical_memory.py), search/modes/hybrid.py (its candidates in
search/candidates.py); what they share (a corpus's outcome, what the caller adds to the
union, the concurrent loop, the top k plus every included item) in search/outcome.py,
the shared vector scans in search/vector_scan.py. The statements of the reads besides the branches' own (statistics,
`include` rows, hits read back, feedback's documents) in reads.py, the branches'
statements composed in lexical/sql_index.py and search/fusion_sql.py; the merge (search/union_merge.py) and the fusion
(search/fusion.py) I/O-free; feedback's second pass in search/feedback.py (its math in search/prf.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from internal.api.vectord import Corpus, Hit
from internal.vectord.search import modes as _modes  # noqa: F401  (registers every mode's search)
from internal.vectord.search import query_vectors, reads, selection
from internal.vectord.search.options import Options
from internal.vectord.search.outcome import Federation, Outcome, each, resolved
from internal.vectord.search.registry import SEARCHES, Search
from internal.vectord.search.validation import check
from internal.vectord.storage.store import Store
from lakehouse.wire.modes import MODES

__all__ = ["SEARCHES", "Federation", "Outcome", "Result", "Search", "check", "federation",
           "search"]

assert set(SEARCHES) == set(MODES), "every mode declared has its search, and no other"


@dataclass
class Result:
    hits: list[Hit]
    outcomes: list[Outcome]
    include_missing: int = 0


def federation(corpus_weights: dict[str, float] | None,
               include: Sequence[tuple[str, str, float]] = (), select: bool = False
               ) -> Federation:
    """What the caller adds to the union: include as (corpus, id, factor), each id once;
    select: resource selection weighs the corpora `corpus_weights` does not name."""
    inc: dict[str, list[str]] = {}
    factors: dict[tuple[str, str], float] = {}
    for corpus, item_id, f in include:
        if item_id not in inc.setdefault(corpus, []):
            inc[corpus].append(item_id)
        if f != 1.0:
            factors[(corpus, item_id)] = f
    return Federation(dict(corpus_weights or {}), inc, factors, select)


def selected(store: Store, p: Options, outcomes: Sequence[Outcome], fed: Federation
             ) -> Federation:
    """The federation with resource selection's weights (search/selection.py) for the
    resolved corpora no explicit weight names; each outcome keeps its choice. Not for a
    mode merged newest first (it takes no weight), nor over fewer than two corpora."""
    live = [o for o in outcomes if o.error is None and o.corpus is not None]
    if not fed.select or p.mode.merge == "newest" or len(live) < 2 or not p.query_text.strip():
        return fed
    members = [_member(store, p, o.name, o.corpus) for o in live if o.corpus is not None]
    choices = selection.select(p.query_text, members)
    if choices is None:
        return fed
    weights = dict(fed.weights)
    for o, choice in zip(live, choices, strict=True):
        if o.name in fed.weights:  # the caller's weight wins
            choice.weight = fed.weights[o.name]
        elif choice.weight != 1.0:
            weights[o.name] = choice.weight
        o.selection = choice
    return replace(fed, weights=weights)


def _member(store: Store, p: Options, name: str, corpus: Corpus) -> selection.Member:
    """A searched corpus as the selection reads it: its profile, and the question's
    vector of its embedding space (unit), when it has one."""
    profile = store.profiles.get(corpus.id)
    if (profile is not None and profile.about_model is not None
            and corpus.model not in (None, profile.about_model)):
        profile = replace(profile, about_vector=None)  # its name embedded by a former model
    choice = query_vectors.choose(corpus, p.query_vector, p.query_vectors)
    if choice.vector is None:
        return selection.Member(name, profile)
    vec = np.asarray(choice.vector, dtype=np.float32)
    norm = float(np.linalg.norm(vec))
    return selection.Member(name, profile, vec / norm if norm > 0 else None, choice.space)


async def search(store: Store, names: Sequence[str], p: Options,
                 fed: Federation | None = None) -> Result:
    """The top k over the named corpora, ranked as their union; one outcome per corpus.

    fed.include: ids scored as candidates whatever retrieval finds and returned even below
    the top k (`included`), for the playbook's recall (modes merged newest first: ignored).
    In hybrid mode a factor is applied to the item's branch scores before the fusion
    (distance x factor, BM25 / factor): the playbook boost, inside the fusion.
    """
    fed = fed or Federation()
    outcomes = [Outcome(name, i) for i, name in enumerate(names)]
    await each(store, outcomes, resolved)
    fed = selected(store, p, outcomes, fed)
    run = SEARCHES[p.mode.name]
    try:
        found = await run(store, p, outcomes, fed)
    except reads.Stale:  # a write landed while scoring from the cache: read it this time
        found = await run(store, replace(p, trust_cache=False), outcomes, fed)
    by_name = {o.name: o for o in outcomes}
    for h in found:
        by_name[h.corpus].hits += 1
    if p.mode.merge == "newest":
        return Result(found, outcomes)
    wanted = sum(len(ids) for ids in fed.include.values())
    got = sum(1 for h in found if h.id in fed.include.get(h.corpus, ()))
    return Result(found, outcomes, max(0, wanted - got))
