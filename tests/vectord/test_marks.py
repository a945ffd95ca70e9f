"""Highlight marks found in Python (internal/vectord/lexical/marks.py): given PostgreSQL's term
frequencies and its lexemes of the words (stemmed here by the real embedded PostgreSQL,
with vectord's own statement), they mark the words it would, and answer None wherever
they cannot prove it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import psycopg
import pytest

from internal.vectord.lexical import marks
from internal.vectord.shaping.statements import LEXEMES_OF

Marker = Callable[[str, str, Mapping[str, int]], "list[tuple[int, int]] | None"]


@pytest.fixture(scope="module")
def marked(pg_dsn: str) -> Iterator[Marker]:
    """marks.marks after PostgreSQL stemmed the words it wants, as highlight() does."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        def mark(text: str, language: str, lexemes: Mapping[str, int]
                 ) -> list[tuple[int, int]] | None:
            words = sorted(marks.wanted(text, language, lexemes))
            if words:
                rows = conn.execute(LEXEMES_OF, {"cfg": language, "words": words}).fetchall()
                marks.learn(language, {str(w): str(lx or "") for w, lx in rows})
            return marks.marks(text, language, lexemes)
        yield mark


def _words(text: str, got: list[tuple[int, int]] | None) -> list[str] | None:
    return None if got is None else [text[s:e] for s, e in got]


def test_marks_the_stemmed_words_when_the_counts_agree(marked: Marker) -> None:
    text = "Running late, she runs; the run-up ran on."
    got = marked(text, "english", {"run": 3, "late": 1})
    assert _words(text, got) == ["Running", "late", "runs", "run"]
    # "ran" is not "run" in Snowball, and the compound "run-up" is never marked itself.
    assert _words(text, marked(text, "english", {"run": 3, "run-up": 1})) == [
        "Running", "runs", "run"]
    assert _words("Das Haus, die Häuser", marked("Das Haus, die Häuser", "german",
                                                       {"haus": 2})) == ["Haus", "Häuser"]


def test_words_the_parser_reads_into_other_tokens_are_not_marked(marked: Marker) -> None:
    # PostgreSQL reads "2.5" as a decimal, "IL-2" as "il" and "-2", "x.org/run" as a
    # host and a path, "HIV/AIDS" as a path: none of their word parts is marked.
    text = "2.5 fold in 2 of IL-2 cells, -2 and x.org/run; HIV/AIDS in HIV"
    assert _words(text, marked(text, "english", {"2": 1, "-2": 2, "hiv": 1})) == [
        "2", "-2", "-2", "HIV"]
    # ... but a compound's part is ("anti-IL" then "2"), and so is a number next to a comma.
    text = "anti-IL-2 at 1,68"
    assert _words(text, marked(text, "english", {"2": 1, "1": 1, "68": 1})) == [
        "2", "1", "68"]


def test_none_where_postgresql_may_read_otherwise(marked: Marker) -> None:
    # A count that differs from the index's: PostgreSQL is asked.
    assert marked("run runs", "english", {"run": 1}) is None
    # PostgreSQL reads a word of the path as a word after all: its count falls short.
    assert marked("see x.org/run", "english", {"run": 1}) is None
    # Next to what may be an HTML tag or entity.
    assert marked("<b>bold</b> &amp; amp", "english", {"b": 2}) is None
    assert marked("&amp; amp", "english", {"amp": 1}) is None
    # A word PostgreSQL has not stemmed for us yet (marks alone, no statement before).
    assert marks.marks("zyzzyvas", "danish", {"zyzzyva": 1}) is None
    # Nothing of the query in the field, as the index says: no marks (a word stemmed here
    # to a lexeme the field lacks is not one PostgreSQL marks).
    assert marked("nothing here", "english", {"run": 0}) == []
    assert marked("2.5 fold", "english", {"2": 0}) == []
