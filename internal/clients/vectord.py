"""Client for vectord's HTTP API (used by matrixd, syncd and the evaluation harness)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import aiohttp

from internal.api.ranker import NewRanker, RankerSaved, StoredRanker, StoredRankers
from internal.api.responses import (
    Corpus,
    CorpusDeleted,
    CorpusList,
    IdRow,
    IdsPage,
    IndexBuilt,
    ItemsDeleted,
    StorageStatus,
    StoredItem,
    Upserted,
)
from internal.api.vectord import (
    CreateCorpus,
    DeleteItems,
    Hit,
    Item,
    Metric,
    MultiSearchRequest,
    MultiSearchResult,
    SearchRequest,
    SearchResponse,
    SpacesResponse,
    UpsertRequest,
)
from internal.clients.base import ServiceClient
from internal.common.errors import Conflict, NotFound
from internal.common.upstream import Upstream
from lakehouse.wire.documents import (
    AddDocuments,
    DeleteDocuments,
    DocumentRow,
    DocumentsPage,
    StoredDocument,
    Task,
)

H = TypeVar("H", bound=Hit)
P = TypeVar("P", DocumentsPage, IdsPage)


class VectordClient(ServiceClient):
    """vectord at one address or several replicas (failover: ServiceClient)."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str | Sequence[str] | Upstream,
                 timeout: float = 60.0, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(session, base_url, "vectord", timeout, headers=headers)

    @staticmethod
    def _c(name: str) -> str:
        return f"/v1/vectors/corpora/{quote(name, safe='')}"

    async def list_corpora(self) -> list[Corpus]:
        """The corpora the caller may see, with their counts."""
        return (await self.call_as(CorpusList, "GET", "/v1/vectors/corpora")).corpora

    async def get_corpus(self, name: str) -> Corpus:
        return await self.call_as(Corpus, "GET", self._c(name))

    async def create_corpus(self, name: str, dim: int, metric: Metric = "cosine",
                            language: str | None = None, model: str | None = None,
                            defer_index: bool = False) -> Corpus:
        body = CreateCorpus(name=name, dim=dim, metric=metric, language=language or None,
                            model=model or None, defer_index=defer_index)
        return await self.call_as(Corpus, "POST", "/v1/vectors/corpora", body)

    async def ensure_corpus(self, name: str, dim: int, metric: Metric = "cosine",
                            language: str | None = None, model: str | None = None,
                            defer_index: bool = False) -> tuple[Corpus, bool]:
        """The corpus `name`, created with these settings when it does not exist yet;
        returns (corpus, created). Two first writers racing: the loser's 409 means the
        winner created it, which is all either needs. The one place ingest, sync, eval and
        the playbook make sure of a corpus; what an existing corpus's model must be is
        their own policy."""
        try:
            return await self.get_corpus(name), False
        except NotFound:
            pass
        try:
            return await self.create_corpus(name, dim, metric, language, model, defer_index), True
        except Conflict:
            pass
        return await self.get_corpus(name), False

    async def build_index(self, name: str, timeout: float = 3600.0) -> IndexBuilt:
        """Build the HNSW index of a corpus created with defer_index (idempotent)."""
        return await self.call_as(IndexBuilt, "POST", f"{self._c(name)}/index", {},
                                  timeout=timeout, idempotent=True)

    async def delete_corpus(self, name: str) -> CorpusDeleted:
        return await self.call_as(CorpusDeleted, "DELETE", self._c(name))

    async def upsert(self, name: str, items: Sequence[Item], model: str | None = None) -> int:
        body = UpsertRequest(items=list(items), model=model or None)
        # Idempotent: the same batch again stores the same rows.
        out = await self.call_as(Upserted, "POST", f"{self._c(name)}/items", body,
                                 idempotent=True)
        return out.upserted

    async def get_item(self, name: str, item_id: str, vector: bool = False) -> StoredItem:
        """One item; its vector too when asked."""
        query = "?include=vector" if vector else ""
        return await self.call_as(StoredItem, "GET",
                                  f"{self._c(name)}/items/{quote(item_id, safe='')}{query}")

    # ---- documents: text in, chunked and embedded by vectord's task runner ---------------

    @staticmethod
    def _d(name: str) -> str:
        return f"/v1/corpora/{quote(name, safe='')}/documents"

    async def add_documents(self, name: str, req: AddDocuments) -> Task:
        """The task writing them (202: persisted, run in order after the corpus's others)."""
        return await self.call_as(Task, "POST", self._d(name), req, idempotent=True)

    async def delete_documents(self, name: str, ids: list[str]) -> Task:
        return await self.call_as(Task, "POST", f"{self._d(name)}/delete",
                                  DeleteDocuments(ids=ids), idempotent=True)

    async def get_document(self, name: str, doc_id: str) -> StoredDocument:
        return await self.call_as(StoredDocument, "GET",
                                  f"{self._d(name)}/{quote(doc_id, safe='')}")

    async def task(self, task_id: int) -> Task:
        return await self.call_as(Task, "GET", f"/v1/tasks/{int(task_id)}")

    async def iter_documents(self, name: str, page: int = 5000) -> AsyncIterator[DocumentRow]:
        """Every document written as text (id, content hash, chunks), in id order."""
        async for out in self._pages(DocumentsPage, self._d(name), "", page):
            for row in out.documents:
                yield row

    async def delete_items(self, name: str, ids: list[str]) -> int:
        out = await self.call_as(ItemsDeleted, "POST", f"{self._c(name)}/items/delete",
                                 DeleteItems(ids=ids), idempotent=True)
        return out.deleted

    async def iter_ids(self, name: str, prefix: str = "", page: int = 5000
                       ) -> AsyncIterator[IdRow]:
        """Every stored (id, content_hash, updated_at), in id order, page by page."""
        async for out in self._pages(IdsPage, f"{self._c(name)}/ids", prefix, page):
            for row in out.items:
                yield row

    async def _pages(self, cls: type[P], path: str, prefix: str, page: int
                     ) -> AsyncIterator[P]:
        """Each page of a listing in id order (`limit`, `prefix`, `after`) to the last."""
        after: str | None = None
        while True:
            params: dict[str, str | int] = {"limit": page}
            if prefix:
                params["prefix"] = prefix
            if after is not None:
                params["after"] = after
            out = await self.call_as(cls, "GET", f"{path}?{urlencode(params)}")
            yield out
            after = out.next_after
            if after is None:
                return

    async def search(self, name: str, req: SearchRequest) -> SearchResponse:
        """One corpus's search; its hits as `Hit` structs (an answer that is not one: 502)."""
        return await self.call_as(SearchResponse, "POST", f"{self._c(name)}/search", req,
                                  idempotent=True)

    async def search_many(self, req: MultiSearchRequest, hits: type[H]) -> MultiSearchResult[H]:
        """One search over several corpora, ranked as their union (POST /v1/vectors/search).

        req.corpora None: every corpus (but req.exclude_corpora). The merged hits come as
        `hits` structs, `Hit` or a struct extending it (matrixd's `RankedHit`: decoded
        into it, annotated in place), each with its corpus; `results` has each corpus's
        count and time,
        or its error and status as the per-corpus route would have answered. A
        request-wide fault (bad k, filter, ...) raises vectord's 400. With `include`,
        `include_missing` counts the included items that do not exist.

        The request is the struct vectord decodes: what the caller built it from was
        checked by the caller (matrixd's own check), so nothing is checked again here.
        """
        answer: Any = MultiSearchResult[hits]  # type: ignore[valid-type]
        out: MultiSearchResult[H] = await self.call_as(answer, "POST", "/v1/vectors/search", req,
                                                       idempotent=True)
        return out

    async def spaces(self) -> SpacesResponse:
        """Every corpus by embedding space (model label, dimension), no counts."""
        return await self.call_as(SpacesResponse, "GET", "/v1/vectors/spaces")

    async def storage(self) -> StorageStatus:
        """What the corpora take (rows, table and index bytes), the memory held, the warm-up."""
        return await self.call_as(StorageStatus, "GET", "/v1/vectors/storage")

    # ---- the learned ranker's models (the stack's own routes: call as the service) ----------

    async def save_ranker(self, new: NewRanker) -> RankerSaved:
        """Store a trained model as its (playbook, corpora)'s newest version."""
        return await self.call_as(RankerSaved, "POST", "/internal/rankers", new)

    async def list_rankers(self, playbook_corpus: str | None = None,
                           limit: int = 100) -> list[StoredRanker]:
        """The models, newest first, without their trees."""
        params: dict[str, Any] = {"limit": limit}
        if playbook_corpus:
            params["playbook_corpus"] = playbook_corpus
        out = await self.call_as(StoredRankers, "GET", f"/internal/rankers?{urlencode(params)}")
        return out.rankers

    async def current_rankers(self) -> list[StoredRanker]:
        """The newest model of every (playbook, corpora), with its trees."""
        return (await self.call_as(StoredRankers, "GET", "/internal/rankers/current")).rankers
