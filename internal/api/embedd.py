"""embedd's wire: the request shape (the gateway's /openapi.json uses it too), the lanes' route
and timing headers (I/O-free)."""

from __future__ import annotations

from typing import Literal

import msgspec


class EmbedRequest(msgspec.Struct, forbid_unknown_fields=True):
    texts: list[str]
    model: str | None = None
    input_type: Literal["query", "document"] | None = None  # None: "document"


# The interactive lane's route: search paths of matrixd (and any daemon embedding a
# question) post here; documents go to /v1/embed, the bulk lane. The gateway forwards
# nothing under /internal/, and with auth on embedd takes only the service token here,
# so no outside client can put its texts before everyone's questions.
INTERACTIVE_PATH = "/internal/v1/embed"
LANE_HEADER = "Lakehouse-Embed-Lane"
WAIT_HEADER = "Lakehouse-Embed-Wait-Ms"  # how long the texts waited in their lane


# The interactive lane's "which passage is nearest" route (matrixd's semantic highlights):
# the passages are embedded as `/internal/v1/embed` does, and only each group's nearest
# index comes back, not its vectors (a hit's 8 passages are 8 x 384 numbers of JSON).
NEAREST_PATH = "/internal/v1/embed/nearest"


class NearestRequest(msgspec.Struct, forbid_unknown_fields=True):
    query: list[float]  # the question's vector by `model`
    groups: list[list[str]]  # each hit's passages (documents)
    model: str | None = None


class NearestResponse(msgspec.Struct):
    model: str
    nearest: list[int]  # per group, the index of its passage most similar to `query`
