"""Observation normalisation with the real pipeline: coreference, dates, keywords."""

from __future__ import annotations

from datetime import datetime

from spacy.language import Language

from internal.understanding.normalize import Observation, keywords, normalize

SESSION = datetime(2023, 5, 8, 13, 56)  # LoCoMo conv-26, session 1: "1:56 pm on 8 May, 2023"


def test_locomo_example(pipeline: Language) -> None:
    [out] = normalize(pipeline, [Observation("I went to a LGBTQ support group yesterday",
                                             SESSION, "Caroline")])
    assert out.text == "Caroline went to a LGBTQ support group on 7 May 2023"
    assert out.original == "I went to a LGBTQ support group yesterday"
    assert [(r.span, r.replacement, r.kind) for r in out.resolved] == [
        ("I", "Caroline", "coreference"), ("yesterday", "on 7 May 2023", "temporal")]
    assert out.dates == ["2023-05-07"]


def test_you_is_the_other_speaker(pipeline: Language) -> None:
    turns = [Observation("Hey Caroline! What's up with you?", SESSION, "Melanie"),
             Observation("I painted your portrait last Saturday.", SESSION, "Caroline")]
    first, second = normalize(pipeline, turns)
    assert first.text == "Hey Caroline! What's up with Caroline?"
    assert second.text == "Caroline painted Melanie's portrait on 6 May 2023."


def test_you_from_context(pipeline: Language) -> None:
    [out] = normalize(pipeline, [Observation("Did you finish it?", None, "Jon")],
                      context=["Gina: I started the mural.", "Jon: Nice!"])
    assert out.text == "Did Gina finish it?"


def test_verb_agrees_with_the_name(pipeline: Language) -> None:
    [out] = normalize(pipeline, [Observation("I'm swamped and I have two kids.", None, "Melanie")])
    assert out.text == "Melanie is swamped and Melanie has two kids."


def test_conservative_without_referent(pipeline: Language) -> None:
    # No speaker, no other party, no reference time: nothing may be guessed.
    [out] = normalize(pipeline, [Observation("I saw you there yesterday.")])
    assert out.text == out.original == "I saw you there yesterday."
    assert out.resolved == []
    # "you know" addresses nobody; two people in sight leave "she" alone.
    [out] = normalize(pipeline, [Observation("Anna met Beth; she was late, you know.", None, "Jon")],
                      context=["Gina: hi"])
    assert "she was late, you know" in out.text


def test_third_person_when_one_person_in_sight(pipeline: Language) -> None:
    [out] = normalize(pipeline, [Observation("I ran with my friend Jenna. She was great!",
                                             None, "Melanie")])
    assert out.text == "Melanie ran with Melanie's friend Jenna. Jenna was great!"


def test_temporal_anchoring_granularity(pipeline: Language) -> None:
    text = "Two days ago we hiked. Next month we fly. Last year was hard. Since last week it rains."
    [out] = normalize(pipeline, [Observation(text, SESSION)])
    assert out.text == ("On 6 May 2023 we hiked. In June 2023 we fly. 2022 was hard. "
                        "Since the week of 1 May 2023 it rains.")
    assert out.dates == ["2022-01-01", "2023-05-01", "2023-05-06", "2023-06-01"]


def test_keywords() -> None:
    kws = keywords("Caroline went to a LGBTQ support group on 7 May 2023 and it was so powerful.")
    assert "LGBTQ support" in kws
    assert len(kws) <= 5
    assert len({k.lower() for k in kws}) == len(kws)
    assert keywords("ok") == []
