"""Client for matrixd's HTTP API (used by syncd's normaliser and the evaluation harness)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

import aiohttp
import msgspec

from internal.api.matrixd import NormalizeRequest, ObservationIn, RecordRequest
from internal.api.ranker import RankerModel, RankerStatus, TrainRanker
from internal.api.responses import MatrixSearchResponse, NormalizeResponse, RecordResponse
from internal.clients.base import ServiceClient
from internal.common.upstream import Upstream


class MatrixdClient(ServiceClient):
    """matrixd at one address or several replicas (failover: ServiceClient)."""

    def __init__(self, session: aiohttp.ClientSession, base_url: str | Sequence[str] | Upstream,
                 timeout: float = 300.0, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(session, base_url, "matrixd", timeout, headers=headers)

    async def search(self, body: Mapping[str, Any]) -> MatrixSearchResponse:
        """POST /v1/matrix/search (body: internal.api.matrixd.MatrixSearchRequest's fields)."""
        return await self.call_as(MatrixSearchResponse, "POST", "/v1/matrix/search", dict(body),
                                  idempotent=True)

    async def record(self, request: RecordRequest) -> RecordResponse:
        """Record (question, answer, score) in a playbook; NotFound for an unknown answer."""
        # Idempotent: the same record again rewrites the same playbook entry.
        return await self.call_as(RecordResponse, "POST", "/v1/matrix/playbooks/record",
                                  request, idempotent=True)

    async def normalize(self, texts: Sequence[str]) -> NormalizeResponse:
        """Each text as /v1/matrix/normalize rewrites it (coreferences, dates, keywords)."""
        body = NormalizeRequest(observations=[ObservationIn(text=t) for t in texts])
        return await self.call_as(NormalizeResponse, "POST", "/v1/matrix/normalize", body,
                                  idempotent=True)

    async def train_ranker(self, request: TrainRanker, timeout: float | None = None
                           ) -> RankerModel:
        """POST /v1/matrix/ranker/train with `wait`: the stored model and its figures."""
        body = msgspec.structs.replace(request, wait=True)
        return await self.call_as(RankerModel, "POST", "/v1/matrix/ranker/train", body,
                                  timeout=timeout)

    async def rankers(self, playbook_corpus: str | None = None) -> RankerStatus:
        """GET /v1/matrix/ranker: the models, newest first, and what trains now."""
        query = f"?{urlencode({'playbook_corpus': playbook_corpus})}" if playbook_corpus else ""
        return await self.call_as(RankerStatus, "GET", f"/v1/matrix/ranker{query}")
