"""vectord and embedd through the gateway, with the shapes the daemons' own clients
have: the store and embedder of the sync runner (`lakehouse sync`) and of the ingest
pipeline (`lakehouse ingest`), over the public client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Literal

import msgspec

from internal.api import vectord
from internal.api.responses import Corpus, EmbedResponse, IdRow, ModelsResponse
from internal.api.vectord import Metric
from lakehouse import AsyncClient, Item
from lakehouse.wire.documents import AddDocuments, DocumentRow, Task


class GatewayStore:
    """The sync runner's and the ingest pipeline's store and embedder over the
    public client: the same calls syncd makes to vectord and embedd, through the gateway."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client

    async def models(self) -> ModelsResponse:
        return await self.client.models()

    async def default_model(self) -> tuple[str, int]:
        listing = await self.client.models()
        for m in listing.models:
            if m.id == listing.default and m.dim:
                return m.id, m.dim
        probe = await self.embed(["dimension probe"], input_type="query")
        return probe.model, probe.dim

    async def embed(self, texts: list[str], input_type: Literal["query", "document"] = "document",
                    model: str | None = None) -> EmbedResponse:
        return await self.client.embed(texts, model=model or None, input_type=input_type)

    async def ensure_corpus(self, name: str, dim: int, metric: Metric = "cosine",
                            language: str | None = None, model: str | None = None,
                            defer_index: bool = False) -> tuple[Corpus, bool]:
        return await self.client.ensure_corpus(name, dim, metric=metric, language=language,
                                               model=model, defer_index=defer_index)

    async def get_corpus(self, name: str) -> Corpus:
        return await self.client.get_corpus(name)

    async def iter_ids(self, name: str, prefix: str = "", page: int = 5000
                       ) -> AsyncIterator[IdRow]:
        async for row in self.client.iter_ids(name, prefix=prefix or None, page_size=page):
            yield row

    async def delete_items(self, name: str, ids: list[str]) -> int:
        return await self.client.delete_items(name, ids)

    async def upsert(self, name: str, items: Sequence[vectord.Item],
                     model: str | None = None) -> int:
        return await self.client.upsert(name, [Item(**msgspec.structs.asdict(it)) for it in items],
                                        model=model)

    def iter_documents(self, name: str, page: int = 5000) -> AsyncIterator[DocumentRow]:
        return self.client.iter_documents(name, page_size=page)

    async def add_documents(self, name: str, req: AddDocuments) -> Task:
        [task] = await self.client.add_documents(name, req.documents, chunking=req.chunking,
                                                 chunk_chars=req.chunk_chars)
        return task

    async def delete_documents(self, name: str, ids: list[str]) -> Task:
        return await self.client.delete_documents(name, ids)

    async def task(self, task_id: int) -> Task:
        return await self.client.task(task_id)
