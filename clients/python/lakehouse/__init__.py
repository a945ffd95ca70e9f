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

from typing import TYPE_CHECKING, Any

from lakehouse.errors import (
    Conflict,
    InvalidArgument,
    LakehouseError,
    NotFound,
    PayloadTooLarge,
    TooManyRequests,
    Unauthorized,
    Unavailable,
    UpstreamError,
    UpstreamTimeout,
)

if TYPE_CHECKING:
    from lakehouse import errors, types
    from lakehouse.aio import AsyncClient
    from lakehouse.client import Client
    from lakehouse.types import DowngradeOption, Filter, Item, ObservationIn, Prf

# Loaded on first use (PEP 562), so that `import lakehouse.errors` or a command that
# only prints its help does not pay for aiohttp: name -> the module that defines it.
_LAZY = {
    "AsyncClient": "lakehouse.aio", "Client": "lakehouse.client",
    "DowngradeOption": "lakehouse.types", "Filter": "lakehouse.types", "Item": "lakehouse.types",
    "ObservationIn": "lakehouse.types", "Prf": "lakehouse.types",
    "errors": "lakehouse.errors", "types": "lakehouse.types",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lakehouse' has no attribute {name!r}")
    import importlib

    loaded = importlib.import_module(module)
    value = loaded if module.rsplit(".", 1)[1] == name else getattr(loaded, name)
    globals()[name] = value
    return value


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
    "TooManyRequests",
    "Unauthorized",
    "Unavailable",
    "UpstreamError",
    "UpstreamTimeout",
    "errors",
    "types",
]
