"""Typo tolerance, the pure part (no I/O): a question's term that no searched corpus holds
is matched against the corpora's own terms within one or two edits, by its length.

- **How many edits** (`budget`): none below `ONE_TYPO_FROM` characters, one from there,
  two from `TWO_TYPOS_FROM`: Meilisearch's `typoTolerance` defaults (5 and 9). A short
  term has too many neighbours one edit away (`ss`: `sa`, `su`, `sh`) for a guess to mean
  anything.
- **An edit** is an insertion, a deletion, a substitution or the transposition of two
  neighbours (the optimal string alignment distance: Damerau's count, as Meilisearch's
  and Elasticsearch's `transpositions: true` count it): `journalclt` is one edit from
  `journalctl`.
- **Which term**: the fewest edits, then the most documents (the likelier word), then the
  term itself (a stable answer).
- **Counted less**: a corrected term scores with its weight times `CORRECTED_WEIGHT`,
  so a page matching the question's own words outranks one matching a guess.

Terms are the corpora's lexemes (stemmed in their language), so a correction is found
in the same form the index holds; a term is compared only with terms of lengths within
its budget, after a filter on character counts (each edit changes them by at most 2),
so a vocabulary of 100,000 terms answers in a few milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

ONE_TYPO_FROM = 5
TWO_TYPOS_FROM = 9
# A corrected term's weight against the question's own (measured: docs/decisions/0222).
CORRECTED_WEIGHT = 0.5
# The character classes counted by the filter: a-z, 0-9 and one bucket for the rest.
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
_CLASSES = len(_ALPHABET) + 1
# Terms shorter than this are never a correction's answer (a term of ONE_TYPO_FROM
# characters reaches one edit shorter; two edits start at TWO_TYPOS_FROM).
SHORTEST = min(ONE_TYPO_FROM - 1, TWO_TYPOS_FROM - 2)


def budget(term: str) -> int:
    """The edits allowed to match a term of this length (0: none, it must be exact)."""
    n = len(term)
    if n >= TWO_TYPOS_FROM:
        return 2
    if n >= ONE_TYPO_FROM:
        return 1
    return 0


def distance(a: str, b: str, limit: int = 2) -> int:
    """The optimal string alignment distance of a and b (an adjacent transposition is one
    edit), or limit + 1 as soon as it must exceed limit."""
    if a == b:
        return 0
    la, lb = len(a), len(b)
    if abs(la - lb) > limit:
        return limit + 1
    prev2: list[int] = []
    prev = list(range(lb + 1))
    for i in range(1, la + 1):
        cur = [i] + [0] * lb
        ai = a[i - 1]
        low = cur[0]
        for j in range(1, lb + 1):
            cost = 0 if ai == b[j - 1] else 1
            v = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and ai == b[j - 2] and a[i - 2] == b[j - 1]:
                v = min(v, prev2[j - 2] + 1)
            cur[j] = v
            low = min(low, v)
        if low > limit:
            return limit + 1
        prev2, prev = prev, cur
    return min(prev[lb], limit + 1)


def _counts(term: str) -> npt.NDArray[np.int16]:
    row: npt.NDArray[np.int16] = _count_rows([term], len(term))[0]
    return row


def _count_rows(terms: list[str], n: int) -> npt.NDArray[np.int16]:
    """The character-class counts of terms of n characters each, one row a term (code
    points read as UTF-32 at once: a vocabulary of 30,000 terms in milliseconds)."""
    if n == 0:
        return np.zeros((len(terms), _CLASSES), dtype=np.int16)
    cp = np.frombuffer("".join(terms).encode("utf-32-le"), dtype=np.uint32).reshape(-1, n)
    cls = np.where((cp >= 97) & (cp <= 122), cp - 97,
                   np.where((cp >= 48) & (cp <= 57), cp - 48 + 26, _CLASSES - 1))
    rows = np.repeat(np.arange(len(terms)), n)
    flat = np.bincount(rows * _CLASSES + cls.ravel().astype(np.int64),
                       minlength=len(terms) * _CLASSES)
    out: npt.NDArray[np.int16] = flat.reshape(len(terms), _CLASSES).astype(np.int16)
    return out


@dataclass
class Vocabulary:
    """A corpus's (or a union's) terms and their document frequencies, grouped by length
    for the search of near ones."""

    dfs: dict[str, float]
    _by_len: dict[int, tuple[list[str], npt.NDArray[np.int16]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        groups: dict[int, list[str]] = {}
        for t in self.dfs:
            if len(t) >= SHORTEST:
                groups.setdefault(len(t), []).append(t)
        for n, terms in groups.items():
            terms.sort()
            self._by_len[n] = (terms, _count_rows(terms, n))

    def __len__(self) -> int:
        return len(self.dfs)

    def near(self, term: str, edits: int) -> list[tuple[int, str]]:
        """The terms within `edits` of term (not term itself), as (edits, term)."""
        if edits <= 0:
            return []
        want = _counts(term)
        out: list[tuple[int, str]] = []
        for n in range(len(term) - edits, len(term) + edits + 1):
            group = self._by_len.get(n)
            if group is None:
                continue
            terms, counts = group
            # Each edit changes the character counts by at most 2 (a transposition by 0).
            close = np.nonzero(np.abs(counts - want).sum(axis=1) <= 2 * edits)[0]
            for i in close.tolist():
                t = terms[i]
                if t != term and (d := distance(term, t, edits)) <= edits:
                    out.append((d, t))
        return out


def correct(term: str, vocabs: Sequence[Vocabulary]) -> str | None:
    """The term's correction within its budget in the union of the vocabularies: fewest
    edits, most documents (summed over them), then the term itself; None when the term
    is too short or nothing is near."""
    edits = budget(term)
    found: dict[str, int] = {}
    for vocab in vocabs:
        for d, t in vocab.near(term, edits):
            found[t] = d
    if not found:
        return None

    def df(t: str) -> float:
        return sum(v.dfs.get(t, 0.0) for v in vocabs)

    return min(found, key=lambda t: (found[t], -df(t), t))


def corrections(unknown: Iterable[str], vocabs: Sequence[Vocabulary]) -> dict[str, str]:
    """Each unknown term's correction (those with none left out)."""
    out: dict[str, str] = {}
    for term in unknown:
        if budget(term) > 0 and (fixed := correct(term, vocabs)) is not None:
            out[term] = fixed
    return out


_WORD = re.compile(r"[^\W_]+")


def suggestion(question: str, fixed: Mapping[str, str]) -> str | None:
    """The question as `did you mean` shows it: each word whose lexeme was corrected
    replaced by its correction (a word is taken for its lexeme when it is the lexeme, or
    the lexeme less its last letter begins it, as a Snowball stem begins its word);
    None when no word was."""
    changed = False

    def swap(m: re.Match[str]) -> str:
        nonlocal changed
        low = m.group(0).lower()
        for wrong, right in fixed.items():
            if low == wrong or (len(wrong) > 3 and low.startswith(wrong[:-1])
                                and len(low) - len(wrong) <= 3):
                changed = True
                return right
        return m.group(0)

    out = _WORD.sub(swap, question)
    return out if changed else None
