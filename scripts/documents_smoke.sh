#!/usr/bin/env bash
# Documents with curl alone: add a document of about 1,000 words as text (the service
# chunks and embeds it), read it by its id, search it, add it again (nothing rewritten),
# change it (its stale chunks go), delete it, and read its tasks. Uses $LAKEHOUSE_URL when
# set (searching through matrixd, as a user does); else starts embedd and vectord on free
# loopback ports (embedded PostgreSQL in a temp dir) and searches vectord's lexical layer.
source "$(dirname "$0")/smoke_lib.sh"

if [ -n "${LAKEHOUSE_URL:-}" ]; then
  BASE=$LAKEHOUSE_URL
  SEARCH=/v1/matrix/search
else
  EPORT=$(free_port)
  VPORT=$(free_port)
  start_daemon embedd LAKEHOUSE_EMBEDD_PORT="$EPORT"
  start_daemon vectord LAKEHOUSE_VECTORD_PORT="$VPORT" \
    LAKEHOUSE_VECTORD_EMBEDD_URL="http://127.0.0.1:$EPORT" \
    LAKEHOUSE_VECTORD_DATA_DIR="${LAKEHOUSE_VECTORD_DATA_DIR:-$SMOKE_TMP/pg}"
  BASE="http://127.0.0.1:$VPORT"
  wait_http "http://127.0.0.1:$EPORT/readyz" 180
  wait_http "$BASE/readyz" 120
  SEARCH=""
fi

C="smoke_docs_$$_$(date +%s)"
D="/v1/corpora/$C/documents"
# About 1,000 words in four sections: the manual of a small harbour.
words="harbour pilot ferry lagoon tide anchor rope sail keel mast deck hull cargo crane"
body=""
for part in 1 2 3 4; do
  text=""
  for _ in $(seq 1 18); do text="$text $words"; done
  body="$body\n\n## Part $part\n\n$text and the lighthouse of part $part."
done
DOC="{\"documents\":[{\"id\":\"manual\",\"title\":\"Harbour manual\",\"text\":\"# Harbour manual$body\",\"tags\":[\"ops\"]}]}"

req POST "$D?wait=true" "$DOC"
expect_status 200 "add a document as text (waited for its task)"
check "its task succeeded: 1 added, its sections embedded" \
  '.state == "succeeded" and .counts.added == 1 and .counts.embedded == 4 and .counts.failed == 0'
TASK=$(printf '%s' "$BODY" | jq -r .id)

req GET "$D/manual"
expect_status 200 "read it by the id it was given"
check "its chunks, its text, its title" \
  '.chunks == ["manual#0","manual#1","manual#2","manual#3"] and .title == "Harbour manual" and (.text | test("lighthouse of part 3"))'

if [ -n "$SEARCH" ]; then
  req POST "$SEARCH" "{\"query_text\":\"lighthouse of part 3\",\"corpora\":[\"$C\"],\"k\":3}"
else
  req POST "/v1/vectors/corpora/$C/search" '{"query_text":"lighthouse of part 3","mode":"lexical","k":3}'
fi
expect_status 200 "search it"
check "hits are its chunks, with the document's id" \
  '(.hits | length) > 0 and all(.hits[]; .document_id == "manual") and .hits[0].id == "manual#2"'

req POST "$D?wait=true" "$DOC"
check "added again: unchanged, nothing embedded" \
  '.state == "succeeded" and .counts.unchanged == 1 and .counts.embedded == 0'

req POST "$D?wait=true" '{"documents":[{"id":"manual","title":"Harbour manual","text":"# Harbour manual\n\nOne short section now."}]}'
check "changed: updated, its three stale chunks removed" \
  '.counts.updated == 1 and .counts.stale == 3'
req GET "/v1/vectors/corpora/$C/ids"
check "one chunk left" '[.items[].id] == ["manual#0"]'

req GET "/v1/vectors/corpora/$C/items/manual"
expect_status 404 "a document's id is not an item's"
check "the 404 names its chunks" '.error.field == "id" and (.error.message | test("is a document of 1 chunk: manual#0"))'

req DELETE "$D/manual?wait=true"
expect_status 200 "delete it by its id"
check "deleted with its chunk" '.state == "succeeded" and .counts.deleted == 1 and .counts.stale == 1'
req GET "$D/manual"
expect_status 404 "it is gone"

req GET "/v1/tasks?corpus=$C"
expect_status 200 "list the corpus's tasks"
check "four tasks, newest first, the first one last" \
  "[.tasks[].state] == [\"succeeded\",\"succeeded\",\"succeeded\",\"succeeded\"] and .tasks[-1].id == $TASK"

req POST "$D" '{"documents":[{"id":"x"}]}'
expect_status 400 "a document with nothing to store is refused"
check "naming the field" '.error.field == "documents[0].text"'

req DELETE "/v1/vectors/corpora/$C"
expect_status 200 "delete the corpus"

smoke_done documents_smoke
