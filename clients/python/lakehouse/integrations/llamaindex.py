"""LlamaIndex retriever over Lakehouse search (extra `llamaindex` of lakehouse-client:
`pip install './clients/python[llamaindex]'` from a Lakehouse checkout)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lakehouse.integrations import missing_framework

try:
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as exc:
    raise missing_framework(__name__, "llama-index-core", "llamaindex") from exc

from lakehouse.client import Client
from lakehouse.integrations._hits import (
    hit_key,
    hit_metadata,
    relevance,
    search_async,
    search_options,
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
