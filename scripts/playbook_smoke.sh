#!/usr/bin/env bash
# matrixd's playbook loop: a recorded answer (score 1.0) halves its distance and moves up.
source "$(dirname "$0")/smoke_lib.sh"
source "$(dirname "$0")/matrix_stack.sh"
matrix_stack_up

SUFFIX="$$_$(date +%s)"
C="smoke_pb_docs_$SUFFIX"; PB="smoke_pb_memory_$SUFFIX"
make_corpus "$C" '["Cats are small domesticated felines kept as pets.",
  "Dogs are loyal companions descended from wolves.",
  "Parrots can imitate human speech and live for decades.",
  "Goldfish are a common first pet.",
  "Hamsters are small rodents that run on wheels at night.",
  "The Moon orbits the Earth every 27 days."]'

Q='which pet can learn to talk'
SEARCH=$(jq -nc --arg q "$Q" --arg c "$C" --arg pb "$PB" '{query_text: $q, mode: "vector", corpora: [$c], k: 6, playbook_corpus: $pb}')
req POST /v1/matrix/search "$SEARCH"
expect_status 200 "baseline search"
TARGET=$(printf '%s' "$BODY" | jq -r '.hits[2].id')
BASE_RANK=3
BASE_D=$(printf '%s' "$BODY" | jq '.hits[2].distance')
check "target ranks below the top at baseline" ".hits[2].id == \"$TARGET\" and .hits[0].id != \"$TARGET\""

req POST /v1/matrix/playbooks/record "$(jq -nc --arg q "$Q" --arg id "$TARGET" --arg c "$C" --arg pb "$PB" '{query_text: $q, answer_id: $id, answer_corpus: $c, score: 1.0, tags: ["smoke"], playbook_corpus: $pb}')"
expect_status 200 "record the target with score 1.0"
check "record returns a sha256 playbook_id" '(.playbook_id | test("^[0-9a-f]{64}$"))'

req POST /v1/matrix/search "$(printf '%s' "$SEARCH" | jq -c '. + {use_playbook: true}')"
expect_status 200 "search with use_playbook"
check "playbook_boosted = 1" '.playbook_boosted == 1'
check "boosted distance is exactly 0.5x the baseline" "[.hits[] | select(.id == \"$TARGET\")][0] | (.distance == ($BASE_D * 0.5) and .original_distance == $BASE_D and .boost_factor == 0.5)"
check "the target moves up" "([.hits[].id] | index(\"$TARGET\")) + 1 < $BASE_RANK"
check "distances still ascend" "[.hits[].distance] as \$d | \$d == (\$d | sort)"

req POST /v1/matrix/playbooks/record "$(jq -nc --arg q "$Q" --arg id "$TARGET" --arg c "$C" '{query_text: $q, answer_id: $id, answer_corpus: $c, score: 1.5}')"
expect_status 400 "score outside [0, 1] -> 400"
check "400 names score" '.error.field == "score"'

drop_corpus "$C"; drop_corpus "$PB"
smoke_done playbook_smoke
