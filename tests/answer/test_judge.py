"""The verdict whether the hits answer the question at all (no I/O)."""

from __future__ import annotations

from internal.matrixd.answer import _judge as J
from internal.matrixd.answer import _passages as P


def turn(rank: int, speaker: str | None, text: str, similarity: float = 0.6) -> P.Source:
    body = f"{speaker}: {text}" if speaker else text
    return P.Source(rank=rank, corpus="talk", id=f"D{rank}", document_id=None, title=None,
                    text=body, own_end=len(body), similarity=similarity, speaker=speaker)


def verdict(question: str, sources: list[P.Source]) -> J.Verdict:
    persons = J.persons_named(question, sources)
    q = P.question_of(question, sources, persons)
    return J.judge(q, P.score_passages(q, sources), sources, persons)


TALK = [turn(1, "Caroline", "Did you run the charity race last weekend?"),
        turn(2, "Melanie", "I ran a charity race for mental health last Saturday."),
        turn(3, "Caroline", "I went to a support group yesterday."),
        turn(4, "Melanie", "My kids loved the camping trip.")]


def test_another_speakers_deed_is_an_unsupported_premise() -> None:
    v = verdict("What did Caroline feel after her charity race?", TALK)
    assert (v.answered, v.reason, v.persons) == (False, "unsupported_premise", ["Caroline"])
    assert "Caroline" in v.message
    # Her own question about the race states nothing: it does not make the race hers.
    assert verdict("What did Melanie feel after her charity race?", TALK).answered


def test_a_statement_naming_the_person_counts_for_them() -> None:
    talk = [*TALK, turn(5, "Melanie", "Caroline ran the charity race with me, she was fast.")]
    assert verdict("How did Caroline do in the charity race?", talk).answered


def test_without_speakers_no_premise_is_judged() -> None:
    docs = [turn(1, None, "Caroline ran a charity race."), turn(2, None, "Melanie went camping.")]
    assert J.persons_named("Where did Melanie run the race?", docs) == []
    assert verdict("Where did Melanie run the race?", docs).answered


def test_nothing_relevant_and_nothing_found() -> None:
    far = [turn(1, None, "The kettle has temperature presets.", similarity=0.1)]
    v = verdict("Which river flows through Ulaanbaatar?", far)
    assert (v.answered, v.reason) == (False, "not_relevant")
    near = [turn(1, None, "The kettle has temperature presets.", similarity=0.8)]
    assert verdict("Which river flows through Ulaanbaatar?", near).answered  # the vectors vouch
    assert verdict("anything", []).reason == "no_hits"
