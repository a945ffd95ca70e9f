"""Resource selection's math (internal.vectord.search.selection, no I/O): each kind of
evidence, what gives none (shards of one kind, a small corpus's chance words, a
common word of a description), the weight, and a profile's distinctive lexemes."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from internal.vectord.search import selection as sel
from internal.vectord.storage.profiles import Profile

# Words and the lexemes they make (the profiles' own `words`, read from their documents).
STEMS = {"windows": "window", "zones": "zone", "tickets": "ticket"}


def profile(name: str, documents: int, terms: dict[str, int], description: str = "",
            about_vector: list[float] | None = None) -> Profile:
    """A profile whose words are its lexemes (and STEMS), and its name's and description's."""
    described = {w: STEMS.get(w, w) for w in sel.words(f"{name} {description}")}
    words = {t: [t] for t in terms} | {w: [t] for w, t in STEMS.items() if t in terms}
    vec = None if about_vector is None else np.asarray(about_vector, dtype=np.float32)
    return Profile(corpus_id=hash(name) % 1000, version=1, about=f"{name}\n{description}",
                   documents=documents, sampled=documents, terms=terms, words=words,
                   described=described, build_ms=1.0, built_at=datetime.now(UTC),
                   about_vector=vec)


def members(*profiles: Profile, vector: list[float] | None = None) -> list[sel.Member]:
    q = None if vector is None else np.asarray(vector, dtype=np.float32)
    return [sel.Member(p.about.partition("\n")[0], p, q, 0) for p in profiles]


def by_name(choices: list[sel.Choice] | None) -> dict[str, sel.Choice]:
    assert choices is not None
    return {c.corpus: c for c in choices}


def test_a_word_a_whole_corpus_holds_weighs_it() -> None:
    win = profile("win", 300, {"window": 150, "process": 20, "file": 90})
    gen = profile("gen", 4000, {"window": 40, "process": 200, "file": 1400})
    got = by_name(sel.select("kill a process by its name on windows", members(win, gen)))
    assert got["gen"].weight == 1.0 and got["gen"].evidence == []
    (ev,) = got["win"].evidence
    assert (ev.word, ev.lexeme, ev.source) == ("windows", "window", "content")
    assert ev.share == 0.5 and ev.others == 0.01
    assert got["win"].weight == round(min(sel.DEFAULT.most, 1 + sel.DEFAULT.per_unit * ev.value),
                                      6) > 1.0


def test_a_question_about_no_corpus_weighs_none() -> None:
    win = profile("win", 300, {"window": 150, "file": 90})
    gen = profile("gen", 4000, {"window": 40, "file": 1400})
    got = sel.select("count the lines of a file", members(win, gen))
    assert got is not None and all(c.weight == 1.0 and not c.evidence for c in got)


def test_shards_of_one_kind_never_differ() -> None:
    """Random parts of one set: the same words in about the same shares, and rare words
    (a name two documents hold) in one part only: no evidence for any part."""
    rng = np.random.default_rng(7)
    parts = []
    for i in range(4):
        terms = {f"w{j}": int(rng.binomial(1300, 0.02 + 0.01 * (j % 5))) for j in range(200)}
        terms[f"rare{i}"] = 2  # a name only this part's documents hold
        parts.append(profile(f"scifact_p{i}", 1300, terms))
    question = " ".join(f"w{j}" for j in range(0, 200, 17)) + " rare0 rare1"
    got = sel.select(question, members(*parts))
    assert got is not None and all(c.weight == 1.0 for c in got), got


def test_a_small_corpus_is_not_about_the_words_a_few_of_its_pages_hold() -> None:
    tiny = profile("tiny", 11, {"process": 3, "zone": 5})
    big = profile("big", 4000, {"process": 200})
    got = by_name(sel.select("kill a process", members(tiny, big)))
    assert got["tiny"].weight == 1.0  # 3 of 11, shrunk toward 5%: not 3 times the other's
    got = by_name(sel.select("manage the zones", members(tiny, big)))
    assert got["tiny"].weight > 1.0  # a word only it holds, in half of its pages


def test_a_word_is_counted_in_every_language_its_corpus_stores() -> None:
    """Short pages are stored in the language detected for each: "windows" is `window`
    in the English ones and `windows` in the others; its documents are both's."""
    win = profile("win", 12, {"window": 8, "windows": 4})
    win.words["windows"] = ["window", "windows"]
    gen = profile("gen", 300, {"kill": 20})
    got = by_name(sel.select("kill it on windows", members(win, gen)))
    (ev,) = got["win"].evidence
    assert (ev.word, ev.lexeme, ev.share) == ("windows", "window", 1.0)


def test_a_name_word_no_other_corpus_has() -> None:
    lin = profile("linux", 2000, {"kernel": 300})
    osx = profile("osx", 370, {"maco": 30})
    got = by_name(sel.select("find files by name on linux", members(lin, osx)))
    (ev,) = got["linux"].evidence
    assert (ev.source, ev.value) == ("name", sel.DEFAULT.named)
    # The same word in two names tells neither apart.
    a, b = profile("linux_docs", 100, {}), profile("linux_tickets", 100, {})
    got = by_name(sel.select("linux kernel panic", members(a, b)))
    assert all(c.weight == 1.0 for c in got.values())
    got = by_name(sel.select("linux tickets about the kernel", members(a, b)))
    assert got["linux_tickets"].evidence[0].source == "name"


def test_a_description_word_unless_every_corpus_holds_it() -> None:
    osx = profile("osx", 370, {"system": 60, "maco": 30}, "Commands for the Mac's operating system")
    lin = profile("linux", 2000, {"system": 400, "kernel": 300}, "Commands for Linux")
    got = by_name(sel.select("keep my mac from going to sleep", members(osx, lin)))
    (ev,) = got["osx"].evidence
    assert (ev.word, ev.source) == ("mac", "description")
    # "system": in 15% of the documents searched, too common to say what a corpus is about;
    # "commands": in both descriptions.
    got = by_name(sel.select("system commands", members(osx, lin)))
    assert all(c.weight == 1.0 for c in got.values())


def test_the_question_nearest_a_corpus_name() -> None:
    osx = profile("osx", 370, {}, about_vector=[1.0, 0.0, 0.0])
    lin = profile("linux", 2000, {}, about_vector=[0.0, 1.0, 0.0])
    near_osx = [0.8, 0.6, 0.0]  # 0.8 against 0.6: a gap of 0.2
    got = by_name(sel.select("keep it awake", members(osx, lin, vector=near_osx)))
    (ev,) = got["osx"].evidence
    assert ev.source == "about" and ev.share == 0.8 and ev.others == 0.6
    assert ev.value == pytest.approx(sel.DEFAULT.about_per_gap * (0.2 - sel.DEFAULT.about_gap),
                                     rel=1e-6)
    got = by_name(sel.select("keep it awake", members(osx, lin, vector=[0.7, 0.71, 0.0])))
    assert all(c.weight == 1.0 for c in got.values())  # no corpus nearer by the gap
    # Nearer by the gap, but near neither: two short texts' background, no evidence
    # ("printer jams after new toner": 0.09 to "handbook", -0.02 to "tickets").
    got = by_name(sel.select("printer jams", members(osx, lin, vector=[0.09, -0.02, 0.9955])))
    assert all(c.weight == 1.0 and not c.evidence for c in got.values())


def test_corpora_alike_weigh_as_one() -> None:
    """The parts of one set (alike shares) are never told apart; against another set,
    every part takes the same evidence."""
    parts = [profile(f"docs_p{i}", 300, {"cell": 60 + i, "gene": 30, "protein": 45})
             for i in range(3)]
    other = profile("aero", 1400, {"flow": 500, "wing": 300, "cell": 3})
    assert sel.groups([*parts, other], sel.DEFAULT.same) == [0, 0, 0, 3]
    got = sel.select("cell division", members(*parts))
    assert got is not None and all(c.weight == 1.0 for c in got)
    got = sel.select("cell division", members(*parts, other))
    assert got is not None and len({c.weight for c in got[:3]}) == 1 and got[0].weight > 1
    assert got[3].weight == 1.0


def test_the_weight_is_capped_and_fewer_than_two_profiles_compare_nothing() -> None:
    win = profile("windows", 300, {"window": 150, "powershel": 90, "cmd": 60})
    gen = profile("gen", 4000, {"window": 4})
    got = by_name(sel.select("windows powershell cmd", members(win, gen)))
    assert got["windows"].weight == sel.DEFAULT.most
    assert sel.select("windows", [sel.Member("windows", win), sel.Member("new", None)]) is None


def test_distinctive_lexemes_against_the_others_the_caller_sees() -> None:
    win = profile("windows", 300, {"window": 150, "powershel": 90, "file": 100})
    gen = profile("gen", 4000, {"window": 40, "file": 1400})
    terms = sel.distinctive(win, [gen])
    # Both over 30 times the other's share: the one more of its documents hold first.
    assert [t.lexeme for t in terms] == ["window", "powershel"]
    assert terms[1].share == 0.3 and terms[1].others == 0.0 and terms[0].others == 0.01
    alone = sel.distinctive(win, [])  # no other corpus: its most common lexemes
    assert [t.lexeme for t in alone] == ["window", "file", "powershel"]
    assert all(t.others is None for t in alone)
