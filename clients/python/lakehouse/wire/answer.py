"""An answer's wire shapes (POST /v1/matrix/answer; docs/API.md, "matrixd: answers"),
declared once (I/O-free): the request (a matrix search and how to answer from its hits),
the answer (its text with numbered markers, the citations, the hits, the generator), the
events of its stream, and the feedback on an answer (its cited hits recorded).

The answer is generic in its hit: the server builds it with its own hit struct, the client
decodes it with `MatrixHit`, so its fields are written here once.
"""

from __future__ import annotations

from typing import Annotated, Generic, Literal, TypeVar

import msgspec
from msgspec import Meta

from lakehouse.wire.ranker import RankerUse
from lakehouse.wire.responses import (
    FailedCorpus,
    MatrixHit,
    PlaybookSummary,
    RecordResponse,
    SkippedCorpus,
)
from lakehouse.wire.search import MatrixSearchRequest
from lakehouse.wire.shapes import CorpusName, ItemId, QueryText

MIN_WORDS = 5
MAX_WORDS = 1000
# Generators: the offline one (sentences of the hits, no model), or the configured model
# (`[answer] backend`: an Ollama or OpenAI-compatible server).
Generator = Literal["extractive", "model"]
# Why an answer was not given (`reason` of an answer with `answered` false).
Reason = Literal["no_hits", "not_relevant", "unsupported_premise"]


class AnswerRequest(MatrixSearchRequest, kw_only=True, forbid_unknown_fields=True,
                    omit_defaults=True):
    """POST /v1/matrix/answer: a matrix search (every field of it: corpora, filter, mode,
    the playbook and its learned ranker, ...) whose hits the question is answered from.

    `query_text` is required. `generator` None: the model when `[answer]` configures one,
    else extractive. `max_words` None: `[answer] max_words`. `stream`: server-sent events
    (the citations first, then the text as it is made, then the whole answer).
    """

    generator: Generator | None = None
    max_words: Annotated[int, Meta(ge=MIN_WORDS, le=MAX_WORDS)] | None = None
    stream: bool = False


class Citation(msgspec.Struct, kw_only=True):
    """One numbered source of the answer: `marker` is the n of `[n]` in its text; the
    passage is `text[start:end]` of the item (offsets in characters of its stored text)."""

    marker: int
    corpus: str
    id: str
    # The document the item is part of (a wiki chunk's page), when the item says it.
    document_id: str | None
    title: str | None
    passage: str
    start: int
    end: int
    rank: int  # the hit's place in the answer's `hits` (1-based)


class GeneratorUse(msgspec.Struct, kw_only=True):
    """What wrote the answer: `extractive`, or the model's backend and name. `fallback`:
    why the model's answer was replaced by the extractive one (its failure, a time-out),
    as a vector outage makes a search lexical; `dropped_markers`: markers the model wrote
    that point to no passage, taken out of its text."""

    kind: Literal["extractive", "ollama", "openai"]
    model: str | None = None
    fallback: str | None = None
    dropped_markers: int = 0


class AnswerTimings(msgspec.Struct, kw_only=True):
    """Where the time went, in milliseconds: the search, choosing the passages, the model
    (None without one), the whole answer."""

    search_ms: float
    passages_ms: float
    generate_ms: float | None = None
    total_ms: float


class AnswerSignals(msgspec.Struct, kw_only=True):
    """What the answer judged its hits by: the best share of the question's terms a
    passage holds, the best vector similarity of a hit (None without vectors), the
    persons the question names (the speakers of its hits it holds), and the share of
    the question's terms no passage holds."""

    best_overlap: float
    best_similarity: float | None
    persons: list[str]
    unmatched: float


H = TypeVar("H")


class AnswerBody(msgspec.Struct, Generic[H], kw_only=True):
    """POST /v1/matrix/answer's answer. `answered` false: `reason` says why (no hits,
    none relevant enough, a premise no hit states) and `hits` are the nearest ones."""

    answered: bool
    reason: Reason | None
    text: str
    citations: list[Citation]
    hits: list[H]
    generator: GeneratorUse
    signals: AnswerSignals
    mode: str
    degraded: list[str]
    failed_corpora: list[FailedCorpus]
    skipped_corpora: list[SkippedCorpus]
    playbook: PlaybookSummary | None = None
    ranker: RankerUse | None = None
    timings: AnswerTimings
    took_ms: float


class AnswerResponse(AnswerBody[MatrixHit], kw_only=True):
    """An answer as the client reads it."""


# ---- the stream (`"stream": true`): server-sent events, one JSON object each ------------

class SourcesBody(msgspec.Struct, Generic[H], kw_only=True, tag="citations", tag_field="type"):
    """First: the passages the answer is drawn from, numbered as its markers (a model's
    answer cites some of them; `done` says which), the hits, whether it is answered."""

    answered: bool
    reason: Reason | None
    citations: list[Citation]
    hits: list[H]
    generator: GeneratorUse


class SourcesEvent(SourcesBody[MatrixHit], kw_only=True):
    """The citations event as the client reads it."""


class DeltaEvent(msgspec.Struct, kw_only=True, tag="delta", tag_field="type"):
    """The next piece of the answer's text."""

    text: str


class ResetEvent(msgspec.Struct, kw_only=True, tag="reset", tag_field="type"):
    """The model failed (or took too long): the text so far is void, and the extractive
    answer follows, numbered as these citations."""

    reason: str
    citations: list[Citation]


class DoneBody(msgspec.Struct, Generic[H], kw_only=True, tag="done", tag_field="type"):
    """Last: the whole answer, as the route without `stream` gives it."""

    answer: AnswerBody[H]


class DoneEvent(DoneBody[MatrixHit], kw_only=True):
    """The done event as the client reads it."""

    answer: AnswerResponse


class ErrorEvent(msgspec.Struct, kw_only=True, tag="error", tag_field="type"):
    """The answer failed after the stream began: the one error body's code and message."""

    code: str
    message: str


AnswerEvent = SourcesEvent | DeltaEvent | ResetEvent | DoneEvent | ErrorEvent
EVENT_TYPES: tuple[str, ...] = ("citations", "delta", "reset", "done", "error")
DONE_LINE = "[DONE]"  # the stream's last data line, as OpenAI-compatible servers end theirs


# ---- feedback on an answer -----------------------------------------------------------------

class CitedRef(msgspec.Struct, forbid_unknown_fields=True):
    corpus: CorpusName
    id: ItemId


class AnswerFeedback(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """POST /v1/matrix/answer/feedback: the answer to `query_text` was right (score 1) or
    wrong (-1): each of its cited hits is recorded in the playbook with that score."""

    query_text: Annotated[QueryText, Meta(min_length=1)]
    cited: Annotated[list[CitedRef], Meta(min_length=1, max_length=50)]
    score: Annotated[float, Meta(ge=-1, le=1)]
    tags: Annotated[list[Annotated[str, Meta(max_length=256)]], Meta(max_length=64)] = (
        msgspec.field(default_factory=list))
    playbook_corpus: CorpusName | None = None


class AnswerFeedbackResponse(msgspec.Struct):
    recorded: list[RecordResponse]
