"""The learned ranker's costs on SciFact, through the gateway.

A stack (training by itself off), SciFact ingested, every judged pair of train.tsv (919)
recorded in two playbooks alike. One is trained (POST /v1/matrix/ranker/train, wait): its
time is the training figure. Then the default search of SciFact's held-out questions (the
eval's 20%), one at a time, four ways in turn (which goes first rotating): no feedback,
the untrained playbook's feedback (the boost alone), the same at the ranker's depth
(per_corpus_k 100), the trained one's (the learned ranker): p50 and p95 of each and the
ranker's p50 over the boost alone's. Last, a search's p50 and p95 while a training runs,
against the same searches just before and after it.

Target: the ranker's p50 at most 1.15x the boost alone's; training <= 60 s.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench.harness import Run
from bench.harness.http import call, post, session
from bench.harness.timing import pct, rotated
from internal.clients.embed import EmbedClient
from internal.clients.matrixd import MatrixdClient
from internal.clients.vectord import VectordClient
from internal.evaluation import beir
from internal.evaluation.asking import record_all
from internal.evaluation.feedback import held_out
from internal.evaluation.ingest import ingest

OPTIONS = {"rounds": 2}
QUICK = {"rounds": 1}
PLAYBOOKS = {"boost": "bench_pb_boost", "ranker": "bench_pb_ranker"}


def bodies(corpus: str) -> dict[str, dict[str, Any]]:
    boost = {"corpora": [corpus], "use_playbook": True, "playbook_corpus": PLAYBOOKS["boost"]}
    return {"default": {"corpora": [corpus]}, "boost": boost,
            "boost k100": {**boost, "per_corpus_k": 100},  # the part of its cost that is k 100
            "ranker": {**boost, "playbook_corpus": PLAYBOOKS["ranker"]}}


async def main(run: Run) -> None:
    ds = beir.load(run.need("data", "scifact"), "train")
    pairs = [(q, d) for q, docs in ds.qrels.items() for d, g in docs.items() if g > 0]
    held = [ds.queries[q] for q in ds.queries if held_out(q)]
    corpus = beir.corpus_name(ds)
    with run.stack({"LAKEHOUSE_MATRIXD_RANKER_AUTO": "false"}) as stack:
        async with session() as s:
            vc, ec = (cls(s, stack.url(d), timeout=1800.0) for cls, d in
                      ((VectordClient, "vectord"), (EmbedClient, "embedd")))
            matrix = MatrixdClient(s, stack.url("matrixd"), timeout=1800.0)
            await ingest(vc, ec, corpus, ds.docs, cache_dir=run.root / "var" / "eval-cache")
            for pb in PLAYBOOKS.values():
                n, _ = await record_all(matrix, corpus, pb, pairs, ds.queries)
            gw = stack.gateway
            t = time.perf_counter()
            model = await post(s, f"{gw}/v1/matrix/ranker/train",
                               {"playbook_corpus": PLAYBOOKS["ranker"], "wait": True})
            run.say(f"{len(pairs)} judged pairs recorded ({n} found); training on {model['records']} "
                    f"records ({model['queries']} questions, {model['examples']} examples): "
                    f"{model['seconds']:.1f} s in matrixd, {time.perf_counter() - t:.1f} s through the "
                    f"gateway; {model['trees']} trees; cross-validated nDCG@10 on the records "
                    f"{model['ndcg10_boost']:.4f} -> {model['ndcg10_ranker']:.4f} (target <= 60 s)",
                    training_s=model["seconds"])

            async def ask(body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
                t0 = time.perf_counter()
                out = await post(s, f"{gw}/v1/matrix/search", body)
                return (time.perf_counter() - t0) * 1000, out

            kinds = bodies(corpus)
            lat: dict[str, list[float]] = {k: [] for k in kinds}
            applied, scoring = 0, []
            for rnd in range(run.args.rounds + 1):  # round 0 warms the caches
                for i, q in enumerate(held):
                    for name in rotated(list(kinds), i + rnd):
                        ms, out = await ask({"query_text": q, **kinds[name]})
                        if rnd:
                            lat[name].append(ms)
                            used = (out.get("ranker") or {}) if name == "ranker" else {}
                            applied += bool(used.get("applied"))
                            if used.get("ms") is not None:
                                scoring.append(float(used["ms"]))
            p50 = {k: statistics.median(v) for k, v in lat.items()}
            rows = [(k, p50[k], pct(v, 95)) for k, v in lat.items()]
            if scoring:
                rows.append(("ranker's scoring in matrixd (features + predict, the answer's ranker.ms)",
                             statistics.median(scoring), pct(scoring, 95)))
            run.table(f"{run.args.rounds} rounds x {len(held)} held-out SciFact questions, one at a "
                      "time, through the gateway (the default search, k 10)",
                      ["search", "p50 ms:.1f", "p95 ms:.1f"], rows)
            run.say(f"the learned ranker ordered {applied} of {len(lat['ranker'])} answers; its p50 "
                    f"{p50['ranker'] / p50['boost']:.3f}x the boost alone's (target <= 1.15), "
                    f"{p50['ranker'] / p50['default']:.3f}x the search without feedback's",
                    ranker_boost_p50=p50["ranker"] / p50["boost"])
            phases: dict[str, list[float]] = {"before": [], "during": [], "after": []}
            for q in held:
                phases["before"].append((await ask({"query_text": q, **kinds["boost"]}))[0])
            await post(s, f"{gw}/v1/matrix/ranker/train", {"playbook_corpus": PLAYBOOKS["ranker"]})
            i = 0
            while (await call(s, "GET", f"{gw}/v1/matrix/ranker?playbook_corpus="
                                        f"{PLAYBOOKS['ranker']}"))["training"]:
                phases["during"].append((await ask({"query_text": held[i % len(held)],
                                                    **kinds["boost"]}))[0])
                i += 1
            for q in held:
                phases["after"].append((await ask({"query_text": q, **kinds["boost"]}))[0])
    run.table("the boost-alone search while the ranker trains (one at a time, through the gateway)",
              ["phase", "searches:d", "p50 ms:.1f", "p95 ms:.1f"],
              [(k, len(v), statistics.median(v), pct(v, 95)) for k, v in phases.items()])
    ratio = pct(phases["during"], 95) / pct(phases["before"] + phases["after"], 95)
    run.say(f"p95 during the training {ratio:.3f}x the p95 around it", p95_training_ratio=ratio)
