"""Whether the hits answer the question at all (no I/O): an answer is refused, with the
nearest hits, rather than made of passages that do not hold it.

Three reasons, each from evidence the search already has:

- `no_hits`: nothing was found.
- `not_relevant`: no passage holds enough of the question (the weighted share of its
  terms, names left out: `content`) and no hit is near it by the vector layer either.
- `unsupported_premise`: the question names a person (a speaker of the hits: metadata
  `speaker`) and what it asks about is stated by someone else: among the statements of
  the first hits, another speaker's holds more of it than any said by or naming the
  person (a question the person asks states nothing). A question that credits one person
  with another's deed finds the deed, told by the other person; an answer made of it
  would confirm the false premise.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from internal.matrixd.answer._passages import Passage, Question, Source, fold, terms

# Chosen on LoCoMo's tuning conversations (docs/decisions/0281-refusals-by-statements.md).
MIN_CONTENT = 0.2  # a passage holding less of the question (names out) is not an answer
MIN_SIMILARITY = 0.35  # ... unless a hit is this near the question by the vector layer
PREMISE_MARGIN = 0.02  # another speaker's statements hold this much more of the question
PREMISE_DEPTH = 10  # the hits whose passages are weighed for the premise

MESSAGES = {
    "no_hits": "Nothing in the searched corpora matches the question.",
    "not_relevant": "The searched corpora hold nothing that answers the question.",
    "unsupported_premise": ("The searched corpora do not say this of {persons}; the nearest "
                            "passages are about someone else."),
}


@dataclass(frozen=True)
class Verdict:
    answered: bool
    reason: str | None
    message: str
    best_content: float
    best_overlap: float
    best_similarity: float | None
    persons: list[str]
    unmatched: float


def persons_named(question: str, sources: Sequence[Source]) -> list[str]:
    """The speakers of the hits the question names (a whole word, any case, a
    possessive too), in the order the hits give them."""
    words = {fold(w) for w in re.findall(r"\w+", question)}
    out: list[str] = []
    for s in sources:
        who = s.speaker
        if who and who not in out and fold(who) in words:
            out.append(who)
    return out


def _theirs(p: Passage, persons: Sequence[str]) -> bool | None:
    """Whether the passage is a named person's: said by them, or naming them (after the
    speaker's name a turn begins with); None when its hit names no speaker."""
    who = p.source.speaker
    if not who:
        return None
    if any(who.casefold() == name.casefold() for name in persons):
        return True
    body = p.text
    if p.start == 0 and body.casefold().startswith(f"{who.casefold()}:"):
        body = body[len(who) + 1:]
    words = {fold(w) for w in re.findall(r"\w+", body)}
    return any(fold(name) in words for name in persons)


def premise_margin(passages: Sequence[Passage], persons: Sequence[str]) -> float:
    """How much more of the question another speaker's statements hold than those said by
    or naming the persons. Statements only: a question asks, and one the named person asks
    states nothing."""
    stated = [p for p in passages if p.source.rank <= PREMISE_DEPTH and p.stated]
    theirs = max((p.content for p in stated if _theirs(p, persons)), default=0.0)
    others = max((p.content for p in stated if _theirs(p, persons) is False), default=0.0)
    return others - theirs


def judge(question: Question, passages: Sequence[Passage], sources: Sequence[Source],
          persons: Sequence[str]) -> Verdict:
    """The verdict and the signals it read."""
    sims = [s.similarity for s in sources if s.similarity is not None]
    best_sim = max(sims) if sims else None
    best_content = max((p.content for p in passages), default=0.0)
    best_overlap = max((p.overlap for p in passages), default=0.0)
    found = {t for s in sources for t in terms(s.text[:s.own_end])}
    unmatched = 1.0 - question.share(found, without_names=True) if question.terms else 0.0
    signals = (best_content, best_overlap, best_sim, list(persons), unmatched)
    if not sources:
        return _refuse("no_hits", persons, *signals)
    if best_content < MIN_CONTENT and (best_sim is None or best_sim < MIN_SIMILARITY):
        return _refuse("not_relevant", persons, *signals)
    if persons and premise_margin(passages, persons) >= PREMISE_MARGIN:
        return _refuse("unsupported_premise", persons, *signals)
    return Verdict(True, None, "", *signals)


def _refuse(reason: str, persons: Sequence[str], best_content: float, best_overlap: float,
            best_sim: float | None, named: list[str], unmatched: float) -> Verdict:
    message = MESSAGES[reason].format(persons=" or ".join(persons) or "them")
    return Verdict(False, reason, message, best_content, best_overlap, best_sim, named,
                   unmatched)
