"""The model side of scripts/proto_ranker.py: playbook lookups simulated per fold, features,
LambdaMART per fold, the fallback rule, the tables.

A playbook lookup here is the service's (boost.Match, nearest first: the `top_k` entries
nearest the question, within MAX_DISTANCE) over the records a context may see, computed
from the query vectors: a recorded question's entry vector is its query embedding.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import lightgbm as lgb
import msgspec
import numpy as np
from proto_ranker import (
    CURVE,
    DATA,
    FOLDS,
    MAX_DISTANCE,
    SETS,
    Collected,
    curve_pairs,
    fold,
    pairs_of,
)

from internal.api.vectord import Hit
from internal.evaluation import beir
from internal.evaluation.metrics import ndcg10_per_query
from internal.matrixd import boost
from internal.matrixd import ranker_features as rf
from internal.matrixd.boost import Match, PlaybookEntry

TOP_K = 20  # [matrixd] playbook_top_k
NOW = datetime(2027, 1, 1, tzinfo=UTC)
PARAMS: dict[str, Any] = {
    "objective": "lambdarank", "metric": "ndcg", "eval_at": [10], "learning_rate": 0.05,
    "num_leaves": 15, "min_data_in_leaf": 20, "feature_fraction": 0.9,
    "lambdarank_truncation_level": 20, "verbose": -1, "num_threads": 2, "seed": 7,
    "deterministic": True,
}
ROUNDS = 300
PB = [rf.FEATURES.index(n) for n in rf.PLAYBOOK_FEATURES]


@dataclass
class Set:
    """One data set ready for the model: its questions' candidate hits with text, the rows
    that do not depend on the records, the question-to-question distances."""

    name: str
    code: int
    corpus: str
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    hits: dict[str, list[Hit]]
    base: dict[str, np.ndarray]
    dist: dict[str, dict[str, float]]  # question -> judged question within MAX_DISTANCE -> d
    boosted: dict[str, dict[str, list[str]]]
    folds: dict[str, int] = field(default_factory=dict)


def prepare(data: Collected, code: int) -> Set:
    docs = {d.id: d for d in beir.load(DATA / data.name, SETS[data.name]).docs}
    df: dict[str, float] = {}
    for d in docs.values():
        for t in set(rf.words(f"{d.title} {d.text}")):
            df[t] = df.get(t, 0.0) + 1.0
    hits, base = {}, {}
    for q, hs in data.hits.items():
        full = [msgspec.structs.replace(h, title=docs[h.id].title or None, text=docs[h.id].text)
                for h in hs]
        bm = {(data.corpus, i): rf.Bm25(s, r) for i, (s, r) in data.bm25[q].items()}
        question = rf.Question.of(data.queries[q], df, len(docs))
        hits[q] = full
        base[q] = np.asarray(rf.rows(question, full, [], bm, NOW), dtype=np.float64)
    qids = list(data.vectors)
    m = np.asarray([data.vectors[q] for q in qids], dtype=np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    d = 1.0 - m @ m.T
    dist = {q: {qids[j]: float(d[i, j]) for j in np.flatnonzero(d[i] <= MAX_DISTANCE)}
            for i, q in enumerate(qids)}
    return Set(data.name, code, data.corpus, data.queries, data.qrels, hits, base, dist,
               data.boosted, {q: fold(q) for q in qids})


Records = Mapping[str, Sequence[str]]  # recorded question -> its recorded right answers


def lookup(s: Set, q: str, records: Records, top_k: int = TOP_K,
           oof: bool = False) -> list[Match]:
    """The playbook's matches for q over these records, nearest first, as the service's
    lookup (top_k entries, within MAX_DISTANCE); oof: without q's own fold's records."""
    near = sorted((d, r) for r, d in s.dist[q].items() if r in records)
    out: list[Match] = []
    for d, r in near:
        for a in records[r]:
            out.append(Match(PlaybookEntry(query_text=s.queries[r], answer_id=a,
                                           answer_corpus=s.corpus, score=1.0), max(d, 0.0)))
    out = out[:top_k]
    return rf.out_of_fold(out, s.queries[q]) if oof else out


@dataclass
class Group:
    """One question's candidates in one context: rows, ids, labels."""

    q: str
    ids: list[str]
    x: np.ndarray
    y: np.ndarray


def group(s: Set, q: str, matches: Sequence[Match], labels: Iterable[str] = ()) -> Group:
    """The candidates a search with these matches would rank: the retrieved top 100 and the
    answers the matches recall (deciding score > 0), with the playbook's columns filled."""
    best = boost.best_scores(matches)
    keep = [i for i, h in enumerate(s.hits[q])
            if not h.included or best.get((h.corpus, h.id), 0.0) > 0]
    hs = [s.hits[q][i] for i in keep]
    x = s.base[q][keep].copy()
    if matches:
        x[:, PB] = np.asarray(rf.playbook_columns(hs, matches))
    pos = set(labels)
    return Group(q, [h.id for h in hs], x, np.asarray([h.id in pos for h in hs], dtype=np.float64))


def with_corpus(g: Group, code: int) -> np.ndarray:
    return np.hstack([g.x, np.full((len(g.ids), 1), float(code))])


NAMES = [*rf.FEATURES, "corpus"]


def train(groups: Sequence[tuple[Group, int]], cols: Sequence[int]) -> lgb.Booster | None:
    """LambdaMART over the groups with a positive; None when there are none."""
    use = [(g, c) for g, c in groups if g.y.any()]
    if not use:
        return None
    x = np.vstack([with_corpus(g, c)[:, cols] for g, c in use])
    y = np.concatenate([g.y for g, _ in use])
    ds = lgb.Dataset(x, y, group=[len(g.ids) for g, _ in use],
                     feature_name=[NAMES[i] for i in cols], free_raw_data=False)
    return lgb.train(PARAMS, ds, num_boost_round=ROUNDS)


def rank(model: lgb.Booster, g: Group, code: int, cols: Sequence[int]) -> list[str]:
    scores = model.predict(with_corpus(g, code)[:, cols])
    order = sorted(range(len(g.ids)), key=lambda i: (-scores[i], i))
    return [g.ids[i] for i in order]


def sim_boost(s: Set, q: str, matches: Sequence[Match]) -> list[str]:
    """Today's in-fusion boost recomputed from the hits' true layer scores: distance x f and
    BM25 / f, min-max over the candidates, weighted 0.5 / 0.5 (the fallback's yardstick)."""
    g = group(s, q, matches)
    best = boost.best_scores(matches)
    hs = {h.id: h for h in s.hits[q]}
    vec: dict[str, float] = {}
    lex: dict[str, float] = {}
    for i in g.ids:
        h = hs[i]
        f = boost.factor(best[(h.corpus, i)]) if (h.corpus, i) in best else 1.0
        v, lx = h.scores.get("vector"), h.scores.get("lexical")
        if v is not None:
            vec[i] = 1.0 - (1.0 - v) * f
        if lx is not None:
            lex[i] = lx / f
    fused = dict.fromkeys(g.ids, 0.0)
    for layer in (vec, lex):
        if layer:
            lo, hi = min(layer.values()), max(layer.values())
            for i, v in layer.items():
                fused[i] += 0.5 * ((v - lo) / (hi - lo) if hi > lo else 1.0)
    return sorted(g.ids, key=lambda i: -fused[i])


def ndcg(s: Set, run: Mapping[str, Sequence[str]]) -> dict[str, float]:
    return ndcg10_per_query(run, {q: s.qrels[q] for q in run})


def mean(xs: Iterable[float]) -> float:
    v = list(xs)
    return sum(v) / len(v) if v else math.nan


@dataclass
class Trained:
    model: lgb.Booster | None
    cv_model: float  # the model's nDCG@10 on its own records, cross-validated
    cv_boost: float  # the boost's, on the same questions and matches
    seconds: float
    questions: int

    @property
    def used(self) -> bool:
        return self.model is not None and self.cv_model > self.cv_boost


def fit(sets: Sequence[Set], records: Mapping[str, Records], cols: Sequence[int],
        top_k: int = TOP_K, check: bool = True) -> Trained:
    """Train on every recorded question of the sets (playbook features out of fold), and
    when check: the fallback's figures, the model's and the boost's, over the same
    out-of-fold groups (a model per text fold trained on the other folds)."""
    started = time.perf_counter()
    groups: list[tuple[Group, int, Set, list[Match]]] = []
    for s in sets:
        recs = records[s.name]
        for q in recs:
            m = lookup(s, q, recs, top_k, oof=True)
            groups.append((group(s, q, m, recs[q]), s.code, s, m))
    model = train([(g, c) for g, c, _, _ in groups], cols)
    cv_model = cv_boost = math.nan
    if check and model is not None:
        per_m: list[float] = []
        per_b: list[float] = []
        by_fold: dict[int, list[int]] = {}
        for i, (g, _, s, _) in enumerate(groups):
            by_fold.setdefault(rf.fold_of(s.queries[g.q]), []).append(i)
        for k, idx in by_fold.items():
            inner = train([(g, c) for j, (g, c, _, _) in enumerate(groups)
                           if rf.fold_of(groups[j][2].queries[g.q]) != k], cols)
            for i in idx:
                g, c, s, m = groups[i]
                rel = {d: 1 for d in records[s.name][g.q]}
                if inner is None:
                    continue
                per_m.append(ndcg10_per_query({g.q: rank(inner, g, c, cols)}, {g.q: rel})[g.q])
                per_b.append(ndcg10_per_query({g.q: sim_boost(s, g.q, m)}, {g.q: rel})[g.q])
        cv_model, cv_boost = mean(per_m), mean(per_b)
    return Trained(model, cv_model, cv_boost, time.perf_counter() - started, len(groups))


def records_of(s: Set, qids: Iterable[str]) -> dict[str, list[str]]:
    return {q: [d for d, g in s.qrels[q].items() if g > 0] for q in qids}


def ranked(s: Set, t: Trained, q: str, records: Records, cols: Sequence[int],
           top_k: int = TOP_K) -> list[str]:
    """q ranked as a search with the ranker would: by the model when the fallback allows,
    else by the boost alone (its in-fusion form, recomputed)."""
    m = lookup(s, q, records, top_k)
    if not t.used or t.model is None:
        return sim_boost(s, q, m)
    return rank(t.model, group(s, q, m), s.code, cols)


Runner = Callable[..., Any]
ALL = list(range(len(NAMES) - 1))  # every feature but the corpus code


@dataclass
class Outcome:
    """A configuration's held-out runs per set (every fold), and what fold 0 trained."""

    runs: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    fold0: dict[str, Trained] = field(default_factory=dict)
    used: dict[str, int] = field(default_factory=dict)  # folds whose model passed the rule


def cross_validate(sets: Sequence[Set], groups: Sequence[Sequence[Set]], cols: Sequence[int],
                   top_k: int = TOP_K, check: bool = True, oof: bool = True) -> Outcome:
    """Each fold f of every set held out; a model per group of sets trained on the records
    of the other folds; the held-out questions ranked with every other record visible."""
    out = Outcome(runs={s.name: {} for s in sets}, used={s.name: 0 for s in sets})
    for f in range(FOLDS):
        records = {s.name: records_of(s, [q for q in s.queries if s.folds[q] != f])
                   for s in sets}
        for members in groups:
            t = fit(members, records, cols, top_k, check) if oof else fit_in_fold(
                members, records, cols, top_k)
            if not check:
                t.cv_model, t.cv_boost = 1.0, 0.0  # no rule: the model always
            for s in members:
                out.used[s.name] += t.used
                if f == 0:
                    out.fold0[s.name] = t
                for q in s.queries:
                    if s.folds[q] == f:
                        out.runs[s.name][q] = ranked(s, t, q, records[s.name], cols, top_k)
    return out


def fit_in_fold(sets: Sequence[Set], records: Mapping[str, Records], cols: Sequence[int],
                top_k: int) -> Trained:
    """The losing alternative: training questions see their own records in their features."""
    started = time.perf_counter()
    groups = [(group(s, q, lookup(s, q, records[s.name], top_k), records[s.name][q]), s.code)
              for s in sets for q in records[s.name]]
    return Trained(train(groups, cols), 1.0, 0.0, time.perf_counter() - started, len(groups))


def again(s: Set, t: Trained, cols: Sequence[int], top_k: int = TOP_K) -> dict[str, list[str]]:
    """The recorded questions (folds 1..4) asked again with their own records (P_0)."""
    records = records_of(s, [q for q in s.queries if s.folds[q] != 0])
    return {q: ranked(s, t, q, records, cols, top_k) for q in records}


def fmt(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.4f}"


def report(collected: Mapping[str, Collected]) -> None:
    t0 = time.perf_counter()
    sets = [prepare(c, i) for i, c in enumerate(collected.values())]
    print(f"features of {sum(len(s.hits) for s in sets)} questions' candidates in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    by = {s.name: s for s in sets}

    def plain(s: Set) -> dict[str, list[str]]:
        return {q: [h.id for h in s.hits[q] if not h.included] for q in s.queries}

    per_group = cross_validate(sets, [[s] for s in sets], ALL)
    glob = cross_validate(sets, [sets], [*ALL, len(NAMES) - 1])

    print("\n### Held out (nDCG@10; SciFact fold 0 = `lakehouse eval`'s held-out 20%, "
          "the rest 5-fold cross-validation by query-id hash)\n")
    print("| set | questions | without feedback | boost alone | boost (recomputed) | "
          "learned ranker | global model | folds on the ranker |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for s in sets:
        rows = [("fold 0", [q for q in s.queries if s.folds[q] == 0])]
        rows.append(("5-fold", list(s.queries)))
        for label, qs in rows:
            def score(run: Mapping[str, Sequence[str]], qs: Sequence[str] = qs, s: Set = s) -> float:
                return mean(ndcg(s, {q: run[q] for q in qs}).values())
            simb = {q: sim_boost(s, q, lookup(s, q, records_of(
                s, [r for r in s.queries if s.folds[r] != s.folds[q]]))) for q in qs}
            print(f"| {s.name} {label} | {len(qs)} | {fmt(score(plain(s)))} | "
                  f"{fmt(score(s.boosted['held_out']))} | {fmt(score(simb))} | "
                  f"{fmt(score(per_group.runs[s.name]))} | {fmt(score(glob.runs[s.name]))} | "
                  f"{per_group.used[s.name]}/{FOLDS} |", flush=True)

    print("\n### Asked again (the recorded questions, folds 1-4, with their own records)\n")
    print("| set | questions | without feedback | boost alone | learned ranker | ranker's CV "
          "on records | boost's CV (recomputed) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for s in sets:
        t = per_group.fold0[s.name]
        run = again(s, t, ALL)
        qs = list(run)
        base = plain(s)
        print(f"| {s.name} | {len(qs)} | {fmt(mean(ndcg(s, {q: base[q] for q in qs}).values()))} | "
              f"{fmt(mean(ndcg(s, {q: s.boosted['again'][q] for q in qs}).values()))} | "
              f"{fmt(mean(ndcg(s, run).values()))} | {fmt(t.cv_model)} | {fmt(t.cv_boost)} |",
              flush=True)

    sci = by.get("scifact")
    if sci is not None:
        curve(sci)
        importance(sci, sets)
    variants(sets)
    timing(sets)


def curve(s: Set) -> None:
    print("\n### Learning curve, SciFact fold 0 (161 held out)\n")
    print("| records | questions | boost alone | learned ranker (as used) | model without "
          "the rule | CV model / boost on the records | rule picks |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    held = [q for q in s.queries if s.folds[q] == 0]
    every = pairs_of(s.qrels, [q for q in s.queries if s.folds[q] != 0])
    for n in (*CURVE, len(every)):
        recs: dict[str, list[str]] = {}
        for q, d in curve_pairs(every, n):
            recs.setdefault(q, []).append(d)
        t = fit([s], {s.name: recs}, ALL)
        run = {q: ranked(s, t, q, recs, ALL) for q in held}
        raw = ({q: rank(t.model, group(s, q, lookup(s, q, recs)), s.code, ALL) for q in held}
               if t.model is not None else {})
        boosted = s.boosted[f"curve{n}"] if n in CURVE else s.boosted["held_out"]
        print(f"| {n} | {len(recs)} | {fmt(mean(ndcg(s, {q: boosted[q] for q in held}).values()))} | "
              f"{fmt(mean(ndcg(s, run).values()))} | "
              f"{fmt(mean(ndcg(s, raw).values())) if raw else 'n/a'} | "
              f"{fmt(t.cv_model)} / {fmt(t.cv_boost)} | {'ranker' if t.used else 'boost'} |",
              flush=True)


SMALL: list[int] = []


def importance(s: Set, sets: Sequence[Set]) -> None:
    records = records_of(s, [q for q in s.queries if s.folds[q] != 0])
    t = fit([s], {s.name: records}, ALL, check=False)
    assert t.model is not None
    gain = t.model.feature_importance("gain")
    total = float(gain.sum()) or 1.0
    order = sorted(range(len(gain)), key=lambda i: -gain[i])
    print("\n### Gain importance, SciFact model of fold 0\n")
    print("| feature | share of gain |")
    print("|---|---:|")
    for i in order:
        print(f"| {NAMES[ALL[i]]} | {100 * gain[i] / total:.1f}% |")
    SMALL[:] = sorted(ALL[i] for i in order[:10])


def variants(sets: Sequence[Set]) -> None:
    print("\n### Alternatives, 5-fold held out (no fallback rule: the model as trained)\n")
    print("| variant | " + " | ".join(s.name for s in sets) + " |")
    print("|---|" + "---:|" * len(sets))
    no_pb = [i for i in ALL if NAMES[i] not in rf.PLAYBOOK_FEATURES]
    layers_pb = [i for i in ALL if NAMES[i] in rf.LAYER_FEATURES + rf.PLAYBOOK_FEATURES]
    configs: list[tuple[str, dict[str, Any]]] = [
        ("all features, playbook top_k 20", {"cols": ALL}),
        ("all features, playbook top_k 100", {"cols": ALL, "top_k": 100}),
        (f"top 10 by gain ({', '.join(NAMES[i] for i in SMALL)})", {"cols": SMALL}),
        ("layers + playbook only", {"cols": layers_pb}),
        ("no playbook features", {"cols": no_pb}),
        ("playbook features in fold (leak)", {"cols": ALL, "oof": False}),
    ]
    for label, kw in configs:
        if not kw["cols"]:
            continue
        out = cross_validate(sets, [[s] for s in sets], kw["cols"], kw.get("top_k", TOP_K),
                             check=False, oof=kw.get("oof", True))
        print(f"| {label} | " + " | ".join(
            fmt(mean(ndcg(s, out.runs[s.name]).values())) for s in sets) + " |", flush=True)


def timing(sets: Sequence[Set]) -> None:
    print("\n### Training time (every judged pair of the set recorded)\n")
    print("| set | records | questions | rows | train s | train + fallback check s | "
          "model bytes |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for s in sets:
        records = records_of(s, list(s.queries))
        n = sum(len(v) for v in records.values())
        one = fit([s], {s.name: records}, ALL, check=False)
        full = fit([s], {s.name: records}, ALL)
        rows = sum(len(s.hits[q]) for q in records)
        size = len(one.model.model_to_string()) if one.model is not None else 0
        print(f"| {s.name} | {n} | {len(records)} | {rows} | {one.seconds:.1f} | "
              f"{full.seconds:.1f} | {size} |", flush=True)
