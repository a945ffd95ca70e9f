#!/usr/bin/env bash
# The README's test command: set up, lint, type-check, run the tests, run the smoke scripts.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
echo "== ruff"; .venv/bin/ruff check internal clients/python/lakehouse tests scripts bench
echo "== mypy"; .venv/bin/mypy internal clients/python/lakehouse
echo "== imports"; .venv/bin/lint-imports
# Three workers, a file to each, the longest files first (tests/conftest.py): the tests
# wait on daemons, failovers and subprocesses as much as they compute, so three share two
# cores well (docs/decisions/0324-test-workers.md). LAKEHOUSE_TEST_WORKERS=0: one process.
echo "== pytest ($(date -u +%T))"
.venv/bin/python -m pytest -n "${LAKEHOUSE_TEST_WORKERS:-3}" --dist loadfile --no-loadscope-reorder "$@"
echo "== smoke ($(date -u +%T))"; bash scripts/smoke_all.sh
echo "== done ($(date -u +%T))"
