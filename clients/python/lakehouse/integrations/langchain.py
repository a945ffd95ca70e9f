"""LangChain retriever over Lakehouse search (extra `langchain` of lakehouse-client:
`pip install './clients/python[langchain]'` from a Lakehouse checkout)."""

from __future__ import annotations

from typing import Any

from lakehouse.integrations import missing_framework

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:
    raise missing_framework(__name__, "langchain-core", "langchain") from exc
from pydantic import ConfigDict, Field, PrivateAttr

from lakehouse.client import Client
from lakehouse.integrations._hits import hit_key, hit_metadata, search_async, search_options
from lakehouse.wire.responses import MatrixHit
from lakehouse.wire.search import ModeName


class LakehouseRetriever(BaseRetriever):
    """Documents for a question, best first, from Lakehouse's search across corpora.

    `page_content` is the item's text; `metadata` holds corpus, id, rank, score,
    distance, the per-branch `scores` and `ranks`, title, tags and the item's own
    `metadata`; `id` is `corpus/id`. `client` defaults to `lakehouse.Client()`;
    `search_kwargs` takes any other option of `Client.search` (fusion, prf, prefer, ...).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: Client | None = None
    corpora: list[str] | None = None
    k: int = 4
    mode: ModeName | None = None
    filter: dict[str, Any] | None = None
    use_playbook: bool = False
    group_by: str | None = None  # "parent": one document per wiki page
    search_kwargs: dict[str, Any] = Field(default_factory=dict)
    _default_client: Client | None = PrivateAttr(default=None)

    def _client(self) -> Client:
        if self.client is not None:
            return self.client
        if self._default_client is None:
            self._default_client = Client()
        return self._default_client

    def _options(self) -> dict[str, Any]:
        return search_options(self.corpora, self.k, self.mode, self.filter, self.use_playbook,
                              self.search_kwargs, self.group_by)

    def _get_relevant_documents(self, query: str, *,
                                run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        found = self._client().search(query, **self._options())
        return [_document(hit) for hit in found.hits]

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun
                                       ) -> list[Document]:
        found = await search_async(self._client(), query, self._options())
        return [_document(hit) for hit in found.hits]


def _document(hit: MatrixHit) -> Document:
    return Document(page_content=hit.text, metadata=hit_metadata(hit), id=hit_key(hit))
