"""Cross-validated choice of a default among search configurations: the pure part (no I/O).

Choosing the default as "the best mean on every judged query" rewards whatever fits those
queries; new queries are what a default is for. So each configuration's per-query nDCG@10
is split into k folds by a stable hash of (data set, query id); for each fold the
configuration with the best score on the other k-1 folds is chosen and scored on the fold
it never saw. The mean of those held-out scores estimates how the selection procedure does
on new queries (Hastie, Tibshirani & Friedman, ESL 7.10); the configuration chosen on all
folds is the one to ship, and the held-out mean is the figure to quote for it.

A score over queries is the mean of the data sets' means (each set counts once, as in the
eval's mean table), so a large set does not outvote the others.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lakehouse.wire.modes import DEFAULT_FUSION
from lakehouse.wire.modes import FUSIONS as REGISTERED

# The configurations `lakehouse eval --cross-validate` compares: the hybrid request's
# options (fusion x feedback). "as shipped" sends none, so it is whatever vectord's
# defaults are today, and the table shows which named configuration it equals.
FEEDBACK: dict[str, dict[str, Any]] = {
    "off": {"docs": 0},
    "rm3": {"docs": 10, "terms": 10, "weight": 0.5, "vector": False},
    "rocchio": {"docs": 10, "terms": 0, "weight": 0.5, "vector": True},
    "rm3+rocchio": {"docs": 10, "terms": 10, "weight": 0.5, "vector": True},
}
FUSIONS = (DEFAULT_FUSION, *(name for name in REGISTERED if name != DEFAULT_FUSION))
# Fewer candidates per branch than vectord's 100 (the request's `candidates`), with the
# weighted fusion and RM3: less to scan, fuse and expand, so a faster default, if it holds.
POOLS = (50, 30)
AS_SHIPPED = "as shipped"
CANDIDATES: dict[str, dict[str, Any]] = {
    AS_SHIPPED: {},
    **{f"{fusion}, feedback {name}": {"fusion": fusion, "prf": prf}
       for fusion in FUSIONS for name, prf in FEEDBACK.items()},
    **{f"weighted, feedback rm3, {n} candidates": {"fusion": "weighted",
                                                    "prf": FEEDBACK["rm3"], "candidates": n}
       for n in POOLS},
}

# Each configuration is searched with k 10, as a user's search is: nDCG@10 needs no more,
# and the candidates per branch are then the default's (max(candidates, k)), not 100.
DEPTH = 10

QueryKey = tuple[str, str]  # (data set, query id)
PerQuery = Mapping[QueryKey, float]  # one configuration's nDCG@10 per query


def fold_of(key: QueryKey, folds: int) -> int:
    """A query's fold: stable across runs and machines (not Python's salted hash)."""
    digest = hashlib.blake2b(f"{key[0]}\x00{key[1]}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % folds


def score(per_query: PerQuery, keys: Sequence[QueryKey]) -> float:
    """Mean over data sets of the mean over `keys` of that set (sets with no key skipped)."""
    sums: dict[str, list[float]] = {}
    for key in keys:
        sums.setdefault(key[0], []).append(per_query[key])
    if not sums:
        return 0.0
    return sum(sum(v) / len(v) for v in sums.values()) / len(sums)


@dataclass(frozen=True)
class Fold:
    index: int
    queries: int
    chosen: str  # best on the other folds
    held_out: float  # the chosen one's score on this fold
    held_out_by_config: dict[str, float]


@dataclass(frozen=True)
class Result:
    folds: list[Fold]
    chosen_on_all: str  # the configuration to ship: best on every query
    on_all: dict[str, float]  # each configuration's score on every query
    mean_held_out_by_config: dict[str, float]  # each configuration's mean over the folds
    # each configuration's held-out score on each data set alone: the mean over the folds
    # of its mean on that set's queries of the fold
    held_out_by_set: dict[str, dict[str, float]]
    per_query: Mapping[str, PerQuery]  # each configuration's nDCG@10 per query, as scored

    @property
    def mean_held_out(self) -> float:
        """The selection procedure's estimate on new queries."""
        return sum(f.held_out for f in self.folds) / len(self.folds)


def cross_validate(configs: Mapping[str, PerQuery], folds: int = 5) -> Result:
    """Choose on k-1 folds, score on the k-th, for each k. Ties go to the earlier config.

    Every configuration must have scored the same queries.
    """
    if folds < 2:
        raise ValueError(f"folds: expected at least 2, got {folds}")
    if not configs:
        raise ValueError("configs: expected at least one configuration")
    names = list(configs)
    keys = sorted(configs[names[0]])
    for name in names[1:]:
        if set(configs[name]) != set(keys):
            raise ValueError(f"config {name!r}: scored other queries than {names[0]!r}")
    by_fold: list[list[QueryKey]] = [[] for _ in range(folds)]
    for key in keys:
        by_fold[fold_of(key, folds)].append(key)
    out: list[Fold] = []
    for i, held in enumerate(by_fold):
        if not held:
            raise ValueError(f"fold {i}: no queries (too few queries for {folds} folds)")
        train = [k for j, part in enumerate(by_fold) if j != i for k in part]
        chosen = max(names, key=lambda n: (score(configs[n], train), -names.index(n)))
        held_scores = {n: score(configs[n], held) for n in names}
        out.append(Fold(i, len(held), chosen, held_scores[chosen], held_scores))
    on_all = {n: score(configs[n], keys) for n in names}
    chosen_on_all = max(names, key=lambda n: (on_all[n], -names.index(n)))
    mean_by_config = {n: sum(f.held_out_by_config[n] for f in out) / folds for n in names}
    sets = sorted({k[0] for k in keys})
    by_set = {n: {s: _mean([score(configs[n], [k for k in held if k[0] == s])
                            for held in by_fold if any(k[0] == s for k in held)])
                  for s in sets} for n in names}
    return Result(out, chosen_on_all, on_all, mean_by_config, by_set, configs)


def to_json(result: Result, config: str) -> dict[str, Any]:
    """One configuration's figures (`lakehouse eval --cross-validate --json`): its held-out
    nDCG@10 per set and each query's nDCG@10 (set -> query id -> value), for paired
    comparisons of two runs."""
    per_set: dict[str, dict[str, float]] = {}
    for (name, qid), value in sorted(result.per_query[config].items()):
        per_set.setdefault(name, {})[qid] = value
    return {"configuration": config, "held_out_by_set": result.held_out_by_set[config],
            "mean_held_out": result.mean_held_out_by_config[config], "per_query": per_set}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def table(result: Result, default: str | None = None) -> str:
    """The markdown tables `lakehouse eval --cross-validate` prints."""
    names = list(result.on_all)
    lines = [
        "| configuration | all queries | mean of held-out folds | "
        + " | ".join(f"fold {f.index + 1}" for f in result.folds) + " |",
        "|---|---:|---:|" + "---:|" * len(result.folds),
    ]
    for n in names:
        mark = " (default)" if n == default else ""
        cells = " | ".join(f"{f.held_out_by_config[n]:.4f}" for f in result.folds)
        lines.append(f"| {n}{mark} | {result.on_all[n]:.4f} | "
                     f"{result.mean_held_out_by_config[n]:.4f} | {cells} |")
    lines += [
        "",
        "| fold | queries | chosen on the other folds | its held-out nDCG@10 |",
        "|---:|---:|---|---:|",
    ]
    for f in result.folds:
        lines.append(f"| {f.index + 1} | {f.queries} | {f.chosen} | {f.held_out:.4f} |")
    lines += [
        "",
        f"cross-validated nDCG@10 of choosing by score (mean of held-out folds): "
        f"{result.mean_held_out:.4f}",
        f"chosen on all queries: {result.chosen_on_all}",
    ]
    if default is not None:
        lines.append(f"the shipped default: {default} "
                     f"(held-out mean {result.mean_held_out_by_config[default]:.4f})")
        lines += ["", "| data set | the shipped default's held-out nDCG@10 |", "|---|---:|"]
        lines += [f"| {name} | {value:.4f} |"
                  for name, value in result.held_out_by_set[default].items()]
    return "\n".join(lines)
