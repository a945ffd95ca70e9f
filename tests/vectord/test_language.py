"""Language names -> PostgreSQL text search configurations, and item language resolution."""

from __future__ import annotations

import psycopg
import pytest

from internal.common.errors import InvalidArgument
from internal.common.language import (
    REGCONFIGS,
    normalize_corpus_language,
    normalize_language,
    resolve_item_language,
)


def test_every_language_we_accept_is_a_server_regconfig(pg_dsn: str, vectord_url: str) -> None:
    # vectord's migrations made the configurations PostgreSQL lacks (Chinese, Japanese).
    with psycopg.connect(pg_dsn) as conn:
        have = {r[0] for r in conn.execute("SELECT cfgname FROM pg_ts_config").fetchall()}
    assert have >= REGCONFIGS


@pytest.mark.parametrize(("given", "want"), [
    ("de", "german"), ("DE", "german"), ("german", "german"), (" English ", "english"),
    ("simple", "simple"), ("nb", "norwegian"), ("pt", "portuguese"), ("zh", "chinese"),
    ("ja", "japanese"),
])
def test_codes_and_names(given: str, want: str) -> None:
    assert normalize_language(given, "language") == want
    assert normalize_corpus_language(given, "language") == want


def test_corpus_language_may_be_auto() -> None:
    assert normalize_corpus_language(None, "language") == "auto"
    assert normalize_corpus_language("auto", "language") == "auto"
    with pytest.raises(InvalidArgument):
        normalize_language("auto", "language")


@pytest.mark.parametrize("bad", ["xx", "klingon", "", "german;drop", "ko"])
def test_unknown_language_names_the_field(bad: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        normalize_corpus_language(bad, "items[3].language")
    assert err.value.field == "items[3].language"
    assert "items[3].language" in err.value.message


GERMAN = "Die alten Häuser am Fluss wurden im letzten Jahrhundert gebaut."
ENGLISH = "The old houses by the river were built in the last century."


def test_resolution_order() -> None:
    # Explicit wins, whatever the corpus says.
    assert resolve_item_language("fr", ENGLISH, "german", "l") == "french"
    # A fixed corpus language is used as is, never detected.
    assert resolve_item_language(None, GERMAN, "english", "l") == "english"
    assert resolve_item_language(None, GERMAN, "simple", "l") == "simple"
    # Auto: detected on text long enough to judge, else simple.
    assert resolve_item_language(None, GERMAN, "auto", "l") == "german"
    assert resolve_item_language(None, ENGLISH, "auto", "l") == "english"
    assert resolve_item_language(None, "Häuser", "auto", "l") == "simple"
    # An item told `auto` in a fixed corpus: the corpus's language unless the verdict is
    # confident (a sentence of 52 letters is not evidence enough; three are).
    assert resolve_item_language("auto", GERMAN, "english", "l") == "english"
    assert resolve_item_language("auto", " ".join([GERMAN] * 3), "english", "l") == "german"
    with pytest.raises(InvalidArgument):
        resolve_item_language("xx", ENGLISH, "auto", "items[0].language")
