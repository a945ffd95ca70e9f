"""LlamaIndex over Lakehouse (extra `llamaindex` of lakehouse-client:
`pip install './clients/python[llamaindex]'` from a Lakehouse checkout): a retriever over
its search, and a query engine over its answers with their sources."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator, Mapping
from typing import Any

from lakehouse.integrations import missing_framework

try:
    from llama_index.core.base.base_query_engine import BaseQueryEngine
    from llama_index.core.base.response.schema import (
        RESPONSE_TYPE,
        AsyncStreamingResponse,
        Response,
        StreamingResponse,
    )
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.prompts.mixin import PromptMixinType
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as exc:
    raise missing_framework(__name__, "llama-index-core", "llamaindex") from exc

from lakehouse.client import Client
from lakehouse.integrations._hits import (
    answer_async,
    answer_events,
    citation_metadata,
    cited_hits,
    hit_key,
    hit_metadata,
    relevance,
    search_async,
    search_options,
)
from lakehouse.wire.answer import (
    AnswerEvent,
    AnswerResponse,
    Citation,
    DeltaEvent,
    SourcesEvent,
)
from lakehouse.wire.responses import MatrixHit
from lakehouse.wire.search import ModeName

# Shown to the LLM and the embedder with a node's text; the rest of the metadata is kept
# on the node for the caller (scores, ranks, ids).
_SHOWN = frozenset({"title", "corpus"})


class LakehouseRetriever(BaseRetriever):
    """Nodes for a question, best first, from Lakehouse's search across corpora.

    Each is a TextNode (id `corpus/id`, the item's text; metadata: corpus, id, rank,
    score, distance, the per-branch `scores` and `ranks`, title, tags, the item's own
    `metadata`) with the hit's score (relevance(): the ranking score, else the mode's
    score, else the vector similarity). `client` defaults to `lakehouse.Client()`;
    `search_kwargs` takes any other option of `Client.search`.
    """

    def __init__(self, client: Client | None = None, *, corpora: list[str] | None = None,
                 k: int = 4, mode: ModeName | None = None,
                 filter: Mapping[str, Any] | None = None, use_playbook: bool = False,
                 search_kwargs: Mapping[str, Any] | None = None, group_by: str | None = None,
                 callback_manager: CallbackManager | None = None, verbose: bool = False) -> None:
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.client = client if client is not None else Client()
        self.options = search_options(corpora, k, mode, filter, use_playbook,
                                      search_kwargs or {}, group_by)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        found = self.client.search(query_bundle.query_str, **self.options)
        return [_node(hit) for hit in found.hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        found = await search_async(self.client, query_bundle.query_str, self.options)
        return [_node(hit) for hit in found.hits]


def _node(hit: MatrixHit) -> NodeWithScore:
    metadata = hit_metadata(hit)
    hidden = [key for key in metadata if key not in _SHOWN]
    node = TextNode(id_=hit_key(hit), text=hit.text, metadata=metadata,
                    excluded_embed_metadata_keys=hidden, excluded_llm_metadata_keys=hidden)
    return NodeWithScore(node=node, score=relevance(hit))


class LakehouseQueryEngine(BaseQueryEngine):
    """The question answered by Lakehouse, with its sources, as a LlamaIndex query engine.

    `query(question)` gives a Response: `response` the answer's text (numbered markers),
    `source_nodes` a node per cited hit (its metadata the hit's plus the citation's
    `marker`, `passage`, `start`, `end`, `document_id`), `metadata` the answer's
    `answered`, `reason`, `generator` and `citations`. `streaming=True`: a
    StreamingResponse (AsyncStreamingResponse from `aquery`) whose text comes as the stack
    writes it. `answer_kwargs` takes any other option of `Client.answer`.
    """

    def __init__(self, client: Client | None = None, *, corpora: list[str] | None = None,
                 k: int = 10, mode: ModeName | None = None,
                 filter: Mapping[str, Any] | None = None, use_playbook: bool = False,
                 streaming: bool = False, answer_kwargs: Mapping[str, Any] | None = None,
                 callback_manager: CallbackManager | None = None) -> None:
        super().__init__(callback_manager=callback_manager)
        self.client = client if client is not None else Client()
        self.streaming = streaming
        self.options = {"corpora": corpora, "k": k, "mode": mode, "filter": filter,
                        "use_playbook": use_playbook, **(answer_kwargs or {})}

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    def _query(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        question = query_bundle.query_str
        if not self.streaming:
            return _response(self.client.answer(question, **self.options))
        events = self.client.answer_stream(question, **self.options)
        first = next(events)
        return StreamingResponse(response_gen=_texts(events), source_nodes=_sources(first),
                                 metadata=_head(first))

    async def _aquery(self, query_bundle: QueryBundle) -> RESPONSE_TYPE:
        question = query_bundle.query_str
        if not self.streaming:
            return _response(await answer_async(self.client, question, self.options))
        events = answer_events(self.client, question, self.options)
        first = await anext(events)
        return AsyncStreamingResponse(response_gen=_atexts(events), source_nodes=_sources(first),
                                      metadata=_head(first))


def _cited_nodes(citations: list[Citation], hits: list[MatrixHit]) -> list[NodeWithScore]:
    out = []
    for c, hit in cited_hits(citations, hits):
        node = _node(hit)
        node.node.metadata.update(citation_metadata(c, hit))
        out.append(node)
    return out


def _response(answer: AnswerResponse) -> Response:
    return Response(response=answer.text, source_nodes=_cited_nodes(answer.citations,
                                                                     answer.hits),
                    metadata={"answered": answer.answered, "reason": answer.reason,
                              "generator": answer.generator.kind,
                              "citations": answer.citations})


def _sources(first: AnswerEvent) -> list[NodeWithScore]:
    """The stream's first event's sources: every passage the answer is drawn from."""
    if not isinstance(first, SourcesEvent):
        return []
    return _cited_nodes(first.citations, first.hits)


def _head(first: AnswerEvent) -> dict[str, Any]:
    if not isinstance(first, SourcesEvent):
        return {}
    return {"answered": first.answered, "reason": first.reason,
            "generator": first.generator.kind, "citations": first.citations}


def _texts(events: Iterator[AnswerEvent]) -> Generator[str, None, None]:
    for event in events:
        if isinstance(event, DeltaEvent):
            yield event.text


async def _atexts(events: AsyncIterator[AnswerEvent]) -> AsyncGenerator[str, None]:
    async for event in events:
        if isinstance(event, DeltaEvent):
            yield event.text
