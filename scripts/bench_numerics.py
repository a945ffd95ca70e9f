"""The local model's two numerics side by side: the shipped (float MatMuls) and integer.

Prints, from one run:
- CPU per question and per document, in-process (LocalModel, one onnxruntime thread, one
  text a call, the process's CPU time) and through embedd's `POST /v1/embed` (one embedd
  process per numerics, cache off, one text a request, that process's CPU time from
  psutil); each text carries a unique suffix so no cache answers. The sides alternate in
  slices and the whole is repeated `--rounds` times; each figure is the median of rounds.
- The cosine between the two numerics' vectors of the same texts (mean / min).
- With `--quality`: the held-out nDCG@10 of the cross-validated default (`lakehouse eval
  --cross-validate` over SciFact train, Cranfield dev and CISI dev) for each numerics in
  a fresh data directory, and for corpora embedded by the float numerics searched with
  questions embedded by the integer ones (the float run's vectors, kept in its eval
  cache, labelled with the integer numerics' id: the mix the two ids prevent); then, per
  set, the two numerics' nDCG@10 query by query (how many queries moved, by how much).
- With `--dense-only`: each set's nDCG@10 of the vectors alone (exact cosine search,
  in-process), both numerics and the two mixed: how far the vectors themselves move,
  apart from the hybrid search's fusion and feedback.

    flock /tmp/lakehouse-heavy.lock flock /tmp/lakehouse-bench.lock \\
        .venv/bin/python scripts/bench_numerics.py [--rounds 3] [--quality]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import aiohttp
import numpy as np
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_embed import data_dir, free_port, wait_up  # noqa: E402

from internal.config.sections import LOCAL_NUMERICS  # noqa: E402
from internal.embedd.local import MODEL_IDS, LocalModel  # noqa: E402
from internal.evaluation.ingest import cache_path  # noqa: E402

SIDES = tuple(reversed(LOCAL_NUMERICS))  # float (shipped) first, then integer
SETS = (("scifact", "train"), ("cranfield", "dev"), ("cisi", "dev"))


def questions(n: int) -> list[str]:
    path = data_dir() / "data" / "scifact" / "queries.jsonl"
    with path.open(encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f][:n]


def documents(n: int) -> list[str]:
    out: list[str] = []
    with (data_dir() / "data" / "scifact" / "corpus.jsonl").open(encoding="utf-8") as f:
        for line in f:
            doc = json.loads(line)
            out.append(f"{doc.get('title', '')}\n{doc['text']}")
            if len(out) >= n:
                break
    return out


def tagged(texts: list[str]) -> list[str]:
    """The texts, each with a suffix no cache has seen."""
    return [f"{t} [{uuid.uuid4().hex[:8]}]" for t in texts]


def inproc_cpu_ms(model: LocalModel, texts: list[str]) -> float:
    t = time.process_time()
    for text in texts:
        model.embed([text])
    return (time.process_time() - t) / len(texts) * 1000


def start_embedd(port: int, numerics: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "LAKEHOUSE_EMBEDD_PORT": str(port), "LAKEHOUSE_EMBEDD_CACHE_SIZE": "0",
           "LAKEHOUSE_EMBEDD_BACKEND": "local", "LAKEHOUSE_EMBEDD_BACKENDS": "",
           "LAKEHOUSE_EMBEDD_LOCAL_NUMERICS": numerics,
           "LAKEHOUSE_LOG_LEVEL": "warning", "LAKEHOUSE_LOG_FORMAT": "json"}
    return subprocess.Popen([sys.executable, "-m", "internal.embedd.server"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def cpu_of(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


async def http_cpu_ms(http: aiohttp.ClientSession, base: str, proc: psutil.Process,
                      texts: list[str], input_type: str) -> float:
    """embedd's CPU per text, one text a request, one request at a time."""
    before = cpu_of(proc)
    for text in texts:
        async with http.post(f"{base}/v1/embed",
                             json={"texts": [text], "input_type": input_type}) as resp:
            body = await resp.read()
            assert resp.status == 200, body
    return (cpu_of(proc) - before) / len(texts) * 1000


def cosine(a: np.ndarray, b: np.ndarray) -> str:
    c = (a * b).sum(axis=1)
    return f"{c.mean():.4f} / {c.min():.4f}"


async def speed(args: argparse.Namespace) -> None:
    qs, ds = questions(args.questions), documents(args.documents)
    models = {side: LocalModel(1, side) for side in SIDES}
    ports = {side: free_port() for side in SIDES}
    procs = {side: start_embedd(ports[side], side) for side in SIDES}
    figures: dict[tuple[str, str], list[float]] = {}
    try:
        async with aiohttp.ClientSession() as http:
            for side in SIDES:
                await wait_up(http, f"http://127.0.0.1:{ports[side]}", procs[side])
            ps = {side: psutil.Process(procs[side].pid) for side in SIDES}
            for side in SIDES:  # warm both paths
                models[side].embed(qs[:5])
                await http_cpu_ms(http, f"http://127.0.0.1:{ports[side]}", ps[side],
                                  tagged(qs[:5]), "query")
            for r in range(args.rounds):
                order = SIDES if r % 2 == 0 else tuple(reversed(SIDES))
                for side in order:
                    base = f"http://127.0.0.1:{ports[side]}"
                    for kind, texts, input_type in (("question", qs, "query"),
                                                    ("document", ds, "document")):
                        figures.setdefault((side, f"{kind} in-process"), []).append(
                            inproc_cpu_ms(models[side], tagged(texts)))
                        figures.setdefault((side, f"{kind} /v1/embed"), []).append(
                            await http_cpu_ms(http, base, ps[side], tagged(texts), input_type))
    finally:
        for proc in procs.values():
            proc.terminate()
            proc.wait(timeout=30)
    vq = {side: models[side].embed(qs).vectors for side in SIDES}
    vd = {side: models[side].embed(ds).vectors for side in SIDES}
    old, new = SIDES
    print(f"bench_numerics: {len(qs)} SciFact questions and {len(ds)} documents, one text a "
          f"call, 1 onnxruntime thread; {args.rounds} rounds, sides alternating; "
          f"CPU ms per text (median of rounds)")
    print()
    print(f"| CPU per text | {old} (shipped) | {new} | {new} / {old} | target |")
    print("|---|---:|---:|---:|---|")
    for what in ("question in-process", "document in-process", "question /v1/embed",
                 "document /v1/embed"):
        a = statistics.median(figures[(old, what)])
        b = statistics.median(figures[(new, what)])
        target = "<= 0.5x" if "in-process" in what else "<= 0.6x"
        print(f"| {what} | {a:.2f} | {b:.2f} | {b / a:.2f}x | {target} |")
    for what in ("question", "document"):
        a = statistics.median(figures[(old, f"{what} /v1/embed")])
        b = statistics.median(figures[(old, f"{what} in-process")])
        c = statistics.median(figures[(new, f"{what} /v1/embed")])
        d = statistics.median(figures[(new, f"{what} in-process")])
        print(f"| {what}: embedd's own (HTTP - in-process) | {a - b:.2f} | {c - d:.2f} | | |")
    print()
    print(f"cosine {new} to {old}, mean / min: questions {cosine(vq[new], vq[old])}, "
          f"documents {cosine(vd[new], vd[old])}")


Run = tuple[dict[str, float], dict[str, dict[str, float]]]  # held out per set; per query


def held_out(numerics: str, data: Path) -> Run:
    """The default's held-out nDCG@10 per data set (as `lakehouse eval` prints it) and
    its nDCG@10 per query (its --json)."""
    cmd = [str(ROOT / ".venv" / "bin" / "lakehouse"), "eval", "--in-process", "--cross-validate",
           "--json", str(data / "eval.json")]
    for name, split in SETS:
        cmd += ["--dataset", str(data_dir() / "data" / name), "--split", split]
    env = {**os.environ, "LAKEHOUSE_VECTORD_DATA_DIR": str(data / "pg"),
           "LAKEHOUSE_EMBEDD_LOCAL_NUMERICS": numerics, "LAKEHOUSE_LOG_LEVEL": "warning"}
    data.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    found = dict(re.findall(r"^\| (\w+) \| (0\.\d{4}) \|$", out.stdout, re.MULTILINE))
    mean = re.search(r"the shipped default: .* \(held-out mean (0\.\d{4})\)", out.stdout)
    result = {name: float(found[name]) for name, _ in SETS}
    result["mean of the three"] = float(mean.group(1)) if mean else float("nan")
    return result, json.loads((data / "eval.json").read_text())["per_query"]


def relabel_cache(source: Path, target: Path, old: str, new: str) -> None:
    """The eval cache's vectors of model old in source, filed in target as model new's:
    an eval of the new numerics in target (a fresh data directory, so no corpus of the
    old id that vectord would re-embed) builds its corpora from them (the old numerics'
    vectors under the new id) and embeds only the questions."""
    (target / "eval-cache").mkdir(parents=True)
    for path in sorted((source / "eval-cache").glob("*.npz")):
        with np.load(path, allow_pickle=False) as f:
            if str(f["model"]) != old:
                continue
            keys, vectors = f["keys"], f["vectors"]
        corpus = path.name.split(".")[0]  # a corpus name has no dot
        np.savez(cache_path(target / "eval-cache", corpus, new), model=np.array(new),
                 keys=keys, vectors=vectors)


def paired(a: dict[str, float], b: dict[str, float]) -> str:
    """One set's per-query comparison of b against a: a row of the paired table."""
    d = np.array([b[q] - a[q] for q in sorted(a)])
    moved = np.abs(d) > 1e-9
    se = float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else float("nan")
    big = sorted([(x, q) for x, q in zip(d, sorted(a), strict=True) if abs(x) > 1e-9],
                 key=lambda x: -abs(x[0]))[:3]
    return (f"{len(d)} | {int((d > 1e-9).sum())} / {int((d < -1e-9).sum())} / "
            f"{int((~moved).sum())} | {d.mean():+.4f} | {se:.4f} | "
            f"{np.abs(d[moved]).mean() if moved.any() else 0:.4f} | "
            + ", ".join(f"{q} {x:+.3f}" for x, q in big) + " |")


def quality() -> None:
    old, new = SIDES
    ids = dict(MODEL_IDS)
    with tempfile.TemporaryDirectory(prefix="bench-numerics-") as tmp:
        runs = {old: held_out(old, Path(tmp) / old), new: held_out(new, Path(tmp) / new)}
        relabel_cache(Path(tmp) / old, Path(tmp) / "mixed", ids[old], ids[new])
        runs["mixed"] = held_out(new, Path(tmp) / "mixed")
    print()
    print("held-out nDCG@10 of the cross-validated default (lakehouse eval --cross-validate)")
    print()
    print(f"| data set | {old} (shipped) | {new} | {new} - {old} | {old} corpus, {new} "
          f"questions | its - {old} |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in runs[old][0]:
        a, b, m = runs[old][0][name], runs[new][0][name], runs["mixed"][0][name]
        print(f"| {name} | {a:.4f} | {b:.4f} | {b - a:+.4f} | {m:.4f} | {m - a:+.4f} |")
    print()
    print(f"the default's nDCG@10 query by query, {new} against {old} (d = {new} - {old}; "
          "se: the paired standard error of the mean d)")
    print()
    print("| data set | queries | higher / lower / same | mean d | se | mean abs d of those "
          "moved | largest moves (query d) |")
    print("|---|---:|---|---:|---:|---:|---|")
    for name, _ in SETS:
        print(f"| {name} | " + paired(runs[old][1][name], runs[new][1][name]))


def judged(name: str, split: str) -> tuple[list[dict[str, str]], dict[str, str],
                                           dict[str, dict[str, int]]]:
    """A BEIR set: documents, the judged queries (id -> text), qrels."""
    folder = data_dir() / "data" / name
    with (folder / "corpus.jsonl").open(encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    qrels: dict[str, dict[str, int]] = {}
    with (folder / "qrels" / f"{split}.tsv").open(encoding="utf-8") as f:
        for line in f:
            part = line.split()
            if len(part) >= 3 and part[-1].isdigit():
                qrels.setdefault(part[0], {})[part[1]] = int(part[-1])
    with (folder / "queries.jsonl").open(encoding="utf-8") as f:
        queries = {q["_id"]: q["text"] for q in map(json.loads, f) if q["_id"] in qrels}
    return docs, queries, qrels


def ndcg10(docs: np.ndarray, questions: np.ndarray, ids: list[str], qids: list[str],
           qrels: dict[str, dict[str, int]]) -> float:
    """Mean nDCG@10 of an exact cosine search (the vectors are unit length)."""
    scores = questions @ docs.T
    total = 0.0
    for i, qid in enumerate(qids):
        top = np.argsort(-scores[i])[:10]
        rel = qrels[qid]
        dcg = sum(rel.get(ids[j], 0) / np.log2(r + 2) for r, j in enumerate(top))
        ideal = sorted(rel.values(), reverse=True)[:10]
        idcg = sum(v / np.log2(r + 2) for r, v in enumerate(ideal))
        total += dcg / idcg if idcg > 0 else 0.0
    return total / len(qids)


def embed_all(model: LocalModel, texts: list[str], batch: int = 16) -> np.ndarray:
    """Vectors of many texts, in calls of `batch` (one call would pad them all to the
    longest)."""
    return np.concatenate([model.embed(texts[i:i + batch]).vectors
                           for i in range(0, len(texts), batch)])


def dense() -> None:
    """nDCG@10 of the vectors alone (exact search, no BM25, no feedback), in-process."""
    old, new = SIDES
    models = {side: LocalModel(1, side) for side in SIDES}
    print()
    print("nDCG@10 of the vectors alone (exact cosine search over each set's documents)")
    print()
    print(f"| data set | queries | {old} | {new} | {new} - {old} | {old} corpus, {new} "
          f"questions | its - {old} |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, split in SETS:
        docs, queries, qrels = judged(name, split)
        texts = [f"{d['title']}\n{d['text']}" if d.get("title") else d["text"] for d in docs]
        ids, qids = [d["_id"] for d in docs], list(queries)
        d = {side: embed_all(models[side], texts) for side in SIDES}
        q = {side: embed_all(models[side], [queries[i] for i in qids]) for side in SIDES}
        a = ndcg10(d[old], q[old], ids, qids, qrels)
        b = ndcg10(d[new], q[new], ids, qids, qrels)
        m = ndcg10(d[old], q[new], ids, qids, qrels)
        print(f"| {name} | {len(qids)} | {a:.4f} | {b:.4f} | {b - a:+.4f} | {m:.4f} | "
              f"{m - a:+.4f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--questions", type=int, default=200)
    ap.add_argument("--documents", type=int, default=60)
    ap.add_argument("--quality", action="store_true",
                    help="also run the cross-validated eval for each numerics (minutes)")
    ap.add_argument("--quality-only", action="store_true", help="only the eval part")
    ap.add_argument("--dense-only", action="store_true",
                    help="only the vectors' own nDCG@10 per set, both numerics (minutes)")
    args = ap.parse_args()
    if args.dense_only:
        dense()
        return
    if not args.quality_only:
        asyncio.run(speed(args))
    if args.quality or args.quality_only:
        quality()


if __name__ == "__main__":
    main()
