"""The tables of scripts/proto_ranker.py fit: held out, asked again, the learning curve,
global against per-set models, gain importance, the alternatives, training time."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import proto_ranker_features as rf
import proto_ranker_fit as pf
from proto_ranker_collect import CURVE, FOLDS, Collected, curve_pairs, pairs_of
from proto_ranker_fit import ALL, CORPUS, NAMES, Set, Trained

from internal.evaluation.metrics import ndcg10_per_query


def mean(xs: Iterable[float]) -> float:
    v = list(xs)
    return sum(v) / len(v) if v else math.nan


def ndcg(s: Set, run: Mapping[str, Sequence[str]]) -> float:
    """nDCG@10 as `lakehouse eval` scores it (ir-measures, graded judgments)."""
    return mean(ndcg10_per_query(run, {q: s.qrels[q] for q in run}).values())


def fmt(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.4f}"


@dataclass
class Outcome:
    """A configuration's held-out runs per set (every fold) and what each fold trained."""

    runs: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    trained: dict[str, list[Trained]] = field(default_factory=dict)

    def used(self, name: str) -> str:
        return f"{sum(t.used for t in self.trained[name])}/{len(self.trained[name])}"


def cross_validate(sets: Sequence[Set], groups: Sequence[Sequence[Set]], cols: Sequence[int],
                   served: bool = True, **kw: Any) -> Outcome:
    """Each fold f of every set held out; a model per group of sets trained on the records
    of the other folds; fold f's questions ranked with every other record visible."""
    out = Outcome(runs={s.name: {} for s in sets}, trained={s.name: [] for s in sets})
    top_k = kw.get("top_k", pf.TOP_K)
    for f in range(FOLDS):
        records = {s.name: pf.records_of(s, [q for q in s.queries if s.folds[q] != f])
                   for s in sets}
        for members in groups:
            t = pf.fit(members, records, cols, **kw)
            for s in members:
                out.trained[s.name].append(t)
                for q in s.queries:
                    if s.folds[q] != f:
                        continue
                    out.runs[s.name][q] = (
                        pf.rank_served(s, t, q, "held_out", records[s.name], cols, top_k)
                        if served else pf.rank_group(s, t, q, records[s.name], cols, top_k))
    return out


def plain(s: Set) -> dict[str, list[str]]:
    return {q: [h.id for h in s.hits[q] if not h.included] for q in s.queries}


def report(collected: Mapping[str, Collected], alpha: float | None = None) -> None:
    """Every table; alpha: the boost's weight fixed (None: chosen with the trees)."""
    t0 = time.perf_counter()
    sets = [pf.prepare(c, i) for i, c in enumerate(collected.values())]
    print(f"features of {sum(len(s.hits) for s in sets)} questions' candidates in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    print(f"alpha: {'chosen among ' + str(pf.ALPHAS) if alpha is None else alpha}")
    per_set = cross_validate(sets, [[s] for s in sets], ALL, alpha=alpha)
    glob = (cross_validate(sets, [sets], [*ALL, CORPUS], alpha=alpha) if len(sets) > 1
            else per_set)

    print("\n### Held out (nDCG@10; fold 0 is `lakehouse eval`'s held-out 20%; 5-fold: every "
          "judged question held out once, by query-id hash)\n")
    print("| set | questions | without feedback | boost alone | learned ranker | global model "
          "| folds on the ranker (per set / global) |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for s in sets:
        for label, qs in (("fold 0", [q for q in s.queries if s.folds[q] == 0]),
                          ("5-fold", list(s.queries))):
            def sub(run: Mapping[str, Sequence[str]], qs: Sequence[str] = qs
                    ) -> dict[str, Sequence[str]]:
                return {q: run[q] for q in qs}
            print(f"| {s.name} {label} | {len(qs)} | {fmt(ndcg(s, sub(plain(s))))} | "
                  f"{fmt(ndcg(s, sub(s.boosted['held_out'])))} | "
                  f"{fmt(ndcg(s, sub(per_set.runs[s.name])))} | "
                  f"{fmt(ndcg(s, sub(glob.runs[s.name])))} | "
                  f"{per_set.used(s.name)} / {glob.used(s.name)} |", flush=True)

    print("\n### Asked again (the recorded questions, folds 1-4, with their own records; "
          "the model of fold 0)\n")
    print("| set | questions | without feedback | boost alone | learned ranker | trees | "
          "CV on the records: boost / chosen |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for s in sets:
        t = per_set.trained[s.name][0]
        records = pf.records_of(s, [q for q in s.queries if s.folds[q] != 0])
        run = {q: pf.rank_served(s, t, q, "again", records, ALL) for q in records}
        base = plain(s)
        print(f"| {s.name} | {len(run)} | {fmt(ndcg(s, {q: base[q] for q in run}))} | "
              f"{fmt(ndcg(s, {q: s.boosted['again'][q] for q in run}))} | {fmt(ndcg(s, run))} | "
              f"{t.rounds} (alpha {t.alpha:g}) | {fmt(t.cv_boost)} / "
              f"{fmt(t.cv.get((t.alpha, t.rounds), math.nan))} |", flush=True)

    by = {s.name: s for s in sets}
    if "scifact" in by:
        curve(by["scifact"], alpha)
        small = importance(by["scifact"])
        variants(sets, small)
    timing(sets, alpha)


def curve(s: Set, alpha: float | None) -> None:
    print("\n### Learning curve, SciFact fold 0 (its 161 questions held out)\n")
    print("| records | questions | boost alone | learned ranker (as used) | trees chosen | "
          "CV on the records: boost / best |")
    print("|---:|---:|---:|---:|---:|---|")
    held = [q for q in s.queries if s.folds[q] == 0]
    every = pairs_of(s.qrels, [q for q in s.queries if s.folds[q] != 0])
    for n in (*CURVE, len(every)):
        recs: dict[str, list[str]] = {}
        for q, d in curve_pairs(every, n):
            recs.setdefault(q, []).append(d)
        t = pf.fit([s], {s.name: recs}, ALL, alpha=alpha)
        ctx = f"curve{n}" if n in CURVE else "held_out"
        run = {q: pf.rank_served(s, t, q, ctx, recs, ALL) for q in held}
        print(f"| {n} | {len(recs)} | {fmt(ndcg(s, {q: s.boosted[ctx][q] for q in held}))} | "
              f"{fmt(ndcg(s, run))} | {t.rounds} (alpha {t.alpha:g}) | {fmt(t.cv_boost)} / "
              f"{fmt(t.cv_best)} |", flush=True)


def importance(s: Set) -> list[int]:
    """The gain table of SciFact's fold-0 model (50 trees); the ten largest."""
    records = pf.records_of(s, [q for q in s.queries if s.folds[q] != 0])
    t = pf.fit([s], {s.name: records}, ALL, rounds=50)
    assert t.model is not None
    gain = t.model.feature_importance("gain")
    total = float(gain.sum()) or 1.0
    ranked = sorted(range(len(gain)), key=lambda i: -gain[i])
    print("\n### Gain importance, SciFact's model of fold 0 (50 trees)\n")
    print("| feature | share of gain |")
    print("|---|---:|")
    for i in ranked:
        print(f"| {NAMES[ALL[i]]} | {100 * gain[i] / total:.1f}% |")
    return sorted(ALL[i] for i in ranked[:10])


def variants(sets: Sequence[Set], small: Sequence[int]) -> None:
    print("\n### Alternatives, 5-fold held out, nDCG@10 (50 trees, no fallback rule)\n")
    print("| variant | " + " | ".join(s.name for s in sets) + " |")
    print("|---|" + "---:|" * len(sets))
    no_pb = [i for i in ALL if NAMES[i] not in rf.PLAYBOOK_FEATURES]
    configs: list[tuple[str, Sequence[int], dict[str, Any]]] = [
        ("from the boost (alpha 1), every feature", ALL, {}),
        ("from the boost, alpha 10", ALL, {"alpha": 10.0}),
        (f"from the boost, the 10 of most gain ({', '.join(NAMES[i] for i in small)})",
         small, {}),
        ("from the boost, no playbook feature", no_pb, {}),
        ("from the boost, playbook top_k 100", ALL, {"top_k": 100}),
        ("from the boost, playbook features in fold (the leak)", ALL, {"oof": False}),
        ("from zero (plain LambdaMART, boost only as features)", ALL, {"alpha": 0.0}),
    ]
    for label, cols, kw in configs:
        out = cross_validate(sets, [[s] for s in sets], cols, rounds=50, **kw)
        print(f"| {label} | " + " | ".join(fmt(ndcg(s, out.runs[s.name])) for s in sets) + " |",
              flush=True)


def timing(sets: Sequence[Set], alpha: float | None) -> None:
    print("\n### Training time (every judged pair of the set recorded; 2 threads)\n")
    print("| set | records | questions | candidate rows | 50 trees s | with the "
          "cross-validated choice s | trees chosen | model bytes |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for s in sets:
        records = pf.records_of(s, list(s.queries))
        one = pf.fit([s], {s.name: records}, ALL, rounds=50)
        full = pf.fit([s], {s.name: records}, ALL, alpha=alpha)
        rows = sum(len(s.hits[q]) for q in records)
        size = len(one.model.model_to_string()) if one.model is not None else 0
        print(f"| {s.name} | {sum(len(v) for v in records.values())} | {len(records)} | {rows} | "
              f"{one.seconds:.1f} | {full.seconds:.1f} | {full.rounds} (alpha {full.alpha:g}) | "
              f"{size} |", flush=True)
