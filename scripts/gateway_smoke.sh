#!/usr/bin/env bash
# The gateway and the people's CLI: health, readiness, API document, metrics, errors,
# then `lakehouse ingest` (twice: the rerun skips everything) and `lakehouse search`.
source "$(dirname "$0")/smoke_lib.sh"

if [ -n "${LAKEHOUSE_URL:-}" ]; then
  BASE=$LAKEHOUSE_URL
else
  for section in GATEWAY EMBEDD VECTORD MATRIXD SYNC MCPD; do
    export "LAKEHOUSE_${section}_PORT=$(free_port)"
  done
  export LAKEHOUSE_VECTORD_DATA_DIR="$SMOKE_TMP/pg"
  (cd "$ROOT" && "$PY" -m internal.cli.main up --log-dir "$SMOKE_TMP" >"$SMOKE_TMP/up.log" 2>&1) &
  SMOKE_PIDS+=("$!")
  BASE="http://127.0.0.1:$LAKEHOUSE_GATEWAY_PORT"
  wait_http "$BASE/readyz" 300
fi
LH=("$PY" -m internal.cli.main)

req GET /healthz
expect_status 200 "healthz"
req GET /readyz
expect_status 200 "readyz"
check "every component ready, PostgreSQL included" '([.components[].status] | all(. == "ok")) and (.components | has("postgres"))'
req GET /openapi.json
check "openapi lists the matrix search with its request schema" '.paths["/v1/matrix/search"].post.requestBody != null'
req GET /v1/vectors/corpora/no_such_corpus_$$
expect_status 404 "a daemon's 404 passes through"
check "error body shape" '.error.code == "corpus_not_found" and (.request_id | length > 0)'
req GET /v1/nowhere
expect_status 404 "unknown route"

corpus="gw_smoke_$$_$(date +%s)"
cat >"$SMOKE_TMP/docs.jsonl" <<'JSONL'
{"_id": "pg", "title": "PostgreSQL", "text": "PostgreSQL is a relational database; pgvector adds vector similarity search.", "metadata": {"kind": "db"}}
{"_id": "tea", "title": "Tea", "text": "Green tea is brewed from unoxidised leaves of Camellia sinensis.", "metadata": {"kind": "drink"}}
{"_id": "bike", "title": "Bicycle", "text": "A bicycle has two wheels, pedals and a chain that drives the rear wheel."}
JSONL
out=$(cd "$ROOT" && LAKEHOUSE_URL=$BASE "${LH[@]}" ingest "$SMOKE_TMP/docs.jsonl" --corpus "$corpus" --quiet)
BODY="{\"line\": $(printf '%s' "$out" | jq -Rs .)}"
check "ingest stores 3 documents" '.line | contains("3 documents: 3 written (3 chunks), 0 unchanged, 0 skipped (no text), 0 failed; 3 documents, 3 items in corpus")'
out=$(cd "$ROOT" && LAKEHOUSE_URL=$BASE "${LH[@]}" ingest "$SMOKE_TMP/docs.jsonl" --corpus "$corpus" --quiet)
BODY="{\"line\": $(printf '%s' "$out" | jq -Rs .)}"
check "a rerun skips unchanged documents" '.line | contains("0 written (0 chunks), 3 unchanged")'
out=$(cd "$ROOT" && LAKEHOUSE_URL=$BASE "${LH[@]}" search "which database does vector search" --corpora "$corpus" --k 2)
BODY="{\"table\": $(printf '%s' "$out" | jq -Rs .)}"
check "search prints the corpus and the best hit" ".table | test(\"$corpus +pg#0 \")"
out=$(cd "$ROOT" && LAKEHOUSE_URL=$BASE "${LH[@]}" corpora)
BODY="{\"table\": $(printf '%s' "$out" | jq -Rs .)}"
check "corpora lists it: 3 documents, 3 items" ".table | test(\"$corpus +3 +3 \")"
req DELETE "/v1/vectors/corpora/$corpus"
expect_status 200 "cleanup"
metrics=$(curl -fsS "$BASE/metrics")
BODY=$(jq -n --arg m "$metrics" '{metrics: $m}')
check "metrics per route and per upstream" '.metrics | test("lakehouse_gateway_requests_total[{]method=\"POST\",route=\"/v1/matrix/search\",status=\"200\"[}]") and test("lakehouse_gateway_upstream_seconds_count[{]upstream=\"matrixd\"[}]")'
smoke_done gateway
