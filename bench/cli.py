"""`python -m bench`: run a benchmark, list them, or draw the record from the results.

    python -m bench list
    python -m bench NAME [options]     (python -m bench NAME --help: its options)
    python -m bench report             docs/BENCHMARKS.md from bench/results
    python -m bench plots              docs/images/bench-*.png from bench/results
    python -m bench check [NAME ...]   the quoted benchmarks: the old script and the new
                                       module at a reduced scale, side by side
"""

from __future__ import annotations

import importlib
import sys

from bench.harness.registry import benchmark, names, title


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    verb, rest = args[0], args[1:]
    if verb == "list":
        for name in names():
            print(f"{name:<16} {title(benchmark(name))}")
        return 0
    if verb in ("report", "plots", "check"):
        tool = importlib.import_module(f"bench.reports.{verb}")
        return int(tool.main(rest) or 0)
    from bench.harness.run import execute

    return execute(verb, benchmark(verb), rest)
