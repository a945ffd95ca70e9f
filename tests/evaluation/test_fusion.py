"""Fusion math: rrf, weighted (min-max) and dbsf (mean ± 3σ), per-layer scores."""

from __future__ import annotations

import msgspec
import pytest

from internal.api import search
from internal.api.vectord import MAX_WEIGHT, SearchRequest
from internal.common.errors import InvalidArgument
from internal.vectord.search import fusion
from internal.vectord.search.fusion import (
    dbsf,
    dbsf_normalise,
    fuse,
    minmax,
    normalise_weights,
    rrf,
    weighted,
)


def ids(hits: list[fusion.Fused]) -> list[str]:
    return [h.id for h in hits]


def test_rrf_matches_formula_and_both_branch_hit_wins() -> None:
    out = rrf({"vector": [("a", 0.9), ("b", 0.8)], "lexical": [("b", 7.0), ("c", 3.0)]}, k=60)
    assert ids(out) == ["b", "a", "c"]
    by_id = {h.id: h for h in out}
    assert by_id["b"].score == pytest.approx(1 / 62 + 1 / 61)
    assert by_id["a"].score == pytest.approx(1 / 61)
    assert by_id["c"].score == pytest.approx(1 / 62)
    assert by_id["b"].matched_layers == ("vector", "lexical")
    assert by_id["c"].matched_layers == ("lexical",)
    assert by_id["c"].scores == {"vector": None, "lexical": 3.0}
    assert by_id["c"].ranks == {"vector": None, "lexical": 2}


def test_rrf_ties_go_to_the_better_single_rank() -> None:
    # a: vector rank 1; c: lexical rank 1; equal fused scores, order by best rank then first seen.
    out = rrf({"vector": [("a", 1.0)], "lexical": [("c", 1.0)]}, k=10)
    assert ids(out) == ["a", "c"]


def test_empty_branch_keeps_the_other_branch_order() -> None:
    vec = [("x", 0.9), ("y", 0.5), ("z", 0.1)]
    for method in fusion.METHODS:
        assert ids(fuse(method, {"vector": vec, "lexical": []})) == ["x", "y", "z"]
        assert ids(fuse(method, {"vector": [], "lexical": vec})) == ["x", "y", "z"]


def test_minmax_and_degenerate_lists() -> None:
    assert minmax([2.0, 4.0, 3.0]) == [0.0, 1.0, 0.5]
    assert minmax([5.0]) == [1.0]
    assert minmax([]) == []


def test_dbsf_normalise_is_mean_plus_minus_three_sigma_clipped() -> None:
    values = [0.0, 10.0]  # mean 5, σ 5: range [-10, 20]
    assert dbsf_normalise(values) == pytest.approx([10 / 30, 20 / 30])
    assert dbsf_normalise([3.0, 3.0]) == [0.5, 0.5]
    outlier = dbsf_normalise([0.0] * 20 + [100.0])
    assert outlier[-1] == 1.0 and all(0.0 <= v <= 1.0 for v in outlier)


def test_weighted_is_a_convex_combination_of_minmax_scores() -> None:
    out = weighted(
        {"vector": [("a", 0.9), ("b", 0.7), ("c", 0.5)], "lexical": [("c", 12.0), ("b", 2.0)]},
        weights={"vector": 0.5, "lexical": 0.3, "symbolic": 0.2},
    )
    # no preferences: symbolic drops out, weights renormalise to 5/8 and 3/8
    by_id = {h.id: h.score for h in out}
    assert by_id["a"] == pytest.approx(5 / 8 * 1.0)
    assert by_id["b"] == pytest.approx(5 / 8 * 0.5 + 3 / 8 * 0.0)
    assert by_id["c"] == pytest.approx(5 / 8 * 0.0 + 3 / 8 * 1.0)
    assert ids(out) == ["a", "c", "b"]


def test_weights_change_the_winner() -> None:
    branches = {"vector": [("a", 0.9), ("b", 0.1)], "lexical": [("b", 9.0), ("a", 1.0)]}
    assert ids(weighted(branches, weights={"vector": 0.9, "lexical": 0.1}))[0] == "a"
    assert ids(weighted(branches, weights={"vector": 0.1, "lexical": 0.9}))[0] == "b"


def test_dbsf_sums_weighted_normalised_scores() -> None:
    out = dbsf({"vector": [("a", 1.0), ("b", 0.0)], "lexical": [("b", 4.0), ("a", 2.0)]},
               weights={"vector": 1, "lexical": 1})
    # vector: mean .5 σ .5 → a 4/6, b 2/6; lexical: mean 3 σ 1 → b 4/6, a 2/6
    assert [h.score for h in out] == pytest.approx([0.5, 0.5])


def test_symbolic_preferences_lift_a_matching_candidate() -> None:
    branches = {"vector": [("a", 0.9), ("b", 0.8)], "lexical": [("a", 5.0), ("b", 4.9)]}
    prefs = {"a": 0.0, "b": 1.0}
    for method in fusion.METHODS:
        out = fuse(method, branches, symbolic=prefs, weights={"vector": 0.2, "lexical": 0.2, "symbolic": 0.6})
        assert ids(out)[0] == "b", method
        top = out[0]
        assert top.matched_layers == ("vector", "lexical", "symbolic")
        assert top.scores["symbolic"] == 1.0
        assert out[1].matched_layers == ("vector", "lexical")
        assert out[1].ranks["symbolic"] is None


def test_symbolic_ranks_share_ties() -> None:
    out = rrf({"vector": [("a", 3.0), ("b", 2.0), ("c", 1.0)]}, symbolic={"a": 0.5, "b": 0.5, "c": 1.0})
    by_id = {h.id: h for h in out}
    assert (by_id["c"].ranks["symbolic"], by_id["a"].ranks["symbolic"], by_id["b"].ranks["symbolic"]) == (1, 2, 2)


def test_normalise_weights() -> None:
    assert normalise_weights({"vector": 5, "lexical": 3, "symbolic": 2}, ["vector", "lexical", "symbolic"]
                             ) == pytest.approx({"vector": 0.5, "lexical": 0.3, "symbolic": 0.2})
    assert normalise_weights(fusion.DEFAULT_WEIGHTS, ["vector", "lexical"]) == pytest.approx(
        {"vector": 0.5, "lexical": 0.5})
    assert normalise_weights({"vector": 2, "lexical": 2}, ["vector", "lexical"]) == {"vector": 0.5, "lexical": 0.5}
    assert normalise_weights({"vector": 0, "lexical": 0}, ["vector", "lexical"]) == {"vector": 0.5, "lexical": 0.5}



def test_weights_name_layers_and_are_in_range() -> None:
    """Checked once, with the request: a layer there is (the edge's check), a number in
    0..MAX_WEIGHT (the wire type's); the fusion trusts them."""
    with pytest.raises(InvalidArgument) as bad:
        search.layer_weights({"semantic": 1.0})
    assert bad.value.field == "weights.semantic"
    assert search.layer_weights({"lexical": 2.0}) == {"lexical": 2.0}
    for value in (-1.0, MAX_WEIGHT + 1):
        with pytest.raises(msgspec.ValidationError, match=r"weights"):
            msgspec.convert({"weights": {"vector": value}}, SearchRequest)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="fusion"):
        fuse("borda", {"vector": []})
    with pytest.raises(ValueError, match="branch"):
        rrf({"title": [("a", 1.0)]})


def test_duplicate_ids_keep_their_first_rank() -> None:
    out = rrf({"vector": [("a", 1.0), ("a", 0.5), ("b", 0.4)]}, k=1)
    assert [(h.id, h.ranks["vector"]) for h in out] == [("a", 1), ("b", 3)]


def test_vector_spaces_rank_and_normalise_within_each_space() -> None:
    lex = [("a1", 3.0), ("b1", 2.0), ("a2", 1.0)]
    one = [("a1", 0.9), ("a2", 0.5), ("b1", 0.1)]
    # One space: the plain vector branch, score for score.
    for method in ("rrf", "weighted", "dbsf"):
        plain = fusion.fuse(method, {"vector": one, "lexical": lex})
        spaced = fusion.fuse(method, {"lexical": lex}, vector_spaces=[one])
        assert [(f.id, f.score, f.ranks) for f in plain] == [
            (f.id, f.score, f.ranks) for f in spaced]
    # Two spaces whose scales differ wildly: each space's best is rank 1 and scaled to 1.
    a = [("a1", 0.9), ("a2", 0.5)]
    b = [("b1", 90.0), ("b2", 10.0)]
    fused = {f.id: f for f in fusion.fuse("rrf", {"lexical": []}, vector_spaces=[a, b])}
    assert fused["a1"].ranks["vector"] == fused["b1"].ranks["vector"] == 1
    assert fused["a1"].score == fused["b1"].score == pytest.approx(1 / 61)
    fused = {f.id: f for f in fusion.fuse("weighted", {"lexical": []}, vector_spaces=[a, b])}
    assert fused["a1"].score == fused["b1"].score == pytest.approx(1.0)
    assert fused["a2"].score == fused["b2"].score == pytest.approx(0.0)
    with pytest.raises(ValueError, match="not both"):
        fusion.fuse("rrf", {"vector": a}, vector_spaces=[b])


@pytest.mark.parametrize("method", fusion.METHODS)
def test_a_limit_gives_the_prefix_of_the_whole_list(method: str) -> None:
    # Ties in score (equal ranks in both lists) and candidates of one layer only.
    vec = [(f"v{i}", 1.0 - (i // 2) / 50) for i in range(60)]
    lex = [(f"v{i}" if i % 3 == 0 else f"l{i}", 20.0 - (i // 3) * 0.5) for i in range(60)]
    sym = {f"v{i}": (i % 4) / 4 for i in range(0, 60, 5)}
    for symbolic in (None, sym):
        whole = fusion.fuse(method, {fusion.LEXICAL: lex}, vector_spaces=[vec],
                            symbolic=symbolic)
        for limit in (0, 1, 10, 97, len(whole), len(whole) + 3):
            got = fusion.fuse(method, {fusion.LEXICAL: lex}, vector_spaces=[vec],
                              symbolic=symbolic, limit=limit)
            assert [(f.id, f.score, f.ranks, f.scores) for f in got] == \
                [(f.id, f.score, f.ranks, f.scores) for f in whole[:limit]]
