"""Searches while bulk work runs: the stack of the README, shared by searchers and loaders.

Starts the whole stack with `lakehouse up` (scripts/bench_gateway.py's start_stack: free
loopback ports, a temporary data directory), ingests docs/examples' two corpora, then
measures the default search over them (hybrid, as shipped; `corpora: [handbook, tickets]`)
from two searching clients, each asking a question, waiting `--think` seconds and asking
the next (questions from the BEIR sets' queries, never twice the same text):

- idle;
- during a bulk `lakehouse ingest` of Cranfield + CISI (2,858 documents, embedded);
- during `lakehouse reembed` of a 1,400-document corpus (Cranfield, loaded with random
  vectors and no model, then embedded by the local model);
- during `lakehouse sync` of a folder of 500 generated markdown pages.

Each bulk job runs once alone and once under the searches (alone first for ingest and
sync, searched first for reembed), on texts of its own (a run tag in every text, so
embedd's cache serves neither run from the other): documents/s alone and under searches.
Then fairness: client A runs the default search at concurrency 32, client B (another
loopback address, 127.0.0.2) asks one question a second; B's p95 against B alone.

Targets (DECISIONS.md, "Embedding: lanes"): p95 during each bulk job <= 2x idle p95; bulk
documents/s under searches >= 0.85x alone; B's p95 <= 2x B alone.

    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock \\
        .venv/bin/python scripts/bench_load.py [--data ../shared/data] [--think 0.1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_gateway import start_stack  # noqa: E402

CORPORA = ["handbook", "tickets"]
MODEL = "all-MiniLM-L6-v2"
REEMBED_DOCS = 1400
WIKI_PAGES = 500


@dataclass
class Searches:
    """Latencies (ms) and statuses of one client's searches."""

    ms: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)


class Questions:
    """BEIR queries, each text used once (a counter after a round)."""

    def __init__(self, data: Path) -> None:
        self.texts: list[str] = []
        for name in ("cranfield", "cisi", "scifact"):
            with (data / name / "queries.jsonl").open() as f:
                self.texts += [json.loads(line)["text"] for line in f]
        random.Random(38).shuffle(self.texts)
        self.n = 0

    def next(self) -> str:
        text = self.texts[self.n % len(self.texts)]
        rnd = self.n // len(self.texts)
        self.n += 1
        return text if rnd == 0 else f"{text} ({rnd})"


async def search(session: aiohttp.ClientSession, gateway: str, text: str, out: Searches) -> None:
    t0 = time.perf_counter()
    async with session.post(f"{gateway}/v1/matrix/search",
                            json={"query_text": text, "corpora": CORPORA}) as resp:
        await resp.read()
        out.statuses[resp.status] += 1
    if resp.status == 200:
        out.ms.append((time.perf_counter() - t0) * 1000)


async def searching(session: aiohttp.ClientSession, gateway: str, questions: Questions,
                    think: float, stop: asyncio.Event, out: Searches) -> None:
    """One client: a question, `think` seconds, the next, until stop."""
    while not stop.is_set():
        await search(session, gateway, questions.next(), out)
        if think:
            await asyncio.sleep(think)


async def while_searching(session: aiohttp.ClientSession, gateway: str, questions: Questions,
                          think: float, job: Callable[[], Awaitable[float]]
                          ) -> tuple[float, Searches]:
    """job() with two searching clients around it: (what job returns, the searches)."""
    stop = asyncio.Event()
    out = Searches()
    clients = [asyncio.create_task(searching(session, gateway, questions, think, stop, out))
               for _ in range(2)]
    await asyncio.sleep(1.0)  # the searches are running before the job starts
    try:
        result = await job()
    finally:
        stop.set()
        await asyncio.gather(*clients)
    return result, out


async def cli(gateway: str, *args: str) -> float:
    """Run `lakehouse ARGS` against the stack; its wall time in seconds."""
    env = {**os.environ, "LAKEHOUSE_URL": gateway}
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "internal.cli.main", *args, cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"lakehouse {' '.join(args)} failed ({proc.returncode}):\n"
                         f"{out.decode()[-2000:]}")
    return took


def tagged_docs(data: Path, sets: tuple[str, ...], tag: str) -> list[dict[str, Any]]:
    """The sets' documents, ids prefixed by set, a run tag at the end of every text."""
    docs = []
    for name in sets:
        with (data / name / "corpus.jsonl").open() as f:
            for line in f:
                d = json.loads(line)
                docs.append({"_id": f"{name[:2]}-{d['_id']}", "title": d.get("title") or "",
                             "text": f"{d['text']} [{tag}]"})
    return docs


def write_jsonl(path: Path, docs: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def write_wiki(folder: Path, data: Path, tag: str, pages: int) -> Path:
    """pages markdown pages, two sections each, from SciFact's abstracts."""
    docs = tagged_docs(data, ("scifact",), tag)
    folder.mkdir(parents=True)
    for i in range(pages):
        a, b = docs[i], docs[i + pages]
        (folder / f"page-{i:03d}.md").write_text(
            f"# {a['title'] or a['_id']}\n\n{a['text']}\n\n"
            f"## {b['title'] or b['_id']}\n\n{b['text']}\n")
    return folder


async def load_unembedded(session: aiohttp.ClientSession, gateway: str, corpus: str,
                          docs: list[dict[str, Any]]) -> None:
    """A corpus of random vectors and no model: what `reembed` then embeds."""
    async with session.post(f"{gateway}/v1/vectors/corpora",
                            json={"name": corpus, "dim": 384}) as r:
        assert r.status == 201, await r.text()
    rng = np.random.default_rng(38)
    for s in range(0, len(docs), 500):
        part = docs[s:s + 500]
        vecs = rng.standard_normal((len(part), 384)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        items = [{"id": d["_id"], "title": d["title"], "text": d["text"], "vector": v.tolist()}
                 for d, v in zip(part, vecs, strict=True)]
        async with session.post(f"{gateway}/v1/vectors/corpora/{corpus}/items",
                                json={"items": items}) as r:
            assert r.status == 200, await r.text()


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))] if xs else float("nan")


def row(label: str, s: Searches, idle_p95: float) -> str:
    bad = sum(n for st, n in s.statuses.items() if st != 200)
    return (f"{label:<34} {len(s.ms):>8} {pct(s.ms, 50):>8.1f} {pct(s.ms, 95):>8.1f} "
            f"{max(s.ms, default=float('nan')):>8.1f} {pct(s.ms, 95) / idle_p95:>8.2f}x"
            f"{f'  ({bad} not 200: {dict(s.statuses)})' if bad else ''}")


async def fairness(gateway: str, questions: Questions, seconds: float
                   ) -> tuple[Searches, Searches, Searches]:
    """(B alone, B beside A, A): A at concurrency 32, B one search a second from 127.0.0.2."""
    b_conn = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
    a_conn = aiohttp.TCPConnector(limit=64)
    async with aiohttp.ClientSession(connector=b_conn) as b_http, \
            aiohttp.ClientSession(connector=a_conn) as a_http:

        async def b_client(out: Searches) -> None:
            t_end = time.perf_counter() + seconds
            while time.perf_counter() < t_end:
                t0 = time.perf_counter()
                await search(b_http, gateway, questions.next(), out)
                await asyncio.sleep(max(0.0, 1.0 - (time.perf_counter() - t0)))

        alone = Searches()
        await b_client(alone)
        beside, a = Searches(), Searches()
        stop = asyncio.Event()
        a_tasks = [asyncio.create_task(searching(a_http, gateway, questions, 0.0, stop, a))
                   for _ in range(32)]
        await asyncio.sleep(2.0)
        await b_client(beside)
        stop.set()
        await asyncio.gather(*a_tasks)
    return alone, beside, a


async def lanes(session: aiohttp.ClientSession, gateway: str) -> dict[str, Any]:
    async with session.get(f"{gateway}/v1/embed/lanes") as r:
        out: dict[str, Any] = (await r.json())["models"][0]["lanes"]
        return out


async def main_async(args: argparse.Namespace, gateway: str, tmp: Path) -> None:
    data = Path(args.data)
    questions = Questions(data)
    think = args.think
    cut = args.limit or None  # a quick check of the script: a few documents per job
    n_reembed = min(REEMBED_DOCS, args.limit or REEMBED_DOCS)
    n_pages = min(WIKI_PAGES, args.limit or WIKI_PAGES)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=16)) as http:
        for name in CORPORA:
            await cli(gateway, "ingest", str(ROOT / "docs" / "examples" / f"{name}.jsonl"),
                      "--corpus", name, "--quiet")
        for name in ("re_searched", "re_alone"):
            docs = tagged_docs(data, ("cranfield",), name)[:n_reembed]
            await load_unembedded(http, gateway, name, docs)
        ingest_docs = {tag: write_jsonl(tmp / f"{tag}.jsonl",
                                        tagged_docs(data, ("cranfield", "cisi"), tag)[:cut])
                       for tag in ("in_alone", "in_searched")}
        n_ingest = len(tagged_docs(data, ("cranfield", "cisi"), "x")[:cut])
        wikis = {tag: write_wiki(tmp / tag, data, tag, n_pages)
                 for tag in ("wk_alone", "wk_searched")}
        # Warm-up: every part has answered a few searches.
        warm = Searches()
        for _ in range(20):
            await search(http, gateway, questions.next(), warm)

        async def idle_job() -> float:
            await asyncio.sleep(args.idle_seconds)
            return 0.0

        _, idle = await while_searching(http, gateway, questions, think, idle_job)
        idle_p95 = pct(idle.ms, 95)

        def ingest(tag: str) -> Callable[[], Awaitable[float]]:
            return lambda: cli(gateway, "ingest", str(ingest_docs[tag]), "--corpus", tag,
                               "--quiet")

        def reembed(tag: str) -> Callable[[], Awaitable[float]]:
            return lambda: cli(gateway, "reembed", tag, "--model", MODEL, "--wait")

        def sync(tag: str) -> Callable[[], Awaitable[float]]:
            return lambda: cli(gateway, "sync", str(wikis[tag]), "--corpus", tag)

        speeds: dict[str, tuple[float, float]] = {}
        during: dict[str, Searches] = {}
        t_alone = await ingest("in_alone")()
        t_searched, during["ingest"] = await while_searching(http, gateway, questions, think,
                                                             ingest("in_searched"))
        speeds["ingest"] = (n_ingest / t_alone, n_ingest / t_searched)
        t_searched, during["reembed"] = await while_searching(http, gateway, questions, think,
                                                              reembed("re_searched"))
        t_alone = await reembed("re_alone")()
        speeds["reembed"] = (n_reembed / t_alone, n_reembed / t_searched)
        t_alone = await sync("wk_alone")()
        t_searched, during["sync"] = await while_searching(http, gateway, questions, think,
                                                           sync("wk_searched"))
        speeds["sync"] = (n_pages / t_alone, n_pages / t_searched)
        lane_stats = await lanes(http, gateway)

    b_alone, b_beside, a = await fairness(gateway, questions, args.fair_seconds)

    print(f"# bench_load: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{os.cpu_count()} cores; default search over {', '.join(CORPORA)}; "
          f"2 searching clients, {think:g} s between a client's searches")
    print(f"{'searches':<34} {'n':>8} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'p95/idle':>9}")
    print(row("idle", idle, idle_p95))
    print(row(f"during ingest ({n_ingest} docs)", during["ingest"], idle_p95))
    print(row(f"during reembed ({n_reembed} docs)", during["reembed"], idle_p95))
    print(row(f"during wiki sync ({n_pages} pages)", during["sync"], idle_p95))
    print(f"{'bulk job':<34} {'alone/s':>8} {'searched/s':>11} {'ratio':>8}")
    for job, unit in (("ingest", "docs"), ("reembed", "docs"), ("sync", "pages")):
        alone_s, searched_s = speeds[job]
        print(f"{job + ' (' + unit + ')':<34} {alone_s:>8.2f} {searched_s:>11.2f} "
              f"{searched_s / alone_s:>7.2f}x")
    b95 = pct(b_alone.ms, 95)
    print(f"fairness ({args.fair_seconds:g} s each): B alone p50 {pct(b_alone.ms, 50):.1f} / "
          f"p95 {b95:.1f} ms; B beside A p50 {pct(b_beside.ms, 50):.1f} / "
          f"p95 {pct(b_beside.ms, 95):.1f} / max {max(b_beside.ms, default=float('nan')):.1f} ms "
          f"({pct(b_beside.ms, 95) / b95:.2f}x alone; B statuses {dict(b_beside.statuses)}); "
          f"A: {len(a.ms)} searches answered, statuses {dict(a.statuses)}")
    inter, bulk = lane_stats["interactive"], lane_stats["bulk"]
    print(f"embedd lanes: interactive {inter['texts']} texts, longest wait "
          f"{inter['wait_max_ms']:.1f} ms; bulk {bulk['texts']} texts, longest slice "
          f"{bulk['call_max_ms']:.1f} ms, longest wait {bulk['wait_max_ms']:.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.environ.get(
        "LAKEHOUSE_DATA", str(ROOT.parent / "shared")) + "/data")
    parser.add_argument("--think", type=float, default=0.1,
                        help="seconds a searching client waits between its searches")
    parser.add_argument("--idle-seconds", type=float, default=40.0)
    parser.add_argument("--fair-seconds", type=float, default=40.0)
    parser.add_argument("--limit", type=int, default=0,
                        help="at most this many documents per bulk job (0: all; a quick check)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-bench-load-"))
    proc, urls = start_stack(tmp / "stack")
    try:
        asyncio.run(main_async(args, urls["gateway"], tmp))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
