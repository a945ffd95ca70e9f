#!/usr/bin/env bash
# The README's run command: install (first time), then run the whole stack until Ctrl-C.
# The terminal shows the install, each part as it comes up, then warnings and errors;
# the daemons' logs go to var/log/<daemon>.log (`--verbose`: here too).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x .venv/bin/lakehouse ]; then
  echo "install: checking .venv"
else
  echo "install: Lakehouse and its model runtime into .venv (first time: a few minutes)"
fi
bash scripts/setup.sh
echo "install: done"
exec .venv/bin/lakehouse up "$@"
