"""Qdrant's engine in-process: qdrant-edge-py (Qdrant Edge, the Rust engine of the Qdrant
server as a library; no server, no network), its HNSW index built with the parameters
vectord builds with (m 16, ef_construction 64), cosine distance, searched at a given
hnsw_ef. A peer of the `bench` extra, never a Lakehouse dependency."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import qdrant_edge as q


class Qdrant:
    """One Edge shard under `where`, loaded with the rows of `data` (ids = row numbers)."""

    def __init__(self, where: Path, data: np.ndarray, m: int = 16, efc: int = 64) -> None:
        cfg = q.EdgeConfig(vectors=q.EdgeVectorParams(size=data.shape[1], distance=q.Distance.Cosine),
                           hnsw_config=q.HnswIndexConfig(m=m, ef_construct=efc, full_scan_threshold=1000),
                           optimizers=q.EdgeOptimizersConfig(indexing_threshold=1000))
        self.shard = q.EdgeShard.create(str(where), cfg)
        t = time.perf_counter()
        for s in range(0, len(data), 1000):
            self.shard.update(q.UpdateOperation.upsert_points(
                [q.Point(s + i, v.tolist()) for i, v in enumerate(data[s:s + 1000])]))
        self.shard.optimize()  # the HNSW graph built before the first query
        self.load_s = time.perf_counter() - t

    def search(self, vector: np.ndarray, k: int, ef: int) -> list[int]:
        req = q.SearchRequest(query=q.Query.Nearest(vector.tolist()), limit=k,
                              params=q.SearchParams(hnsw_ef=ef))
        return [int(p.id) for p in self.shard.search(req)]

    def qps(self, queries: np.ndarray, k: int, ef: int, concurrency: int = 8) -> float:
        """Queries a second with `concurrency` threads searching at once."""
        with ThreadPoolExecutor(concurrency) as pool:
            t = time.perf_counter()
            list(pool.map(lambda v: self.search(v, k, ef), queries))
            return len(queries) / (time.perf_counter() - t)

    def close(self) -> None:
        self.shard.close()
