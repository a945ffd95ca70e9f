"""The languages each embedding model reads, as embedd's model listing declares them
(`GET /v1/embed/models`, `languages`), kept in `Store.model_languages` for the search's
layer weights (search/weighing.py). Read at start and again every `EVERY_S` (a model
added to embedd later is learnt then); a model not listed, or listed with no languages,
is taken to read every language, so an embedd that cannot be reached changes nothing."""

from __future__ import annotations

import asyncio

import structlog

from internal.clients.embed import EmbedClient
from internal.vectord.storage.store import Store

log = structlog.get_logger()

EVERY_S = 60.0
RETRY_S = 5.0


def declared(listing: object) -> dict[str, tuple[str, ...]]:
    """Model id -> its declared languages (those that declare some)."""
    out: dict[str, tuple[str, ...]] = {}
    for m in getattr(listing, "models", []):
        langs = tuple(getattr(m, "languages", None) or ())
        if langs:
            out[m.id] = langs
    return out


async def follow(store: Store, embed: EmbedClient | None) -> None:
    """Keep store.model_languages as embedd declares them (until cancelled)."""
    if embed is None:
        return
    failing = False
    while True:
        try:
            store.model_languages = declared(await embed.models())
            failing, wait = False, EVERY_S
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # reported once a streak; the weights stay as last read
            if not failing:
                log.warning("model_languages_unread", error=str(exc))
            failing, wait = True, RETRY_S
        await asyncio.sleep(wait)
