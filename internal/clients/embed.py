"""The one way matrixd, the sync and the CLI turn text into vectors: embedd's API."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import aiohttp

from internal.api.embedd import (
    INTERACTIVE_PATH,
    NEAREST_PATH,
    EmbedRequest,
    NearestRequest,
    NearestResponse,
)
from internal.api.responses import EmbedResponse, ModelsResponse
from internal.clients.base import ServiceClient
from internal.common.upstream import Upstream, addresses_of

# What `embed` answers: embedd's own answer, the name its callers know it by.
Embedding = EmbedResponse


class EmbedClient(ServiceClient):
    def __init__(self, session: aiohttp.ClientSession, base_url: str | Sequence[str] | Upstream,
                 timeout: float = 120.0) -> None:
        super().__init__(session, base_url, "embedd", timeout)

    async def embed(self, texts: list[str], input_type: Literal["query", "document"] = "document",
                    model: str | None = None, *, interactive: bool = False) -> Embedding:
        """Vectors for texts, in order, L2-normalised. interactive: a search path's
        question, served before every document (embedd's interactive lane)."""
        body = EmbedRequest(texts=texts, model=model or None, input_type=input_type)
        path = INTERACTIVE_PATH if interactive else "/v1/embed"
        return await self.call_as(EmbedResponse, "POST", path, body, idempotent=True)

    async def nearest(self, query: Sequence[float], groups: list[list[str]],
                      model: str | None = None) -> list[int]:
        """Per group of passages (documents), the index of the one most similar to the
        query vector (of `model`): embedded on the interactive lane, vectors kept in
        embedd."""
        body = NearestRequest(query=list(query), groups=groups, model=model or None)
        out = await self.call_as(NearestResponse, "POST", NEAREST_PATH, body, idempotent=True)
        return out.nearest

    async def models(self) -> ModelsResponse:
        return await self.call_as(ModelsResponse, "GET", "/v1/embed/models")

    async def default_model(self) -> tuple[str, int]:
        """The model embedd uses when none is named, and its dimension (probed when the
        listing does not know it yet, as for a remote backend before its first answer)."""
        info = await self.models()
        for m in info.models:
            if m.id == info.default and m.dim:
                return m.id, m.dim
        probe = await self.embed(["dimension probe"], input_type="query")
        return probe.model, probe.dim

    async def superseded(self) -> dict[str, str]:
        """Each model embedd serves whose vectors another replaces -> that one."""
        listing = await self.call_as(ModelsResponse, "GET", "/v1/embed/models")
        return {m.id: m.superseded_by for m in listing.models if m.superseded_by}


def make_client(session: aiohttp.ClientSession, url: str | Sequence[str] | None,
                timeout: float = 120.0) -> EmbedClient | None:
    """An unconfigured URL (or an empty list) yields no client: callers gate on one check."""
    urls = addresses_of(url or ())
    return EmbedClient(session, urls, timeout) if urls else None
