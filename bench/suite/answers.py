"""Answers with their sources on LoCoMo: support, citations, refusals; cost beside the search.

By category, word budget and split (the conversations tuned on, those held out).

LoCoMo's dev half on one stack, both indexes (bench/data/locomo.py: the turns as spoken,
and normalised with their neighbours); every question of categories 1-4 and the
adversarial category 5 (a premise the conversation never states), each answered
extractively (k 10) at every word budget: the rates (`--part quality`; they do not depend
on the machine's load, so the lock is let go: run it at nice 19). Then, under the lock,
`--timed` questions an index spread over the conversations: the plain search (k 10), the
answer (60 words) and the same answer streamed (the time to its first event, the
citations), one at a time in a turn shuffled a question (`--part cost`).

Support: the gold answer's content words (lower case, punctuation and stop words out,
number words as digits, plurals singular) at least 80% in the answer's text. Citations: an
answered question of categories 1-4 cites an evidence turn; every citation names one of
the answer's hits. Refusals: `answered` false. Reported for the conversations the answer
was tuned on and those held out (bench/data/locomo.py: TUNE, HELD).

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
           "indexes": ("spoken,normalised", "the indexes asked"),
           "part": ("all", "quality (the rates; run it at nice 19: the lock is let go), cost "
                           "(the timings, under the lock) or all"),
           "timed": (400, "questions timed an index, spread over the conversations (0: all)")}
QUICK = {"limit": 3, "budgets": "60", "timed": 30}
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
    if a.part not in ("quality", "cost", "all"):
        raise SystemExit(f"--part: {a.part!r}; expected quality, cost or all")
    indexes = a.indexes.split(",")
    for index in indexes:
        if index not in SUFFIX:
            raise SystemExit(f"--indexes: {index!r} is not one of {', '.join(SUFFIX)}")
    budgets = sorted({int(b) for b in a.budgets.split(",")} | {WORDS})
    convs = data.conversations(run.need("data", "locomo", "locomo_dev.json").parents[2])
    rows: list[Row] = []
    lat: dict[tuple[str, str], list[float]] = defaultdict(list)
    with run.stack() as stack:
        async with session() as http:
            base = stack.gateway
            with run.between():  # loading and the rates do not depend on the machine's load
                run.progress("loading both indexes")
                await data.index(AnyVersion(http, base, timeout=1800.0),
                                 EmbedClient(http, base, 1800.0), convs)
                if a.part != "cost":
                    for index in indexes:
                        for conv, q in questions(run, convs):
                            row = Row(index, data.part_of(conv), q.category)
                            await answer_all(http, base, conv.corpus + SUFFIX[index], q, row,
                                             budgets)
                            rows.append(row)
            if a.part != "quality":
                await time_all(run, http, base, convs, indexes, lat)
    report(run, rows, lat, budgets)


def questions(run: Run, convs: list[Any]) -> list[tuple[Any, Any]]:
    """(conversation, question) of every question asked (--limit a category and
    conversation)."""
    out = []
    for conv in convs:
        qs = [*conv.questions, *conv.adversarial]
        if run.args.limit:
            qs = [q for c in CATS for q in [x for x in qs if x.category == c][:run.args.limit]]
        out += [(conv, q) for q in qs]
    return out


async def answer_all(http: aiohttp.ClientSession, base: str, corpus: str, q: Any, row: Row,
                     budgets: list[int]) -> None:
    """One question's extractive answer at every word budget."""
    asked = {"query_text": q.text, "corpora": [corpus], "k": K, "generator": "extractive"}
    for budget in budgets:
        judge(row, await post(http, f"{base}/v1/matrix/answer", {**asked, "max_words": budget}),
              q, budget)


async def time_all(run: Run, http: aiohttp.ClientSession, base: str, convs: list[Any],
                   indexes: list[str], lat: dict[tuple[str, str], list[float]]) -> None:
    """The search, the answer and its stream, one at a time in a turn shuffled a question,
    over --timed questions a index (every conversation's in turn)."""
    rng = random.Random(7)
    asked = questions(run, convs)
    step = max(1, len(asked) // run.args.timed) if run.args.timed else 1
    for index in indexes:
        run.progress(f"timing on the {index} index")
        for conv, q in asked[::step]:
            body = {"query_text": q.text, "corpora": [conv.corpus + SUFFIX[index]], "k": K}
            answer = {**body, "generator": "extractive", "max_words": WORDS}
            for what in shuffled(("search", "answer", "stream"), rng):
                if what == "search":
                    took = await ms(search(http, base, body))
                elif what == "answer":
                    took = await ms(post(http, f"{base}/v1/matrix/answer", answer))
                else:
                    took = await first_event_ms(http, base, answer)
                lat[(index, what)].append(took)


def _share(xs: list[bool]) -> float | None:
    return fmean(xs) if xs else None


def report(run: Run, rows: list[Row], lat: dict[tuple[str, str], list[float]],
           budgets: list[int]) -> None:
    if rows:
        report_rates(run, rows, budgets)
    if lat:
        report_cost(run, lat)


def report_rates(run: Run, rows: list[Row], budgets: list[int]) -> None:
    indexes = list(dict.fromkeys(r.index for r in rows))
    parts = ("tune", "held")
    table = []
    for index in indexes:
        for part in parts:
            for cat in (*CATS, "categories 1-4"):
                rs = [r for r in rows if (r.index, r.part) == (index, part)
                      and (r.cat == cat or (cat == "categories 1-4" and r.cat != "adversarial"))]
                answered = [r for r in rs if r.answered]
                adversarial = cat == "adversarial"  # the right answer is a refusal
                table.append((index, part, cat, len(rs),
                              None if adversarial else _share([r.supported[WORDS] for r in rs]),
                              None if adversarial else _share([r.cites_evidence for r in answered]),
                              _share([not r.answered for r in rs])))
    run.table(f"extractive answers, {WORDS} words: support, citing evidence (of the answered), "
              "refused", ["index", "part", "category", "questions:d", "support:.3f",
                          "cites evidence:.3f", "refused:.3f"], table)
    curve = []
    for index in indexes:
        for part in parts:
            rs = [r for r in rows if (r.index, r.part) == (index, part) and r.cat != "adversarial"]
            points = [(index, part, b, _share([r.supported[b] for r in rs]),
                       fmean(r.words[b] for r in rs) if rs else None) for b in budgets]
            curve += points
            run.series(f"support {index} {part}", [[b, x or 0] for _, _, b, x, _ in points])
    run.table("support of categories 1-4 by word budget", ["index", "part", "budget:d",
                                                          "support:.3f", "mean words:.1f"], curve)
    cited = sum(r.citations for r in rows)
    run.say(f"citations naming one of the answer's hits: {sum(r.citations_hit for r in rows)} "
            f"of {cited}", citations=cited, citations_hit=sum(r.citations_hit for r in rows))


def report_cost(run: Run, lat: dict[tuple[str, str], list[float]]) -> None:
    cost = []
    for index in dict.fromkeys(i for i, _ in lat):
        s, an, st = lat[(index, "search")], lat[(index, "answer")], lat[(index, "stream")]
        cost.append((index, len(s), median(s), pct(s, 95), median(an), pct(an, 95),
                     median(an) / median(s), median(st), pct(st, 95)))
    run.table("cost, one question at a time (ms): the search, the extractive answer, the "
              "stream's first event (its citations)",
              ["index", "questions:d", "search p50:.1f", "search p95:.1f", "answer p50:.1f",
               "answer p95:.1f", "answer/search p50:.2f", "first event p50:.1f",
               "first event p95:.1f"], cost)
