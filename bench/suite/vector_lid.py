"""How hard the synthetic vectors are: local intrinsic dimension, real embeddings against the mixtures.

SciFact's first --docs abstracts embedded by the local model (MiniLM, as a stack embeds
them) against bench/data/vectors.py's mixtures of the same size (isotropic: `mixture`;
`spectral_mixture` at each --alphas), 1,000 items a centre as at 1M. For --probe points
of each set: the Levina-Bickel maximum-likelihood intrinsic dimension over their k 20
nearest (median), and the 10th neighbour's distance over the 1st's. An ANN index finds
neighbours more easily the lower the first and the larger the second; a synthetic set
that stands for real embeddings in the benchmarks should match them
(docs/decisions/0302-a-million-through-the-product.md).
"""

from __future__ import annotations

import json

import numpy as np
import numpy.typing as npt

from bench.data.vectors import mixture, spectral_mixture
from bench.harness import Run
from internal.embedd.local import LocalModel

OPTIONS = {"docs": 4000, "probe": 500, "alphas": "0.5,0.8,1.0"}
QUICK = {"docs": 400, "probe": 100, "alphas": "0.8"}


def lid(x: npt.NDArray[np.float32], probe: int, k: int = 20) -> tuple[float, float]:
    """(median intrinsic dimension, median d10 / d1) of the first `probe` points."""
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    d = np.sqrt(np.maximum(0.0, 2 - 2 * x[:probe] @ x.T))
    d.sort(axis=1)
    d = d[:, 1:k + 1]  # the point itself left out
    dim = -1 / np.mean(np.log(d[:, :-1] / d[:, -1:]), axis=1)
    return float(np.median(dim)), float(np.median(d[:, 9] / d[:, 0]))


def main(run: Run) -> None:
    a = run.args
    path = run.need("data", "scifact", "corpus.jsonl")
    docs = [json.loads(line) for line in path.read_text("utf-8").splitlines()[:a.docs]]
    texts = [(d.get("title", "") + " " + d["text"])[:1000] for d in docs]
    model = LocalModel(threads=1)
    real = np.concatenate([np.asarray(model.embed(texts[i:i + 64]).vectors, dtype=np.float32)
                           for i in range(0, len(texts), 64)])
    centres = max(1, len(texts) // 1000)
    rows = [("SciFact abstracts, the local model", *lid(real, a.probe)),
            ("mixture, isotropic", *lid(mixture(len(texts), 384, centres, 42), a.probe))]
    for alpha in (float(x) for x in a.alphas.split(",")):
        pts = spectral_mixture(len(texts), 384, centres, 42, alpha)
        rows.append((f"spectral mixture, alpha {alpha}", *lid(pts, a.probe)))
    run.table(f"{len(texts):,} vectors each (1,000 a centre), {a.probe} probed, k 20",
              ["vectors", "intrinsic dimension:.1f", "d10 / d1:.3f"], rows)
