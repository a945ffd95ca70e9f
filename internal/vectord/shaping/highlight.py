"""Highlights of the hits shown (docs/API.md, "Shaping results").

A word is marked when its lexeme, in the item's language, is one of the query's lexemes
as the lexical layer matched them (the query stemmed in every language of the searched
corpora, only lexemes some corpus holds: BM25's own). With the in-memory lexical index
the marks are found in Python from the hits' text, already read with the hits, and
proven equal to PostgreSQL's by the index's term frequencies (lexical/marks.py): no statement.
The words' lexemes are PostgreSQL's own: the words a search needs that no search has
needed before are stemmed by one statement per language, then kept (marks.learn).
A hit whose counts disagree, or the "sql" engine: PostgreSQL's
ts_headline over those hits only (statements.headlines), with the same lexemes. The
fragments are cut and escaped by shaping/fragments.py either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Sequence
from dataclasses import replace

import numpy as np
import psycopg

from internal.api.vectord import Corpus, Highlight, Hit
from internal.vectord.lexical import cjk, marks, postings
from internal.vectord.search import lexical_memory, reads
from internal.vectord.search.lexical_options import union_languages
from internal.vectord.search.options import Options
from internal.vectord.shaping import fragments, statements
from internal.vectord.storage.store import Store

Spans = list[tuple[int, int]]
FIELDS = ("title", "text")
# Hits highlighted by each way since start (tests, the benchmark's notes).
MARKED = {"python": 0, "postgres": 0}
# The words stemmed at a search (statements.LEXEMES_OF): statements and words since start.
STEMMED = {"statements": 0, "words": 0}


async def query_lexemes(store: Store, p: Options, corpora: Sequence[Corpus], *,
                        trust: bool = True
                        ) -> tuple[list[str], dict[int, postings.CorpusIndex]]:
    """The query's lexemes some corpus holds, and each corpus's in-memory index view
    (by corpus id) holding them: the search's own, so with a warm cache and `trust` no
    statement (else one that reads the corpora's versions and brings the index to them);
    no views with the "sql" engine (the lexemes read by a statement then)."""
    if not p.text.strip() or not corpora:
        return [], {}
    if not lexical_memory.in_memory(store):
        stats = await reads.union_stats(store, p, corpora)
        return (stats.lexemes if stats is not None else []), {}
    langs, auto = union_languages(p, corpora)
    try:
        prep = await store.lex.prepare(store.reads, corpora, p.text, langs, auto,
                                       lexical_memory.fw(p), trust=trust)
    except psycopg.errors.UndefinedTable:  # a corpus dropped since the search: no marks
        return [], {}
    if prep.stats is None:
        if trust and not prep.checked:
            # No query word in the cached views: a write they have not seen may hold one
            # ("nothing matches" must be the corpora's answer now, not the cache's).
            return await query_lexemes(store, p, corpora, trust=False)
        return [], {}
    return prep.stats.lexemes, {c.id: ix for c, ix in zip(corpora, prep.indexes, strict=True)}


def term_counts(ix: postings.CorpusIndex, lexemes: Sequence[str], ids: Sequence[str]
                ) -> dict[str, dict[str, tuple[int, int]]] | None:
    """Per item id, each lexeme's term frequency in its title and its text (0, 0 when it
    lacks the lexeme); None when the view does not hold every lexeme."""
    entries = [ix.entries.get(t) for t in lexemes]
    if any(e is None for e in entries):
        return None
    ords = {o: i for i in ids if (o := ix.ord_of.get(i)) is not None}
    out: dict[str, dict[str, tuple[int, int]]] = {i: dict.fromkeys(lexemes, (0, 0))
                                                  for i in ids}
    if not ords:
        return out
    # Each lexeme's postings of the hits: a gather through a mask of the hits' ordinals,
    # with a spare False at its end that any larger ordinal is clipped to.
    wanted = np.zeros(max(len(ix.ids), max(ords) + 1) + 1, dtype=bool)
    wanted[list(ords)] = True
    for t, e in zip(lexemes, entries, strict=True):
        if e is None or not e.df:
            continue
        at = np.flatnonzero(np.take(wanted, e.ords, mode="clip"))
        if len(at):
            for o, (title, text) in zip(e.ords[at].tolist(), e.tf[at, :2].tolist(),
                                        strict=True):
                out[ords[o]][t] = (title, text)
    return out


def _field(h: Hit, name: str) -> str:
    """The field's text as PostgreSQL reads it for highlights (sentinels out)."""
    return fragments.strip_sentinels((h.title if name == "title" else h.text) or "")


# Per field shown: its text (sentinels out) and the words that may carry a query lexeme.
Fields = dict[str, tuple[str, "marks.Words | None"]]


def field_words(h: Hit, counts: dict[str, tuple[int, int]], fields: Sequence[str]) -> Fields:
    """Each field's text and words, found once for both the stemming and the marks."""
    out: Fields = {}
    for name in fields:
        col = FIELDS.index(name)
        text = _field(h, name)
        out[name] = (text, marks.words(text, h.language, {t: c[col] for t, c in counts.items()}))
    return out


async def learn_words(store: Store, counted: Sequence[tuple[Hit, Fields]]) -> None:
    """Have PostgreSQL stem the words the hits' marks will look up that it has not
    stemmed yet: one statement per language, none once the words are known."""
    want: dict[str, set[str]] = {}
    for h, fields in counted:
        for _, found in fields.values():
            new = marks.unknown(found, h.language)
            if new:
                want.setdefault(h.language, set()).update(new)
    if not want:
        return
    STEMMED["statements"] += len(want)
    STEMMED["words"] += sum(len(w) for w in want.values())
    got = await asyncio.gather(*(statements.lexemes_of(store, language, sorted(words))
                                 for language, words in want.items()))
    for language, table in zip(want, got, strict=True):
        marks.learn(language, table)


def python_marks(h: Hit, fields: Fields, lexemes: Collection[str]
                 ) -> dict[str, tuple[str, Spans]] | None:
    """Each field's text (sentinels out, as for PostgreSQL) and marks, None when any
    field's marks are not proven PostgreSQL's."""
    out: dict[str, tuple[str, Spans]] = {}
    for name, (text, found) in fields.items():
        got = marks.marks_in(found, h.language)
        if got is None:
            return None
        out[name] = (text, with_bigrams(h, text, got, lexemes))
    return out


def with_bigrams(h: Hit, text: str, spans: Spans, lexemes: Collection[str]) -> Spans:
    """A Chinese or Japanese hit's marks plus its words' bigrams that are query lexemes
    (lexical/cjk.py): PostgreSQL's ts_headline reads a run of Han or kana as one word, so it
    never marks a word inside a sentence."""
    if not cjk.is_cjk(h.language):
        return spans
    return cjk.merged(spans, cjk.marks(text, lexemes))


async def highlight(store: Store, p: Options, hl: Highlight, corpora: dict[str, Corpus],
                    hits: list[Hit]) -> None:
    """Each hit's `highlight` and `highlight_kind` (lexical marks, else the field's lead)."""
    if not hits:
        return
    found: dict[tuple[str, str], dict[str, tuple[str, Spans]]] = {}
    # The search's own text (not stripped: the key of the query's lexemes it cached).
    text = p.text or p.query_text
    searched = [c for c in corpora.values() if any(h.corpus == c.name for h in hits)]
    lexemes, views = await query_lexemes(store, replace(p, text=text), searched)
    if lexemes:
        wanted = frozenset(lexemes)
        ask: dict[str, list[str]] = {}
        counted: list[tuple[Hit, Fields | None]] = []
        for c in searched:
            mine = [h for h in hits if h.corpus == c.name]
            ix = views.get(c.id)
            counts = term_counts(ix, lexemes, [h.id for h in mine]) if ix is not None else None
            counted += [(h, field_words(h, counts[h.id], hl.fields) if counts is not None
                         else None) for h in mine]
        await learn_words(store, [(h, f) for h, f in counted if f is not None])
        for h, f in counted:
            got = python_marks(h, f, wanted) if f is not None else None
            if got is None:
                ask.setdefault(h.corpus, []).append(h.id)
            else:
                found[(h.corpus, h.id)] = got
        MARKED["python"] += len(found)
        MARKED["postgres"] += sum(len(ids) for ids in ask.values())
        read = await asyncio.gather(*(statements.headlines(
            store, corpora[name], ids, lexemes, fragments.headline_options())
            for name, ids in ask.items()))
        shown = {(h.corpus, h.id): h for h in hits}
        for name, rows in zip(ask, read, strict=True):
            for i, (title, body) in rows.items():
                got = {"title": fragments.spans(title), "text": fragments.spans(body)}
                h = shown[(name, i)]
                found[(name, i)] = {f: (t, with_bigrams(h, t, s, wanted))
                                    for f, (t, s) in got.items()}
    for h in hits:
        row = found.get((h.corpus, h.id))
        out: dict[str, list[str]] = {}
        kinds: dict[str, str] = {}
        for name in hl.fields:
            frags = (fragments.best_of(*row[name], hl.pre, hl.post, hl.fragment_chars,
                                       hl.fragments) if row is not None else [])
            if frags:
                out[name], kinds[name] = frags, fragments.LEXICAL
            else:
                stored = h.title if name == "title" else h.text
                out[name] = fragments.lead(stored or "", hl.fragment_chars)
                kinds[name] = fragments.LEAD
        h.highlight, h.highlight_kind = out, kinds
