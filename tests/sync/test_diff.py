"""The sync plan (pure module): what is added, changed, deleted, kept."""

from __future__ import annotations

from internal.syncd.diff import plan
from internal.syncd.ticker import next_tick, retry_delay


def test_plan_classifies_pages() -> None:
    desired = {
        "new.md": {"new.md#0": "h1"},
        "same.md": {"same.md#0": "h2"},
        "edited.md": {"edited.md#0": "h3-new", "edited.md#1": "h4"},
        "shrunk.md": {"shrunk.md#0": "h5"},
    }
    stored = {
        "same.md#0": "h2",
        "edited.md#0": "h3-old", "edited.md#1": "h4",
        "shrunk.md#0": "h5", "shrunk.md#1": "h6", "shrunk.md#2": "h7",
        "gone.md#0": "h8", "gone.md#1": "h9",
        "foreign-id": "hx",
    }
    p = plan(desired, stored)
    assert p.added == ["new.md"]
    assert p.changed == ["edited.md", "shrunk.md"]
    assert p.unchanged == ["same.md"]
    assert p.deleted == ["gone.md"]
    # Only the changed chunk is embedded again; the shrunk page embeds nothing.
    assert p.embed == {"new.md": ["new.md#0"], "edited.md": ["edited.md#0"]}
    assert p.stale == {"shrunk.md": ["shrunk.md#1", "shrunk.md#2"],
                       "gone.md": ["gone.md#0", "gone.md#1"]}


def test_unreadable_page_keeps_its_chunks() -> None:
    p = plan({}, {"a.md#0": "h"}, unreadable={"a.md"})
    assert p.deleted == [] and p.stale == {} and p.kept == ["a.md"]


def test_unlisted_folder_keeps_everything_under_it() -> None:
    stored = {"sub/a.md#0": "h", "sub/deeper/b.md#0": "h", "subway.md#0": "h"}
    p = plan({}, stored, unlisted={"sub"})
    assert p.kept == ["sub/a.md", "sub/deeper/b.md"]
    assert p.deleted == ["subway.md"]
    assert plan({}, stored, unlisted={"."}).deleted == []


def test_empty_directory_against_empty_corpus() -> None:
    p = plan({}, {})
    assert (p.added, p.changed, p.unchanged, p.deleted) == ([], [], [], [])


def test_next_tick_keeps_cadence_and_never_overlaps() -> None:
    assert next_tick(100.0, 130.0, 300.0) == 400.0
    # A run that outlasts the interval delays the next to the first tick after it.
    assert next_tick(100.0, 750.0, 300.0) == 1000.0
    assert next_tick(100.0, 100.0, 300.0) == 400.0


def test_a_failed_run_is_tried_again_after_1_2_4_seconds_up_to_a_minute() -> None:
    assert [retry_delay(n, 300.0) for n in (1, 2, 3, 4, 7, 8, 20)] == [1, 2, 4, 8, 60, 60, 60]
    assert retry_delay(9, 30.0) == 30.0  # never later than the cadence itself
