"""AsyncClient's calls on one corpus beyond its items: move it to another model or
precision in the background, and say what it is about (its description and profile)."""

from __future__ import annotations

from urllib.parse import quote

from lakehouse._transport import Transport
from lakehouse.wire.responses import ConvertStarted, Corpus, ReembedStarted
from lakehouse.wire.selection import CorpusProfile
from lakehouse.wire.shapes import Precision


def _c(name: str) -> str:
    return f"/v1/vectors/corpora/{quote(name, safe='')}"


class CorpusCalls:
    """Re-embedding, conversion, description and profile of a corpus (mixed into
    AsyncClient)."""

    _http: Transport

    async def reembed(self, name: str, model: str) -> ReembedStarted:
        """Embed the corpus's stored texts again with another model, in the background;
        searches use the old vectors until the new ones are complete, then switch.
        Progress: get_corpus(name).reembed."""
        return await self._http.call("POST", f"{_c(name)}/reembed", ReembedStarted,
                                     body={"model": model})

    async def convert(self, name: str, precision: Precision) -> ConvertStarted:
        """Store the corpus's vectors in another precision, in the background (searches
        answer throughout; one switch at the end). Progress: get_corpus(name).conversion."""
        return await self._http.call("POST", f"{_c(name)}/convert", ConvertStarted,
                                     body={"precision": precision})

    async def describe_corpus(self, name: str, description: str | None) -> Corpus:
        """Say what a corpus is about (None or "": no description); its profile follows,
        and a search over several corpora weighs each by it."""
        return await self._http.call("PATCH", _c(name), Corpus, body={"description": description})

    async def corpus_profile(self, name: str) -> CorpusProfile:
        """What the corpus is about as searches read it: its description and the words
        that set it apart from the other corpora you may see."""
        return await self._http.call("GET", f"{_c(name)}/profile", CorpusProfile)
