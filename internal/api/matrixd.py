"""matrixd's request shapes (I/O-free, so the gateway's /openapi.json can use them too)."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from internal.api.vectord import MAX_QUERY_CHARS, CorpusName, ItemId
from lakehouse.wire.search import (  # the searches' fields, declared once there
    DEFAULT_RELEVANCE_THRESHOLD,
    Focus,
    MatrixSearchRequest,
    RelevanceOption,
    SearchAutoRequest,
    SearchOptions,
    SmartSearchRequest,
    Threshold,
)
from lakehouse.wire.shapes import DowngradeOption, ObservationIn

__all__ = ["DEFAULT_RELEVANCE_THRESHOLD", "AnalyzeRequest", "Chunk", "DowngradeOption", "Focus",
           "MatrixSearchRequest", "NormalizeRequest", "ObservationIn", "RecordRequest",
           "RelevanceOption", "RelevanceRequest", "SearchAutoRequest", "SearchOptions",
           "SmartSearchRequest", "Threshold"]


# The relevance filter's chunks to judge (the focus file is the search's RelevanceOption's).
class Chunk(msgspec.Struct, forbid_unknown_fields=True):
    text: str
    source: str | None = None
    doc_id: str | None = None


class RecordRequest(msgspec.Struct, forbid_unknown_fields=True):
    query_text: Annotated[str, Meta(min_length=1, max_length=MAX_QUERY_CHARS)]
    answer_id: ItemId
    answer_corpus: CorpusName
    score: Annotated[float, Meta(ge=-1, le=1)]  # -1: wrong answer; 1: right
    tags: Annotated[list[Annotated[str, Meta(max_length=256)]], Meta(max_length=64)] = (
        msgspec.field(default_factory=list))
    playbook_corpus: CorpusName | None = None


class RelevanceRequest(msgspec.Struct, forbid_unknown_fields=True):
    focus: Focus
    chunks: list[Chunk]
    threshold: Threshold = DEFAULT_RELEVANCE_THRESHOLD


# ---- query intelligence ---------------------------------------------------------

MAX_OBSERVATIONS = 1000  # a normalize request holds at most this many (413 beyond)


class AnalyzeRequest(msgspec.Struct, forbid_unknown_fields=True):
    query_text: str
    now: str | None = None  # ISO 8601; relative dates resolve against it (default: now)


class NormalizeRequest(msgspec.Struct, forbid_unknown_fields=True):
    observations: list[ObservationIn]
    context: list[str] = msgspec.field(default_factory=list)
