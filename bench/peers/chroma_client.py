"""Chroma's side of the chroma and peers benchmarks, through Chroma's own Python client.

Runs in the benchmark's own virtual environment (chromadb from PyPI, never a dependency
of Lakehouse), so it imports nothing of the project. One command a call; prints one
JSON object:

    load   --port P --data X.npy [--batch 1000]   create the collection, add the vectors
    ef     --port P --ef N                         set the collection's hnsw ef_search
    query  --port P --data Q.npy --k 10 [--concurrency 1|8] [--total N]
           one at a time: each query's ms and its ids; at 8: queries a second
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import chromadb
import numpy as np

NAME = "bench_chroma"
# Chroma's defaults for everything but the space (M 16, ef_construction 100); ef_search
# is what the benchmark tunes to reach Lakehouse's recall.
CONFIG: dict[str, Any] = {"hnsw": {"space": "cosine"}}


def client(port: int) -> Any:
    return chromadb.HttpClient(host="127.0.0.1", port=port)


def load(args: argparse.Namespace) -> dict[str, Any]:
    data = np.load(args.data)
    c = client(args.port)
    col = c.create_collection(NAME, configuration=CONFIG, embedding_function=None)
    t = time.perf_counter()
    for start in range(0, len(data), args.batch):
        rows = data[start:start + args.batch]
        col.add(ids=[f"p{start + i:07d}" for i in range(len(rows))], embeddings=rows)
    # add() answers once the records are in the log; a query then waits for the index,
    # so the load is over when the first query answers.
    col.query(query_embeddings=data[:1], n_results=1, include=[])
    return {"seconds": time.perf_counter() - t, "id": str(col.id), "count": col.count(),
            "configuration": col.configuration_json.get("hnsw")}


def set_ef(args: argparse.Namespace) -> dict[str, Any]:
    c = client(args.port)
    col = c.get_collection(NAME, embedding_function=None)
    col.modify(configuration={"hnsw": {"ef_search": args.ef}})
    return {"hnsw": c.get_collection(NAME, embedding_function=None).configuration_json.get("hnsw")}


def query(args: argparse.Namespace) -> dict[str, Any]:
    queries = np.load(args.data)
    c = client(args.port)
    col = c.get_collection(NAME, embedding_function=None)

    def one(i: int) -> list[str]:
        out = col.query(query_embeddings=queries[i % len(queries)][None, :],
                        n_results=args.k, include=["distances"])
        return list(out["ids"][0])

    for i in range(50):  # connection made, code paths warm
        one(i)
    if args.concurrency == 1:
        ms, ids = [], []
        for i in range(args.total or len(queries)):
            t = time.perf_counter()
            ids.append(one(i))
            ms.append((time.perf_counter() - t) * 1000)
        return {"ms": ms, "ids": ids}
    total = args.total or len(queries) * 2
    with ThreadPoolExecutor(args.concurrency) as pool:
        t = time.perf_counter()
        list(pool.map(one, range(total)))
        secs = time.perf_counter() - t
    return {"qps": total / secs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["load", "ef", "query"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--ef", type=int)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--total", type=int, default=0)
    args = parser.parse_args()
    fn = {"load": load, "ef": set_ef, "query": query}[args.command]
    print(json.dumps(fn(args)))


if __name__ == "__main__":
    main()
