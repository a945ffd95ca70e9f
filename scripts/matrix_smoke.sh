#!/usr/bin/env bash
# matrixd: corpora listing, fan-out search with attribution, and its errors.
source "$(dirname "$0")/smoke_lib.sh"
source "$(dirname "$0")/matrix_stack.sh"
matrix_stack_up

SUFFIX="$$_$(date +%s)"
A="smoke_animals_$SUFFIX"; B="smoke_space_$SUFFIX"
make_corpus "$A" '["Cats are small domesticated felines kept as pets.",
  "Dogs are loyal companions descended from wolves.",
  "The elephant is the largest land animal.",
  "Parrots can imitate human speech."]' \
  '[{"n":0,"kind":"cat","nested":{"a":[1,"x",null]}},{"n":1},{"n":2},{"n":3,"unicode":"ünï"}]'
make_corpus "$B" '["The Moon orbits the Earth every 27 days.",
  "Jupiter is the largest planet in the Solar System.",
  "Black holes bend light with their gravity."]'

req GET /v1/matrix/corpora
expect_status 200 "corpora listed"
check "both corpora listed with counts" "([.corpora[] | select(.name == \"$A\") | .count] == [4]) and ([.corpora[] | select(.name == \"$B\") | .count] == [3])"
check "corpora carry dim and model" "[.corpora[] | select(.name == \"$A\")][0] | (.dim == 384 and (.model | type) == \"string\")"

Q='pets that live with people and the moon in the sky'
req POST /v1/matrix/search "$(jq -nc --arg q "$Q" --arg a "$A" --arg b "$B" '{query_text: $q, mode: "vector", corpora: [$a, $b], k: 10}')"
expect_status 200 "search across two corpora"
ALL=$BODY
check "hits from both corpora" "([.hits[].corpus] | unique | sort) == ([\"$A\", \"$B\"] | sort)"
check "distances ascend" "[.hits[].distance] as \$d | \$d == (\$d | sort)"
check "per-corpus hit counts and ms" "[.corpora[] | .hits] == [4, 3] and all(.corpora[]; .ms >= 0)"
check "metadata round-trips unchanged" "[.hits[] | select(.corpus == \"$A\" and .id == \"d0\")][0].metadata == {\"n\":0,\"kind\":\"cat\",\"nested\":{\"a\":[1,\"x\",null]}}"
check "unicode metadata round-trips" "[.hits[] | select(.corpus == \"$A\" and .id == \"d3\")][0].metadata.unicode == \"ünï\""

req POST /v1/matrix/search "$(jq -nc --arg q "$Q" --arg a "$A" '{query_text: $q, mode: "vector", corpora: [$a], k: 1}')"
DA=$(printf '%s' "$BODY" | jq '.hits[0].distance')
req POST /v1/matrix/search "$(jq -nc --arg q "$Q" --arg b "$B" '{query_text: $q, mode: "vector", corpora: [$b], k: 1}')"
DB=$(printf '%s' "$BODY" | jq '.hits[0].distance')
BODY=$ALL
check "global top hit is the closest across corpora" ".hits[0].distance == ([$DA, $DB] | min)"

# No corpora field: every corpus (but playbooks), ranked as one corpus holding them all.
req POST /v1/matrix/search "$(jq -nc '{query_text: "Which planet is the largest in the Solar System?", k: 5}')"
expect_status 200 "search over all corpora"
check "the on-topic corpus's hit ranks first" ".hits[0].corpus == \"$B\" and .hits[0].id == \"d1\""
check "every corpus searched is listed" "([.corpora[].corpus] | index(\"$A\")) != null and ([.corpora[].corpus] | index(\"$B\")) != null"
req POST /v1/matrix/search "$(jq -nc --arg a "$A" --arg b "$B" '{query_text: "largest", mode: "lexical", corpora: [$a, $b], corpus_weights: {($a): 0}}')"
expect_status 400 "corpus weight 0 -> 400"
check "400 names the weight" ".error.field == \"corpus_weights.$A\""

req POST /v1/matrix/search "$(jq -nc --arg a "$A" '{query_text: "pets", corpora: [], mode: "vector"}')"
expect_status 400 "empty corpora -> 400"
check "400 names corpora" '.error.field == "corpora"'
req POST /v1/matrix/search "$(jq -nc --arg a "$A" --arg m "smoke_missing_$SUFFIX" '{query_text: "pets", mode: "vector", corpora: [$a, $m]}')"
expect_status 404 "missing corpus -> 404"
check "404 corpus_not_found names the missing corpus" ".error.code == \"corpus_not_found\" and (.error.message | contains(\"smoke_missing_$SUFFIX\"))"
req POST /v1/matrix/search "$(jq -nc --arg a "$A" --arg m "smoke_missing_$SUFFIX" '{query_text: "pets", mode: "vector", corpora: [$a, $m], allow_partial: true}')"
expect_status 200 "allow_partial answers"
check "failed_corpora names it" ".failed_corpora[0].corpus == \"smoke_missing_$SUFFIX\" and all(.hits[]; .corpus == \"$A\")"
req POST /v1/matrix/search "$(jq -nc --arg a "$A" '{corpora: [$a]}')"
expect_status 400 "no query -> 400"
check "400 names query_text" '.error.field == "query_text"'

drop_corpus "$A"; drop_corpus "$B"
smoke_done matrix_smoke
