"""Typo tolerance's pure part (lexical/typos.py): edits allowed by length, the distance,
the correction chosen from the corpora's terms, and the question as `did you mean`."""

from __future__ import annotations

from internal.vectord.lexical import typos


def test_edits_allowed_by_length_as_meilisearch() -> None:
    assert [typos.budget("x" * n) for n in (1, 3, 4, 5, 8, 9, 14)] == [0, 0, 0, 1, 1, 2, 2]


def test_distance_counts_a_transposition_as_one_edit() -> None:
    assert typos.distance("journalclt", "journalctl") == 1
    assert typos.distance("usradd", "useradd") == 1
    assert typos.distance("jurnalclt", "journalctl") == 2
    assert typos.distance("abc", "abc") == 0
    # Past the limit it answers limit + 1, however far (and early).
    assert typos.distance("abcdef", "uvwxyz", limit=2) == 3
    assert typos.distance("a", "abcdefgh", limit=1) == 2


def test_correction_is_the_nearest_then_the_most_frequent() -> None:
    vocab = typos.Vocabulary({"useradd": 3.0, "usermod": 2.0, "journalctl": 10.0,
                              "systemctl": 40.0, "mesg": 1.0, "dmesg": 4.0, "ss": 9.0})
    got = typos.corrections(["usradd", "journalclt", "jurnalclt", "dmseg", "zzzzzzz"], [vocab])
    assert got == {"usradd": "useradd", "journalclt": "journalctl", "jurnalclt": "journalctl",
                   "dmseg": "dmesg"}
    # Too short for an edit: `sx` is never taken for `ss`.
    assert typos.corrections(["sx"], [vocab]) == {}
    # Equal edits: the term more documents hold, summed over the corpora.
    a = typos.Vocabulary({"colour": 1.0, "collar": 5.0})
    b = typos.Vocabulary({"colour": 9.0})
    assert typos.correct("colkur", [a]) in ("colour", "collar")
    assert typos.correct("colbur", [a, b]) == "colour"


def test_vocabulary_skips_terms_no_correction_can_reach() -> None:
    vocab = typos.Vocabulary({"ab": 5.0, "abc": 5.0, "abcd": 5.0})
    assert vocab.near("abcde", 1) == [(1, "abcd")]
    assert vocab.near("abcd", 0) == []


def test_did_you_mean_replaces_the_misspelled_words_only() -> None:
    assert typos.suggestion("usradd create a user", {"usradd": "useradd"}) == (
        "useradd create a user")
    assert typos.suggestion("Journalclt -f", {"journalclt": "journalctl"}) == "journalctl -f"
    assert typos.suggestion("nothing wrong", {"usradd": "useradd"}) is None
