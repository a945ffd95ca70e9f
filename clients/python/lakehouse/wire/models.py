"""Which embedding model a new corpus is made for (I/O-free).

embedd lists each model with the languages its vectors are trained for
(`ModelInfo.languages`). A corpus whose languages are known at its creation and are not
all declared by the default model is made for a listed model that declares them: a German
or a mixed wiki gets the multilingual model, an English one keeps the default (MiniLM: as good
on English pages and BEIR, at half the CPU a question; docs/decisions/0201). An existing
corpus never changes model by this: its owner moves it with `reembed`.
"""

from __future__ import annotations

from collections.abc import Sequence

from lakehouse.wire.responses import ModelsResponse


def model_for(listing: ModelsResponse, languages: str | Sequence[str] | None) -> str:
    """The model id for a new corpus in `languages` (ISO 639-1 codes: one, or those of a
    wiki holding several; None or empty: not known): the default when it declares them
    all (or they are not known), else the first listed model that declares them all,
    else the one that declares most of them; the default when none declares any."""
    wanted = {languages} if isinstance(languages, str) else set(languages or ())
    wanted = {code.strip().lower() for code in wanted if code.strip()}
    by_id = {m.id: m for m in listing.models}
    default = by_id.get(listing.default)
    if not wanted or default is None or default.languages is None:
        return listing.default
    best, covered = listing.default, len(wanted & set(default.languages))
    for m in listing.models:
        if m.superseded_by is None and m.languages is not None:
            n = len(wanted & set(m.languages))
            if n > covered:
                best, covered = m.id, n
    return best
