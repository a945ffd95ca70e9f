"""Client for vectord's HTTP API (used by matrixd, syncd and the evaluation harness)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import aiohttp

from internal.api.ranker import NewRanker, RankerSaved, StoredRanker, StoredRankers
from internal.api.responses import Corpus, CorpusList
from internal.api.vectord import (
    Hit,
    Item,
    MultiSearchRequest,
    MultiSearchResult,
    SearchRequest,
    SearchResponse,
    SpacesResponse,
    UpsertRequest,
)
from internal.clients.base import ServiceClient
from internal.common.errors import ServiceError
from internal.common.upstream import Upstream

H = TypeVar("H", bound=Hit)


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

    async def get_corpus(self, name: str) -> dict[str, Any]:
        out: dict[str, Any] = await self.call("GET", self._c(name))
        return out

    async def create_corpus(self, name: str, dim: int, metric: str = "cosine",
                            language: str | None = None, model: str | None = None,
                            defer_index: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name, "dim": dim, "metric": metric}
        if language:
            body["language"] = language
        if model:
            body["model"] = model
        if defer_index:
            body["defer_index"] = True
        out: dict[str, Any] = await self.call("POST", "/v1/vectors/corpora", body)
        return out

    async def ensure_corpus(self, name: str, dim: int, metric: str = "cosine",
                            language: str | None = None, model: str | None = None,
                            defer_index: bool = False) -> tuple[dict[str, Any], bool]:
        """The corpus `name`, created with these settings when it does not exist yet;
        returns (corpus, created). Two first writers racing: the loser's 409 means the
        winner created it, which is all either needs. The one place ingest, sync, eval and
        the playbook make sure of a corpus; what an existing corpus's model must be is
        their own policy."""
        try:
            return await self.get_corpus(name), False
        except ServiceError as exc:
            if exc.status != 404:
                raise
        try:
            return await self.create_corpus(name, dim, metric, language, model, defer_index), True
        except ServiceError as exc:
            if exc.status != 409:
                raise
        return await self.get_corpus(name), False

    async def build_index(self, name: str, timeout: float = 3600.0) -> dict[str, Any]:
        """Build the HNSW index of a corpus created with defer_index (idempotent)."""
        out: dict[str, Any] = await self.call("POST", f"{self._c(name)}/index", {}, timeout=timeout,
                                               idempotent=True)
        return out

    async def delete_corpus(self, name: str) -> None:
        await self.call("DELETE", self._c(name))

    async def upsert(self, name: str, items: Sequence[Item], model: str | None = None) -> int:
        body = UpsertRequest(items=list(items), model=model or None)
        # Idempotent: the same batch again stores the same rows.
        out = await self.call("POST", f"{self._c(name)}/items", body, idempotent=True)
        return int(out["upserted"])

    async def get_item(self, name: str, item_id: str) -> dict[str, Any]:
        out: dict[str, Any] = await self.call("GET", f"{self._c(name)}/items/{quote(item_id, safe='')}")
        return out

    async def delete_items(self, name: str, ids: list[str]) -> int:
        out = await self.call("POST", f"{self._c(name)}/items/delete", {"ids": ids},
                              idempotent=True)
        return int(out["deleted"])

    async def iter_ids(self, name: str, prefix: str = "", page: int = 5000
                       ) -> AsyncIterator[dict[str, Any]]:
        """Every stored (id, content_hash, updated_at), in id order, page by page."""
        after: str | None = None
        while True:
            params: dict[str, Any] = {"limit": page}
            if prefix:
                params["prefix"] = prefix
            if after is not None:
                params["after"] = after
            out = await self.call("GET", f"{self._c(name)}/ids?{urlencode(params)}")
            for row in out["items"]:
                yield row
            after = out.get("next_after")
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
