"""Resource selection: which of the searched corpora a question is about (no I/O).

A search over several corpora ranks them as one corpus holding their union
(search/union_merge.py). That ranking treats "windows" in "kill a process by its name on
windows" as one more word, when a whole corpus is about it. Federated search solved this
as resource selection (CORI, Callan 1995; ReDDE, Si & Callan 2003; centroid-based
selection): score each collection for the question from a summary of it, then weigh its
results. Here each searched corpus gets a score from its profile
(internal.vectord.storage.profiles) against the other searched corpora, and the score
becomes the corpus's weight in the merge (`merge_score x w`, as `corpus_weights`).

Evidence, per lexeme of the question (a word is read through the profiles' own words,
so no statement runs):

- **content**: the corpus holds the lexeme in a share of its documents at least
  `min_share`, and `min_ratio` times the share of every other searched corpus (each
  share shrunk toward the searched corpora's pooled share by `prior` documents, so a
  corpus of eleven pages is not about a word three of them hold). Its value is the log
  of that ratio, at most `cap`. A word a whole corpus is about ("windows" in a quarter
  of the Windows pages, "powershell" in a third) passes; a word every corpus holds ("the",
  "file") does not, nor a rare one (a name two documents hold), so corpora of one kind
  split into shards never differ by content, whatever the question;
- **name and description**: the lexeme is a word of the corpus's name or description
  that no other searched corpus's name or description holds, and that no other
  searched corpus's documents hold in more than `named_share` of them ("windows" yes,
  "system" no): `named`;
- **about** (their meaning): the question's vector is nearer the corpus's name and
  description, embedded by its model, than any other searched corpus's of its
  embedding space by more than `about_gap`, and near it at all (`about_floor`):
  `about_per_gap` per unit beyond ("keep my mac from going to sleep" is nearest "osx",
  with no word of it).

The score is the sum over the question's lexemes of the larger lexical evidence, plus
the `about` evidence; the weight `1 + per_unit x score`, at most `most`. No evidence:
weight 1, and the ranking is the union's to the bit. The contrasts are computed among
the searched corpora only: the selection of a search can tell nothing of a corpus it
does not cover. The settings are measured in docs/decisions/0240-resource-selection.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from internal.api import responses as wire
from internal.vectord.storage.profiles import F32, WORD, Profile

Source = Literal["content", "name", "description", "about"]



@dataclass(frozen=True)
class Settings:
    """The selection's settings: chosen by leave-one-set-out cross-validation over the
    platform question sets and SciFact, Cranfield and CISI mixed with other corpora
    (docs/decisions/0240-resource-selection.md)."""

    prior: float = 20.0  # documents a corpus's share is shrunk by, toward the pooled one
    min_share: float = 0.01  # content: its documents holding the word, at least
    min_ratio: float = 3.0  # content: times any other group's share, at least
    cap: float = math.log(30.0)  # content: its value at most
    named: float = math.log(20.0)  # a word of its name or description
    named_share: float = 0.05  # ... when no other searched corpus's documents hold it more
    per_unit: float = 0.75  # the weight gained per unit of score
    most: float = 3.0  # the weight at most
    # The question's vector nearer the corpus's name and description than any other
    # searched corpus's of its embedding space by more than `about_gap`: `about_per_gap`
    # per unit of gap beyond it, when it is near it at all (`about_floor`: a cosine below
    # it is no more than two short texts' background, "printer jams" to "handbook").
    about_floor: float = 0.15
    about_gap: float = 0.06
    about_per_gap: float = 20.0
    same: float = 0.97  # corpora this alike weigh as one (groups)


DEFAULT = Settings()


@dataclass(frozen=True)
class Member:
    """A searched corpus: its name, its profile (None: not built yet), the question's
    vector in its embedding space (unit; None: none) and that space."""

    name: str
    profile: Profile | None
    vector: F32 | None = None
    space: object = None


@dataclass(frozen=True)
class Evidence:
    """Why a corpus scores: the question's word, its lexeme, where it matched, the
    corpus's share of documents holding it and the largest share of another searched
    corpus (content), and what it adds."""

    word: str
    lexeme: str
    source: Source
    value: float
    share: float | None = None
    others: float | None = None


@dataclass
class Choice:
    corpus: str
    score: float = 0.0
    weight: float = 1.0
    evidence: list[Evidence] = field(default_factory=list)


def words(text: str) -> list[str]:
    """The question's words, in order, each once."""
    return list(dict.fromkeys(w for w in WORD.split(text.lower()) if w))


def _lexemes(text: str, profiles: Sequence[Profile]) -> dict[str, frozenset[str]]:
    """Each word of the question and its lexemes, read through the profiles' own words
    (one a language its documents are stored in); a word adding no lexeme is left out."""
    out: dict[str, frozenset[str]] = {}
    seen: set[str] = set()
    for w in words(text):
        lexemes = frozenset(x for p in profiles for x in p.lexemes_of(w))
        if lexemes and not lexemes <= seen:
            out[w] = lexemes
            seen |= lexemes
    return out


def groups(profiles: Sequence[Profile], same: float) -> list[int]:
    """Each profile's group: corpora whose documents are alike (fingerprints' dot product
    at least `same`), as the parts of one set are, weigh as one: they are compared with
    the other groups, never with each other, and take one weight. Kept per set of
    profiles (a profile is rebuilt as a new object)."""
    key = (tuple(id(p) for p in profiles), same)
    got = _GROUPS.get(key)
    if got is not None and all(a is b for a, b in zip(got[0], profiles, strict=True)):
        return got[1]
    n = len(profiles)
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    prints = np.stack([p.fingerprint for p in profiles])
    alike = prints @ prints.T
    for i, j in zip(*np.nonzero(np.triu(alike >= same, 1)), strict=True):
        parent[root(int(j))] = root(int(i))
    out = [root(i) for i in range(n)]
    _GROUPS[key] = (list(profiles), out)
    while len(_GROUPS) > GROUPS_KEPT:
        _GROUPS.pop(next(iter(_GROUPS)))
    return out


GROUPS_KEPT = 256
_GROUPS: dict[tuple[tuple[int, ...], float], tuple[list[Profile], list[int]]] = {}


def select(text: str, members: Sequence[Member], s: Settings = DEFAULT) -> list[Choice] | None:
    """Each member's score and weight for the question, in the members' order (None:
    fewer than two have a profile with documents yet, so nothing is compared)."""
    choices = [Choice(m.name) for m in members]
    known = [(c, m.profile) for c, m in zip(choices, members, strict=True)
             if m.profile is not None and m.profile.documents > 0]
    if len(known) < 2:
        return None
    profiles = [p for _, p in known]
    of = groups(profiles, s.same)
    if len(set(of)) > 1:
        asked = _lexemes(text, profiles)
        if asked:
            _weigh(asked, [c for c, _ in known], profiles, of, s)
    _nearest(choices, members, {id(c): of[i] for i, (c, _) in enumerate(known)}, s)
    for c in choices:
        c.weight = round(min(s.most, 1.0 + s.per_unit * c.score), 6)
        c.score = round(c.score, 6)
    return choices


def _best_two(values: list[float]) -> tuple[int, float, float]:
    """The position of the largest value, it, and the second largest (0: none)."""
    top, first, second = 0, values[0], 0.0
    for k in range(1, len(values)):
        v = values[k]
        if v > first:
            top, first, second = k, v, first
        elif v > second:
            second = v
    return top, first, second


def _weigh(asked: dict[str, frozenset[str]], choices: list[Choice], profiles: list[Profile],
           of: list[int], s: Settings) -> None:
    """Each word's evidence: each group's share of documents holding the word, shrunk,
    against the other groups'; each of its corpora takes it. (Plain loops: a question's
    few words over a few groups cost less so than as arrays.)"""
    ids = sorted(set(of))
    members = [[j for j, g in enumerate(of) if g == gid] for gid in ids]
    gdocs = [sum(profiles[j].documents for j in m) for m in members]
    total = sum(gdocs)
    for w, lex in asked.items():
        dfs = [min(p.documents, sum(p.terms.get(x, 0) for x in lex)) for p in profiles]
        gdf = [sum(dfs[j] for j in m) for m in members]
        pooled = sum(gdf) / total
        share = [d / n for d, n in zip(gdf, gdocs, strict=True)]
        shrunk = [(d + s.prior * pooled) / (n + s.prior) for d, n in zip(gdf, gdocs, strict=True)]
        named = [[not profiles[j].described_lexemes.isdisjoint(lex) for j in m] for m in members]
        holders = sum(1 for held in named if any(held))
        top, first, second = _best_two(shrunk)
        stop, sfirst, ssecond = _best_two(share)
        for g, m in enumerate(members):
            others = second if g == top else first
            beside = ssecond if g == stop else sfirst
            value = 0.0
            if share[g] >= s.min_share and shrunk[g] >= s.min_ratio * others:
                value = min(s.cap, math.log(shrunk[g] / others)) if others > 0 else s.cap
            lone = holders == 1 and beside <= s.named_share
            if value <= 0 and not (lone and any(named[g])):
                continue
            for j, is_named in zip(m, named[g], strict=True):
                _evidence(choices[j], profiles[j], w, lex, value, dfs[j], beside,
                          lone and is_named and s.named > value, s)


def _evidence(choice: Choice, p: Profile, w: str, lex: frozenset[str], value: float, df: int,
              beside: float, named: bool, s: Settings) -> None:
    """The word's evidence for one corpus: its name's or description's, else content's."""
    if named:
        source: Source = "name" if w in p.name_words else "description"
        best = Evidence(w, p.described.get(w, _top(p, lex)), source, s.named)
    elif value > 0:
        best = Evidence(w, _top(p, lex), "content", value, round(df / p.documents, 6),
                        round(beside, 6))
    else:
        return
    choice.evidence.append(best)
    choice.score += best.value


def _top(p: Profile, lexemes: frozenset[str]) -> str:
    """The word's lexeme the corpus's documents hold most."""
    return min(lexemes, key=lambda x: (-p.terms.get(x, 0), x))


def _nearest(choices: list[Choice], members: Sequence[Member], of: dict[int, int],
             s: Settings) -> None:
    """Vector evidence: within each embedding space, the group of corpora whose names
    and descriptions the question is nearest (its nearest corpus's), by more than
    `about_gap` over the nearest corpus of another group; each corpus of it takes it."""
    if s.about_per_gap <= 0:
        return
    spaces: dict[object, list[tuple[Choice, float]]] = {}
    for c, m in zip(choices, members, strict=True):
        vec = None if m.profile is None else m.profile.about_vector
        if (m.vector is not None and vec is not None and vec.shape == m.vector.shape
                and id(c) in of):
            spaces.setdefault(m.space, []).append((c, float(np.dot(m.vector, vec))))
    for near in spaces.values():
        near.sort(key=lambda x: -x[1])
        best, sim = near[0]
        group = of.get(id(best))
        others = [x for c, x in near if of.get(id(c)) != group]
        if not others or sim < s.about_floor or sim - others[0] <= s.about_gap:
            continue
        value = s.about_per_gap * (sim - others[0] - s.about_gap)
        for c, x in near:
            if of.get(id(c)) == group:
                c.evidence.append(Evidence("", "", "about", value, round(x, 6),
                                           round(others[0], 6)))
                c.score += value


def public(c: Choice) -> wire.CorpusSelection:
    """A choice as the search's answer shows it."""
    return wire.CorpusSelection(score=c.score, weight=c.weight, evidence=[
        wire.SelectionEvidence(word=e.word, lexeme=e.lexeme, source=e.source,
                               value=round(e.value, 6), share=e.share, others=e.others)
        for e in c.evidence])


def distinctive(p: Profile, others: Sequence[Profile], n: int = 20, s: Settings = DEFAULT
                ) -> list[wire.ProfileTerm]:
    """The lexemes that say most of what the corpus is about against `others` (those the
    caller may see): held by at least `min_share` of its documents and `min_ratio` times
    more than by any other (shrunk as `select` shrinks them), by the evidence each would
    give times its share; against none, its most common lexemes."""
    others = [o for o in others if o.documents > 0]
    docs = p.documents + sum(o.documents for o in others)
    word_of: dict[str, str] = {}
    for w, lexemes in sorted(p.words.items(), key=lambda x: (len(x[0]), x[0]), reverse=True):
        for lexeme in lexemes:
            word_of[lexeme] = w  # the shortest word that makes it, the last written
    ranked: list[tuple[float, str, float, float | None]] = []
    for lexeme, df in p.terms.items():
        share = df / p.documents if p.documents else 0.0
        if share < s.min_share:
            continue
        if not others:
            ranked.append((share, lexeme, share, None))
            continue
        dfs = [o.terms.get(lexeme, 0) for o in others]
        pooled = (df + sum(dfs)) / docs
        own = (df + s.prior * pooled) / (p.documents + s.prior)
        best = max((d + s.prior * pooled) / (o.documents + s.prior)
                   for d, o in zip(dfs, others, strict=True))
        if own < s.min_ratio * best:
            continue
        value = min(s.cap, math.log(own / best)) if best > 0 else s.cap
        ranked.append((value * share, lexeme, share, max(
            (d / o.documents if o.documents else 0.0) for d, o in zip(dfs, others, strict=True))))
    ranked.sort(key=lambda r: (-r[0], r[1]))
    return [wire.ProfileTerm(lexeme=lexeme, word=word_of.get(lexeme, lexeme),
                             documents=p.terms[lexeme], share=round(share, 6),
                             others=None if others_share is None else round(others_share, 6))
            for _, lexeme, share, others_share in ranked[:n]]
