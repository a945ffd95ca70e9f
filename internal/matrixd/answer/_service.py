"""An answer, with I/O: the search, its hits read as sources, the verdict, the passages,
and the text, extractive or written by the configured model (its failure or time-out
falls back to the extractive text, flagged).

The search is `run_search`, the same path as POST /v1/matrix/search, so the caller's
scope, tenant filter, corpora, filters, mode, playbook and learned ranker hold: the
answer reads only the hits that search returned, and cites and quotes nothing else.
"""

from __future__ import annotations

import dataclasses
import html
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec

from internal.api.answer import (
    Answer,
    AnswerRequest,
    AnswerSignals,
    AnswerTimings,
    Citation,
    GeneratorUse,
)
from internal.api.matrixd import MatrixSearchRequest
from internal.api.responses import MatrixAnswer, RankedHit
from internal.common.errors import InvalidArgument
from internal.config.answer import AnswerConfig
from internal.matrixd.answer import _judge, _passages
from internal.matrixd.answer._generate import Chat
from internal.matrixd.answer._passages import Passage, Source
from internal.matrixd.deps import Deps
from internal.matrixd.search import run_search
from internal.understanding.context import WINDOW_KEY
from internal.understanding.plan import SPEAKER_KEY
from lakehouse.wire.search import Highlight

# The highlight the answer's search asks for: the text's fragments, and for a hit the
# vector layer alone found, its passage most similar to the question (about a sentence).
HIGHLIGHT = Highlight(fields=["text"], fragment_chars=160, fragments=2)
DOCUMENT_KEY = "parent_id"  # metadata naming the document an item is part of (wiki pages)


@dataclass(frozen=True)
class Answering:
    """What matrixd answers with: `[answer]` and the model it configures (None: none)."""

    cfg: AnswerConfig
    chat: Chat | None = None


@dataclass
class Prepared:
    """An answer up to its text: the search, the verdict and the passages."""

    request: AnswerRequest
    cfg: AnswerConfig
    question: str
    search: MatrixAnswer
    verdict: _judge.Verdict
    passages: list[Passage]  # the extractive answer's, in its order
    context: list[Passage]  # the model's, numbered as given
    max_words: int
    chat: Chat | None  # the model that writes this answer (None: extractive)
    started: float
    search_ms: float
    passages_ms: float
    timings: dict[str, float] = field(default_factory=dict)


def _ms(since: float) -> float:
    return round((time.perf_counter() - since) * 1000, 2)


def document_of(hit: RankedHit) -> str | None:
    """The document the hit is part of: a wiki chunk's page (metadata `parent_id`)."""
    value = hit.metadata.get(DOCUMENT_KEY)
    return str(value) if isinstance(value, str | int) and str(value) else None


def ranking_key(hit: RankedHit) -> float:
    """What the hit was ranked by, larger better: its merge score (fused, BM25, ...), else
    (vector mode) its similarity, 1 - its merge distance."""
    if hit.merge_score is not None:
        return float(hit.merge_score)
    distance = hit.merge_distance if hit.merge_distance is not None else hit.distance
    if distance is not None:
        return 1.0 - float(distance)
    return float(hit.score or 0.0)


def sources_of(hits: Sequence[RankedHit]) -> list[Source]:
    """The hits as sources, each with its strength: its ranking key against the first's."""
    keys = [ranking_key(h) for h in hits]
    top = max(keys, default=0.0)
    return [dataclasses.replace(source_of(h, i), strength=(k / top if top > 0 else 1.0))
            for i, (h, k) in enumerate(zip(hits, keys, strict=True), 1)]


def source_of(hit: RankedHit, rank: int) -> Source:
    """A hit as the answer reads it: a window's own line, its semantic passage, speaker."""
    text = hit.text
    own_end = len(text)
    if WINDOW_KEY in hit.metadata and "\n" in text:
        own_end = text.index("\n")
    semantic = None
    kinds, fragments = hit.highlight_kind, hit.highlight
    if isinstance(kinds, dict) and isinstance(fragments, dict) and kinds.get("text") == "semantic":
        semantic = html.unescape(fragments["text"][0]) if fragments.get("text") else None
    speaker = hit.metadata.get(SPEAKER_KEY)
    similarity = hit.scores.get("vector")
    return Source(rank=rank, corpus=hit.corpus, id=hit.id, document_id=document_of(hit),
                  title=hit.title, text=text, own_end=own_end, similarity=similarity,
                  semantic=semantic, speaker=speaker if isinstance(speaker, str) else None)


def _search_request(body: AnswerRequest) -> MatrixSearchRequest:
    """The request's search, with the answer's highlight."""
    fields = {name: getattr(body, name) for name in MatrixSearchRequest.__struct_fields__}
    fields["highlight"] = HIGHLIGHT
    return MatrixSearchRequest(**fields)


def _chat(answering: Answering, body: AnswerRequest) -> Chat | None:
    """The model this request is written by: none when it asks for the extractive
    answer, the configured one otherwise (a request for a model none configures: 400)."""
    if body.generator == "extractive":
        return None
    if answering.chat is None:
        if body.generator == "model":
            raise InvalidArgument("generator: no model is configured ([answer] backend); "
                                  "use \"extractive\" or leave it out", field="generator")
        return None
    return answering.chat


async def prepare(deps: Deps, answering: Answering, body: AnswerRequest) -> Prepared:
    """The search, the verdict and the passages of an answer; a bad request raises
    here, before any of it is sent."""
    started = time.perf_counter()
    question = " ".join((body.query_text or "").split())
    if not question:
        raise InvalidArgument("query_text: an answer needs the question's text",
                              field="query_text")
    chat = _chat(answering, body)
    max_words = body.max_words or answering.cfg.max_words
    found = await run_search(deps, _search_request(body))
    search_ms = _ms(started)
    t0 = time.perf_counter()
    sources = sources_of(found.hits)
    persons = _judge.persons_named(question, sources)
    q = _passages.question_of(question, sources, persons)
    scored = _passages.score_passages(q, sources)
    verdict = _judge.judge(q, scored, sources, persons)
    chosen = _passages.merged(_passages.choose(scored, max_words).passages)
    context = (_passages.merged(_passages.choose(scored, answering.cfg.context_words,
                                                 per_hit=None).passages)
               if chat is not None and verdict.answered else [])
    return Prepared(body, answering.cfg, question, found, verdict, chosen if verdict.answered else [],
                    context, max_words, chat if verdict.answered else None, started,
                    search_ms, _ms(t0))


def citations(passages: Sequence[Passage]) -> list[Citation]:
    """The passages as citations, numbered from 1 in their order."""
    return [Citation(marker=i, corpus=p.source.corpus, id=p.source.id,
                     document_id=p.source.document_id, title=p.source.title, passage=p.text,
                     start=p.start, end=p.end, rank=p.source.rank)
            for i, p in enumerate(passages, 1)]


def extractive_text(prep: Prepared) -> str:
    return _passages.compose(prep.passages) if prep.verdict.answered else prep.verdict.message


def build(prep: Prepared, text: str, cited: list[Citation], generator: GeneratorUse,
          generate_ms: float | None = None) -> Answer:
    """The whole answer."""
    v, s = prep.verdict, prep.search
    degraded = list(s.degraded)
    if generator.fallback is not None:
        degraded.append("generator_unavailable")
    total = _ms(prep.started)
    return Answer(
        answered=v.answered, reason=v.reason,  # type: ignore[arg-type]
        text=text, citations=cited, hits=s.hits, generator=generator,
        signals=AnswerSignals(best_overlap=round(v.best_overlap, 4),
                              best_similarity=(None if v.best_similarity is None
                                               else round(v.best_similarity, 4)),
                              persons=v.persons, unmatched=round(v.unmatched, 4)),
        mode=s.mode, degraded=degraded, failed_corpora=s.failed_corpora,
        skipped_corpora=s.skipped_corpora,
        playbook=s.playbook if isinstance(s.playbook, msgspec.Struct) else None,
        ranker=s.ranker if isinstance(s.ranker, msgspec.Struct) else None,
        timings=AnswerTimings(search_ms=prep.search_ms, passages_ms=prep.passages_ms,
                              generate_ms=generate_ms, total_ms=total),
        took_ms=total)
