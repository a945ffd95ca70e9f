"""The learned ranker's settings, a part of `[matrixd]` (MatrixdConfig inherits them).

The ranker (internal.matrixd.ranker; docs/API.md, "matrixd: the learned ranker") re-orders
the top `ranker_depth` candidates of a search with feedback and trains by itself
(`ranker_auto`, checked every `ranker_check_seconds`) once a playbook's entries moved by
`ranker_min_new_records`; with fewer than `ranker_min_queries` recorded questions it keeps
the boost alone. The boost's weight in a candidate's initial score is `ranker_alpha`, or
chosen among 0, 1, 3, 10 by the records' cross-validation (`ranker_choose_alpha`). Every
replica reads the current models every `ranker_refresh_seconds`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RankerSettings:
    ranker_auto: bool = True
    ranker_check_seconds: float = 60.0
    ranker_min_new_records: int = 50
    ranker_min_queries: int = 20
    ranker_depth: int = 100
    ranker_alpha: float = 1.0
    ranker_choose_alpha: bool = False
    ranker_refresh_seconds: float = 5.0
    ranker_threads: int = 1  # LightGBM's threads while training (a child process, niced)
    ranker_concurrency: int = 1  # training's searches in flight

    def validate_ranker(self, max_k: int) -> None:
        """ValueError("key: reason") for a setting out of its range."""
        if not 10 <= self.ranker_depth <= max_k:
            raise ValueError("ranker_depth: must be in 10..max_k")
        for key in ("ranker_check_seconds", "ranker_refresh_seconds", "ranker_min_new_records",
                    "ranker_min_queries", "ranker_threads", "ranker_concurrency"):
            if getattr(self, key) <= 0:
                raise ValueError(f"{key}: must be positive")
        if not 0 <= self.ranker_alpha <= 100:
            raise ValueError("ranker_alpha: must be in [0, 100]")
