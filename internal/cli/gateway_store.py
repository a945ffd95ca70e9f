"""vectord and embedd through the gateway, with the shapes the daemons' own clients
have: the store and embedder of the sync runner (`lakehouse sync`) and of the ingest
pipeline (`lakehouse ingest`), over the public client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any, cast, get_args

import msgspec

from internal.api import vectord
from internal.api.vectord import Metric
from internal.clients.embed import Embedding
from internal.common.errors import InvalidArgument
from lakehouse import AsyncClient, Item


class GatewayStore:
    """The sync runner's and the ingest pipeline's store and embedder over the
    public client: the same calls syncd makes to vectord and embedd, through the gateway."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client

    async def models(self) -> dict[str, object]:
        out: dict[str, object] = msgspec.to_builtins(await self.client.models())
        return out

    async def default_model(self) -> tuple[str, int]:
        listing = await self.client.models()
        for m in listing.models:
            if m.id == listing.default and m.dim:
                return m.id, m.dim
        probe = await self.embed(["dimension probe"], input_type="query")
        return probe.model, probe.dim

    async def embed(self, texts: list[str], input_type: str = "document",
                    model: str | None = None) -> Embedding:
        out = await self.client.embed(texts, model=model or None,
                                      input_type="query" if input_type == "query" else "document")
        return Embedding(model=out.model, dim=out.dim, vectors=out.vectors,
                         truncated=out.truncated)

    async def ensure_corpus(self, name: str, dim: int, metric: str = "cosine",
                            language: str | None = None, model: str | None = None,
                            defer_index: bool = False) -> tuple[dict[str, Any], bool]:
        if metric not in get_args(Metric):
            raise InvalidArgument(f"metric: expected one of {get_args(Metric)}, got {metric!r}",
                                  field="metric")
        corpus, created = await self.client.ensure_corpus(
            name, dim, metric=cast(Metric, metric), language=language, model=model,
            defer_index=defer_index)
        out: dict[str, Any] = msgspec.to_builtins(corpus)
        return out, created

    async def get_corpus(self, name: str) -> dict[str, Any]:
        out: dict[str, Any] = msgspec.to_builtins(await self.client.get_corpus(name))
        return out

    async def iter_ids(self, name: str, prefix: str = "", page: int = 5000
                       ) -> AsyncIterator[dict[str, Any]]:
        async for row in self.client.iter_ids(name, prefix=prefix or None, page_size=page):
            yield {"id": row.id, "content_hash": row.content_hash}

    async def delete_items(self, name: str, ids: list[str]) -> int:
        return await self.client.delete_items(name, ids)

    async def upsert(self, name: str, items: Sequence[vectord.Item],
                     model: str | None = None) -> int:
        return await self.client.upsert(name, [Item(**msgspec.structs.asdict(it)) for it in items],
                                        model=model)
