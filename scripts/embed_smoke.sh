#!/usr/bin/env bash
# embedd smoke: models list, embed (order, norm, dim, truncation, cache), bad input.
# Uses $LAKEHOUSE_URL when set (the gateway); else starts embedd on a free loopback port
# with the local model.
source "$(dirname "$0")/smoke_lib.sh"

if [ -n "${LAKEHOUSE_URL:-}" ]; then
  BASE=$LAKEHOUSE_URL
else
  PORT=$(free_port)
  start_daemon embedd LAKEHOUSE_EMBEDD_PORT="$PORT"
  BASE="http://127.0.0.1:$PORT"
  wait_http "$BASE/readyz" 120
fi

req GET /v1/embed/models
expect_status 200 "models list"
check "default model is listed with a dimension" \
  '.default as $d | any(.models[]; .id == $d and (.dim | type) == "number" and .dim > 0)'
DIM=$(printf '%s' "$BODY" | jq -r '.default as $d | .models[] | select(.id == $d) | .dim')

STAMP="$$-$(date +%s)"
req POST /v1/embed "{\"texts\":[\"How do I reset my password? $STAMP\",\"I forgot my password and must change it. $STAMP\",\"Tomatoes grow best in full sun. $STAMP\"],\"input_type\":\"query\"}"
expect_status 200 "embed three texts"
check "one vector per text, of the model's dimension" \
  ".dim == $DIM and (.vectors | length) == 3 and all(.vectors[]; length == $DIM)"
check "every vector has norm 1" \
  'all(.vectors[]; (map(. * .) | add | sqrt) as $n | $n > 0.999 and $n < 1.001)'
check "the paraphrase is nearer than the unrelated text" \
  '.vectors as $v | ([$v[0], $v[1]] | transpose | map(.[0] * .[1]) | add) > ([$v[0], $v[2]] | transpose | map(.[0] * .[1]) | add)'
check "nothing truncated" '.truncated == []'
FIRST=$(printf '%s' "$BODY" | jq -c '.vectors[0]')

req POST /v1/embed "{\"texts\":[\"Tomatoes grow best in full sun. $STAMP\",\"How do I reset my password? $STAMP\"],\"input_type\":\"query\"}"
expect_status 200 "embed again, other order"
check "a repeated text returns the identical vector, in request order" ".vectors[1] == $FIRST"

LONG=$(printf 'word %.0s' $(seq 1 700))
req POST /v1/embed "{\"texts\":[\"short $STAMP\",\"$LONG $STAMP\"]}"
expect_status 200 "an over-long text is embedded"
check "and reported as truncated" '.truncated == [1]'

req POST /v1/embed '{"texts":["fine","   "]}'
expect_status 400 "a blank text is rejected"
check "naming its index" '.error.field == "texts[1]" and .error.code == "invalid_argument"'

req POST /v1/embed '{"texts":["x"],"model":"no-such-model"}'
expect_status 400 "an unknown model is rejected"
check "listing the known ones" '.error.field == "model" and (.error.message | contains("known"))'

MANY=$(jq -cn '{texts: [range(0; 10000) | "t\(.)"]}')
req POST /v1/embed "$MANY"
expect_status 413 "too many texts"
check "with the one error shape" '.error.code == "payload_too_large" and (.request_id | length) > 0'

smoke_done embed
