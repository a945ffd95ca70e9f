"""Feedback on an answer: each hit it cited recorded in the playbook with the answer's
score (POST /v1/matrix/answer/feedback), as one record a hit would be."""

from __future__ import annotations

from internal.api.answer import AnswerFeedback, AnswerFeedbackResponse
from internal.api.matrixd import RecordRequest
from internal.common.auth import as_service, caller
from internal.common.errors import NotFound
from internal.matrixd import playbook
from internal.matrixd.deps import Deps


async def record(deps: Deps, body: AnswerFeedback) -> AnswerFeedbackResponse:
    """Every cited hit recorded (a corpus the caller does not see is a 404 naming it,
    before anything is recorded, as the record route answers one)."""
    scope = caller()
    for i, ref in enumerate(body.cited):
        if scope is not None and not scope.sees(ref.corpus):
            raise NotFound(f"cited[{i}].corpus: corpus {ref.corpus!r} not found",
                           field=f"cited[{i}].corpus")
    recorded = []
    seen: set[tuple[str, str]] = set()
    for ref in body.cited:
        if (ref.corpus, ref.id) in seen:
            continue
        seen.add((ref.corpus, ref.id))
        with as_service():  # the playbook is the stack's; the caller's right was decided above
            recorded.append(await playbook.record(deps, RecordRequest(
                query_text=body.query_text, answer_id=ref.id, answer_corpus=ref.corpus,
                score=body.score, tags=list(body.tags), playbook_corpus=body.playbook_corpus)))
    return AnswerFeedbackResponse(recorded=recorded)
