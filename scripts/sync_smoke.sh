#!/usr/bin/env bash
# syncd smoke: POST /v1/sync/run and GET /v1/sync/status over a small copy of the tldr
# fixture wiki (add, no-change rerun, edit + delete), an unconfigured syncd (503), and a
# missing wiki_dir (one line and exit 78 at start-up: a configuration error).
#
# It always starts its own syncd (its own temp wiki, a unique corpus), so it needs nothing
# from smoke_all.sh. With $LAKEHOUSE_URL set, that syncd uses the stack's vectord and
# embedd through the gateway (same /v1/vectors and /v1/embed paths), and the gateway's
# /v1/sync/status route is checked too; without it, vectord and embedd are started here.
source "$(dirname "$0")/smoke_lib.sh"

if [ -n "${LAKEHOUSE_URL:-}" ]; then
  UPSTREAM=$LAKEHOUSE_URL
  VECTORD_URL=$LAKEHOUSE_URL
  EMBEDD_URL=$LAKEHOUSE_URL
else
  VPORT=$(free_port); EPORT=$(free_port)
  start_daemon vectord LAKEHOUSE_VECTORD_PORT="$VPORT" \
    LAKEHOUSE_VECTORD_EMBEDD_URL="http://127.0.0.1:$EPORT" \
    LAKEHOUSE_VECTORD_DATA_DIR="${LAKEHOUSE_VECTORD_DATA_DIR:-$SMOKE_TMP/pg}"
  start_daemon embedd LAKEHOUSE_EMBEDD_PORT="$EPORT"
  VECTORD_URL="http://127.0.0.1:$VPORT"
  EMBEDD_URL="http://127.0.0.1:$EPORT"
  wait_http "$VECTORD_URL/readyz" 120
  wait_http "$EMBEDD_URL/readyz" 120
  UPSTREAM=""
fi

# A small wiki: 20 English Linux pages, 3 German pages, and an _index.md to be ignored.
WIKI="$SMOKE_TMP/wiki"
FIX="$ROOT/tests/fixtures/tldr"
mkdir -p "$WIKI/pages/linux" "$WIKI/pages.de/common"
cp "$FIX"/pages/linux/*.md "$WIKI/pages/linux/"
cp "$FIX"/pages.de/common/7z*.md "$WIKI/pages.de/common/"
printf '# Index\n\nall pages\n' >"$WIKI/pages/_index.md"
PAGES=$(find "$WIKI" -name '*.md' ! -name '_index.md' | wc -l | tr -d ' ')
CORPUS="smoke_sync_$$_$(date +%s)"

SPORT=$(free_port)
start_daemon syncd LAKEHOUSE_SYNC_PORT="$SPORT" LAKEHOUSE_SYNC_WIKI_DIR="$WIKI" \
  LAKEHOUSE_SYNC_CORPUS="$CORPUS" LAKEHOUSE_SYNC_INTERVAL=3600 LAKEHOUSE_SYNC_RUN_ON_START=false \
  LAKEHOUSE_SYNC_VECTORD_URL="$VECTORD_URL" LAKEHOUSE_SYNC_EMBEDD_URL="$EMBEDD_URL" \
  LAKEHOUSE_SYNC_LANGUAGES='{"pages.de": "de"}'
BASE="http://127.0.0.1:$SPORT"
wait_http "$BASE/healthz" 60

req GET /v1/sync/status
expect_status 200 "status before any run"
check "no run yet, not running, next run scheduled" \
  ".last_run == null and .running == false and (.next_run_at | length) > 0 and .corpus == \"$CORPUS\""

req POST /v1/sync/run
expect_status 200 "first run"
check "every page added, _index.md ignored, no errors" \
  ".added == $PAGES and .updated == 0 and .deleted == 0 and .errors == [] and (.seconds | type) == \"number\""

req POST /v1/sync/run
expect_status 200 "rerun without changes"
check "everything unchanged, nothing embedded" ".unchanged == $PAGES and .added == 0 and .embedded_chunks == 0"

printf '\n- Edited by the smoke test:\n\n`7z --smoke`\n' >>"$WIKI/pages.de/common/7z.md"
rm "$WIKI/pages.de/common/7za.md"
req POST /v1/sync/run
expect_status 200 "run after an edit and a delete"
check "one updated, one deleted" ".updated == 1 and .deleted == 1 and .unchanged == $((PAGES - 2)) and .errors == []"

req GET /v1/sync/status
expect_status 200 "status after three runs"
check "last run recorded" '.runs == 3 and .running == false and .last_run.deleted == 1 and (.last_finished_at | length) > 0'

SAVED_BASE=$BASE
BASE=$VECTORD_URL
req GET "/v1/vectors/corpora/$CORPUS/items/pages.de%2Fcommon%2F7z.md%230"
expect_status 200 "synced chunk stored in vectord"
check "chunk metadata and German language" \
  '.title == "7z" and .metadata.folder == "pages.de/common" and .language == "german" and (.text | contains("7z --smoke"))'
req DELETE "/v1/vectors/corpora/$CORPUS"
expect_status 200 "drop the smoke corpus"
BASE=$SAVED_BASE

# A syncd with no wiki_dir answers 503 sync_not_configured.
OPORT=$(free_port)
start_daemon syncd LAKEHOUSE_SYNC_PORT="$OPORT" LAKEHOUSE_SYNC_WIKI_DIR=
BASE="http://127.0.0.1:$OPORT"
wait_http "$BASE/healthz" 60
req POST /v1/sync/run
expect_status 503 "unconfigured sync refuses to run"
check "sync_not_configured in the error body" '.error.code == "sync_not_configured" and (.request_id | length) > 0'

if [ -n "$UPSTREAM" ]; then
  BASE=$UPSTREAM
  req GET /v1/sync/status
  if [ "$STATUS" = 200 ]; then
    check "gateway routes /v1/sync/status" 'has("running")'
  else
    expect_status 503 "gateway routes /v1/sync/status (stack's syncd has no wiki_dir)"
    check "error names sync_not_configured" '.error.code == "sync_not_configured"'
  fi
fi

# A wiki_dir that does not exist stops start-up with one line naming it, exit code 78.
set +e
LAKEHOUSE_SYNC_PORT=$(free_port) LAKEHOUSE_SYNC_WIKI_DIR="$SMOKE_TMP/no-such-wiki" \
  "$PY" -m internal.syncd.server >"$SMOKE_TMP/bad.log" 2>&1
code=$?
set -e
if [ "$code" = 78 ] && [ "$(wc -l <"$SMOKE_TMP/bad.log")" = 1 ] \
    && grep -q "^config error: sync.wiki_dir: '$SMOKE_TMP/no-such-wiki'" "$SMOKE_TMP/bad.log"; then
  PASSES=$((PASSES + 1)); echo "ok   missing wiki_dir: one line naming sync.wiki_dir, exit 78"
else
  echo "FAIL missing wiki_dir: exit $code" >&2; cat "$SMOKE_TMP/bad.log" >&2; exit 1
fi

smoke_done sync_smoke
