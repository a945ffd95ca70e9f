"""A search request held to its caller's scope, at decode time (internal.common.access).

A tenant token's filter is ANDed with the caller's, so every mode and path (vector,
lexical, hybrid, keyword, PRF, whose feedback rows are the first pass's filtered hits)
reads only rows it admits; the playbook's `include` (items fetched by id, outside any
filter) is dropped, so a recorded answer the filter would refuse is never fetched.
The corpora are held by Store.corpus, where every search resolves its corpora.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec

from internal.api.vectord import Filter, MultiSearchRequest, SearchRequest
from internal.common.auth import caller

R = TypeVar("R", SearchRequest, MultiSearchRequest)


def request(req: R) -> R:
    """req with the caller's forced filter in (unchanged without one)."""
    scope = caller()
    if scope is None or scope.filter is None:
        return req
    flt = (msgspec.convert(scope.filter, Filter) if req.filter is None
           else Filter(all_of=[msgspec.to_builtins(req.filter), scope.filter]))
    if isinstance(req, MultiSearchRequest):
        return msgspec.structs.replace(req, filter=flt, include=[])
    return msgspec.structs.replace(req, filter=flt)



