#!/usr/bin/env bash
# matrixd's playbook loop: a recorded answer (score 1.0) halves its distance and moves up;
# a wrong mark (score -1) multiplies it by 1.5; entries are listed and deleted; an answer
# retrieval misses is found once recorded (issue 16).
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
BASELINE=$BODY
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
expect_status 400 "score outside [-1, 1] -> 400"
check "400 names score" '.error.field == "score"'

# ---- issue 16: wrong marks, housekeeping, recall of answers retrieval misses ----------------
ORDER=$(printf '%s' "$BASELINE" | jq -c '[.hits[].id]')
TOP=$(printf '%s' "$BASELINE" | jq -r '.hits[0].id')
TOP_D=$(printf '%s' "$BASELINE" | jq '.hits[0].distance')
PB2="smoke_pb_wrong_$SUFFIX"
WRONG=$(printf '%s' "$SEARCH" | jq -c --arg pb "$PB2" '. + {use_playbook: true, playbook_corpus: $pb}')
req POST /v1/matrix/playbooks/record "$(jq -nc --arg q "$Q" --arg id "$TOP" --arg c "$C" --arg pb "$PB2" '{query_text: $q, answer_id: $id, answer_corpus: $c, score: -1, playbook_corpus: $pb}')"
expect_status 200 "record the top hit as wrong (score -1)"
PID=$(printf '%s' "$BODY" | jq -r '.playbook_id')
req POST /v1/matrix/search "$WRONG"
expect_status 200 "search after the wrong mark"
check "the wrong hit drops" "([.hits[].id] | index(\"$TOP\")) > 0"
check "its distance is exactly 1.5x" "[.hits[] | select(.id == \"$TOP\")][0] | (.distance == ($TOP_D * 1.5) and .boost_factor == 1.5)"
req GET "/v1/matrix/playbooks?playbook_corpus=$PB2&answer_id=$TOP&answer_corpus=$C"
expect_status 200 "list the playbook entries for that answer"
check "the entry is listed with score -1" "[.entries[] | {playbook_id, score}] == [{playbook_id: \"$PID\", score: -1}]"
req DELETE "/v1/matrix/playbooks/$PID?playbook_corpus=$PB2"
expect_status 200 "delete the entry"
req POST /v1/matrix/search "$WRONG"
expect_status 200 "search after the delete"
check "order restored" "[.hits[].id] == $ORDER"
req DELETE "/v1/matrix/playbooks/$PID?playbook_corpus=$PB2"
expect_status 404 "deleting it again -> 404"
check "404 names playbook_id" '.error.field == "playbook_id"'
req POST /v1/matrix/playbooks/record "$(jq -nc --arg q "$Q" --arg c "$C" '{query_text: $q, answer_id: "no-such-doc", answer_corpus: $c, score: 1}')"
expect_status 404 "recording an answer that does not exist -> 404"
check "404 names answer_id" '.error.field == "answer_id"'

# An answer outside the top 2 whose halved distance beats the second: found once recorded.
PB3="smoke_pb_recall_$SUFFIX"
MISSING=$(printf '%s' "$BASELINE" | jq -r '.hits[1].distance as $d2 | [.hits[2:][] | select(.distance * 0.5 < $d2)][0].id')
NARROW=$(printf '%s' "$SEARCH" | jq -c --arg pb "$PB3" '. + {k: 2, use_playbook: true, playbook_corpus: $pb}')
req POST /v1/matrix/search "$NARROW"
check "the answer is not among the top 2 before recording" "\"$MISSING\" != \"null\" and ([.hits[].id] | index(\"$MISSING\")) == null"
req POST /v1/matrix/playbooks/record "$(jq -nc --arg q "$Q" --arg id "$MISSING" --arg c "$C" --arg pb "$PB3" '{query_text: $q, answer_id: $id, answer_corpus: $c, score: 1, playbook_corpus: $pb}')"
expect_status 200 "record the missed answer"
req POST /v1/matrix/search "$NARROW"
expect_status 200 "search the top 2 with use_playbook"
check "the missed answer is found, from_playbook" "[.hits[] | select(.id == \"$MISSING\")][0].from_playbook == true"

drop_corpus "$C"; drop_corpus "$PB"; drop_corpus "$PB2"; drop_corpus "$PB3"
smoke_done playbook_smoke
