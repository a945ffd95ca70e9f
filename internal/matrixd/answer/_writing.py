"""An answer's text as events: the sources first, then the text in pieces, then the whole
answer. The extractive text is sent a passage a piece; a model's as it writes it, its
markers checked on the way (_markers), within `[answer]`'s time limits. A model that
fails or takes too long is replaced by the extractive text: a `reset` event voids what it
wrote and gives the citations of what follows, and the answer says why (`fallback`).

`complete` is the same events, kept to the last: one path for both forms of the route.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator

import structlog

from internal.api.answer import (
    Answer,
    DeltaEvent,
    Done,
    GeneratorUse,
    ResetEvent,
    Sources,
)
from internal.common.errors import LakehouseError, UpstreamTimeout, describe
from internal.matrixd.answer import _passages, _prompt
from internal.matrixd.answer._markers import MarkerFilter
from internal.matrixd.answer._service import Prepared, build, citations, extractive_text

log = structlog.get_logger()

Event = Sources | DeltaEvent | ResetEvent | Done


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 2)


async def pieces(prep: Prepared) -> AsyncGenerator[str, None]:
    """The model's text as it comes: its first piece within `first_token_seconds`, the
    whole within `timeout_seconds` (UpstreamTimeout past either)."""
    chat, cfg = prep.chat, prep.cfg
    assert chat is not None
    numbered = [_prompt.Numbered(i, p.source.title, p.text)
                for i, p in enumerate(prep.context, 1)]
    messages = _prompt.build(prep.question, numbered, prep.max_words)
    stream = chat.stream(messages)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + cfg.timeout_seconds
    first = True
    try:
        while True:
            left = deadline - loop.time()
            limit = min(left, cfg.first_token_seconds) if first else left
            try:
                piece = await asyncio.wait_for(anext(stream), max(limit, 0.0))
            except StopAsyncIteration:
                return
            except TimeoutError:
                what = (f"wrote nothing within {cfg.first_token_seconds:g} s"
                        if first and limit < left
                        else f"did not finish within {cfg.timeout_seconds:g} s")
                raise UpstreamTimeout(f"{chat.kind} model {chat.model!r} {what}") from None
            first = False
            yield piece
    finally:
        await stream.aclose()


def _extractive_pieces(prep: Prepared) -> list[str]:
    """The extractive text in pieces that join to it: a passage and its marker each."""
    if not prep.verdict.answered:
        return [prep.verdict.message]
    return _passages.pieces(prep.passages)


async def events(prep: Prepared) -> AsyncGenerator[Event, None]:
    """The answer's events, the whole answer last (in `Done`)."""
    chat = prep.chat
    use = GeneratorUse(kind="extractive") if chat is None else GeneratorUse(
        kind=chat.kind, model=chat.model)  # type: ignore[arg-type]
    v = prep.verdict
    yield Sources(answered=v.answered, reason=v.reason,  # type: ignore[arg-type]
                  citations=citations(prep.context if chat is not None else prep.passages),
                  hits=prep.search.hits, generator=use)
    if chat is None:
        for piece in _extractive_pieces(prep):
            yield DeltaEvent(text=piece)
        yield Done(answer=_logged(build(prep, extractive_text(prep), citations(prep.passages),
                                        use)))
        return
    t0 = time.perf_counter()
    checked = MarkerFilter(len(prep.context))
    sent: list[str] = []
    try:
        # Closed with this generator (a client that left): the model's stream with it.
        async with contextlib.aclosing(pieces(prep)) as written:
            async for piece in written:
                out = checked.feed(piece)
                if out:
                    sent.append(out)
                    yield DeltaEvent(text=out)
        tail = checked.flush()
        if tail:
            sent.append(tail)
            yield DeltaEvent(text=tail)
    except LakehouseError as exc:
        reason = describe(exc)
        log.warning("answer_model_failed", backend=chat.kind, model=chat.model, error=reason)
        yield ResetEvent(reason=reason, citations=citations(prep.passages))
        for piece in _extractive_pieces(prep):
            yield DeltaEvent(text=piece)
        use.fallback = reason
        yield Done(answer=_logged(build(prep, extractive_text(prep), citations(prep.passages),
                                        use, _ms(t0))))
        return
    numbered = citations(prep.context)
    cited = [c for c in numbered if c.marker in set(checked.cited)]
    use.dropped_markers = checked.dropped
    yield Done(answer=_logged(build(prep, "".join(sent), cited, use, _ms(t0))))


async def complete(prep: Prepared) -> Answer:
    """The whole answer (the route without `stream`)."""
    answer: Answer | None = None
    async for event in events(prep):
        if isinstance(event, Done):
            answer = event.answer
    assert answer is not None
    return answer


def _logged(answer: Answer) -> Answer:
    log.info("answer_done", answered=answer.answered, reason=answer.reason,
             generator=answer.generator.kind, fallback=answer.generator.fallback,
             citations=len(answer.citations), hits=len(answer.hits), ms=answer.took_ms)
    return answer
