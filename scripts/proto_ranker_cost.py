"""The cost side of scripts/proto_ranker.py (run it under both locks, exclusively).

A stack on free ports with SciFact (vectors from var/eval-cache) and a playbook of its
recorded pairs (folds 1-4); the ranker trained on them (the collected candidates in
var/rankproto/scifact.json), timed. Then the held-out questions through the gateway, one at
a time, the three searches alternating which goes first: the default search (k 10), the
same with `use_playbook` (the boost alone), and the same with `use_playbook` and k 100
(the candidates a ranker re-orders), whose 100 hits are then featurised and scored here
(proto_ranker_features.rows and the model's predict, as matrixd would run them), timed apart.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import aiohttp
import msgspec
import numpy as np
import proto_ranker_collect as pr
import proto_ranker_features as rf
import proto_ranker_fit as fit

from internal.api.responses import RankedHit
from internal.clients.embed import EmbedClient
from internal.clients.matrixd import MatrixdClient
from internal.clients.vectord import VectordClient
from internal.evaluation import beir
from internal.evaluation.ingest import ingest

ROUNDS = 2


class _Answer(msgspec.Struct):
    hits: list[RankedHit]


async def run() -> None:
    data = pr.load("scifact")
    t0 = time.perf_counter()
    s = fit.prepare(data, 0)
    prep = time.perf_counter() - t0
    every = fit.records_of(s, list(s.queries))
    chosen = fit.fit([s], {s.name: every}, fit.ALL)
    trained = fit.fit([s], {s.name: every}, fit.ALL, rounds=50)
    print(f"features of {len(s.queries)} questions' candidates: {prep:.1f} s; training on "
          f"{sum(len(v) for v in every.values())} records: {trained.seconds:.1f} s for 50 "
          f"trees, {chosen.seconds:.1f} s with the cross-validated choice of trees "
          f"({chosen.rounds} chosen)")
    model = trained.model
    assert model is not None
    records = fit.records_of(s, [q for q in s.queries if s.folds[q] != 0])
    held = [q for q in s.queries if s.folds[q] == 0]
    dataset = beir.load(pr.DATA / "scifact", "train")
    docs = {d.id for d in dataset.docs}
    df: dict[str, float] = {}
    for d in dataset.docs:
        for t in set(rf.words(f"{d.title} {d.text}")):
            df[t] = df.get(t, 0.0) + 1.0
    with tempfile.TemporaryDirectory(prefix="rankcost-") as tmp:
        proc, urls = pr.stack(Path(tmp))
        try:
            async with aiohttp.ClientSession() as session:
                gw = urls["gateway"]
                vc = VectordClient(session, urls["vectord"], timeout=600.0)
                ec = EmbedClient(session, urls["embedd"], timeout=600.0)
                await ingest(vc, ec, data.corpus, dataset.docs, cache_dir=pr.CACHE)
                await pr.record(MatrixdClient(session, urls["matrixd"], timeout=600.0),
                                data.corpus, "rankcost_playbook",
                                [(q, d) for q, ds in records.items() for d in ds if d in docs],
                                data.queries)
                lat: dict[str, list[float]] = {"default": [], "boost": [], "k100": []}
                score_ms: list[float] = []
                bodies = {
                    "default": {"k": 10},
                    "boost": {"k": 10, "use_playbook": True,
                              "playbook_corpus": "rankcost_playbook"},
                    "k100": {"k": 100, "use_playbook": True,
                             "playbook_corpus": "rankcost_playbook"},
                }
                names = list(bodies)
                for rnd in range(ROUNDS + 1):  # round 0 warms the caches
                    for i, q in enumerate(held):
                        turn = (i + rnd) % 3
                        for name in names[turn:] + names[:turn]:
                            body = {"query_text": data.queries[q], "corpora": [data.corpus],
                                    **bodies[name]}
                            t = time.perf_counter()
                            async with session.post(f"{gw}/v1/matrix/search", json=body) as r:
                                raw = await r.read()
                                assert r.status == 200, raw[:300]
                            ms = (time.perf_counter() - t) * 1000
                            if rnd:
                                lat[name].append(ms)
                            if name == "k100":
                                hits = msgspec.json.decode(raw, type=_Answer).hits
                                t = time.perf_counter()
                                question = rf.Question.of(data.queries[q], df, len(docs))
                                x = np.asarray(rf.rows(question, hits, fit.lookup(s, q, records),
                                                       {}, fit.NOW), dtype=np.float64)[:, fit.ALL]
                                model.predict(x, num_threads=1)
                                if rnd:
                                    score_ms.append((time.perf_counter() - t) * 1000)
        finally:
            pr.stop(proc)
    p50 = {k: statistics.median(v) for k, v in lat.items()}
    sc = statistics.median(score_ms)
    print(f"\n{ROUNDS} rounds x {len(held)} held-out SciFact questions, one at a time, through "
          "the gateway\n")
    print("| search | p50 ms | p95 ms |")
    print("|---|---:|---:|")
    for k, v in lat.items():
        xs = sorted(v)
        print(f"| {k} | {p50[k]:.1f} | {xs[int(len(xs) * 0.95) - 1]:.1f} |")
    print(f"| featurise + predict 100 candidates (in-process) | {sc:.2f} | "
          f"{sorted(score_ms)[int(len(score_ms) * 0.95) - 1]:.2f} |")
    ranked = p50["k100"] + sc
    print(f"\nwith the ranker (k 100 + scoring) {ranked:.1f} ms: "
          f"{ranked / p50['boost']:.3f}x the boost alone's p50, "
          f"{ranked / p50['default']:.3f}x the default search's (target <= 1.15)")
