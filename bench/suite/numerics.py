"""The local model's two numerics side by side: the shipped (float MatMuls) and integer.

- CPU per question and per document, in-process (LocalModel, one onnxruntime thread, one
  text a call, the process's CPU time) and through embedd's POST /v1/embed (an embedd
  process per numerics, cache off, one text a request, that process's CPU time); each
  text with a unique suffix so no cache answers; the sides alternate, --rounds times, the
  median of rounds; the cosine between the two numerics' vectors (mean / min).
- --quality: the held-out nDCG@10 of the cross-validated default (`lakehouse eval
  --cross-validate` over SciFact, Cranfield and CISI) for each numerics in a fresh data
  directory, and for corpora of the float numerics asked with the integer one's
  questions (the mix the two model ids prevent); then each set's per-query moves.
- --dense-only: each set's nDCG@10 of the vectors alone (exact cosine, in-process).
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from pathlib import Path

import aiohttp
import numpy as np
import psutil

from bench.data.quality import SETS, exact_ndcg, held_out
from bench.harness import Run
from bench.harness.http import post
from bench.harness.stacks import daemon
from internal.config.sections import LOCAL_NUMERICS
from internal.embedd.local import MODEL_IDS, LocalModel
from internal.evaluation import beir
from internal.evaluation.ingest import cache_path

OPTIONS = {"rounds": 3, "questions": 200, "documents": 60, "quality": False,
           "quality_only": False, "dense_only": False}
QUICK = {"rounds": 1, "questions": 40, "documents": 20}
SIDES = tuple(reversed(LOCAL_NUMERICS))  # float (shipped) first, then integer


def tagged(texts: list[str]) -> list[str]:
    return [f"{t} [{uuid.uuid4().hex[:8]}]" for t in texts]


def inproc_ms(model: LocalModel, texts: list[str]) -> float:
    t = time.process_time()
    for text in texts:
        model.embed([text])
    return (time.process_time() - t) / len(texts) * 1000


async def http_ms(http: aiohttp.ClientSession, base: str, proc: psutil.Process,
                  texts: list[str], kind: str) -> float:
    t = proc.cpu_times()
    before = t.user + t.system
    for text in texts:
        await post(http, f"{base}/v1/embed", {"texts": [text], "input_type": kind})
    t = proc.cpu_times()
    return (t.user + t.system - before) / len(texts) * 1000


async def speed(run: Run) -> None:
    a, sf = run.args, beir.load(run.data / "data" / "scifact", "train")
    qs = list(sf.queries.values())[:a.questions]
    ds = [f"{d.title}\n{d.text}" for d in sf.docs[:a.documents]]
    models = {side: LocalModel(1, side) for side in SIDES}
    env = {"LAKEHOUSE_EMBEDD_CACHE_SIZE": "0", "LAKEHOUSE_EMBEDD_BACKEND": "local",
           "LAKEHOUSE_EMBEDD_BACKENDS": "", "LAKEHOUSE_LOG_LEVEL": "warning"}
    got: dict[tuple[str, str], list[float]] = {}
    with daemon("embedd", {**env, "LAKEHOUSE_EMBEDD_LOCAL_NUMERICS": SIDES[0]}) as e0, \
            daemon("embedd", {**env, "LAKEHOUSE_EMBEDD_LOCAL_NUMERICS": SIDES[1]}) as e1:
        ends = {SIDES[0]: e0, SIDES[1]: e1}
        async with aiohttp.ClientSession() as http:
            for side in SIDES:  # warm both paths
                models[side].embed(qs[:5])
                await http_ms(http, ends[side].base, psutil.Process(ends[side].proc.pid),
                              tagged(qs[:5]), "query")
            for r in range(a.rounds):
                for side in (SIDES if r % 2 == 0 else SIDES[::-1]):
                    proc = psutil.Process(ends[side].proc.pid)
                    for kind, texts, input_type in (("question", qs, "query"),
                                                    ("document", ds, "document")):
                        got.setdefault((side, f"{kind} in-process"), []).append(
                            inproc_ms(models[side], tagged(texts)))
                        got.setdefault((side, f"{kind} /v1/embed"), []).append(
                            await http_ms(http, ends[side].base, proc, tagged(texts), input_type))
    old, new = SIDES
    med = {k: statistics.median(v) for k, v in got.items()}
    rows = [(w, med[(old, w)], med[(new, w)], med[(new, w)] / med[(old, w)],
             "<= 0.5x" if "in-process" in w else "<= 0.6x")
            for w in ("question in-process", "document in-process", "question /v1/embed",
                      "document /v1/embed")]
    rows += [(f"{w}: embedd's own (HTTP - in-process)",
              med[(old, f"{w} /v1/embed")] - med[(old, f"{w} in-process")],
              med[(new, f"{w} /v1/embed")] - med[(new, f"{w} in-process")], None, "")
             for w in ("question", "document")]
    run.table(f"{len(qs)} SciFact questions and {len(ds)} documents, one text a call, 1 "
              f"onnxruntime thread; {a.rounds} rounds, sides alternating; CPU ms per text "
              "(median of rounds)", ["CPU per text", f"{old} (shipped):.2f", f"{new}:.2f",
                                     f"{new} / {old}:.2f", "target"], rows)

    def cosine(texts: list[str]) -> str:
        c = (models[new].embed(texts).vectors * models[old].embed(texts).vectors).sum(axis=1)
        return f"{c.mean():.4f} / {c.min():.4f}"
    run.say(f"cosine {new} to {old}, mean / min: questions {cosine(qs)}, documents {cosine(ds)}")


def relabel_cache(source: Path, target: Path, old: str, new: str) -> None:
    """The old model's cached document vectors filed under the new model's id."""
    (target / "eval-cache").mkdir(parents=True)
    for path in sorted((source / "eval-cache").glob("*.npz")):
        with np.load(path, allow_pickle=False) as f:
            if str(f["model"]) != old:
                continue
            keys, vecs = f["keys"], f["vectors"]
        np.savez(cache_path(target / "eval-cache", path.name.split(".")[0], new),
                 model=np.array(new), keys=keys, vectors=vecs)


def quality(run: Run) -> None:
    old, new = SIDES
    ids = dict(MODEL_IDS)
    runs = {old: held_out(run, old, run.folder / old), new: held_out(run, new, run.folder / new)}
    relabel_cache(run.folder / old, run.folder / "mixed", ids[old], ids[new])
    runs["mixed"] = held_out(run, new, run.folder / "mixed")
    rows = []
    for name in runs[old][0]:
        x, y, m = (runs[k][0][name] for k in (old, new, "mixed"))
        rows.append((name, x, y, y - x, m, m - x))
    run.table("held-out nDCG@10 of the cross-validated default (lakehouse eval --cross-validate)",
              ["data set", f"{old} (shipped):.4f", f"{new}:.4f", f"{new} - {old}:+.4f",
               f"{old} corpus, {new} questions:.4f", f"its - {old}:+.4f"], rows)
    moves = []
    for name, _ in SETS:
        a, b = runs[old][1][name], runs[new][1][name]
        d = np.array([b[q] - a[q] for q in sorted(a)])
        moved = np.abs(d) > 1e-9
        moves.append((name, len(d), f"{int((d > 1e-9).sum())} / {int((d < -1e-9).sum())} / "
                      f"{int((~moved).sum())}", float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d))),
                      float(np.abs(d[moved]).mean()) if moved.any() else 0.0))
    run.table(f"the default's nDCG@10 query by query, {new} against {old} (d = {new} - {old})",
              ["data set", "queries:d", "higher / lower / same", "mean d:+.4f", "se:.4f",
               "mean abs d of those moved:.4f"], moves)


def dense(run: Run) -> None:
    """nDCG@10 of the vectors alone (exact search, no BM25, no feedback), in-process."""
    old, new = SIDES
    models = {side: LocalModel(1, side) for side in SIDES}

    def vecs(side: str, xs: list[str]) -> np.ndarray:
        return np.concatenate([models[side].embed(xs[i:i + 16]).vectors
                               for i in range(0, len(xs), 16)])
    rows = []
    for name, split in SETS:
        ds = beir.load(run.data / "data" / name, split)
        qids = [q for q in ds.queries if q in ds.qrels]
        texts = [f"{d.title}\n{d.text}" if d.title else d.text for d in ds.docs]
        d = {side: vecs(side, texts) for side in SIDES}
        q = {side: vecs(side, [ds.queries[i] for i in qids]) for side in SIDES}
        x, y, m = (exact_ndcg(ds, qids, d[a], q[b]) for a, b in ((old, old), (new, new), (old, new)))
        rows.append((name, len(qids), x, y, y - x, m, m - x))
    run.table("nDCG@10 of the vectors alone (exact cosine search over each set's documents)",
              ["data set", "queries:d", f"{old}:.4f", f"{new}:.4f", f"{new} - {old}:+.4f",
               f"{old} corpus, {new} questions:.4f", f"its - {old}:+.4f"], rows)


def main(run: Run) -> None:
    a = run.args
    if a.dense_only:
        return dense(run)
    if not a.quality_only:
        asyncio.run(speed(run))
    if a.quality or a.quality_only:
        quality(run)
    return None
