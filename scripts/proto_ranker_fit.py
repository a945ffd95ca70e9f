"""The model side of scripts/proto_ranker.py: playbook lookups per fold, features, the
LambdaMART model on top of the boost, the fallback rule.

A playbook lookup here is the service's (boost.Match, nearest first: the `top_k` entries
nearest the question, within MAX_DISTANCE) over the records a context may see, computed
from the query vectors: a recorded question's entry vector is its query embedding.

The model starts from the boost: LightGBM's lambdarank with the boosted fused score
(x ALPHA) as every candidate's initial score, so its trees learn what to add to today's
ranking, and with no tree it is today's ranking. How many trees (0 among them) is chosen by
cross-validation over the recorded questions' out-of-fold groups: 0 is the fallback.
Training groups are what a search without the playbook found (the default top 100, and
the answers the out-of-fold matches recall) with the boost recomputed from the hits' true
layer scores (`boost_fused`); a served group is matrixd's boosted answer as it came.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import lightgbm as lgb
import msgspec
import numpy as np
import proto_ranker_features as rf
from proto_ranker_collect import DATA, MAX_DISTANCE, SETS, Collected, fold

from internal.api.vectord import Hit
from internal.evaluation import beir
from internal.evaluation.beir import Doc
from internal.matrixd import boost
from internal.matrixd.boost import Match, PlaybookEntry

TOP_K = 20  # [matrixd] playbook_top_k
NOW = datetime(2027, 1, 1, tzinfo=UTC)
ALPHA = 1.0  # the boosted fused score (0..1) x ALPHA: the initial score, when not chosen
PARAMS: dict[str, Any] = {
    "objective": "lambdarank", "learning_rate": 0.1, "num_leaves": 15, "max_bin": 63,
    "min_data_in_leaf": 20, "feature_fraction": 0.9, "lambdarank_truncation_level": 20,
    "verbose": -1, "num_threads": 2, "seed": 7, "deterministic": True,
}
ITERS = (0, 10, 25, 50, 100)  # trees the cross-validation chooses among (0: the boost)
NAMES = [*rf.FEATURES, "corpus"]
CORPUS = len(NAMES) - 1
# The model's columns: every feature but the corpus code and age_days. A data set is
# ingested at one moment, so an item's "age" here is the seconds between ingest batches, an
# id in disguise (7% of the gain in a first run); real ages are not measured here.
ALL = [i for i in range(CORPUS) if NAMES[i] != "age_days"]
PB = [rf.FEATURES.index(n) for n in rf.PLAYBOOK_FEATURES]
FUSED = [rf.FEATURES.index(n) for n in ("fused", "fused_rel", "fused_rank")]


@dataclass
class Set:
    """One data set ready for the model."""

    name: str
    code: int
    corpus: str
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    docs: dict[str, Doc]
    questions: dict[str, rf.Question]
    bm25: dict[str, dict[tuple[str, str], rf.Bm25]]
    hits: dict[str, list[Hit]]  # without the playbook: the top 100, then recall's extras
    base: dict[str, np.ndarray]  # their rows without matches
    dist: dict[str, dict[str, float]]  # question -> judged question within MAX_DISTANCE -> d
    boosted: dict[str, dict[str, list[str]]]
    served: dict[str, dict[str, list[Hit]]]  # context -> question -> matrixd's boosted hits
    folds: dict[str, int] = field(default_factory=dict)


def with_text(s: Set | dict[str, Doc], hits: Sequence[Hit]) -> list[Hit]:
    docs = s if isinstance(s, dict) else s.docs
    return [msgspec.structs.replace(h, title=docs[h.id].title or None, text=docs[h.id].text)
            for h in hits]


def prepare(data: Collected, code: int) -> Set:
    docs = {d.id: d for d in beir.load(DATA / data.name, SETS[data.name]).docs}
    df: dict[str, float] = {}
    for d in docs.values():
        for t in set(rf.words(f"{d.title} {d.text}")):
            df[t] = df.get(t, 0.0) + 1.0
    questions = {q: rf.Question.of(t, df, len(docs)) for q, t in data.queries.items()}
    bm25 = {q: {(data.corpus, i): rf.Bm25(sc, r) for i, (sc, r) in b.items()}
            for q, b in data.bm25.items()}
    hits, base = {}, {}
    for q, hs in data.hits.items():
        hits[q] = with_text(docs, hs)
        base[q] = np.asarray(rf.rows(questions[q], hits[q], [], bm25[q], NOW))
    qids = list(data.vectors)
    m = np.asarray([data.vectors[q] for q in qids], dtype=np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    d = 1.0 - m @ m.T
    dist = {q: {qids[j]: float(d[i, j]) for j in np.flatnonzero(d[i] <= MAX_DISTANCE)}
            for i, q in enumerate(qids)}
    return Set(data.name, code, data.corpus, data.queries, data.qrels, docs, questions, bm25,
               hits, base, dist, data.boosted, data.boosted_hits, {q: fold(q) for q in qids})


Records = Mapping[str, Sequence[str]]  # recorded question -> its recorded right answers


def records_of(s: Set, qids: Iterable[str]) -> dict[str, list[str]]:
    return {q: [d for d, g in s.qrels[q].items() if g > 0] for q in qids}


def lookup(s: Set, q: str, records: Records, top_k: int = TOP_K,
           oof: bool = False) -> list[Match]:
    """The playbook's matches for q over these records, nearest first, as the service's
    lookup (top_k entries, within MAX_DISTANCE); oof: without q's own fold's records."""
    near = sorted((d, r) for r, d in s.dist[q].items() if r in records)
    out = [Match(PlaybookEntry(query_text=s.queries[r], answer_id=a, answer_corpus=s.corpus,
                               score=1.0), max(d, 0.0))
           for d, r in near for a in records[r]]
    if oof:  # the question's own fold is not in the playbook it is trained with
        out = rf.out_of_fold(out, s.queries[q])
    return out[:top_k]


@dataclass
class Group:
    """One question's candidates in one context: ids, rows, labels, the boosted fused score."""

    q: str
    ids: list[str]
    x: np.ndarray
    y: np.ndarray
    base: np.ndarray


def boost_fused(hits: Sequence[Hit], matches: Sequence[Match]) -> np.ndarray:
    """Today's in-fusion boost recomputed from the hits' true layer scores: distance x f and
    BM25 / f, min-max over the candidates, weighted 0.5 / 0.5 (vector and lexical)."""
    best = boost.best_scores(matches)
    f = np.asarray([boost.factor(best[(h.corpus, h.id)]) if (h.corpus, h.id) in best else 1.0
                    for h in hits])
    out = np.zeros(len(hits))
    for layer, move in (("vector", lambda v, f: 1.0 - (1.0 - v) * f),
                        ("lexical", lambda v, f: v / f)):
        idx = [i for i, h in enumerate(hits) if h.scores.get(layer) is not None]
        if not idx:
            continue
        v = move(np.asarray([hits[i].scores[layer] for i in idx], dtype=np.float64), f[idx])
        lo, hi = v.min(), v.max()
        out[idx] += 0.5 * ((v - lo) / (hi - lo) if hi > lo else 1.0)
    return out


def group(s: Set, q: str, matches: Sequence[Match], labels: Iterable[str] = ()) -> Group:
    """A training group: the search without the playbook and the answers the matches
    recall (deciding score > 0), ordered and scored by the boost recomputed."""
    best = boost.best_scores(matches)
    keep = [i for i, h in enumerate(s.hits[q])
            if not h.included or best.get((h.corpus, h.id), 0.0) > 0]
    hs = [s.hits[q][i] for i in keep]
    base = boost_fused(hs, matches)
    order = sorted(range(len(hs)), key=lambda i: (-base[i], i))
    hs, base = [hs[i] for i in order], base[order]
    x = s.base[q][[keep[i] for i in order]].copy()
    if matches:
        x[:, PB] = np.asarray(rf.playbook_columns(hs, matches))
    top = base.max() if len(base) else 1.0
    x[:, FUSED] = np.column_stack([base, base / top if top > 0 else base,
                                   np.arange(1, len(hs) + 1)])
    pos = set(labels)
    return Group(q, [h.id for h in hs], x, np.asarray([h.id in pos for h in hs], float), base)


def served(s: Set, q: str, context: str, matches: Sequence[Match]) -> Group:
    """A served group: matrixd's boosted answer as it came, its fused score the base."""
    hs = with_text(s, s.served[context][q])
    x = np.asarray(rf.rows(s.questions[q], hs, matches, s.bm25[q], NOW))
    base = np.asarray([h.score if h.score is not None else 0.0 for h in hs])
    return Group(q, [h.id for h in hs], x, np.zeros(len(hs)), base)


def matrix(g: Group, code: int, cols: Sequence[int]) -> np.ndarray:
    return np.hstack([g.x, np.full((len(g.ids), 1), float(code))])[:, cols]


def train(groups: Sequence[tuple[Group, int]], cols: Sequence[int], rounds: int,
          alpha: float = ALPHA) -> lgb.Booster | None:
    """LambdaMART from the boost (init score alpha x boosted fused) over the groups with a
    positive; None for no tree."""
    use = [(g, c) for g, c in groups if g.y.any()]
    if not use or rounds <= 0:
        return None
    ds = lgb.Dataset(np.vstack([matrix(g, c, cols) for g, c in use]),
                     np.concatenate([g.y for g, _ in use]),
                     group=[len(g.ids) for g, _ in use],
                     init_score=np.concatenate([alpha * g.base for g, _ in use]),
                     feature_name=[NAMES[i] for i in cols])
    return lgb.train(PARAMS, ds, num_boost_round=rounds)


def scores(model: lgb.Booster | None, g: Group, code: int, cols: Sequence[int],
           rounds: int | None = None, alpha: float = ALPHA) -> np.ndarray:
    out = alpha * g.base
    if model is not None and rounds != 0:
        out = out + model.predict(matrix(g, code, cols), num_iteration=rounds)
    return out


def order(g: Group, values: np.ndarray) -> list[str]:
    return [g.ids[i] for i in sorted(range(len(g.ids)), key=lambda i: (-values[i], i))]


def ndcg10(ranked: Sequence[str], rel: Mapping[str, int]) -> float:
    """nDCG@10 with linear gains, as trec_eval's ndcg_cut_10 (the fast path inside training)."""
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted((g for g in rel.values() if g > 0), reverse=True)[:10]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


Z = 1.64  # one-sided 95%: the trees must beat the boost by this many standard errors
ALPHAS = (0.0, 1.0, 3.0, 10.0)  # the boost's weight in the initial score, chosen with the trees
Choice = tuple[float, int]  # (alpha, trees)


def choose(per: Mapping[Choice, Sequence[float]], z: float = Z) -> Choice:
    """The (alpha, trees) whose cross-validated nDCG@10 is best, if its gain over the boost
    alone (0 trees: the same ranking for every alpha, on the same questions) exceeds z
    standard errors of the paired per-question differences; else (ALPHA, 0), the fallback."""
    base = next((v for (_, it), v in per.items() if it == 0), [])
    if len(base) < 2:
        return ALPHA, 0
    best = max(per, key=lambda c: (sum(per[c]) / len(per[c]), -c[1], -c[0]))
    d = np.asarray(per[best]) - np.asarray(base)
    se = float(d.std(ddof=1)) / math.sqrt(len(d))
    return best if best[1] and d.mean() > z * se else (ALPHA, 0)


@dataclass
class Trained:
    model: lgb.Booster | None
    rounds: int  # trees chosen by the cross-validation (0: the boost alone)
    alpha: float
    cv: dict[Choice, float]  # (alpha, trees) -> cross-validated nDCG@10 on the records
    seconds: float
    questions: int

    @property
    def used(self) -> bool:
        return self.model is not None and self.rounds > 0

    @property
    def cv_boost(self) -> float:
        return next((v for (_, it), v in self.cv.items() if it == 0), math.nan)

    @property
    def cv_best(self) -> float:
        return max(self.cv.values(), default=math.nan)


def oof_groups(sets: Sequence[Set], records: Mapping[str, Records], top_k: int = TOP_K,
               oof: bool = True) -> list[tuple[Group, int, Set]]:
    return [(group(s, q, lookup(s, q, records[s.name], top_k, oof=oof), records[s.name][q]),
             s.code, s) for s in sets for q in records[s.name]]


def fit(sets: Sequence[Set], records: Mapping[str, Records], cols: Sequence[int],
        top_k: int = TOP_K, rounds: int | None = None, oof: bool = True,
        alpha: float | None = None) -> Trained:
    """Train on every recorded question of the sets. rounds None: (alpha, trees) chosen
    among ALPHAS x ITERS by a cross-validation over the questions' text folds (each fold's
    model trained on the others, every group's playbook features out of its own fold); 0
    trees wins when none beats the boost alone on the records (`choose`)."""
    started = time.perf_counter()
    groups = oof_groups(sets, records, top_k, oof)
    cv: dict[Choice, float] = {}
    if rounds is None:
        alphas = ALPHAS if alpha is None else (alpha,)
        per: dict[Choice, list[float]] = {(a, i): [] for a in alphas for i in ITERS}
        folds: dict[int, list[int]] = {}
        for i, (g, _, s) in enumerate(groups):
            folds.setdefault(rf.fold_of(s.queries[g.q]), []).append(i)
        for idx in folds.values():
            held = set(idx)
            # One predict per number of trees over the fold's rows (not one per group).
            x = np.vstack([matrix(groups[i][0], groups[i][1], cols) for i in idx])
            cut = np.cumsum([0] + [len(groups[i][0].ids) for i in idx])
            for a in alphas:
                inner = train([(g, c) for j, (g, c, _) in enumerate(groups) if j not in held],
                              cols, max(ITERS), a)
                for it in ITERS:
                    add = (inner.predict(x, num_iteration=it) if inner is not None and it
                           else np.zeros(len(x)))
                    for n, i in enumerate(idx):
                        g, _, s = groups[i]
                        rel = {d: 1 for d in records[s.name][g.q]}
                        per[(a, it)].append(
                            ndcg10(order(g, a * g.base + add[cut[n]:cut[n + 1]]), rel))
        cv = {c: sum(v) / len(v) for c, v in per.items() if v}
        alpha, rounds = choose(per)
    alpha = ALPHA if alpha is None else alpha
    model = train([(g, c) for g, c, _ in groups], cols, rounds, alpha)
    return Trained(model, rounds if model is not None else 0, alpha, cv,
                   time.perf_counter() - started, len(groups))


def rank_served(s: Set, t: Trained, q: str, context: str, records: Records,
                cols: Sequence[int], top_k: int = TOP_K) -> list[str]:
    """q as a search with the ranker answers it: matrixd's boosted hits re-ordered by the
    model (as they came when the model has no tree)."""
    g = served(s, q, context, lookup(s, q, records, top_k))
    if not t.used:
        return g.ids
    return order(g, scores(t.model, g, s.code, cols, None, t.alpha))


def rank_group(s: Set, t: Trained, q: str, records: Records, cols: Sequence[int],
               top_k: int = TOP_K) -> list[str]:
    """q ranked from the search without the playbook (the boost recomputed as the base)."""
    g = group(s, q, lookup(s, q, records, top_k))
    return order(g, scores(t.model, g, s.code, cols, None, t.alpha))
