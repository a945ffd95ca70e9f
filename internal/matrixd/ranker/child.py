"""The learned ranker's training process: `python -m internal.matrixd.ranker.child` reads
(groups, options) pickled on stdin, runs model.fit at a lower OS priority and writes the
Fit pickled on stdout. matrixd starts one per training (internal.matrixd.ranker.job), so
LightGBM's work never runs in the daemon that serves searches, and a cancelled training
is one process killed."""

from __future__ import annotations

import os
import pickle
import sys

from internal.matrixd.ranker import features, model

NICE = 19  # below matrixd's (and the searches') priority


def main() -> int:
    os.nice(NICE)
    if hasattr(os, "sched_setscheduler"):  # Linux: a core only when nothing else wants it
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    groups, options = pickle.load(sys.stdin.buffer)
    fit = model.fit(groups, features.FEATURES, **options)
    pickle.dump(fit, sys.stdout.buffer)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
