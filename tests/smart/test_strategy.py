"""search_auto's strategy choice and its cost model."""

from __future__ import annotations

from internal.understanding.strategy import PRIORS, CostModel, choose, is_identifier, quoted, wants


def test_quoted_and_identifiers_are_keyword() -> None:
    assert wants('"connection refused"', None, False)[0] == "keyword"
    # A quote inside a question is one clue among others: not an exact-match search.
    assert wants('Who wrote "Charlotte\'s Web" for Melanie?', "factual", True)[0] == "hybrid"
    assert quoted('find "exact phrase" please') == "exact phrase"
    for ident in ("max_batch", "getUserName", "internal/matrixd/smart.py", "ERR_TIMEOUT",
                  "v1.2.3", "0xdeadbeef"):
        assert is_identifier(ident), ident
        assert wants(ident, None, False)[0] == "keyword"
    assert not is_identifier("adoption")


def test_question_types_route() -> None:
    assert wants("When did Caroline go to the group?", "temporal", True)[0] == "smart"
    assert wants("What activities does Melanie do?", "aggregation", True)[0] == "smart"
    assert wants("Where did Jon move from and what did he study?", "multi-hop", True)[0] == "smart"
    assert wants("What did Caroline research?", "factual", True)[0] == "hybrid"
    assert wants("Why do people keep pets at home?", "conceptual", False)[0] == "hybrid"
    assert wants("adoption agencies", None, False)[0] == "lexical"


def test_cost_model_measures() -> None:
    costs = CostModel()
    assert costs.estimate("hybrid") == (PRIORS["hybrid"], "prior")
    for ms in (40.0, 50.0, 60.0):
        costs.observe("hybrid", ms)
    assert costs.estimate("hybrid") == (50.0, "measured")
    # Unmeasured strategies scale with what was measured (hybrid ran 2x its prior here).
    est, src = costs.estimate("smart")
    assert src == "scaled_prior" and est == PRIORS["smart"] * 50.0 / PRIORS["hybrid"]


def test_budget_picks_a_cheaper_strategy() -> None:
    costs = CostModel()
    for s, ms in (("smart", 300.0), ("hybrid", 40.0), ("lexical", 10.0), ("keyword", 4.0)):
        costs.observe(s, ms)
    q = "When did Caroline go to the group?"
    assert choose(q, "temporal", True, costs, None).strategy == "smart"
    assert choose(q, "temporal", True, costs, 500).strategy == "smart"
    c = choose(q, "temporal", True, costs, 100)
    assert (c.strategy, c.wanted, c.estimated_ms) == ("hybrid", "smart", 40.0)
    assert "budget" in c.reason
    assert choose(q, "temporal", True, costs, 20).strategy == "lexical"
    # Nothing fits: the cheapest of the fallbacks, said so.
    c = choose(q, "temporal", True, costs, 1)
    assert c.strategy == "keyword" and "nothing fits" in c.reason
