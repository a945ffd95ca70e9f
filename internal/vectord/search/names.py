"""Exact names first (no I/O): the items a question names, by their title or id, ranked
before the rest in the default search (Meilisearch's `exactness` and `attribute` rules).

A question names an item when

- it **is** the item's title (the title's lexemes are the question's, each title
  lexeme a question lexeme and every question lexeme in the title: `journalctl` for the
  page titled `journalctl`, `how do I use losetup`'s lexemes `use losetup` are not), or
  the id stem of a candidate a layer found (`at` for `at.md#0`: a title of stop words
  has no lexeme);
- it **contains** the title: every lexeme of the title is a question lexeme
  (`journalctl follow the logs of a service`), and each of them is rare in the corpora
  searched (at most `RARE_SHARE` of the documents hold it): a name is a rare word, where
  a title of common words (`file`, `find`, `time`) inside a sentence is only a word of it;
- or it matches the title through a corrected term (lexical/typos.py: `usradd`).

Those classes rank in that order, above every other candidate (`BONUS` apart), and by the
fused score within a class. Only candidates a layer found are named (an item whose title
is the question is among the lexical layer's): their titles come from the in-memory
lexical index's postings (each posting's title frequency, each item's title length), so
nothing is read for it, or, with the SQL reference engine, from their stored lexemes
(reads.TITLE_LEXEMES): the same counts.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

import numpy as np

from internal.vectord.lexical import postings

EXACT, CONTAINED, CORRECTED = 3, 2, 1
# A contained title's lexemes must each be in at most this share of the documents
# (measured: docs/decisions/0223).
RARE_SHARE = 0.02
# Classes are this far apart in the fused score (a fused score is at most 1).
BONUS = 2.0

_STEM = re.compile(r"^(?:.*/)?([^/#]*?)(?:\.[^./#]*)?(?:#.*)?$")


def id_stem(item_id: str) -> str:
    """An item's name as its id says it: no folders, chunk suffix or extension, lower-cased
    (`linux/ss.md#0` -> `ss`)."""
    m = _STEM.match(item_id)
    return (m.group(1) if m else item_id).lower()


def question_name(text: str) -> str:
    """The question as a name is compared: trimmed, lower-cased, inner spaces single."""
    return " ".join(text.lower().split())


def stem_matches(ids: Iterable[str], question: str) -> list[str]:
    """The ids whose stem is the question (its candidates', whatever the cache holds)."""
    name = question_name(question)
    return [i for i in ids if id_stem(i) == name] if name else []


K = TypeVar("K", bound=Hashable)
Title = tuple[dict[str, int], int]  # (query lexeme -> its positions in the title, title length)


def titles_of(ix: postings.CorpusIndex, ids: Iterable[str], lexemes: Sequence[str]
              ) -> dict[str, Title]:
    """Each candidate's title as the lexical index holds it (the query lexemes' title
    positions and the title's length in positions), by item id."""
    ords = {o: i for i in ids if (o := ix.ord_of.get(i)) is not None and o < ix.dl.shape[0]}
    out: dict[str, Title] = {i: ({}, int(ix.dl[o, 0])) for o, i in ords.items()}
    if not ords:
        return out
    wanted = np.fromiter(ords, dtype=np.int64, count=len(ords))
    for t in lexemes:
        e = ix.entries.get(t)
        if e is None or e.df == 0:
            continue
        at = np.nonzero(np.isin(e.ords, wanted) & (e.tf[:, 0] > 0))[0]
        for o, tf in zip(e.ords[at].tolist(), e.tf[at, 0].tolist(), strict=True):
            out[ords[o]][0][t] = int(tf)
    return out


def classes(titles: Mapping[K, Title], lexemes: Sequence[str], corrected: Collection[str],
            n: float, dfs: Mapping[str, float]) -> dict[K, int]:
    """Candidate -> its class (EXACT, CONTAINED, CORRECTED), for those whose title the
    question names. lexemes: the query's (corrected ones included, named in `corrected`);
    n, dfs: the union's documents and each lexeme's document frequency."""
    asked = set(lexemes)
    own = {t for t in asked if t not in corrected}
    rare = {t for t in own if n > 0 and dfs.get(t, 0.0) <= RARE_SHARE * n}
    out: dict[K, int] = {}
    for key, (title, length) in titles.items():
        found = {t: tf for t, tf in title.items() if t in asked}
        if length <= 0 or not found:
            continue
        in_own = sum(tf for t, tf in found.items() if t in own)
        if in_own == length and own and own <= found.keys():
            out[key] = EXACT
        elif in_own == length and found.keys() <= rare:
            out[key] = CONTAINED
        elif sum(found.values()) == length and not found.keys() <= own:
            out[key] = CORRECTED
    return out


def ranked(order: Sequence[tuple[float, K]], named: Mapping[K, int]) -> list[tuple[float, K]]:
    """(score, key) best first with the named keys lifted by their class (each class
    BONUS above the next, the fused score kept within one; ties in their order)."""
    out = [(s + BONUS * named.get(k, 0), k) for s, k in order]
    out.sort(key=lambda r: -r[0])
    return out
