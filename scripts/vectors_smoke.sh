#!/usr/bin/env bash
# vectord smoke: create a corpus, upsert, search (vector, keyword, filtered), bad input,
# delete. Uses $LAKEHOUSE_URL when set; else starts vectord on a free loopback port
# (embedded PostgreSQL in a temp dir, or $LAKEHOUSE_PG_DSN when set).
source "$(dirname "$0")/smoke_lib.sh"

if [ -n "${LAKEHOUSE_URL:-}" ]; then
  BASE=$LAKEHOUSE_URL
else
  PORT=$(free_port)
  start_daemon vectord LAKEHOUSE_VECTORD_PORT="$PORT" \
    LAKEHOUSE_VECTORD_DATA_DIR="${LAKEHOUSE_VECTORD_DATA_DIR:-$SMOKE_TMP/pg}"
  BASE="http://127.0.0.1:$PORT"
  wait_http "$BASE/readyz" 120
fi

C=/v1/vectors/corpora
NAME="smoke_vec_$$_$(date +%s)"

req POST "$C" "{\"name\":\"$NAME\",\"dim\":3,\"metric\":\"cosine\",\"language\":\"english\",\"model\":\"smoke-model\"}"
expect_status 201 "create corpus"
check "corpus echoes dim and model" '.dim == 3 and .model == "smoke-model" and .count == 0'

req POST "$C" "{\"name\":\"$NAME\",\"dim\":3}"
expect_status 409 "existing corpus is a conflict"

ITEMS='{"model":"smoke-model","items":[
 {"id":"a","vector":[1,0,0],"text":"alpha document","title":"First","metadata":{"team":"red"}},
 {"id":"b","vector":[0,1,0],"text":"beta has ERR-40213 inside","metadata":{"team":"blue"}},
 {"id":"c","vector":[0.9,0.1,0],"text":"gamma near alpha","metadata":{"team":"blue"}}]}'
req POST "$C/$NAME/items" "$ITEMS"
expect_status 200 "upsert three items"
check "upserted 3" '.upserted == 3'

req POST "$C/$NAME/search" '{"mode":"vector","query_vector":[1,0,0],"k":2}'
expect_status 200 "vector search"
check "nearest first" '[.hits[].id] == ["a","c"] and .hits[0].distance < 0.001 and .hits[0].ranks.vector == 1'

req POST "$C/$NAME/search" '{"mode":"vector","query_vector":[1,0,0],"k":2,"filter":{"metadata":{"team":"blue"}}}'
check "filtered vector search" '[.hits[].id] == ["c","b"]'

req POST "$C/$NAME/search" '{"mode":"keyword","query_text":"err-40213"}'
check "keyword finds the identifier" '[.hits[].id] == ["b"]'

req POST "$C/$NAME/search" '{"mode":"keyword","query_text":"   "}'
check "blank keyword query: no hits" '.hits == []'

req POST "$C/$NAME/items" '{"items":[{"id":"x","vector":[1,2],"text":"t"}]}'
expect_status 400 "wrong dimension refused"
check "error names the field" '.error.field == "items[0].vector" and .error.code == "invalid_argument"'

req POST "$C/$NAME/items" '{"model":"other-model","items":[{"id":"x","vector":[1,2,3],"text":"t"}]}'
expect_status 409 "other model refused"
check "model_mismatch code" '.error.code == "model_mismatch"'

req GET "$C/$NAME/items/b"
expect_status 200 "get item"
check "item has content_hash" '.id == "b" and (.content_hash | length) == 64'

req GET "$C/$NAME/ids?limit=2"
check "ids page" '[.items[].id] == ["a","b"] and .next_after == "b"'

req POST "$C/$NAME/items/delete" '{"ids":["a","zzz"]}'
check "delete one item" '.deleted == 1'

req GET "$C/$NAME"
check "count after delete" '.count == 2'

req DELETE "$C/$NAME"
expect_status 200 "delete corpus"
req GET "$C/$NAME"
expect_status 404 "deleted corpus is gone"

smoke_done vectors_smoke
