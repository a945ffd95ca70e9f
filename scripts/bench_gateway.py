"""Benchmark the gateway's overhead: one matrixd search, through the gateway and direct.

Starts the whole stack with `lakehouse up` on free loopback ports (temporary data dir,
log level warning everywhere), loads one corpus of random 384-d vectors with short
texts, then sends the same matrixd search at concurrency 16 straight to matrixd and
through the gateway, in alternating rounds so both see the same machine load. Prints
p50/p95 latency and QPS per path and the gateway's p50 overhead (target <= 15%), for
a text (hybrid) search, the usual one, and a vector search, the cheapest one (where a
fixed per-request cost weighs most). A third path, a bare aiohttp proxy that relays the
body and the answer and does nothing else (scripts/bench_floors.py), is the floor: the
overhead any aiohttp hop adds on this machine, measured in the same rounds.

    .venv/bin/python scripts/bench_gateway.py [--items 2000] [--queries 400] [--rounds 4]
        [--baseline DIR]   # instead: this checkout against another (e.g. a worktree of
                           # an older commit), both through their gateways, alternating;
                           # each stack runs with its checkout's own .venv when it has one
        [--beir DATA]      # with --baseline: one corpus holding SciFact + Cranfield + CISI
                           # (text embedded by the stack's model, vectors cached in
                           # var/eval-cache), SciFact's queries as text: the default search
                           # (hybrid, feedback as shipped) and a vector-only search of the
                           # same text, through each gateway (p50s: one text at a
                           # time through all four, in a turn shuffled a text)

    flock /tmp/lakehouse-bench.lock .venv/bin/python scripts/bench_gateway.py \
        --baseline ../main-before --beir ../shared/data
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
CONCURRENCY = 16
WORDS = ("vector database search index query corpus postgres embedding model rank fusion "
         "lexical hybrid keyword gateway daemon latency throughput tea bicycle river").split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def python_of(root: Path) -> str:
    """The checkout's own interpreter (its .venv: its own dependencies and editable
    installs, e.g. a baseline from before the client became its own distribution), else
    this one."""
    own = root / ".venv" / "bin" / "python"
    return str(own) if own.is_file() else sys.executable


def start_stack(tmp: Path, root: Path = ROOT) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """`lakehouse up` of the checkout at root, with its own interpreter (python_of)."""
    ports = {s: free_port() for s in ("GATEWAY", "EMBEDD", "VECTORD", "MATRIXD", "SYNC", "MCPD")}
    env = {**os.environ, "LAKEHOUSE_VECTORD_DATA_DIR": str(tmp / "pg"),
           "LAKEHOUSE_LOG_LEVEL": "warning", "LAKEHOUSE_LOG_FORMAT": "json"}
    env.update({f"LAKEHOUSE_{s}_PORT": str(p) for s, p in ports.items()})
    proc = subprocess.Popen([python_of(root), "-m", "internal.cli.main", "up", "--log-dir", str(tmp / "logs")],
                            cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("Lakehouse is up: "):
            return proc, {"gateway": line.split(": ", 1)[1].strip(),
                          "matrixd": f"http://127.0.0.1:{ports['MATRIXD']}"}
    raise SystemExit("lakehouse up did not come up")


async def load(session: aiohttp.ClientSession, base: str, corpus: str, items: int) -> None:
    rng = np.random.default_rng(7)
    async with session.post(f"{base}/v1/vectors/corpora", json={"name": corpus, "dim": 384}) as r:
        assert r.status in (201, 409), await r.text()
    for start in range(0, items, 500):
        n = min(500, items - start)
        vecs = rng.standard_normal((n, 384)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        batch = [{"id": f"d{start + i}", "vector": v.tolist(),
                  "text": " ".join(random.choices(WORDS, k=12))} for i, v in enumerate(vecs)]
        async with session.post(f"{base}/v1/vectors/corpora/{corpus}/items", json={"items": batch}) as r:
            assert r.status == 200, await r.text()


async def run(session: aiohttp.ClientSession, url: str, body: dict[str, Any], queries: int
              ) -> tuple[list[float], float]:
    """Latencies (ms) of `queries` searches at CONCURRENCY, and the wall time (s)."""
    return await run_texts(session, url, body, [None] * queries)


def _cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


async def main_async(args: argparse.Namespace, urls: dict[str, str], gateway: psutil.Process,
                     daemons: list[psutil.Process]) -> None:
    connector = aiohttp.TCPConnector(limit=CONCURRENCY * 2)
    async with aiohttp.ClientSession(connector=connector) as session:
        corpus = "bench_gateway"
        await load(session, urls["gateway"], corpus, args.items)
        rows = []
        cpu_ms: dict[str, tuple[float, float]] = {}
        for label, body in searches(corpus).items():
            paths = ("matrixd", "gateway", "floor")
            for path in paths:
                await run(session, urls[path], body, 50)  # warm-up
            lat: dict[str, list[float]] = {p: [] for p in paths}
            wall = dict.fromkeys(paths, 0.0)
            gw_cpu = 0.0
            direct_cpu = 0.0
            for rnd in range(args.rounds):
                order = paths[rnd % 3:] + paths[:rnd % 3]  # each path first in turn
                for path in order:
                    cpu0, all0 = _cpu(gateway), sum(_cpu(d) for d in daemons)
                    got, secs = await run(session, urls[path], body, args.queries)
                    if path == "gateway":
                        gw_cpu += _cpu(gateway) - cpu0
                    elif path == "matrixd":
                        direct_cpu += sum(_cpu(d) for d in daemons) - all0
                    lat[path] += got
                    wall[path] += secs
            names = {"matrixd": "direct to matrixd", "gateway": "through gateway",
                     "floor": "bare aiohttp proxy"}
            for path in paths:
                xs = sorted(lat[path])
                rows.append((label, names[path], statistics.median(xs), xs[int(len(xs) * 0.95) - 1],
                             len(xs) / wall[path]))
            cpu_ms[label] = (gw_cpu * 1000 / len(lat["gateway"]),
                             direct_cpu * 1000 / len(lat["matrixd"]))
        print(f"\nconcurrency {CONCURRENCY}, {args.items} items, {args.rounds} x {args.queries} queries per path\n")
        print("| search        | path              | p50 ms | p95 ms |   QPS | p50 overhead |")
        print("|---------------|-------------------|-------:|-------:|------:|-------------:|")
        for i, (label, path, p50, p95, qps) in enumerate(rows):
            over = "" if i % 3 == 0 else f"{(p50 / rows[i - i % 3][2] - 1) * 100:+.1f}%"
            print(f"| {label:<13} | {path:<17} | {p50:6.2f} | {p95:6.2f} | {qps:5.0f} | {over:>12} |")
        print("\nCPU per search (load-independent): ")
        for k, (gw, direct) in cpu_ms.items():
            print(f"  {k}: daemons {direct:.2f} ms direct; the gateway adds {gw:.2f} ms "
                  f"({gw / direct * 100:+.1f}%)")
        print(f"machine load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print("target: gateway p50 overhead <= 15% (the bare aiohttp proxy row is the floor)")


def searches(corpus: str, prf_off: bool = False) -> dict[str, dict[str, Any]]:
    qv = np.random.default_rng(1).standard_normal(384).astype(np.float32)
    qv /= np.linalg.norm(qv)
    text: dict[str, Any] = {"query_text": "vector search latency", "corpora": [corpus], "k": 10}
    if prf_off:  # the hybrid search without pseudo-relevance feedback
        text["prf"] = {"docs": 0}
    return {
        "text (hybrid)": text,
        "vector": {"query_vector": qv.tolist(), "corpora": [corpus], "k": 10, "mode": "vector"},
    }


BEIR_SETS = (("scifact", "train", "sf"), ("cranfield", "dev", "cr"), ("cisi", "dev", "ci"))


async def load_beir(session: aiohttp.ClientSession, base: str, corpus: str, data: Path) -> int:
    """SciFact + Cranfield + CISI as one corpus (ids prefixed by set), embedded by the stack."""
    import dataclasses

    import msgspec

    from internal.api.responses import Corpus
    from internal.api.vectord import CreateCorpus
    from internal.clients.embed import EmbedClient
    from internal.clients.vectord import VectordClient
    from internal.evaluation import beir
    from internal.evaluation.ingest import ingest

    class VectordOfAnyVersion(VectordClient):
        """This checkout's client against a baseline too: a corpus of a vectord from before
        precisions has none (its vectors are float32)."""

        async def get_corpus(self, name: str) -> Corpus:
            raw = await self.call("GET", self._c(name))
            return msgspec.convert({"precision": "float32", **raw}, Corpus)

        async def create_corpus(self, name: str, dim: int, metric: Any = "cosine",
                                language: str | None = None, model: str | None = None,
                                defer_index: bool = False) -> Corpus:
            body = CreateCorpus(name=name, dim=dim, metric=metric, language=language or None,
                                model=model or None, defer_index=defer_index)
            raw = await self.call("POST", "/v1/vectors/corpora", body)
            return msgspec.convert({"precision": "float32", **raw}, Corpus)

    docs = []
    for name, split, tag in BEIR_SETS:
        ds = beir.load(data / name, split)
        docs += [dataclasses.replace(d, id=f"{tag}:{d.id}") for d in ds.docs]
    await ingest(VectordOfAnyVersion(session, base), EmbedClient(session, base), corpus, docs,
                 cache_dir=ROOT / "var" / "eval-cache", cache_name="bench_gateway_beir3")
    return len(docs)


def beir_queries(data: Path, n: int) -> list[str]:
    from internal.evaluation import beir

    return list(beir.load(data / "scifact", "train").queries.values())[:n]


async def run_texts(session: aiohttp.ClientSession, url: str, body: dict[str, Any],
                    texts: list[str | None]) -> tuple[list[float], float]:
    """One search per text at CONCURRENCY, each with that query_text (None: the body's
    own); latencies (ms) and the wall time (s)."""
    latencies: list[float] = []
    todo = list(reversed(texts))

    async def worker() -> None:
        while todo:
            text = todo.pop()
            t0 = time.perf_counter()
            sent = body if text is None else {**body, "query_text": text}
            async with session.post(f"{url}/v1/matrix/search", json=sent) as r:
                await r.read()
                assert r.status == 200, r.status
            latencies.append((time.perf_counter() - t0) * 1000)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return latencies, time.perf_counter() - t0


async def beir_against_baseline(args: argparse.Namespace, this: str, base: str) -> None:
    """The default search and a vector-only one on SciFact + Cranfield + CISI, both sides."""
    connector = aiohttp.TCPConnector(limit=CONCURRENCY * 2)
    async with aiohttp.ClientSession(connector=connector) as session:
        corpus = "bench_beir3"
        n = 0
        for url in (this, base):
            n = await load_beir(session, url, corpus, args.beir)
        texts: list[str | None] = list(beir_queries(args.beir, args.queries))
        bodies = {"default (hybrid)": {"corpora": [corpus], "k": 10},
                  "vector only": {"corpora": [corpus], "k": 10, "mode": "vector"}}
        sides = {"this": this, "baseline": base}
        print(f"\nthis checkout vs baseline {args.baseline}: one corpus of {n:,} documents "
              f"(SciFact + Cranfield + CISI), {len(texts)} SciFact queries as text, "
              f"{args.rounds} rounds; p50/p95 one at a time, each text through both searches "
              f"on both sides in turn; QPS at concurrency {CONCURRENCY}, sides alternating\n")
        print("| search | side | p50 ms | p95 ms | QPS @16 |")
        print("|---|---|---:|---:|---:|")
        figures: dict[tuple[str, str], tuple[float, float, float]] = {}
        for body in bodies.values():
            for url in sides.values():
                await run_texts(session, url, body, texts[:50])  # warm-up
        pairs = [(label, side) for label in bodies for side in sides]
        seq: dict[tuple[str, str], list[float]] = {pair: [] for pair in pairs}
        wall = dict.fromkeys(pairs, 0.0)
        done = dict.fromkeys(pairs, 0)
        order_rng = random.Random(7)
        for rnd in range(args.rounds):
            # One at a time, the latency a user sees: each text through every search on
            # every side in turn, so that the machine's swings fall on all four alike (the
            # p50 ratio compares two of them). The turn is shuffled a text (seeded): each of
            # the four goes first, and follows each other one, equally often on average.
            # (A fixed order favours some: a daemon answering twice in a row answers
            # faster, and a search right after the previous main's 30 ms default search
            # answers slower. A reversed order every other text moved each side's ratio by
            # 0.1 whichever checkout ran as "this"; a rotating one put this side's vector
            # search after the baseline's default three times in four.)
            for text in texts[:100]:
                turn = order_rng.sample(pairs, len(pairs))
                for label, side in turn:
                    got, _ = await run_texts(session, sides[side], bodies[label], [text])
                    seq[(label, side)] += got
            for label, body in bodies.items():
                for side in (list(sides) if rnd % 2 == 0 else list(sides)[::-1]):
                    got, secs = await run_texts(session, sides[side], body, texts)
                    wall[(label, side)] += secs
                    done[(label, side)] += len(got)
        for label, side in pairs:
            xs = sorted(seq[(label, side)])
            figures[(label, side)] = (statistics.median(xs), xs[int(len(xs) * 0.95) - 1],
                                      done[(label, side)] / wall[(label, side)])
            p50, p95, qps = figures[(label, side)]
            print(f"| {label} | {side} | {p50:.2f} | {p95:.2f} | {qps:.0f} |")
        d, v = "default (hybrid)", "vector only"
        print(f"\ndefault search QPS, this / baseline: "
              f"{figures[(d, 'this')][2] / figures[(d, 'baseline')][2]:.2f}x")
        for side in sides:
            print(f"default p50 / vector-only p50 ({side}): "
                  f"{figures[(d, side)][0] / figures[(v, side)][0]:.2f}")
        print(f"machine load average while measuring: {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} cores")


async def against_baseline(args: argparse.Namespace, this: str, base: str) -> None:
    """The same searches through this checkout's gateway and the baseline's, alternating."""
    connector = aiohttp.TCPConnector(limit=CONCURRENCY * 2)
    async with aiohttp.ClientSession(connector=connector) as session:
        corpus = "bench_gateway"
        for url in (this, base):
            await load(session, url, corpus, args.items)
        print(f"\nthis checkout vs baseline {args.baseline}, through the gateway, concurrency "
              f"{CONCURRENCY}, {args.rounds} x {args.queries} queries per side, alternating\n")
        print("| search        | side     | p50 ms | p95 ms |   QPS | QPS this / baseline |")
        print("|---------------|----------|-------:|-------:|------:|--------------------:|")
        for label, body in searches(corpus, args.prf_off).items():
            sides = {"this": this, "baseline": base}
            for url in sides.values():
                await run(session, url, body, 50)  # warm-up
            lat: dict[str, list[float]] = {s: [] for s in sides}
            wall = dict.fromkeys(sides, 0.0)
            for rnd in range(args.rounds):
                order = list(sides) if rnd % 2 == 0 else list(sides)[::-1]
                for side in order:
                    got, secs = await run(session, sides[side], body, args.queries)
                    lat[side] += got
                    wall[side] += secs
            qps = {s: len(lat[s]) / wall[s] for s in sides}
            for side in sides:
                xs = sorted(lat[side])
                ratio = f"{qps['this'] / qps['baseline']:.2f}x" if side == "this" else ""
                print(f"| {label:<13} | {side:<8} | {statistics.median(xs):6.2f} | "
                      f"{xs[int(len(xs) * 0.95) - 1]:6.2f} | {qps[side]:5.0f} | {ratio:>19} |")
        print(f"machine load average while measuring: {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} cores")


def load_line() -> str:
    """The machine's load while measuring, printed under every table."""
    return (f"machine load average while measuring: {os.getloadavg()[0]:.1f} on "
            f"{os.cpu_count()} cores")


def on_stack(prefix: str, work: Callable[[str], Coroutine[Any, Any, None]]) -> int:
    """work(the gateway's URL) on a stack of its own, stopped and removed afterwards."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    proc, urls = start_stack(tmp)
    try:
        asyncio.run(work(urls["gateway"]))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def on_stacks(prefix: str, roots: dict[str, Path],
              work: Callable[[dict[str, str]], Coroutine[Any, Any, None]]) -> int:
    """work(each side's gateway URL) on a stack of each checkout, stopped and removed
    afterwards (in reverse order)."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    procs: list[subprocess.Popen[str]] = []
    try:
        gateways = {}
        for side, root in roots.items():
            proc, urls = start_stack(tmp / side, root.resolve())
            procs.append(proc)
            gateways[side] = urls["gateway"]
        asyncio.run(work(gateways))
    finally:
        for proc in reversed(procs):
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=400)
    # An even number: the sides take turns leading a round's QPS phase (with 3, one led twice).
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--baseline", type=Path, default=None,
                        help="a checkout to compare with (e.g. a git worktree of an older "
                             "commit): both stacks run, their searches alternate")
    parser.add_argument("--prf-off", action="store_true",
                        help="send the text search with \"prf\": {\"docs\": 0} (with --baseline)")
    parser.add_argument("--beir", type=Path, default=None, metavar="DATA",
                        help="with --baseline: SciFact + Cranfield + CISI from DATA as one "
                             "corpus, SciFact's queries (see the module's docstring)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lakehouse-bench-gw-"))
    if args.baseline is not None:
        proc, urls = start_stack(tmp / "this")
        try:
            bproc, burls = start_stack(tmp / "baseline", args.baseline.resolve())
            try:
                compare = beir_against_baseline if args.beir is not None else against_baseline
                asyncio.run(compare(args, urls["gateway"], burls["gateway"]))
            finally:
                bproc.send_signal(signal.SIGTERM)
                bproc.wait(120)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)
            shutil.rmtree(tmp, ignore_errors=True)
        return 0
    proc, urls = start_stack(tmp)
    floor_port = free_port()
    floor = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "bench_floors.py"), "proxy",
                              "--upstream", urls["matrixd"], "--port", str(floor_port)],
                             cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    urls["floor"] = f"http://127.0.0.1:{floor_port}"
    try:
        children = psutil.Process(proc.pid).children()
        gateway = next(p for p in children if "internal.gateway.server" in " ".join(p.cmdline()))
        daemons = [p for p in children if p.pid != gateway.pid]
        asyncio.run(main_async(args, urls, gateway, daemons))
    finally:
        floor.terminate()
        floor.wait(30)
        proc.send_signal(signal.SIGTERM)
        proc.wait(120)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
