"""Synthetic vectors and the truth they are scored against, and random items to load.

A Gaussian mixture (a random centre plus noise, L2-normalised) is clustered the way real
embeddings are; the exact top k by numpy is the truth recall@k is measured against."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import aiohttp
import numpy as np
import numpy.typing as npt

from bench.harness.http import CORPORA, post

F32 = npt.NDArray[np.float32]
WORDS = ("vector database search index query corpus postgres embedding model rank fusion "
         "lexical hybrid keyword gateway daemon latency throughput tea bicycle river").split()


def mixture(n: int, dim: int, centres: int, seed: int) -> F32:
    """n L2-normalised points: a random centre plus Gaussian noise."""
    rng = np.random.default_rng(seed)
    means = rng.standard_normal((centres, dim)).astype(np.float32)
    which = rng.integers(0, centres, size=n)
    pts = means[which] + 0.5 * rng.standard_normal((n, dim)).astype(np.float32)
    pts /= np.linalg.norm(pts, axis=1, keepdims=True)
    return pts


def spectral_mixture(n: int, dim: int, centres: int, seed: int, alpha: float,
                     block: int = 100_000) -> F32:
    """mixture's points with the noise's variance spread as a power law over a random
    basis (sigma_j ~ j^-alpha, the same total): alpha 0 is mixture's isotropic noise, whose
    neighbours are nearly equidistant (local intrinsic dimension ~83 at 1,000 points a
    centre); alpha 0.8 gives ~16, as real MiniLM embeddings of SciFact (17)."""
    rng = np.random.default_rng(seed)
    means = rng.standard_normal((centres, dim)).astype(np.float32)
    which = rng.integers(0, centres, size=n)
    q, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
    sig = np.arange(1, dim + 1, dtype=np.float64) ** -alpha
    sig *= np.sqrt(dim) / np.linalg.norm(sig)
    basis = (sig[:, None] * q.T).astype(np.float32)
    out = np.empty((n, dim), np.float32)
    for s in range(0, n, block):
        e = min(n, s + block)
        noise = rng.standard_normal((e - s, dim)).astype(np.float32) @ basis
        out[s:e] = means[which[s:e]] + 0.5 * noise
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


def unit(n: int, dim: int, rng: np.random.Generator) -> F32:
    """n random unit vectors (no structure: HNSW's worst case)."""
    v = rng.standard_normal((n, dim)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def exact_top(data: F32, queries: F32, k: int, block: int = 200) -> npt.NDArray[np.int64]:
    """The k nearest rows of data to each query by inner product (cosine, as both are
    normalised), best first; in blocks of queries so a million rows fit in memory."""
    out = []
    for start in range(0, len(queries), block):
        sims = queries[start:start + block] @ data.T
        top = np.argpartition(-sims, k, axis=1)[:, :k]
        order = np.take_along_axis(-sims, top, axis=1).argsort(axis=1)
        out.append(np.take_along_axis(top, order, axis=1))
    return np.concatenate(out)


def item_id(i: int) -> str:
    return f"p{i:07d}"


def recall(found: Sequence[Sequence[Any]], truth: npt.NDArray[np.int64],
           name: Any = item_id) -> float:
    """Share of the true top k found, over every query (found[i] answers query i; ids
    named by `name(row)`)."""
    k = truth.shape[1]
    hits = sum(len({name(int(j)) for j in truth[i]} & set(ids)) for i, ids in enumerate(found))
    return hits / (len(found) * k)


async def random_corpus(http: aiohttp.ClientSession, base: str, corpus: str, items: int,
                        dim: int = 384, seed: int = 7) -> None:
    """A corpus of random unit vectors with twelve random words each, 500 a request."""
    rng = np.random.default_rng(seed)
    await post(http, f"{base}{CORPORA}", {"name": corpus, "dim": dim}, ok=(409,))
    for start in range(0, items, 500):
        vecs = unit(min(500, items - start), dim, rng)
        batch = [{"id": f"d{start + i}", "vector": v.tolist(),
                  "text": " ".join(random.choices(WORDS, k=12))} for i, v in enumerate(vecs)]
        await post(http, f"{base}{CORPORA}/{corpus}/items", {"items": batch})
