#!/usr/bin/env bash
# MCP at the gateway's /mcp (initialize, tools/list, a tool call and a bad argument) and
# the web console at / , with curl and jq.
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

# rpc ID METHOD PARAMS_JSON: one JSON-RPC request to /mcp; sets $STATUS and $BODY.
rpc() {
  local out
  out=$(curl -sS -X POST -w '\n%{http_code}' "$BASE/mcp" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2025-06-18' \
    --data-binary "{\"jsonrpc\": \"2.0\", \"id\": $1, \"method\": \"$2\", \"params\": $3}")
  STATUS=${out##*$'\n'}
  BODY=${out%$'\n'*}
}

rpc 1 initialize '{"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "mcp_smoke", "version": "1"}}'
expect_status 200 "mcp initialize"
check "server is lakehouse, with tools" '.result.serverInfo.name == "lakehouse" and (.result.capabilities | has("tools"))'
rpc 2 tools/list '{}'
expect_status 200 "mcp tools/list"
check "search, list_corpora, get_item, record_feedback listed" \
  '[.result.tools[].name] | contains(["search", "list_corpora", "get_item", "record_feedback"])'
check "each tool has a description and an object schema" \
  '[.result.tools[] | (.description | length > 60) and .inputSchema.type == "object"] | all'
rpc 3 tools/call '{"name": "list_corpora", "arguments": {}}'
check "list_corpora answers with structured corpora" '(.result.isError | not) and (.result.structuredContent.corpora | type == "array")'
rpc 4 tools/call '{"name": "search", "arguments": {"query": "tea", "k": "ten"}}'
check "a bad argument is a tool error naming it" '.result.isError == true and .result.structuredContent.error.argument == "k"'

req GET /
expect_status 200 "console at /"
BODY=$(jq -n --arg page "$BODY" '{page: $page}')
check "console page loads its own script" '.page | test("<script src=\"/console/app.js\"")'
csp=$(curl -sS -D - -o /dev/null "$BASE/" | tr -d '\r' | sed -n 's/^[Cc]ontent-[Ss]ecurity-[Pp]olicy: //p')
BODY=$(jq -n --arg csp "$csp" '{csp: $csp}')
check "console may call its own origin only" '.csp | test("connect-src .self.") and test("default-src .none.")'
req GET /console/app.js
expect_status 200 "console script"
smoke_done mcp
