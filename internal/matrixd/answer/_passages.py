"""The extractive answer: the sentences of the hits that answer the question, each cited
(no I/O, deterministic).

Each hit's text is cut into sentences with their offsets in the stored text (a turn
indexed with its neighbours, metadata `context_window`, only in its own first line: the
neighbours are items of their own). A sentence scores by how much of the question it
holds and how strongly its hit was retrieved:

    score = rank_weight(hit) x (overlap + credit(hit) x (SEMANTIC x semantic + FLOOR))
            (x QUESTION for a question)

`overlap` is the share of the question's terms (its words, stop words out, folded), each
weighted by how rare it is among the hits (a term every hit holds, such as a speaker's
name, tells little), that the sentence holds; `semantic` is 1 for the sentence the
search's highlight chose as the hit's passage most similar to the question (a hit the
vector layer alone found: its words do not match the question's); `rank_weight` is
1 / (1 + RANK_DECAY x (rank - 1)); `credit` is 0 for a hit whose ranking score is below
MIN_STRENGTH of the first hit's (its `strength`), else 1: a hit far below the first is quoted
only for the question's words it holds. The best sentences are taken, at most PER_HIT of a hit,
until the word budget is spent (the first one cut at a word boundary when it alone is
longer); sentences of one hit that touch are cited as one passage. The answer reads them
best first, each followed by its marker `[n]`.
"""

from __future__ import annotations

import dataclasses
import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

# The weights, chosen on LoCoMo's tuning conversations:
# docs/decisions/0280-answers-extractive-cited.md.
RANK_DECAY = 0.25
SEMANTIC = 0.5
FLOOR = 0.2  # a hit's sentence holding none of the question still counts by its hit's rank
PER_HIT = 3
QUESTION = 0.5  # a question's score is this share: it asks, it does not state
# A hit scoring below this share of the first hit's lends no credit (FLOOR, SEMANTIC) to its
# sentences: one holding none of the question is not quoted from it.
MIN_STRENGTH = 0.3
# A sentence scoring below this share of the best one is not worth its words.
MIN_SHARE = 0.1

WORD = re.compile(r"\w+(?:['’]\w+)*")
# A sentence ends after . ! ? … (and a closing quote or bracket) before a space, or at a
# line break.
_END = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s)|\n+")

# Function words of questions and answers (English): no term of their own.
STOP = frozenset("""
a about above after again against all am an and any are as at be because been before being
below between both but by can could did do does doing down during each few for from further
had has have having he her here hers herself him himself his how i if in into is it its itself
just me more most my myself no nor not now of off on once only or other our ours ourselves out
over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which
while who whom whose why will with would you your yours yourself yourselves also ever did
does get got kind sort type thing things way much many might may must shall yes yeah oh hey
hi thanks thank really like just well ok okay s t d ll m re ve
say said says tell told go goes went gone going make makes made use used uses take took
come came want wanted know knew think thought see saw look looked
""".split())


def fold(word: str) -> str:
    """A word as terms are compared: lower case, accents kept, a possessive and the
    commonest English inflections (plural, -ing, -ed) taken off a word long enough."""
    w = unicodedata.normalize("NFKC", word).lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    for suffix in ("ing", "ed", "es"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 4:
            return w[: -len(suffix)]
    if w.endswith("s") and not w.endswith("ss") and len(w) >= 4:
        return w[:-1]
    return w


def terms(text: str) -> list[str]:
    """The folded words of a text that are not stop words, in order."""
    return [fold(w) for w in WORD.findall(text) if w.lower() not in STOP]


def word_count(text: str) -> int:
    return len(WORD.findall(text))


@dataclass(frozen=True)
class Source:
    """One hit as the answer reads it."""

    rank: int  # 1-based, in the search's order
    corpus: str
    id: str
    document_id: str | None
    title: str | None
    text: str
    own_end: int  # the item's own text is text[:own_end] (a window's first line)
    similarity: float | None = None  # the vector layer's similarity, when it ran
    semantic: str | None = None  # the highlight's passage most similar to the question
    speaker: str | None = None  # metadata `speaker`, when the item has one
    strength: float = 1.0  # its ranking score against the first hit's, in [0, 1]


@dataclass(frozen=True)
class Passage:
    source: Source
    start: int
    end: int
    score: float
    overlap: float  # the weighted share of the question's terms it holds
    content: float  # the same without the persons' names
    semantic: bool

    @property
    def text(self) -> str:
        return self.source.text[self.start:self.end]

    @property
    def stated(self) -> bool:
        """Whether it states something (a question, ending in "?", does not)."""
        return not self.source.text[self.start:self.end].rstrip("\"'”’) ").endswith("?")


@dataclass(frozen=True)
class Question:
    """The question's terms and their weights over the hits (rarer weighs more)."""

    terms: dict[str, float]
    names: frozenset[str] = frozenset()  # folded names of the persons it names

    def share(self, found: Iterable[str], without_names: bool = False) -> float:
        keys = [t for t in self.terms if not (without_names and t in self.names)]
        total = sum(self.terms[t] for t in keys)
        if total <= 0:
            return 0.0
        got = set(found)
        return sum(self.terms[t] for t in keys if t in got) / total


def sentences(text: str, end: int | None = None) -> list[tuple[int, int]]:
    """The [start, end) spans of the sentences of text[:end], whitespace trimmed."""
    stop = len(text) if end is None else end
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _END.finditer(text, 0, stop):
        spans.append((start, m.end()))
        start = m.end()
    spans.append((start, stop))
    out = []
    for a, b in spans:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if a < b and WORD.search(text, a, b):
            out.append((a, b))
    return out


def question_of(text: str, sources: Sequence[Source], names: Iterable[str] = ()) -> Question:
    """The question's terms weighted by their rarity among the hits' own texts:
    log((N + 1) / (df + 0.5)), N the hits, df those holding the term."""
    qterms = list(dict.fromkeys(terms(text)))
    held = [set(terms(s.text[:s.own_end])) for s in sources]
    n = len(held)
    weights = {t: math.log((n + 1) / (sum(1 for h in held if t in h) + 0.5)) for t in qterms}
    return Question(weights, frozenset(fold(w) for name in names for w in WORD.findall(name)))


def _semantic_span(source: Source) -> tuple[int, int] | None:
    """Where the highlight's semantic passage lies in the text (it is cut from the text
    with its white space made single spaces)."""
    if not source.semantic:
        return None
    words = WORD.findall(source.semantic)
    if not words:
        return None
    pattern = r"\W+".join(re.escape(w) for w in words)
    m = re.search(pattern, source.text)
    return (m.start(), m.end()) if m else None


def rank_weight(rank: int) -> float:
    return 1.0 / (1.0 + RANK_DECAY * (rank - 1))


def score_passages(question: Question, sources: Sequence[Source]) -> list[Passage]:
    """Every sentence of every hit, scored, best first (ties: the better hit, then the
    earlier sentence)."""
    out: list[Passage] = []
    for s in sources:
        sem = _semantic_span(s)
        weight = rank_weight(s.rank)
        credit = 1.0 if s.strength >= MIN_STRENGTH else 0.0
        for a, b in sentences(s.text, s.own_end):
            found = terms(s.text[a:b])
            overlap = question.share(found)
            content = question.share(found, without_names=True)
            semantic = sem is not None and a < sem[1] and sem[0] < b
            score = weight * (overlap + ((SEMANTIC if semantic else 0.0) + FLOOR) * credit)
            p = Passage(s, a, b, score, overlap, content, semantic)
            out.append(p if p.stated else dataclasses.replace(p, score=score * QUESTION))
    out.sort(key=lambda p: (-p.score, p.source.rank, p.start))
    return out


@dataclass
class Chosen:
    """The passages of the answer, in its order, with the words they hold."""

    passages: list[Passage] = field(default_factory=list)
    words: int = 0


def choose(passages: Sequence[Passage], max_words: int, per_hit: int | None = PER_HIT,
           min_share: float = MIN_SHARE) -> Chosen:
    """The best passages within `max_words` (at most `per_hit` a hit, None: any, none
    below `min_share` of the best); the first is cut to fit when it alone is longer."""
    chosen = Chosen()
    if not passages:
        return chosen
    floor = passages[0].score * min_share
    limit = per_hit if per_hit is not None else len(passages)
    taken: dict[tuple[str, str], int] = {}
    seen: set[str] = set()
    for p in passages:
        if p.score < floor or chosen.words >= max_words:
            break
        key = (p.source.corpus, p.source.id)
        norm = " ".join(terms(p.text))
        if taken.get(key, 0) >= limit or norm in seen:
            continue  # a hit's share is taken, or the same words were cited already
        n = word_count(p.text)
        if chosen.words + n > max_words:
            if chosen.passages:
                continue  # a shorter one further down may fit
            p = _cut(p, max_words)
            n = word_count(p.text)
        chosen.passages.append(p)
        chosen.words += n
        taken[key] = taken.get(key, 0) + 1
        seen.add(norm)
    return chosen


def _cut(p: Passage, max_words: int) -> Passage:
    """The passage's first `max_words` words (it ends at the last one's end)."""
    words = list(WORD.finditer(p.source.text, p.start, p.end))
    end = words[max_words - 1].end() if len(words) > max_words else p.end
    return Passage(p.source, p.start, end, p.score, p.overlap, p.content, p.semantic)


def merged(chosen: Sequence[Passage]) -> list[Passage]:
    """The chosen passages with those of one hit that touch (no sentence between them)
    made one, placed where the first of them was."""
    out: list[Passage] = []
    for p in chosen:
        for i, q in enumerate(out):
            if q.source is p.source and _touch(q, p):
                a, b = min(q.start, p.start), max(q.end, p.end)
                out[i] = Passage(q.source, a, b, max(q.score, p.score),
                                 max(q.overlap, p.overlap), max(q.content, p.content),
                                 q.semantic or p.semantic)
                break
        else:
            out.append(p)
    return out


def _touch(a: Passage, b: Passage) -> bool:
    first, second = (a, b) if a.start <= b.start else (b, a)
    gap = first.source.text[first.end:second.start]
    return not WORD.search(gap)


def pieces(passages: Sequence[Passage]) -> list[str]:
    """The answer's text a passage at a time: each passage (its white space made single
    spaces) followed by its marker, `[1]` for the first, a space between them."""
    return [f"{' ' if i > 1 else ''}{' '.join(p.text.split())} [{i}]"
            for i, p in enumerate(passages, 1)]


def compose(passages: Sequence[Passage]) -> str:
    """The answer's text: its pieces joined."""
    return "".join(pieces(passages))
