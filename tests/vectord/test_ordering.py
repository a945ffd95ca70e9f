"""The pure shaping policy: fragments, recency decay, MMR, groups, facet fields."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from internal.common.errors import InvalidArgument
from internal.vectord.shaping import fragments, ordering
from internal.vectord.shaping.fragments import START, STOP


def test_fragments_escape_the_text_and_add_only_the_marks() -> None:
    marked = f"a <b>{START}jam{STOP}</b> & more"
    assert fragments.best(marked, "<em>", "</em>", 160, 2) == [
        "a &lt;b&gt;<em>jam</em>&lt;/b&gt; &amp; more"]
    assert fragments.best("nothing marked", "<em>", "</em>", 160, 2) == []
    assert fragments.lead("<i>x</i>  y", 160) == ["&lt;i&gt;x&lt;/i&gt; y"]
    assert fragments.lead("one two three four", 9) == ["one two…"]
    assert fragments.strip_sentinels(f"a{START}b{STOP}") == "a b "


def test_fragments_best_first_and_cut_at_words() -> None:
    words = ["w"] * 60
    words[5], words[50], words[52] = (f"{START}jam{STOP}", f"{START}toner{STOP}",
                                      f"{START}jam{STOP}")
    got = fragments.best(" ".join(words), "[", "]", 30, 2)
    assert len(got) == 2
    assert "[toner]" in got[0] and "[jam]" in got[0]  # two distinct words beat one
    assert got[1] == "…w w w w [jam] w w w w w w w w…"
    assert all(len(f.replace("[", "").replace("]", "")) <= 32 for f in got)
    assert fragments.best(" ".join(words), "[", "]", 30, 1) == got[:1]


def test_recency_factor() -> None:
    assert ordering.decay(0, 30) == 1.0 and ordering.decay(-5, 30) == 1.0
    assert ordering.decay(30, 30) == pytest.approx(0.5)
    assert ordering.decay(None, 30) == 0.0
    assert ordering.recency_factor(30, 30, 0.5) == pytest.approx(0.75)
    assert ordering.recency_factor(None, 30, 0.0) == 1.0
    now = datetime(2026, 11, 26, tzinfo=UTC)
    assert ordering.age_days("2026-11-16", now) == pytest.approx(10)
    assert ordering.age_days("2026-11-16T00:00:00Z", now) == pytest.approx(10)
    assert ordering.age_days("soon", now) is None and ordering.age_days(3, now) is None
    assert ordering.rerank(["a", "b", "c"], [1.0, 3.0, 3.0], descending=True) == ["b", "c", "a"]


def test_mmr_pushes_copies_down() -> None:
    a, b = np.array([1, 0], dtype=np.float32), np.array([0, 1], dtype=np.float32)
    rel = [1.0, 0.99, 0.98, 0.5]
    vecs = [a, a, a, b]
    assert ordering.mmr(rel, vecs, ["s"] * 4, 0.0, 4) == [0, 1, 2, 3]
    assert ordering.mmr(rel, vecs, ["s"] * 4, 0.7, 2) == [0, 3]
    # Vectors of another space are unrelated: no penalty between them.
    assert ordering.mmr(rel, vecs, ["s", "t", "u", "s"], 0.7, 3) == [0, 1, 2]


def test_groups_keep_the_best_of_each() -> None:
    keys = ["p", "p", "q", None, "p", "r"]
    got = ordering.group(keys, 2, 3)
    assert [(g.leader, g.members, g.count) for g in got] == [(0, [1], 3), (2, [], 1), (3, [], 1)]
    assert ordering.group_field("parent") == "parent_id"
    assert ordering.group_field("metadata.author") == "author"
    with pytest.raises(InvalidArgument) as exc:
        ordering.group_field("author")
    assert exc.value.field == "group_by"
    assert ordering.group_key({"a": ["x"]}, "a") == "['x']"


def test_facet_fields() -> None:
    assert ordering.facet("type", 0) == ordering.Facet("type", "metadata", "type")
    assert ordering.facet(("metadata.d", "month"), 1) == ordering.Facet("metadata.d", "month", "d")
    with pytest.raises(InvalidArgument) as exc:
        ordering.facet("title", 2)
    assert exc.value.field == "facets[2]"
    assert ordering.top_counts({"b": 2, "a": 2, "c": 5}, 2, False) == {"c": 5, "a": 2}
    assert ordering.top_counts({"2026-02": 2, "2026-01": 1}, 5, True) == {
        "2026-01": 1, "2026-02": 2}
