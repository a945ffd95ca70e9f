"""An answer's shapes as matrixd builds them: lakehouse.wire.answer's, with matrixd's own
hit struct (`RankedHit`, whose fields that do not apply are absent), so the answer's
hits read as a search's do. The client reads them with `MatrixHit`."""

from __future__ import annotations

from internal.api.responses import RankedHit
from lakehouse.wire.answer import (
    MAX_WORDS,
    MIN_WORDS,
    AnswerBody,
    AnswerFeedback,
    AnswerFeedbackResponse,
    AnswerRequest,
    AnswerSignals,
    AnswerTimings,
    Citation,
    DeltaEvent,
    DoneBody,
    ErrorEvent,
    GeneratorUse,
    ResetEvent,
    SourcesBody,
)

__all__ = ["MAX_WORDS", "MIN_WORDS", "Answer", "AnswerFeedback", "AnswerFeedbackResponse",
           "AnswerRequest", "AnswerSignals", "AnswerTimings", "Citation", "DeltaEvent",
           "Done", "ErrorEvent", "GeneratorUse", "ResetEvent", "Sources"]


class Answer(AnswerBody[RankedHit], kw_only=True):
    """POST /v1/matrix/answer's answer as matrixd builds it."""


class Sources(SourcesBody[RankedHit], kw_only=True):
    """The stream's first event as matrixd builds it."""


class Done(DoneBody[RankedHit], kw_only=True):
    """The stream's last event as matrixd builds it."""

    answer: Answer
