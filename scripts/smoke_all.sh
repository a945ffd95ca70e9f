#!/usr/bin/env bash
# The whole stack on free loopback ports with a temporary data dir (`lakehouse up`),
# every other scripts/*_smoke.sh run against its gateway (LAKEHOUSE_URL), then a
# SIGTERM and a check that no daemon or PostgreSQL process of that stack is left.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY="$ROOT/.venv/bin/python"
TMP=$(mktemp -d -t lakehouse-all-XXXXXX)
UP_PID=""

free_port() {
  "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

teardown() {
  if [ -n "$UP_PID" ] && kill -0 "$UP_PID" 2>/dev/null; then
    kill -TERM "$UP_PID" 2>/dev/null || true
    wait "$UP_PID" 2>/dev/null || true
  fi
  rm -rf "$TMP"
}
trap teardown EXIT

for section in GATEWAY EMBEDD VECTORD MATRIXD SYNC MCPD; do
  export "LAKEHOUSE_${section}_PORT=$(free_port)"
done
export LAKEHOUSE_VECTORD_DATA_DIR="$TMP/pg"
export LAKEHOUSE_LOG_FORMAT=json
unset LAKEHOUSE_URL

cd "$ROOT"
"$PY" -m internal.cli.main up --log-dir "$TMP/logs" --timeout 300 >"$TMP/up.out" 2>"$TMP/up.err" &
UP_PID=$!

BASE=""
for _ in $(seq 1 1500); do
  if ! kill -0 "$UP_PID" 2>/dev/null; then break; fi
  BASE=$(sed -n 's/^Lakehouse is up: //p' "$TMP/up.out")
  [ -n "$BASE" ] && break
  sleep 0.2
done
if [ -z "$BASE" ]; then
  echo "FAIL: lakehouse up did not come up" >&2
  tail -n 40 "$TMP/up.err" >&2
  for f in "$TMP"/logs/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -n 20 "$f"; } >&2; done
  exit 1
fi
curl -fsS "$BASE/readyz" >/dev/null
echo "stack up at $BASE"
export LAKEHOUSE_URL="$BASE"

failed=()
ran=0
for script in "$ROOT"/scripts/*_smoke.sh; do
  name=$(basename "$script")
  echo "== $name"
  ran=$((ran + 1))
  if ! bash "$script"; then
    failed+=("$name")
  fi
done

# Every process of this stack, and its PostgreSQL, before asking it to stop.
FAMILY=$("$PY" - "$UP_PID" "$TMP/pg" <<'PYEOF'
import sys, psutil
from pathlib import Path
from internal.stack.postgres import postmaster_pid
pids = [p.pid for p in psutil.Process(int(sys.argv[1])).children(recursive=True)]
pg = postmaster_pid(Path(sys.argv[2]))
print(" ".join(str(p) for p in pids + ([pg] if pg else [])))
PYEOF
)
kill -TERM "$UP_PID"
wait "$UP_PID" && code=0 || code=$?
UP_PID=""
if [ "$code" != 0 ]; then
  echo "FAIL: lakehouse up exited with $code after SIGTERM" >&2; failed+=("teardown")
fi
left=$("$PY" - "$TMP" $FAMILY <<'PYEOF'
import os, sys, time, psutil
tmp, pids = sys.argv[1], [int(p) for p in sys.argv[2:]]
def running(p):
    try:
        return psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
deadline = time.time() + 30
while time.time() < deadline and any(running(p) for p in pids):
    time.sleep(0.1)
left = [p for p in pids if running(p)]
left += [p.pid for p in psutil.process_iter(["cmdline"])
         if tmp in " ".join(p.info["cmdline"] or []) and p.pid != os.getpid()
         and running(p.pid) and p.pid not in left]
def describe(p):
    try:
        return f"{p}:{' '.join(psutil.Process(p).cmdline())[:120]}"
    except psutil.NoSuchProcess:
        return f"{p}:gone"
print(", ".join(describe(p) for p in left))
PYEOF
)
if [ -n "$left" ]; then
  echo "FAIL: processes left after teardown: $left" >&2; failed+=("leftovers")
else
  echo "ok   teardown left no process ($(echo $FAMILY | wc -w) stopped)"
fi

if [ "${#failed[@]}" -gt 0 ]; then
  echo "smoke_all: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "smoke_all: $ran smoke scripts passed"
