"""The learned ranker's model: LambdaMART (LightGBM `lambdarank`) from the playbook's boost,
its number of trees chosen by cross-validation, the fallback rule (no I/O; CPU only: run
in a child process by internal.matrixd.ranker.job).

Each candidate's initial score is alpha x its fused score with the boost inside (today's
ranking), and the trees learn what to add to it; with no tree the ranking is the boost's,
exactly. How many trees (TREES, 0 among them) is chosen by 5-fold cross-validation over
the recorded questions (folds by a hash of the question's text, the folds its playbook
features were computed out of), and the trees are used only when the best count beats 0
by more than Z standard errors of the per-question differences (else: the boost alone).
docs/decisions/0151-learned-ranker.md has the measurements behind each choice, the
prototype's in 0152-0155.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]

TREES = (0, 10, 25, 50, 100)
ALPHAS = (0.0, 1.0, 3.0, 10.0)  # the boost's weight, when chosen with the trees
Z = 1.64  # one-sided 95%: the trees must beat the boost alone by this many standard errors
PARAMS: dict[str, Any] = {
    "objective": "lambdarank", "learning_rate": 0.1, "num_leaves": 15, "max_bin": 63,
    "min_data_in_leaf": 20, "feature_fraction": 0.9, "lambdarank_truncation_level": 20,
    "verbose": -1, "seed": 7, "deterministic": True,
}

Choice = tuple[float, int]  # (alpha, trees)


@dataclass
class Group:
    """One recorded question's candidates: its fold, their feature rows, labels (1: a
    recorded right answer) and fused scores (the boost inside)."""

    fold: int
    x: F64
    y: F64
    base: F64


@dataclass
class Fit:
    """A training's outcome: the model's text (None: no tree, the boost alone) and why."""

    model: str | None
    trees: int
    alpha: float
    queries: int
    examples: int
    seconds: float
    cv: dict[str, float] = field(default_factory=dict)  # "alpha/trees" -> nDCG@10
    ndcg10_boost: float | None = None
    ndcg10_ranker: float | None = None
    reason: str | None = None


def ndcg10(order: Sequence[int], labels: F64) -> float:
    """nDCG@10 of the candidates in this order, binary gains (trec_eval's ndcg_cut_10)."""
    dcg = sum(float(labels[i]) / math.log2(r + 2) for r, i in enumerate(order[:10]))
    ideal = int(labels.sum())
    idcg = sum(1.0 / math.log2(r + 2) for r in range(min(ideal, 10)))
    return dcg / idcg if idcg > 0 else 0.0


def ranked(values: F64) -> list[int]:
    """Candidate indexes best first, ties in the order they came (the search's)."""
    return sorted(range(len(values)), key=lambda i: (-values[i], i))


def _train(groups: Sequence[Group], trees: int, alpha: float, threads: int,
           names: Sequence[str]) -> Any:
    import lightgbm as lgb  # a child process's import: matrixd itself loads it only to serve

    ds = lgb.Dataset(np.vstack([g.x for g in groups]), np.concatenate([g.y for g in groups]),
                     group=[len(g.y) for g in groups],
                     init_score=np.concatenate([alpha * g.base for g in groups]),
                     feature_name=list(names), free_raw_data=True)
    return lgb.train({**PARAMS, "num_threads": threads}, ds, num_boost_round=trees)


def choose(per: Mapping[Choice, Sequence[float]], alpha: float, z: float = Z
           ) -> tuple[Choice, str | None]:
    """The (alpha, trees) of the best cross-validated mean if its gain over 0 trees (the
    same ranking for every alpha) exceeds z standard errors of the paired per-question
    differences; else (alpha, 0) and why."""
    base = next(v for (_, t), v in per.items() if t == 0)
    best = max(per, key=lambda c: (sum(per[c]) / len(per[c]), -c[1], -c[0]))
    if best[1] == 0:
        return (alpha, 0), "no number of trees beats the boost alone on the records"
    d = np.asarray(per[best]) - np.asarray(base)
    se = float(d.std(ddof=1)) / math.sqrt(len(d))
    if d.mean() > z * se:
        return best, None
    return (alpha, 0), (
        f"the trees do not beat the boost alone: cross-validated nDCG@10 "
        f"{np.mean(per[best]):.4f} ({best[1]} trees) against {np.mean(base):.4f}, a gain of "
        f"{d.mean():+.4f} within {z} standard errors ({z * se:.4f})")


def fit(groups: Sequence[Group], names: Sequence[str], *, alpha: float = 1.0,
        choose_alpha: bool = False, min_queries: int = 20, threads: int = 1) -> Fit:
    """Train on the groups that hold a right answer: the cross-validated choice of trees
    (and of alpha among ALPHAS when choose_alpha), then the model on them all."""
    started = time.perf_counter()
    use = [g for g in groups if g.y.any()]
    examples = sum(len(g.y) for g in use)
    if len(use) < min_queries:
        return Fit(None, 0, alpha, len(use), examples, time.perf_counter() - started,
                   reason=f"too few records: {len(use)} recorded questions with a right answer "
                          f"among their candidates (at least {min_queries})")
    alphas = ALPHAS if choose_alpha else (alpha,)
    per: dict[Choice, list[float]] = {(a, t): [] for a in alphas for t in TREES}
    folds = sorted({g.fold for g in use})
    for f in folds:
        held = [g for g in use if g.fold == f]
        rest = [g for g in use if g.fold != f]
        x = np.vstack([g.x for g in held])
        cut = np.cumsum([0] + [len(g.y) for g in held])
        for a in alphas:
            inner = _train(rest, max(TREES), a, threads, names) if rest else None
            for t in TREES:
                add = (inner.predict(x, num_iteration=t, num_threads=threads)
                       if inner is not None and t else np.zeros(len(x)))
                for n, g in enumerate(held):
                    per[(a, t)].append(ndcg10(ranked(a * g.base + add[cut[n]:cut[n + 1]]), g.y))
    cv = {f"{a:g}/{t}": float(np.mean(v)) for (a, t), v in per.items()}
    (alpha, trees), reason = choose(per, alpha)
    boost = float(np.mean(next(v for (_, t), v in per.items() if t == 0)))
    model = _train(use, trees, alpha, threads, names).model_to_string() if trees else None
    return Fit(model, trees, alpha, len(use), examples, time.perf_counter() - started, cv,
               ndcg10_boost=boost, ndcg10_ranker=float(np.mean(per[(alpha, trees)])),
               reason=reason)
