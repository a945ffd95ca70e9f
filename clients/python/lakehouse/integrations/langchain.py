"""LangChain over Lakehouse (extra `langchain` of lakehouse-client:
`pip install './clients/python[langchain]'` from a Lakehouse checkout): a retriever over
its search, and its answers with their sources as a runnable."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from lakehouse.integrations import missing_framework

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableConfig, RunnableSerializable
except ImportError as exc:
    raise missing_framework(__name__, "langchain-core", "langchain") from exc
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from lakehouse.client import Client
from lakehouse.integrations._hits import (
    answer_async,
    answer_events,
    citation_metadata,
    cited_hits,
    hit_key,
    hit_metadata,
    search_async,
    search_options,
)
from lakehouse.wire.answer import AnswerEvent, AnswerResponse, DeltaEvent, DoneEvent, ResetEvent
from lakehouse.wire.responses import MatrixHit
from lakehouse.wire.search import ModeName


class _Lakehouse(BaseModel):
    """What the retriever and the answer share: the client and the search's options."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: Client | None = None
    corpora: list[str] | None = None
    mode: ModeName | None = None
    filter: dict[str, Any] | None = None
    use_playbook: bool = False
    _default_client: Client | None = PrivateAttr(default=None)

    def _client(self) -> Client:
        if self.client is not None:
            return self.client
        if self._default_client is None:
            self._default_client = Client()
        return self._default_client


class LakehouseRetriever(_Lakehouse, BaseRetriever):
    """Documents for a question, best first, from Lakehouse's search across corpora.

    `page_content` is the item's text; `metadata` holds corpus, id, rank, score,
    distance, the per-branch `scores` and `ranks`, title, tags and the item's own
    `metadata`; `id` is `corpus/id`. `client` defaults to `lakehouse.Client()`;
    `search_kwargs` takes any other option of `Client.search` (fusion, prf, prefer, ...).
    """

    k: int = 4
    group_by: str | None = None  # "parent": one document per wiki page
    search_kwargs: dict[str, Any] = Field(default_factory=dict)

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


class LakehouseAnswer(_Lakehouse, RunnableSerializable[str, dict[str, Any]]):
    """The question answered by Lakehouse, with its sources, as a LangChain runnable.

    `invoke(question)` gives the shape of LangChain's retrieval chains: `{"input", "answer",
    "context"}` (`context`: a Document per cited hit, its metadata the hit's plus the
    citation's `marker`, `passage`, `start`, `end`, `document_id`), and `answered`,
    `reason`, `citations`. `stream` gives the same keys in pieces: `context` first, then
    `answer` a piece at a time (as the stack writes it). `answer_kwargs` takes any other
    option of `Client.answer` (generator, max_words, prefer, ...).
    """

    k: int = 10
    answer_kwargs: dict[str, Any] = Field(default_factory=dict)

    def _options(self) -> dict[str, Any]:
        return {"corpora": self.corpora, "k": self.k, "mode": self.mode,
                "filter": self.filter, "use_playbook": self.use_playbook,
                **self.answer_kwargs}

    def invoke(self, input: str, config: RunnableConfig | None = None,
               **kwargs: Any) -> dict[str, Any]:
        return _output(input, self._client().answer(input, **self._options()))

    async def ainvoke(self, input: str, config: RunnableConfig | None = None,
                      **kwargs: Any) -> dict[str, Any]:
        return _output(input, await answer_async(self._client(), input, self._options()))

    def stream(self, input: str, config: RunnableConfig | None = None,
               **kwargs: Any | None) -> Iterator[dict[str, Any]]:
        for event in self._client().answer_stream(input, **self._options()):
            yield from _chunks(event)

    async def astream(self, input: str, config: RunnableConfig | None = None,
                      **kwargs: Any | None) -> AsyncIterator[dict[str, Any]]:
        async for event in answer_events(self._client(), input, self._options()):
            for chunk in _chunks(event):
                yield chunk


def _context(answer: AnswerResponse) -> list[Document]:
    return [Document(page_content=hit.text, metadata=citation_metadata(c, hit), id=hit_key(hit))
            for c, hit in cited_hits(answer.citations, answer.hits)]


def _output(question: str, answer: AnswerResponse) -> dict[str, Any]:
    return {"input": question, "answer": answer.text, "context": _context(answer),
            "answered": answer.answered, "reason": answer.reason,
            "citations": answer.citations}


def _chunks(event: AnswerEvent) -> list[dict[str, Any]]:
    if isinstance(event, DeltaEvent):
        return [{"answer": event.text}]
    if isinstance(event, ResetEvent):
        return [{"reset": event.reason}]
    if isinstance(event, DoneEvent):
        done = event.answer
        return [{"context": _context(done), "answered": done.answered, "reason": done.reason,
                 "citations": done.citations}]
    return []
