#!/usr/bin/env bash
# The README's test command: set up, lint, type-check, run the tests, run the smoke scripts.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
echo "== ruff"; .venv/bin/ruff check internal clients/python/lakehouse tests scripts bench
echo "== mypy"; .venv/bin/mypy internal clients/python/lakehouse
echo "== imports"; .venv/bin/lint-imports
echo "== pytest"; .venv/bin/python -m pytest "$@"
echo "== smoke"; bash scripts/smoke_all.sh
