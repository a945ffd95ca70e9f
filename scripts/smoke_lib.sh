#!/usr/bin/env bash
# Helpers the *_smoke.sh scripts source. A smoke script talks to $LAKEHOUSE_URL (the
# gateway, as smoke_all.sh sets it); with no LAKEHOUSE_URL it starts the daemons it
# needs itself, on free loopback ports, and stops them on exit.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY="$ROOT/.venv/bin/python"
SMOKE_PIDS=()
SMOKE_TMP=$(mktemp -d -t lakehouse-smoke-XXXXXX)
PASSES=0

smoke_cleanup() {
  local pid
  for pid in "${SMOKE_PIDS[@]:-}"; do
    [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${SMOKE_PIDS[@]:-}"; do
    [ -n "$pid" ] && wait "$pid" 2>/dev/null || true
  done
  rm -rf "$SMOKE_TMP"
}
trap smoke_cleanup EXIT

free_port() {
  "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# wait_http URL [SECONDS]: poll until URL answers 200.
wait_http() {
  local url=$1 limit=${2:-60} i=0
  until curl -fsS -o /dev/null "$url" 2>/dev/null; do
    i=$((i + 1))
    if [ "$i" -gt $((limit * 5)) ]; then
      echo "FAIL: $url not up after ${limit}s" >&2
      for f in "$SMOKE_TMP"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -n 30 "$f"; } >&2; done
      exit 1
    fi
    sleep 0.2
  done
}

# start_daemon NAME [ENV=VALUE ...]: run `python -m internal.NAME.server` in the background.
start_daemon() {
  local name=$1; shift
  env "$@" "$PY" -m "internal.$name.server" >"$SMOKE_TMP/$name.log" 2>&1 &
  SMOKE_PIDS+=("$!")
}

# req METHOD PATH [JSON]: sets $STATUS and $BODY.
req() {
  local method=$1 path=$2 data=${3:-}
  local out
  if [ -n "$data" ]; then
    out=$(curl -sS -X "$method" -H 'Content-Type: application/json' -w '\n%{http_code}' \
      --data-binary "$data" "$BASE$path")
  else
    out=$(curl -sS -X "$method" -w '\n%{http_code}' "$BASE$path")
  fi
  STATUS=${out##*$'\n'}
  BODY=${out%$'\n'*}
}

# check DESCRIPTION JQ_EXPR: assert that jq's expression is true of $BODY.
check() {
  local desc=$1 expr=$2
  if [ "$(printf '%s' "$BODY" | jq -r "$expr")" = "true" ]; then
    PASSES=$((PASSES + 1)); echo "ok   $desc"
  else
    echo "FAIL $desc" >&2; echo "     status=$STATUS body=$(printf '%s' "$BODY" | head -c 600)" >&2; exit 1
  fi
}

# expect_status CODE DESCRIPTION
expect_status() {
  if [ "$STATUS" = "$1" ]; then
    PASSES=$((PASSES + 1)); echo "ok   $2"
  else
    echo "FAIL $2: expected HTTP $1, got $STATUS" >&2; echo "     body=$(printf '%s' "$BODY" | head -c 600)" >&2; exit 1
  fi
}

smoke_done() { echo "$1: $PASSES checks passed"; }
