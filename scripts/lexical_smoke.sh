#!/usr/bin/env bash
# Lexical (BM25) and hybrid search smoke (RRF asked for explicitly: the default fusion is
# "weighted" since issue 8): English and German stemming, a simple
# corpus that does not stem, hybrid fusion with per-branch ranks, bad language, delete.
# Uses $LAKEHOUSE_URL when set; else starts vectord on a free loopback port (embedded
# PostgreSQL in a temp dir, or $LAKEHOUSE_PG_DSN when set).
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
NAME="smoke_lex_$$_$(date +%s)"
PLAIN="${NAME}_simple"

req POST "$C" "{\"name\":\"$NAME\",\"dim\":3,\"language\":\"en\"}"
expect_status 201 "create English corpus"

req POST "$C/$NAME/items" '{"items":[
 {"id":"pension","vector":[1,0,0],"title":"Retirement","text":"Planning your retirement with pensions and savings."},
 {"id":"garden","vector":[0,1,0],"text":"Growing tomatoes in a small garden.","tags":["outdoor"]},
 {"id":"both","vector":[0.9,0.2,0],"text":"Saving for retirement while gardening."},
 {"id":"haus","vector":[0,0,1],"text":"Die alten Häuser am Fluss und ihre Bücher","language":"de"}]}'
expect_status 200 "upsert four items"

req POST "$C/$NAME/search" '{"mode":"lexical","query_text":"retiring","k":5}'
expect_status 200 "lexical search"
check "retiring finds retirement" '[.hits[].id] | sort == ["both","pension"]'
check "BM25 score and lexical rank reported" '.hits[0].score > 0 and .hits[0].ranks.lexical == 1 and .hits[0].ranks.vector == null and .hits[0].distance == null'
check "title weighs in: the titled item first" '.hits[0].id == "pension"'

req POST "$C/$NAME/search" '{"mode":"lexical","query_text":"Haus Buch","language":"de"}'
check "German stems match a German item" '[.hits[].id] == ["haus"] and .hits[0].language == "german"'

req POST "$C/$NAME/search" '{"mode":"lexical","query_text":"outdoor"}'
check "tags are searched" '[.hits[].id] == ["garden"]'

# (a question no title is made of: a title made of the question's words is lifted above the
# fused scores, exact names first: docs/decisions/0220-exact-names-first.md)
req POST "$C/$NAME/search" '{"mode":"hybrid","query_text":"pensions and savings","query_vector":[0,1,0],"k":4,"candidates":4,"fusion":"rrf","rrf_k":60}'
expect_status 200 "hybrid search"
check "hits carry both branches" '(.hits | map(select(.ranks.vector != null and .ranks.lexical != null)) | length) >= 1'
check "fused score is RRF (k=60)" '.hits[0] as $h | (($h.score - ((if $h.ranks.vector then 1/(60+$h.ranks.vector) else 0 end) + (if $h.ranks.lexical then 1/(60+$h.ranks.lexical) else 0 end))) | fabs) < 1e-9'
check "hit in both branches outranks single-branch hits" '.hits[0].id == "both"'

req POST "$C/$NAME/search" '{"mode":"hybrid","query_text":"zeppelin","query_vector":[1,0,0],"k":3}'
check "empty lexical branch: vector order" '[.hits[].id] == ["pension","both","garden"] and all(.hits[]; .ranks.lexical == null)'

req POST "$C/$NAME/search" '{"mode":"lexical","query_text":"x","language":"xx"}'
expect_status 400 "unknown language refused"
check "error names the field" '.error.field == "language"'

req POST "$C" "{\"name\":\"$PLAIN\",\"dim\":3,\"language\":\"simple\"}"
expect_status 201 "create simple corpus"
req POST "$C/$PLAIN/items" '{"items":[{"id":"haus","vector":[0,0,1],"text":"Die alten Häuser am Fluss und ihre Bücher"}]}'
expect_status 200 "upsert into simple corpus"
req POST "$C/$PLAIN/search" '{"mode":"lexical","query_text":"Haus Buch","language":"de"}'
check "simple corpus does not stem" '.hits == []'

req DELETE "$C/$NAME"
expect_status 200 "delete corpus"
req DELETE "$C/$PLAIN"
expect_status 200 "delete simple corpus"

smoke_done lexical_smoke
