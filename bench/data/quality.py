"""The default's quality on BEIR's three judged sets, as the benchmarks of models and
numerics measure it: the held-out nDCG@10 of `lakehouse eval --cross-validate`, and the
nDCG@10 of an exact cosine search over given vectors."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np

from bench.harness import Run
from bench.harness.stacks import ROOT, environment
from internal.evaluation import beir
from internal.evaluation.metrics import evaluate

SETS = (("scifact", "train"), ("cranfield", "dev"), ("cisi", "dev"))


def held_out(run: Run, numerics: str, where: Path, model: str | None = None
             ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """The default's held-out nDCG@10 per set (as `lakehouse eval` prints it) and per query,
    with embedd's default model or `model`."""
    cmd = [str(ROOT / ".venv" / "bin" / "lakehouse"), "eval", "--in-process", "--cross-validate",
           "--json", str(where / "eval.json"), *(["--model", model] if model else [])]
    for name, split in SETS:
        cmd += ["--dataset", str(run.data / "data" / name), "--split", split]
    where.mkdir(parents=True, exist_ok=True)
    env = environment(ROOT, {"LAKEHOUSE_VECTORD_DATA_DIR": str(where / "pg"),
                             "LAKEHOUSE_EMBEDD_LOCAL_NUMERICS": numerics,
                             "LAKEHOUSE_LOG_LEVEL": "warning"})
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
    found = dict(re.findall(r"^\| (\w+) \| (0\.\d{4}) \|$", out, re.MULTILINE))
    mean = re.search(r"the shipped default: .* \(held-out mean (0\.\d{4})\)", out)
    result = {name: float(found[name]) for name, _ in SETS}
    result["mean of the three"] = float(mean.group(1)) if mean else float("nan")
    return result, json.loads((where / "eval.json").read_text())["per_query"]


def exact_ndcg(ds: beir.Dataset, qids: list[str], docs: np.ndarray, questions: np.ndarray) -> float:
    """Mean nDCG@10 of an exact cosine search (the vectors are unit length)."""
    top = np.argsort(-(questions @ docs.T), axis=1)[:, :10]
    return evaluate({qid: [ds.docs[j].id for j in top[i]] for i, qid in enumerate(qids)},
                    {qid: ds.qrels[qid] for qid in qids})["ndcg@10"]
