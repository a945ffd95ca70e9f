"""Lakehouse's Python client: corpora, items, search, feedback, sync and query
understanding through the gateway's HTTP API, blocking (`Client`) or async (`AsyncClient`).

    import lakehouse

    client = lakehouse.Client()  # $LAKEHOUSE_URL and $LAKEHOUSE_TOKEN, as the CLI
    found = client.search("printer jams after new toner", k=3)

Results are the typed structs of `lakehouse.types`; failures raise the classes of
`lakehouse.errors`. The LangChain and LlamaIndex retrievers are in
`lakehouse.integrations` (extras `lakehouse[langchain]`, `lakehouse[llamaindex]`).
"""

from __future__ import annotations

from lakehouse import errors, types
from lakehouse.aio import AsyncClient
from lakehouse.client import Client
from lakehouse.errors import (
    Conflict,
    InvalidArgument,
    LakehouseError,
    NotFound,
    PayloadTooLarge,
    Unauthorized,
    Unavailable,
    UpstreamError,
    UpstreamTimeout,
)
from lakehouse.tenant import tenant_token
from lakehouse.types import DowngradeOption, Filter, Item, ObservationIn, Prf

__all__ = [
    "AsyncClient",
    "Client",
    "Conflict",
    "DowngradeOption",
    "Filter",
    "InvalidArgument",
    "Item",
    "LakehouseError",
    "NotFound",
    "ObservationIn",
    "PayloadTooLarge",
    "Prf",
    "Unauthorized",
    "Unavailable",
    "UpstreamError",
    "UpstreamTimeout",
    "errors",
    "tenant_token",
    "types",
]
