#!/usr/bin/env bash
# The README's run command: install (first time), then run the whole stack until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/lakehouse up "$@"
