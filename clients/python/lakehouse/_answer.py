"""AsyncClient's answers (POST /v1/matrix/answer, its stream, feedback on an answer)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

import msgspec

from lakehouse._transport import Transport, as_given, body_of
from lakehouse.errors import UpstreamError, from_status
from lakehouse.wire.answer import (
    DONE_LINE,
    AnswerEvent,
    AnswerFeedbackResponse,
    AnswerRequest,
    AnswerResponse,
    CitedRef,
    DoneEvent,
    ErrorEvent,
    Generator,
)
from lakehouse.wire.search import ModeName
from lakehouse.wire.shapes import Filter

Options = Mapping[str, Any]
_events = msgspec.json.Decoder(AnswerEvent)
# An error event's code, as the status it would have answered before the stream began.
_STATUS_OF = {"internal": 500, "upstream_error": 502, "upstream_timeout": 504}


class AnswerCalls:
    """Answers from the corpora, cited (mixed into AsyncClient)."""

    _http: Transport

    def _answer_spec(self, query: str, corpora: str | Sequence[str] | None, k: int,
                     mode: ModeName | None, filter: Filter | Options | None,
                     use_playbook: bool, generator: Generator | None, max_words: int | None,
                     options: Mapping[str, Any]) -> AnswerRequest:
        names = [corpora] if isinstance(corpora, str) else (
            list(corpora) if corpora is not None else None)
        return AnswerRequest(query_text=query, corpora=names, k=k, mode=mode,
                             filter=as_given(filter), use_playbook=use_playbook,
                             generator=generator, max_words=max_words, **options)

    async def answer(self, query: str, /, *, corpora: str | Sequence[str] | None = None,
                     k: int = 10, mode: ModeName | None = None,
                     filter: Filter | Options | None = None, use_playbook: bool = False,
                     generator: Generator | None = None, max_words: int | None = None,
                     **options: Any) -> AnswerResponse:
        """The question answered from the corpora (POST /v1/matrix/answer): `text` with
        numbered markers, `citations` (each passage with its offsets in its item's text),
        the `hits` it was drawn from; `answered` False with a `reason` when nothing found
        answers it. `generator`: "extractive" (the hits' sentences, no model) or "model"
        (the stack's configured model); None: the stack's default. `max_words`: the
        answer's budget. Any other option of `search` (prefer, fusion, prf, ...) goes in
        `options`; the search is the one `search` runs, scopes and feedback included."""
        spec = self._answer_spec(query, corpora, k, mode, filter, use_playbook, generator,
                                 max_words, options)
        return await self._http.call("POST", "/v1/matrix/answer", AnswerResponse, body=spec,
                                     idempotent=True)

    async def answer_stream(self, query: str, /, *, corpora: str | Sequence[str] | None = None,
                            k: int = 10, mode: ModeName | None = None,
                            filter: Filter | Options | None = None, use_playbook: bool = False,
                            generator: Generator | None = None, max_words: int | None = None,
                            **options: Any) -> AsyncGenerator[AnswerEvent, None]:
        """`answer`'s events as they come: `SourcesEvent` (the citations and hits) first,
        `DeltaEvent`s (the text's pieces), a `ResetEvent` when the model failed and the
        extractive text follows, `DoneEvent` (the whole answer) last. A failure after the
        stream began raises its class (UpstreamError, UpstreamTimeout, ...)."""
        spec = msgspec.structs.replace(self._answer_spec(
            query, corpora, k, mode, filter, use_playbook, generator, max_words, options),
            stream=True)
        data: list[str] = []
        async for line in self._http.lines("POST", "/v1/matrix/answer", body=spec,
                                           idempotent=True):
            if line.startswith("data:"):
                data.append(line[5:].strip())
            elif not line and data:
                payload, data = "\n".join(data), []
                if payload == DONE_LINE:
                    return
                event = _decode(payload)
                if isinstance(event, ErrorEvent):
                    raise from_status(_STATUS_OF.get(event.code, 502), event.code,
                                      event.message)
                yield event
        raise UpstreamError("POST /v1/matrix/answer: the stream ended before [DONE]")

    async def record_answer(self, answer: AnswerResponse | DoneEvent, query: str,
                            score: float = 1.0, *, tags: Sequence[str] | None = None,
                            playbook_corpus: str | None = None) -> AnswerFeedbackResponse:
        """Record that the answer to `query` was right (score 1) or wrong (-1): each hit
        it cites is recorded in the playbook with that score."""
        done = answer.answer if isinstance(answer, DoneEvent) else answer
        cited = [CitedRef(corpus=c.corpus, id=c.id) for c in done.citations]
        body = body_of(query_text=query, cited=cited, score=score,
                       tags=list(tags) if tags else None, playbook_corpus=playbook_corpus)
        return await self._http.call("POST", "/v1/matrix/answer/feedback",
                                     AnswerFeedbackResponse, body=body)


def _decode(payload: str) -> AnswerEvent:
    try:
        event: AnswerEvent = _events.decode(payload)
        return event
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise UpstreamError(f"POST /v1/matrix/answer: unexpected event: {exc}",
                            code="invalid_response") from None
