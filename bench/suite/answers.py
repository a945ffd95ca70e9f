"""Answers with their sources on LoCoMo: support, citations, refusals; cost beside the search.

By category, word budget and split (the conversations tuned on, those held out).

LoCoMo's dev half on one stack, both indexes (bench/data/locomo.py: the turns as spoken,
and normalised with their neighbours); every question of categories 1-4 and the
adversarial category 5 (a premise the conversation never states). For each question, in a
turn shuffled a question: the plain search (k 10), the extractive answer (k 10, 60 words)
and the same answer streamed (the time to its first event, the citations); then the
answer at each other word budget. Support: the gold answer's content words (lower case,
punctuation and stop words out, number words as digits, plurals singular) at least 80% in
the answer's text. Citations: an answered question of categories 1-4 cites an evidence
turn; every citation names one of the answer's hits. Refusals: `answered` false. Reported for the conversations the answer was
tuned on and those held out (bench/data/locomo.py: TUNE, HELD).

Targets: support >= 0.5 of categories 1-4 at 60 words; citing evidence >= 0.7 of the
answered ones, 100% of citations a hit; refused >= 0.5 of category 5 and <= 0.1 of 1-4;
the answer's p50 <= 1.5x the search's, the stream's first event <= the search's p95.
"""

from __future__ import annotations

import random
import re
import time
import unicodedata
from collections import defaultdict
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any

import aiohttp

from bench.data import locomo as data
from bench.data.beir import AnyVersion
from bench.harness import Run
from bench.harness.http import post, search, session
from bench.harness.timing import median, ms, pct, shuffled
from internal.clients.embed import EmbedClient
from internal.evaluation.locomo import CATEGORIES

OPTIONS = {"budgets": ("20,40,60,80,120", "the answers' word budgets (the curve)"),
           "limit": (0, "questions a conversation and category (0: all)"),
           "indexes": ("spoken,normalised", "the indexes asked")}
QUICK = {"limit": 3, "budgets": "60"}
K, WORDS, SUPPORT = 10, 60, 0.8
SUFFIX = {"spoken": "", "normalised": data.suffix(data.DEFAULT_WINDOW)}
CATS = (*CATEGORIES.values(), "adversarial")
# The metric's own stop words (no month, number or content word among them).
STOP = frozenset("""a an the and or but of to in on at for from by with about as into over
after before is are was were be been being am do does did has have had i you he she it we
they me him her us them my your his its our their this that these those there here what
which who whom whose when where why how not no so than then too very can could would should
will shall just also""".split())


NUMBERS = dict(zip("zero one two three four five six seven eight nine ten eleven twelve".split(),
                   map(str, range(13)), strict=True))


def content(text: str) -> list[str]:
    """The content words: lower case, a number word as its digits, a plural's or a
    possessive's s off (on both sides alike), stop words out."""
    words = re.findall(r"\w+", unicodedata.normalize("NFKC", text).lower().replace("'s", ""))
    out = []
    for w in words:
        w = NUMBERS.get(w, w)
        if w.endswith("s") and not w.endswith("ss") and len(w) > 3:
            w = w[:-1]
        if w not in STOP:
            out.append(w)
    return out


def supported(answer: str, gold: str) -> bool:
    """The gold answer's content words at least SUPPORT in the answer's."""
    want, have = content(gold), set(content(answer))
    return bool(want) and sum(w in have for w in want) / len(want) >= SUPPORT


@dataclass
class Row:
    index: str
    part: str
    cat: str
    answered: bool = False
    supported: dict[int, bool] = field(default_factory=dict)
    words: dict[int, int] = field(default_factory=dict)
    cites_evidence: bool = False
    citations: int = 0
    citations_hit: int = 0


async def first_event_ms(http: aiohttp.ClientSession, base: str, body: dict[str, Any]) -> float:
    """Milliseconds to the stream's first event (the rest is read, not timed)."""
    t0 = time.perf_counter()
    async with http.post(f"{base}/v1/matrix/answer", json={**body, "stream": True}) as r:
        if r.status != 200:
            raise SystemExit(f"answer stream answered {r.status}: {(await r.read())[:2000]!r}")
        seen = b""
        first = None
        async for chunk in r.content.iter_any():
            seen += chunk
            if first is None and b"\n\n" in seen:
                first = (time.perf_counter() - t0) * 1000
        assert first is not None and seen.rstrip().endswith(b"data: [DONE]"), seen[-200:]
        return first


def judge(row: Row, out: dict[str, Any], q: Any, budget: int) -> None:
    row.supported[budget] = out["answered"] and supported(out["text"], q.answer)
    row.words[budget] = sum(len(c["passage"].split()) for c in out["citations"])
    if budget != WORDS:
        return
    row.answered = out["answered"]
    hits = {(h["corpus"], h["id"]) for h in out["hits"]}
    row.citations = len(out["citations"])
    row.citations_hit = sum((c["corpus"], c["id"]) in hits for c in out["citations"])
    row.cites_evidence = any(c["id"] in q.evidence for c in out["citations"])


async def main(run: Run) -> None:
    a = run.args
    budgets = sorted({int(b) for b in a.budgets.split(",")} | {WORDS})
    convs = data.conversations(run.need("data", "locomo", "locomo_dev.json").parents[2])
    rows: list[Row] = []
    lat: dict[tuple[str, str], list[float]] = defaultdict(list)
    with run.stack() as stack:
        async with session() as http:
            await ask_all(run, http, stack.gateway, convs, budgets, rows, lat)
    report(run, rows, lat, budgets)


async def ask_all(run: Run, http: aiohttp.ClientSession, base: str,
                  convs: list[Any], budgets: list[int], rows: list[Row],
                  lat: dict[tuple[str, str], list[float]]) -> None:
    """Every question of every conversation on each index."""
    rng = random.Random(7)
    run.progress("loading both indexes")
    await data.index(AnyVersion(http, base, timeout=1800.0), EmbedClient(http, base, 1800.0),
                     convs)
    for index in run.args.indexes.split(","):
        if index not in SUFFIX:
            raise SystemExit(f"--indexes: {index!r} is not one of {', '.join(SUFFIX)}")
        for conv in convs:
            qs = [*conv.questions, *conv.adversarial]
            if run.args.limit:
                qs = [q for c in CATS for q in [x for x in qs if x.category == c][:run.args.limit]]
            run.progress(f"{index}: {conv.id}, {len(qs)} questions")
            for q in qs:
                row = Row(index, data.part_of(conv), q.category)
                await ask_one(http, base, conv.corpus + SUFFIX[index], q, row, budgets, rng,
                              lat)
                rows.append(row)


async def ask_one(http: aiohttp.ClientSession, base: str, corpus: str, q: Any, row: Row,
                  budgets: list[int], rng: random.Random,
                  lat: dict[tuple[str, str], list[float]]) -> None:
    """One question: the search, the answer and its stream in a shuffled turn (timed),
    then the answer at the other budgets."""
    body = {"query_text": q.text, "corpora": [corpus], "k": K}
    asked = {**body, "generator": "extractive", "max_words": WORDS}
    for what in shuffled(("search", "answer", "stream"), rng):
        if what == "search":
            lat[(row.index, what)].append(await ms(search(http, base, body)))
        elif what == "answer":
            t0 = time.perf_counter()
            out = await post(http, f"{base}/v1/matrix/answer", asked)
            lat[(row.index, what)].append((time.perf_counter() - t0) * 1000)
            judge(row, out, q, WORDS)
        else:
            lat[(row.index, what)].append(await first_event_ms(http, base, asked))
    for budget in budgets:
        if budget != WORDS:
            judge(row, await post(http, f"{base}/v1/matrix/answer",
                                  {**asked, "max_words": budget}), q, budget)


def _share(xs: list[bool]) -> float | None:
    return fmean(xs) if xs else None


def report(run: Run, rows: list[Row], lat: dict[tuple[str, str], list[float]],
           budgets: list[int]) -> None:
    indexes = list(dict.fromkeys(r.index for r in rows))
    parts = ("tune", "held")
    table = []
    for index in indexes:
        for part in parts:
            for cat in CATS:
                rs = [r for r in rows if (r.index, r.part, r.cat) == (index, part, cat)]
                answered = [r for r in rs if r.answered]
                table.append((index, part, cat, len(rs), _share([r.supported[WORDS] for r in rs]),
                              _share([r.cites_evidence for r in answered]),
                              _share([not r.answered for r in rs])))
            asked = [r for r in rows if (r.index, r.part) == (index, part) and r.cat != "adversarial"]
            answered = [r for r in asked if r.answered]
            table.append((index, part, "categories 1-4", len(asked),
                          _share([r.supported[WORDS] for r in asked]),
                          _share([r.cites_evidence for r in answered]),
                          _share([not r.answered for r in asked])))
    run.table(f"extractive answers, {WORDS} words: support, citing evidence (of the answered), "
              "refused", ["index", "part", "category", "questions:d", "support:.3f",
                          "cites evidence:.3f", "refused:.3f"], table)
    curve = []
    for index in indexes:
        for part in parts:
            rs = [r for r in rows if (r.index, r.part) == (index, part) and r.cat != "adversarial"]
            for b in budgets:
                curve.append((index, part, b, _share([r.supported[b] for r in rs]),
                              fmean(r.words[b] for r in rs) if rs else None))
                run.series(f"support {index} {part}", [[x[2], x[3] or 0] for x in curve
                                                        if x[:2] == (index, part)])
    run.table("support of categories 1-4 by word budget", ["index", "part", "budget:d",
                                                          "support:.3f", "mean words:.1f"], curve)
    cited = sum(r.citations for r in rows)
    run.say(f"citations naming one of the answer's hits: {sum(r.citations_hit for r in rows)} "
            f"of {cited}", citations=cited, citations_hit=sum(r.citations_hit for r in rows))
    cost = []
    for index in indexes:
        s, an, st = lat[(index, "search")], lat[(index, "answer")], lat[(index, "stream")]
        cost.append((index, median(s), pct(s, 95), median(an), pct(an, 95),
                     median(an) / median(s), median(st), pct(st, 95)))
    run.table("cost, one question at a time (ms); the answer's p50 against the search's; the "
              "stream's first event", ["index", "search p50:.1f", "search p95:.1f",
                                       "answer p50:.1f", "answer p95:.1f", "answer/search p50:.2f",
                                       "first event p50:.1f", "first event p95:.1f"], cost)
