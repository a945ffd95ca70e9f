"""The learned ranker's costs on SciFact, through the gateway (run under both locks):

    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock \\
        .venv/bin/python scripts/bench_ranker.py

A stack of this checkout on free ports (`lakehouse up`, training by itself off), SciFact
ingested (vectors from var/eval-cache), every judged pair of train.tsv (919) recorded in
two playbooks alike. One is trained (`POST /v1/matrix/ranker/train`, `wait`): its time is
the training figure. Then the default search of SciFact's held-out questions (the eval's
20%), one at a time, four ways in turn (which goes first rotating): without feedback, with
feedback of the untrained playbook (the boost alone), the same at the ranker's depth
(`per_corpus_k` 100: what of the cost is the depth), with feedback of the trained one (the
learned ranker): p50 and p95 of each, and the ranker's p50 over the boost alone's (the
target: at most 1.15). Last, a search's p50 and p95 while a training runs, against the
same searches just before and after it (the training on the bulk side must not slow them).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from internal.clients.embed import EmbedClient  # noqa: E402
from internal.clients.matrixd import MatrixdClient  # noqa: E402
from internal.clients.vectord import VectordClient  # noqa: E402
from internal.evaluation import beir  # noqa: E402
from internal.evaluation.asking import record_all  # noqa: E402
from internal.evaluation.ingest import ingest  # noqa: E402

DATA = Path(os.environ.get("LAKEHOUSE_DATA", ROOT.parent / "shared")) / "data" / "scifact"
CACHE = ROOT / "var" / "eval-cache"
PLAYBOOKS = {"boost": "bench_pb_boost", "ranker": "bench_pb_ranker"}


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_stack(tmp: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
    ports = {s: free_port() for s in ("GATEWAY", "EMBEDD", "VECTORD", "MATRIXD", "SYNC", "MCPD")}
    env = {**os.environ, "LAKEHOUSE_VECTORD_DATA_DIR": str(tmp / "pg"),
           "LAKEHOUSE_LOG_LEVEL": "warning", "LAKEHOUSE_LOG_FORMAT": "json",
           "LAKEHOUSE_MATRIXD_RANKER_AUTO": "false"}
    for name in ("LAKEHOUSE_TOKEN", "LAKEHOUSE_URL"):
        env.pop(name, None)
    env.update({f"LAKEHOUSE_{s}_PORT": str(p) for s, p in ports.items()})
    proc = subprocess.Popen([sys.executable, "-m", "internal.cli.main", "up", "--log-dir",
                             str(tmp / "logs")], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("Lakehouse is up: "):
            return proc, {"gateway": line.split(": ", 1)[1].strip(),
                          **{s.lower(): f"http://127.0.0.1:{ports[s]}"
                             for s in ("EMBEDD", "VECTORD", "MATRIXD")}}
    raise SystemExit("lakehouse up did not come up")


def held_out(qid: str) -> bool:
    """The eval's held-out 20% (internal.evaluation.feedback.held_out)."""
    return int.from_bytes(hashlib.sha256(qid.encode()).digest()[:8], "big") % 10_000 < 2000


def pct(values: list[float], p: float) -> float:
    xs = sorted(values)
    return xs[max(0, round(p * len(xs)) - 1)]


async def ask(session: aiohttp.ClientSession, gateway: str, body: dict[str, Any]
              ) -> tuple[float, dict[str, Any]]:
    t = time.perf_counter()
    async with session.post(f"{gateway}/v1/matrix/search", json=body) as r:
        out = await r.json()
        assert r.status == 200, out
    return (time.perf_counter() - t) * 1000, out


async def run(rounds: int) -> None:
    dataset = beir.load(DATA, "train")
    pairs = [(q, d) for q, docs in dataset.qrels.items() for d, g in docs.items() if g > 0]
    held = [dataset.queries[q] for q in dataset.queries if held_out(q)]
    corpus = beir.corpus_name(dataset)
    with tempfile.TemporaryDirectory(prefix="bench-ranker-") as tmp:
        proc, urls = start_stack(Path(tmp))
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1800)) as s:
                vc = VectordClient(s, urls["vectord"], timeout=1800.0)
                ec = EmbedClient(s, urls["embedd"], timeout=1800.0)
                matrix = MatrixdClient(s, urls["matrixd"], timeout=1800.0)
                await ingest(vc, ec, corpus, dataset.docs, cache_dir=CACHE)
                for pb in PLAYBOOKS.values():
                    n, _ = await record_all(matrix, corpus, pb, pairs, dataset.queries)
                print(f"{len(pairs)} judged pairs of SciFact train recorded ({n} found) in "
                      f"each of {', '.join(PLAYBOOKS.values())}", flush=True)
                gw = urls["gateway"]
                t = time.perf_counter()
                async with s.post(f"{gw}/v1/matrix/ranker/train",
                                  json={"playbook_corpus": PLAYBOOKS["ranker"], "wait": True}) as r:
                    model = await r.json()
                    assert r.status == 200, model
                wall = time.perf_counter() - t
                print(f"training on {model['records']} records ({model['queries']} questions, "
                      f"{model['examples']} examples): {model['seconds']:.1f} s in matrixd, "
                      f"{wall:.1f} s through the gateway; {model['trees']} trees, alpha "
                      f"{model['alpha']:g}; cross-validated nDCG@10 on the records "
                      f"{model['ndcg10_boost']:.4f} -> {model['ndcg10_ranker']:.4f} "
                      f"(target <= 60 s)", flush=True)
                await latencies(s, gw, corpus, held, rounds)
                await while_training(s, gw, corpus, held)
        finally:
            proc.terminate()
            proc.wait(120)


def bodies(corpus: str) -> dict[str, dict[str, Any]]:
    return {"default": {"corpora": [corpus]},
            "boost": {"corpora": [corpus], "use_playbook": True,
                      "playbook_corpus": PLAYBOOKS["boost"]},
            # The boost alone at the ranker's depth: the part of its cost that is k 100.
            "boost k100": {"corpora": [corpus], "use_playbook": True, "per_corpus_k": 100,
                           "playbook_corpus": PLAYBOOKS["boost"]},
            "ranker": {"corpora": [corpus], "use_playbook": True,
                       "playbook_corpus": PLAYBOOKS["ranker"]}}


async def latencies(s: aiohttp.ClientSession, gw: str, corpus: str, held: list[str],
                    rounds: int) -> None:
    kinds = bodies(corpus)
    names = list(kinds)
    lat: dict[str, list[float]] = {k: [] for k in names}
    applied = 0
    scoring: list[float] = []  # the answer's ranker.ms: features and predict in matrixd
    for rnd in range(rounds + 1):  # round 0 warms the caches
        for i, q in enumerate(held):
            turn = (i + rnd) % len(names)
            for name in names[turn:] + names[:turn]:
                ms, out = await ask(s, gw, {"query_text": q, **kinds[name]})
                if rnd:
                    lat[name].append(ms)
                    used = (out.get("ranker") or {}) if name == "ranker" else {}
                    applied += bool(used.get("applied"))
                    if used.get("ms") is not None:
                        scoring.append(float(used["ms"]))
    p50 = {k: statistics.median(v) for k, v in lat.items()}
    print(f"\n{rounds} rounds x {len(held)} held-out SciFact questions, one at a time, through "
          "the gateway (the default search, k 10)\n")
    print("| search | p50 ms | p95 ms |")
    print("|---|---:|---:|")
    for k, v in lat.items():
        print(f"| {k} | {p50[k]:.1f} | {pct(v, 0.95):.1f} |")
    if scoring:
        print(f"| ranker's scoring in matrixd (features + predict, the answer's ranker.ms) | "
              f"{statistics.median(scoring):.2f} | {pct(scoring, 0.95):.2f} |")
    print(f"\nthe learned ranker ordered {applied} of {len(lat['ranker'])} answers; its p50 "
          f"{p50['ranker'] / p50['boost']:.3f}x the boost alone's (target <= 1.15), "
          f"{p50['ranker'] / p50['default']:.3f}x the search without feedback's", flush=True)


async def while_training(s: aiohttp.ClientSession, gw: str, corpus: str,
                         held: list[str]) -> None:
    """The boost-alone search, one at a time: before, during and after a training."""
    body = bodies(corpus)["boost"]
    phases: dict[str, list[float]] = {"before": [], "during": [], "after": []}
    for q in held:
        phases["before"].append((await ask(s, gw, {"query_text": q, **body}))[0])
    async with s.post(f"{gw}/v1/matrix/ranker/train",
                      json={"playbook_corpus": PLAYBOOKS["ranker"]}) as r:
        assert r.status == 202, await r.text()
    i = 0
    while True:
        async with s.get(f"{gw}/v1/matrix/ranker?playbook_corpus={PLAYBOOKS['ranker']}") as r:
            training = (await r.json())["training"]
        if not training:
            break
        q = held[i % len(held)]
        phases["during"].append((await ask(s, gw, {"query_text": q, **body}))[0])
        i += 1
    for q in held:
        phases["after"].append((await ask(s, gw, {"query_text": q, **body}))[0])
    print("\nthe boost-alone search while the ranker trains (one at a time, through the "
          "gateway)\n")
    print("| phase | searches | p50 ms | p95 ms |")
    print("|---|---:|---:|---:|")
    for k, v in phases.items():
        print(f"| {k} | {len(v)} | {statistics.median(v):.1f} | {pct(v, 0.95):.1f} |")
    idle = phases["before"] + phases["after"]
    print(f"\np95 during the training {pct(phases['during'], 0.95) / pct(idle, 0.95):.3f}x "
          f"the p95 around it", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    asyncio.run(run(parser.parse_args().rounds))


if __name__ == "__main__":
    main()
