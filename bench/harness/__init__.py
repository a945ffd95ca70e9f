"""The harness every benchmark runs over: the run (options, lock, tables, results file),
stacks and daemons of a checkout, timing and HTTP helpers."""

from bench.harness.run import Run as Run
from bench.harness.run import data_dir as data_dir
