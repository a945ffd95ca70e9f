"""Typed-enough client for vectord's HTTP API (used by matrixd, syncd and the CLI)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp

from internal.common.client import ServiceClient


class VectordClient(ServiceClient):
    def __init__(self, session: aiohttp.ClientSession, base_url: str, timeout: float = 60.0) -> None:
        super().__init__(session, base_url, "vectord", timeout)

    @staticmethod
    def _c(name: str) -> str:
        return f"/v1/vectors/corpora/{quote(name, safe='')}"

    async def list_corpora(self) -> list[dict[str, Any]]:
        out = await self.call("GET", "/v1/vectors/corpora")
        return list(out["corpora"])

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

    async def build_index(self, name: str, timeout: float = 3600.0) -> dict[str, Any]:
        """Build the HNSW index of a corpus created with defer_index (idempotent)."""
        out: dict[str, Any] = await self.call("POST", f"{self._c(name)}/index", {}, timeout=timeout)
        return out

    async def delete_corpus(self, name: str) -> None:
        await self.call("DELETE", self._c(name))

    async def upsert(self, name: str, items: list[dict[str, Any]], model: str | None = None) -> int:
        body: dict[str, Any] = {"items": items}
        if model:
            body["model"] = model
        out = await self.call("POST", f"{self._c(name)}/items", body)
        return int(out["upserted"])

    async def get_item(self, name: str, item_id: str) -> dict[str, Any]:
        out: dict[str, Any] = await self.call("GET", f"{self._c(name)}/items/{quote(item_id, safe='')}")
        return out

    async def delete_items(self, name: str, ids: list[str]) -> int:
        out = await self.call("POST", f"{self._c(name)}/items/delete", {"ids": ids})
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

    async def search(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = await self.call("POST", f"{self._c(name)}/search", body)
        return out

    async def search_many(self, names: list[str], body: dict[str, Any]) -> list[dict[str, Any]]:
        """One search over several corpora in one call (POST /v1/vectors/search).

        Returns vectord's per-corpus results in the order of names: each is
        {"corpus", "hits", "took_ms"} or {"corpus", "error": {"code", "message", "field"?},
        "status"}. A request-wide fault (bad k, filter, ...) raises as search() does.
        """
        return list((await self.search_many_answer(names, body))["results"])

    async def search_many_answer(self, names: list[str], body: dict[str, Any]) -> dict[str, Any]:
        """search_many's whole answer: `results`, `took_ms` and, for a search with
        `include`, `include_missing` (the included items that no longer exist)."""
        out: dict[str, Any] = await self.call("POST", "/v1/vectors/search", {**body, "corpora": names})
        return out
