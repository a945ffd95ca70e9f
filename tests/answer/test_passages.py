"""The extractive answer's pure parts: sentences with their offsets, the question's terms,
scores, the choice within a word budget, the text and its markers (no I/O)."""

from __future__ import annotations

import dataclasses

from internal.matrixd.answer import _passages as P
from internal.matrixd.answer._markers import MarkerFilter, check


def src(rank: int, text: str, **kw: object) -> P.Source:
    return P.Source(rank=rank, corpus=str(kw.get("corpus", "c")), id=f"d{rank}",
                    document_id=None, title=None, text=text,
                    own_end=int(kw.get("own_end", len(text))),  # type: ignore[call-overload]
                    semantic=kw.get("semantic"), speaker=kw.get("speaker"),  # type: ignore[arg-type]
                    strength=float(kw.get("strength", 1.0)))  # type: ignore[arg-type]


def test_sentences_keep_their_offsets_in_the_text() -> None:
    text = "  Hello there. How are you?\nFine!  Thanks (really).\n\n- a list item\nlast"
    spans = P.sentences(text)
    assert [text[a:b] for a, b in spans] == [
        "Hello there.", "How are you?", "Fine!", "Thanks (really).", "- a list item", "last"]
    assert P.sentences("...  ") == []
    # A window's own line only: the neighbours are items of their own.
    assert [text[a:b] for a, b in P.sentences(text, text.index("\n"))] == [
        "Hello there.", "How are you?"]


def test_terms_fold_inflections_and_drop_stop_words() -> None:
    assert P.terms("What did Caroline's kids research about adoptions?") == [
        "caroline", "kid", "research", "adoption"]
    assert P.fold("running") == "runn" and P.fold("ran") == "ran" and P.fold("bus") == "bus"


def test_the_sentence_holding_the_question_wins_and_rarer_terms_weigh_more() -> None:
    sources = [
        src(1, "Melanie: I love my kids. We went camping at the national park last weekend."),
        src(2, "Melanie: The kids loved the pottery class."),
    ]
    q = P.question_of("Where did Melanie go camping with her kids?", sources, ["Melanie"])
    assert q.terms["camp"] > q.terms["kid"]  # every hit holds "kids"
    best = P.score_passages(q, sources)[0]
    assert best.text == "We went camping at the national park last weekend."
    assert best.content > 0 and best.source.rank == 1


def test_choice_fills_the_budget_best_first_and_cuts_only_the_first() -> None:
    sources = [src(1, "Alpha beta gamma delta. Epsilon zeta eta."), src(2, "Alpha theta iota kappa lambda.")]
    q = P.question_of("alpha epsilon theta", sources)
    scored = P.score_passages(q, sources)
    chosen = P.choose(scored, 9)
    assert chosen.words <= 9 and len(chosen.passages) == 2
    assert scored[0].text == "Epsilon zeta eta."  # epsilon is rarer among the hits than alpha
    one = P.choose(scored, 2)
    assert [p.text for p in one.passages] == ["Epsilon zeta"]  # the first, cut to the budget
    assert one.passages[0].end == one.passages[0].start + len("Epsilon zeta")


def test_a_hit_far_below_the_first_is_quoted_only_for_the_questions_words() -> None:
    """The tour's paper jam: a ticket about expenses in 4th place, its only sentence the
    vector layer's pick, is no part of the answer; the same hit scoring near the first is."""
    jam = "When the printer reports a paper jam, pull the green lever."
    far = [src(1, jam), src(4, "My expense report came back rejected.",
                            semantic="My expense report came back rejected.", strength=0.15)]
    q = P.question_of("What do I do when the printer says paper jam?", far)
    assert [p.text for p in P.choose(P.score_passages(q, far), 60).passages] == [jam]
    near = [far[0], dataclasses.replace(far[1], strength=0.9)]
    assert len(P.choose(P.score_passages(q, near), 60).passages) == 2


def test_touching_sentences_of_a_hit_are_one_citation() -> None:
    s = src(1, "Red apples. Green pears. Blue plums.")
    q = P.question_of("red apples green pears", [s])
    chosen = P.merged(P.choose(P.score_passages(q, [s]), 4).passages)
    assert chosen[0].text == "Red apples. Green pears."
    text = P.compose(chosen)
    assert text.startswith("Red apples. Green pears. [1]")
    assert "".join(P.pieces(chosen)) == text


def test_a_question_states_nothing() -> None:
    s = src(1, "Did you go camping at the lake? We went camping at the lake in June.")
    q = P.question_of("When did they go camping at the lake?", [s])
    scored = P.score_passages(q, [s])
    assert [p.stated for p in scored] == [True, False]
    assert scored[0].text == "We went camping at the lake in June."


def test_the_semantic_passage_is_found_in_the_text_and_counts() -> None:
    text = "Nothing here.  The   lake was frozen solid. Other words."
    s = src(1, text, semantic="The lake was frozen solid.")
    q = P.question_of("winter ice", [s])
    best = P.score_passages(q, [s])[0]
    assert best.semantic and best.text == "The   lake was frozen solid."


def test_markers_pointing_nowhere_are_dropped_and_counted() -> None:
    text, cited, dropped = check("A [1]. B [4]. C [2, 9]. D [2][3] [x] [", 3)
    assert text == "A [1]. B . C [2]. D [2][3] [x] ["
    assert cited == [1, 2, 3] and dropped == 2


def test_a_marker_split_between_pieces_is_checked_whole() -> None:
    f = MarkerFilter(12)
    out = [f.feed(p) for p in ("Tea [", "1", "1] and coffee [1", "3]", " end [")] + [f.flush()]
    assert out == ["Tea ", "", "[11] and coffee ", "", " end ", "["]
    assert f.cited == [11] and f.dropped == 1
