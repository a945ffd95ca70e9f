#!/usr/bin/env bash
# The README's run command: install (when pyproject.toml or setup.sh changed), then run
# the whole stack until Ctrl-C. The terminal shows one install line, each part as it
# comes up, then the daemons' warnings and errors; their logs go to var/log/<daemon>.log
# (`--verbose`: here too).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/lakehouse up "$@"
