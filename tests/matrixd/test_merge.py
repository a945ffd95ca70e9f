"""matrixd's side of the merge (internal.matrixd.merge): vectord ranks, matrixd annotates."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from internal.api.responses import RankedHit
from internal.api.vectord import Hit
from internal.matrixd.merge import annotate, ranking_of
from lakehouse.wire.modes import MODES

WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def h(id_: str, corpus: str, **kw: Any) -> RankedHit:
    fields: dict[str, Any] = {"distance": None, "score": None, **kw}
    return RankedHit(id=id_, corpus=corpus, ranks={}, scores={}, text="", title=None, tags=[],
               metadata={"n": id_}, language="english", updated_at=WHEN, **fields)


def test_order_kept_and_corpus_rank_counted_per_corpus() -> None:
    merged = [h("b1", "b", distance=0.1, merge_distance=0.1),
              h("a1", "a", distance=0.2, merge_distance=0.2),
              h("b2", "b", distance=0.3, merge_distance=0.3)]
    out = annotate(merged, MODES["vector"])
    assert [x.id for x in out] == ["b1", "a1", "b2"]
    assert [x.corpus_rank for x in out] == [1, 1, 2]
    assert all(x.merge_score is None for x in out)
    assert out[0].metadata == {"n": "b1"}


def test_hits_read_as_vectord_sent_them() -> None:
    """vectord's answer decodes straight into matrixd's hits: encoded again, its fields
    come first, in its order (the shaping fields it left out still out), matrixd's after."""
    sent = msgspec.json.encode([Hit(id="a1", corpus="a", distance=None, score=0.5, ranks={},
                                    scores={}, text="", title=None, tags=[], metadata={},
                                    language="english", updated_at=WHEN, recency_factor=0.9)])
    out = annotate(msgspec.json.decode(sent, type=list[RankedHit]), MODES["lexical"])
    answer = msgspec.json.decode(msgspec.json.encode(out))[0]
    vectord = msgspec.json.decode(sent)[0]
    assert list(answer)[:len(vectord)] == list(vectord) and "highlight" not in answer
    assert {k: answer[k] for k in vectord} == {**vectord, "merge_score": 0.5}
    assert answer["updated_at"] == "2026-01-02T03:04:05Z"


def test_score_modes_keep_vectord_merge_score() -> None:
    out = annotate([h("a1", "a", score=2.0, merge_score=6.0), h("b1", "b", score=5.0)],
                   MODES["lexical"])
    assert [x.merge_score for x in out] == [6.0, 5.0]


def test_keyword_gets_rank_based_merge_score() -> None:
    out = annotate([h("a1", "a"), h("b1", "b")], MODES["keyword"], keyword_merge_k=60)
    assert [x.merge_score for x in out] == [1 / 61, 1 / 62]


def test_modes() -> None:
    """The ranking key is the registry's merge rule: by distance, else by merge_score."""
    assert ranking_of(MODES["vector"]) == "distance" and ranking_of(MODES["hybrid"]) == "score"
    assert {ranking_of(m) for m in MODES.values()} == {"distance", "score"}
