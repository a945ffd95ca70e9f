"""Observation normalisation: coreference, temporal anchoring, keywords.

I/O-free given the spaCy pipeline. Conservative by design: a pronoun is replaced
only when its referent is certain from the turn's structure (the speaker for
"I", the other party for "you"; "he"/"she" only when one person is in sight), and
a relative date only when dateparser (internal.understanding.temporal) resolves it from
the observation's reference time. The original text is always kept.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

import yake
from spacy.language import Language
from spacy.tokens import Doc

from internal.api.responses import NormalizedObservation, Resolved
from internal.understanding import temporal

Kind = Literal["coreference", "temporal"]
KEYWORDS = 5

# First person singular: replacement shape per pronoun ("{s}" = the speaker's name).
_FIRST = {"i": "{s}", "me": "{s}", "myself": "{s}", "my": "{s}'s", "mine": "{s}'s"}
_SECOND = {"you": "{s}", "your": "{s}'s", "yours": "{s}'s", "yourself": "{s}"}
_THIRD = {"he": "{s}", "she": "{s}", "him": "{s}", "his": "{s}'s", "hers": "{s}'s"}
# "I'm" -> "Caroline is": the verb after a replaced "I" or "you" agrees with a third person.
_AGREE = {"'m": "is", "’m": "is", "am": "is", "'ve": "has", "’ve": "has", "have": "has",
          "'re": "is", "’re": "is", "are": "is", "'ll": "will", "’ll": "will", "'d": "would",
          "’d": "would", "do": "does", "were": "was"}
# "you" in set phrases addresses nobody in particular.
_GENERIC_YOU = re.compile(r"\b(?:you know|you see|thank you|you never know|if you ask me|"
                          r"you guys|see you|you bet|mind you)\b", re.IGNORECASE)
_PREP_BEFORE = re.compile(r"\b(?:on|in|during|at|since|until|till|before|after|from|by)\s+$",
                          re.IGNORECASE)
# "Last weekend was fun": the expression is the subject, so it takes no preposition.
_VERB_AFTER = re.compile(r"\s+(?:was|is|were|has|had|will|would|felt|seems?|seemed)\b",
                         re.IGNORECASE)
_SPEAKER_LINE = re.compile(r"^\s*([A-Z][\w .'-]{0,40}?)\s*:\s")


@dataclass(frozen=True)
class Observation:
    text: str
    reference_time: datetime | None = None
    speaker: str | None = None


@dataclass(frozen=True)
class Resolution:
    span: str
    replacement: str
    kind: Kind
    start: int  # offset of span in the original text


@dataclass
class Normalized:
    text: str
    original: str
    keywords: list[str]
    resolved: list[Resolution]
    dates: list[str] = field(default_factory=list)  # ISO start dates anchored in the text

    def to_wire(self) -> NormalizedObservation:
        return NormalizedObservation(
            text=self.text, original=self.original, keywords=self.keywords,
            resolved=[Resolved(span=r.span, replacement=r.replacement, kind=r.kind)
                      for r in self.resolved],
            dates=self.dates)


_kw_lock = threading.Lock()
_kw: yake.KeywordExtractor | None = None


def keywords(text: str, top: int = KEYWORDS) -> list[str]:
    """YAKE's best key phrases (up to two words), each once, best first."""
    global _kw
    with _kw_lock:
        if _kw is None:
            _kw = yake.KeywordExtractor(lan="en", n=2, top=top, dedupLim=0.7)
        extractor = _kw
    seen: set[str] = set()
    out: list[str] = []
    for phrase, _score in extractor.extract_keywords(text):
        key = str(phrase).lower()
        if key not in seen:
            seen.add(key)
            out.append(str(phrase))
    return out[:top]


# ---- participants -------------------------------------------------------------------------

def _speaker_of_line(line: str) -> str | None:
    m = _SPEAKER_LINE.match(line)
    return m.group(1).strip() if m else None


def addressee(speaker: str | None, index: int, observations: Sequence[Observation],
              context: Sequence[str]) -> str | None:
    """Whom a turn speaks to: the nearest other speaker before it, else after it, else the
    one other participant named in the context (lines "Name: text" or bare names)."""
    if not speaker:
        return None
    for j in [*range(index - 1, -1, -1), *range(index + 1, len(observations))]:
        other = observations[j].speaker
        if other and other != speaker:
            return str(other)
    names: list[str] = []
    for line in reversed(context):
        name = _speaker_of_line(line)
        if name is None and re.fullmatch(r"[A-Z][\w .'-]{0,40}", line.strip()):
            name = line.strip()
        if name and name != speaker and name not in names:
            names.append(name)
    return names[0] if len(names) == 1 else None


# ---- one observation ----------------------------------------------------------------------

@dataclass
class _Edit:
    start: int
    end: int
    replacement: str
    kind: Kind
    date: str | None = None


def _coreference(doc: Doc, speaker: str | None, other: str | None,
                 third: str | None) -> list[_Edit]:
    edits: list[_Edit] = []
    generic = [m.span() for m in _GENERIC_YOU.finditer(doc.text)]
    skip_next: set[int] = set()
    for tok in doc:
        if tok.i in skip_next or tok.tag_ not in ("PRP", "PRP$"):
            continue
        low = tok.lower_
        table, name = None, None
        if low in _FIRST and speaker:
            table, name = _FIRST, speaker
        elif low in _SECOND and other and not any(a <= tok.idx < b for a, b in generic):
            table, name = _SECOND, other
        elif low in _THIRD and third:
            table, name = _THIRD, third
        if table is None or name is None:
            continue
        rep = table[low].format(s=name)
        start, end = tok.idx, tok.idx + len(tok.text)
        nxt = doc[tok.i + 1] if tok.i + 1 < len(doc) else None
        if low in ("i", "you") and nxt is not None and nxt.lower_ in _AGREE and tok.dep_ in ("nsubj", "nsubjpass") \
                and nxt.pos_ in ("AUX", "VERB"):
            rep = f"{rep} {_AGREE[nxt.lower_]}"
            end = nxt.idx + len(nxt.text)
            skip_next.add(nxt.i)
        edits.append(_Edit(start, end, rep, "coreference"))
    return edits


def _third_person(doc: Doc, speaker: str | None, other: str | None) -> str | None:
    """The one person other than the two parties named in this text, if exactly one."""
    people = {e.text for e in doc.ents if e.label_ == "PERSON"} - {speaker, other}
    # Names the recogniser missed count as people too: any doubt means no replacement.
    unsure = {t.text for t in doc if t.pos_ == "PROPN" and t.ent_type_ in ("", "PERSON")
              and not any(t.text in p for p in people)} - {speaker, other}
    return next(iter(people)) if len(people) == 1 and not unsure else None


def _temporal(text: str, ref: datetime | None) -> list[_Edit]:
    if ref is None:
        return []
    edits: list[_Edit] = []
    for m in temporal.RELATIVE.finditer(text):
        r = temporal.resolve(m.group(0), ref)
        if r is None:
            continue
        rep = temporal.phrase(r)
        if _PREP_BEFORE.search(text[:m.start()]) or _VERB_AFTER.match(text[m.end():]):
            rep = rep.split(" ", 1)[1]  # "since yesterday" -> "since 7 May 2023"
        if m.group(0)[:1].isupper():
            rep = rep[:1].upper() + rep[1:]
        edits.append(_Edit(m.start(), m.end(), rep, "temporal", r.start.isoformat()))
    return edits


def normalize_one(doc: Doc, obs: Observation, other: str | None) -> Normalized:
    """One observation normalised from its parsed text."""
    text = doc.text
    speaker = obs.speaker.strip() if obs.speaker and obs.speaker.strip() else None
    third = _third_person(doc, speaker, other)
    edits = _temporal(text, obs.reference_time) + _coreference(doc, speaker, other, third)
    edits.sort(key=lambda e: e.start)
    kept: list[_Edit] = []
    for e in edits:  # temporal spans win over a pronoun inside them (none in practice)
        if kept and e.start < kept[-1].end:
            continue
        kept.append(e)
    out, pos = [], 0
    for e in kept:
        out.append(text[pos:e.start])
        out.append(e.replacement)
        pos = e.end
    out.append(text[pos:])
    new = "".join(out)
    return Normalized(
        text=new, original=text, keywords=keywords(new),
        resolved=[Resolution(text[e.start:e.end], e.replacement, e.kind, e.start) for e in kept],
        dates=sorted({e.date for e in kept if e.date}))


def normalize(nlp: Language, observations: Sequence[Observation],
              context: Sequence[str] = ()) -> list[Normalized]:
    """Every observation normalised, in order (blocking: run in a thread)."""
    docs = list(nlp.pipe([o.text for o in observations], batch_size=64))
    return [normalize_one(doc, obs, addressee(obs.speaker, i, observations, context))
            for i, (doc, obs) in enumerate(zip(docs, observations, strict=True))]
