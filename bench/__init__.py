"""The workshop: every benchmark of Lakehouse over one harness (bench/README.md).

    .venv/bin/python -m bench list                 # the benchmarks, a line each
    .venv/bin/python -m bench NAME [options]       # run one (takes the benchmark lock)
    .venv/bin/python -m bench report               # docs/BENCHMARKS.md from the results
    .venv/bin/python -m bench plots                # docs/images/*.png from the results
    .venv/bin/python -m bench check                # the quoted benchmarks, old and new
"""
