"""Highlight marks found in Python (internal/vectord/marks.py): given PostgreSQL's term
frequencies they mark the words it would, and answer None wherever they cannot prove it."""

from __future__ import annotations

from internal.vectord import marks


def _words(text: str, got: list[tuple[int, int]] | None) -> list[str] | None:
    return None if got is None else [text[s:e] for s, e in got]


def test_marks_the_stemmed_words_when_the_counts_agree() -> None:
    text = "Running late, she runs; the run-up ran on."
    got = marks.marks(text, "english", {"run": 3, "late": 1})
    assert _words(text, got) == ["Running", "late", "runs", "run"]
    # "ran" is not "run" in Snowball, and the compound "run-up" is never marked itself.
    assert _words(text, marks.marks(text, "english", {"run": 3, "run-up": 1})) == [
        "Running", "runs", "run"]
    assert _words("Das Haus, die Häuser", marks.marks("Das Haus, die Häuser", "german",
                                                       {"haus": 2})) == ["Haus", "Häuser"]


def test_none_where_postgresql_may_read_otherwise() -> None:
    # A count that differs from the index's: PostgreSQL is asked.
    assert marks.marks("run runs", "english", {"run": 1}) is None
    # Inside what the parser reads as a URL, a path or a number.
    assert marks.marks("see x.org/run", "english", {"run": 1}) is None
    assert marks.marks("HIV/AIDS", "english", {"hiv": 1}) is None
    assert marks.marks("2.5 fold", "english", {"2": 0}) is None
    assert marks.marks("IL-2 level", "english", {"2": 0}) is None
    # A language without a Snowball stemmer here.
    assert marks.marks("run", "klingon", {"run": 1}) is None
    # Nothing of the query in the field, as the index says: no marks.
    assert marks.marks("nothing here", "english", {"run": 0}) == []
