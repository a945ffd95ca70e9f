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
    """Every cited hit recorded (once each). A corpus the caller does not see, or one or
    an item that does not exist, is a 404 naming its place in `cited`, before anything
    is recorded."""
    scope = caller()
    first: dict[tuple[str, str], int] = {}
    for i, ref in enumerate(body.cited):
        if scope is not None and not scope.sees(ref.corpus):
            # As a corpus that does not exist is answered.
            raise NotFound(f"cited[{i}].corpus: corpus {ref.corpus!r} not found",
                           field=f"cited[{i}].corpus")
        first.setdefault((ref.corpus, ref.id), i)
    # The playbook is the stack's; the caller's right to each corpus was decided above.
    with as_service():
        for (corpus, item), i in first.items():
            try:
                await playbook.check_answer(deps, corpus, item)
            except NotFound as exc:
                where = "corpus" if exc.field == "answer_corpus" else "id"
                message = exc.message.split(": ", 1)[-1]
                raise NotFound(f"cited[{i}].{where}: {message}",
                               field=f"cited[{i}].{where}") from None
        recorded = [await playbook.record(deps, RecordRequest(
            query_text=body.query_text, answer_id=item, answer_corpus=corpus, score=body.score,
            tags=list(body.tags), playbook_corpus=body.playbook_corpus))
            for corpus, item in first]
    return AnswerFeedbackResponse(recorded=recorded)
