#!/usr/bin/env bash
# Query intelligence through the gateway: analyze, normalize, smart_search, search_auto,
# each of their bad inputs, and the CLI commands on top (analyze, ask, search --auto,
# ingest --normalize).
source "$(dirname "$0")/smoke_lib.sh"
source "$(dirname "$0")/matrix_stack.sh"
matrix_stack_up
if [ -z "${LAKEHOUSE_URL:-}" ]; then  # alone: put a gateway in front, as `lakehouse up` does
  gport=$(free_port)
  start_daemon gateway LAKEHOUSE_GATEWAY_PORT="$gport" LAKEHOUSE_GATEWAY_MATRIXD="$BASE" \
    LAKEHOUSE_GATEWAY_VECTORD="$VBASE" LAKEHOUSE_GATEWAY_EMBEDD="$EBASE"
  BASE="http://127.0.0.1:$gport"
  wait_http "$BASE/healthz" 60
fi
LH=("$ROOT/.venv/bin/lakehouse")

SUFFIX="$$_$(date +%s)"
C="smoke_talk_$SUFFIX"
make_corpus "$C" '["Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
  "Melanie: I ran a charity race for mental health last Saturday.",
  "Caroline: I am researching adoption agencies to give a kid a home.",
  "Melanie: My kids and I went camping at the national park.",
  "Melanie: Pottery is how I relax, besides painting sunsets.",
  "Caroline: The setting max_batch_size broke the importer."]' \
  '[{"speaker":"Caroline","date":"2023-05-08"},{"speaker":"Melanie","date":"2023-05-08"},
    {"speaker":"Caroline","date":"2023-05-25"},{"speaker":"Melanie","date":"2023-05-25"},
    {"speaker":"Melanie","date":"2023-05-25"},{"speaker":"Caroline","date":"2023-05-25"}]'

# ---- analyze
req POST /v1/matrix/analyze '{"query_text": "What did Melanie do last week in Paris?", "now": "2023-05-08T12:00:00Z"}'
expect_status 200 "analyze"
check "persons and locations" '.persons == ["Melanie"] and .locations == ["Paris"]'
check "last week resolved against now" '.temporal_range == {"start": "2023-05-01", "end": "2023-05-08", "relative": "last week"}'
check "type, complexity, confidence, sub-queries" '(.question_type | type) == "string" and (.complexity | IN("low","medium","high")) and .confidence > 0 and (.sub_queries | length) >= 1'
req POST /v1/matrix/analyze '{"query_text": "Where did Jon move from and what did he study in Paris?"}'
check "a multi-hop question splits in two" '.question_type == "multi-hop" and (.sub_queries | length) == 2'
req POST /v1/matrix/analyze '{"query_text": "What did we discuss before the wedding?"}'
check "an event that is no date gives no range" '.temporal_range == null'
req POST /v1/matrix/analyze '{"query_text": "   "}'
expect_status 400 "analyze: blank query_text -> 400"
check "400 names query_text" '.error.field == "query_text"'
req POST /v1/matrix/analyze '{"query_text": "When?", "now": "next tuesday"}'
expect_status 400 "analyze: unparseable now -> 400"
check "400 names now" '.error.field == "now"'

# ---- normalize
req POST /v1/matrix/normalize '{"observations": [{"text": "I went to a LGBTQ support group yesterday", "speaker": "Caroline", "reference_time": "2023-05-08T13:56:00"}]}'
expect_status 200 "normalize"
check "the LoCoMo example" '.observations[0].text == "Caroline went to a LGBTQ support group on 7 May 2023"'
check "original kept, keywords, both resolutions" '.observations[0].original == "I went to a LGBTQ support group yesterday" and (.observations[0].keywords | length) > 0 and ([.observations[0].resolved[].kind] | sort) == ["coreference", "temporal"]'
req POST /v1/matrix/normalize "$(jq -nc '{observations: [range(1001) | {text: "hi"}]}')"
expect_status 413 "normalize: 1,001 observations -> 413"
check "413 names observations" '.error.field == "observations"'
req POST /v1/matrix/normalize "$(jq -nc '{observations: [{text: "ok"}, {text: ("x" * 20001)}]}')"
expect_status 413 "normalize: a text over the limit -> 413"
check "413 names its index" '.error.field == "observations[1].text"'
req POST /v1/matrix/normalize '{"observations": [{"text": "ok", "reference_time": "soonish"}]}'
expect_status 400 "normalize: unparseable reference_time -> 400"
check "400 names it" '.error.field == "observations[0].reference_time"'

# ---- smart_search
Q='What does Melanie do with her kids and what does she do to relax?'
req POST /v1/matrix/smart_search "$(jq -nc --arg q "$Q" --arg c "$C" '{query_text: $q, corpora: [$c], k: 4}')"
expect_status 200 "smart_search"
check "hits with plan and iterations" '(.hits | length) == 4 and (.plan.sub_queries | length) >= 2 and (.iterations | length) >= 1'
check "the camping and pottery turns found" '([.hits[].id] | index("d3") != null) and ([.hits[].id] | index("d4") != null)'
check "each sub-query has a layer and filters" 'all(.plan.sub_queries[]; (.layer | IN("hybrid","lexical","vector")) and has("filters"))'
check "the last iteration says why it stopped" '.iterations[-1].stopped | IN("adequate","max_iterations","no_new_queries")'
req POST /v1/matrix/smart_search "$(jq -nc --arg c "$C" '{query_text: "Where did Caroline move from?", corpora: [$c], max_iterations: 2, min_confidence: 1}')"
check "an unreachable bar stops at max_iterations" '(.iterations | length) <= 2 and (.stopped | IN("max_iterations","no_new_queries"))'
for mi in 0 11; do
  req POST /v1/matrix/smart_search "$(jq -nc --arg c "$C" --argjson m $mi '{query_text: "x?", corpora: [$c], max_iterations: $m}')"
  expect_status 400 "smart_search: max_iterations $mi -> 400"
  check "400 names max_iterations" '.error.field == "max_iterations"'
done
req POST /v1/matrix/smart_search "$(jq -nc --arg c "$C" '{query_text: "", corpora: [$c]}')"
expect_status 400 "smart_search: empty query_text -> 400"
check "400 names query_text" '.error.field == "query_text"'
req POST /v1/matrix/smart_search "$(jq -nc --arg c "$C" '{query_text: "x?", corpora: [$c], now: "2023-02-30"}')"
expect_status 400 "smart_search: unparseable now -> 400"
check "400 names now" '.error.field == "now"'

# ---- search_auto
req POST /v1/matrix/search_auto "$(jq -nc --arg c "$C" '{query_text: "max_batch_size", corpora: [$c]}')"
expect_status 200 "search_auto"
check "an identifier is a keyword search" '.strategy == "keyword" and .hits[0].id == "d5"'
check "reason, estimate and time" '(.reason | length) > 0 and .estimated_ms > 0 and .took_ms > 0'
req POST /v1/matrix/search_auto "$(jq -nc --arg c "$C" '{query_text: "When did Caroline go to the support group?", corpora: [$c]}')"
check "a temporal question is a smart search" '.strategy == "smart" and .hits[0].id == "d0"'
req POST /v1/matrix/search_auto "$(jq -nc --arg c "$C" '{query_text: "When did Caroline go to the support group?", corpora: [$c], budget_ms: 0.001}')"
check "a tiny budget picks a cheaper strategy" '.strategy != "smart" and (.reason | contains("budget"))'
for b in 0 -1; do
  req POST /v1/matrix/search_auto "$(jq -nc --arg c "$C" --argjson b $b '{query_text: "x", corpora: [$c], budget_ms: $b}')"
  expect_status 400 "search_auto: budget_ms $b -> 400"
  check "400 names budget_ms" '.error.field == "budget_ms"'
done
req POST /v1/matrix/search_auto "$(jq -nc --arg c "$C" '{query_text: " ", corpora: [$c]}')"
expect_status 400 "search_auto: blank query_text -> 400"
check "400 names query_text" '.error.field == "query_text"'

# ---- the gateway documents the four routes
req GET /openapi.json
check "openapi has the four routes" '[.paths["/v1/matrix/analyze","/v1/matrix/normalize","/v1/matrix/smart_search","/v1/matrix/search_auto"].post.requestBody != null] == [true,true,true,true]'

# ---- CLI
out=$("${LH[@]}" analyze "Where did Jon move from and what did he study in Paris?" --url "$BASE")
grep -q "question type   multi-hop" <<<"$out" && grep -q "Paris (location)" <<<"$out" \
  && { PASSES=$((PASSES + 1)); echo "ok   lakehouse analyze"; } || { echo "FAIL lakehouse analyze: $out" >&2; exit 1; }
out=$("${LH[@]}" ask "$Q" --corpora "$C" --k 3 --url "$BASE")
grep -q "^plan (" <<<"$out" && grep -q "^iterations" <<<"$out" && grep -q "$C" <<<"$out" \
  && { PASSES=$((PASSES + 1)); echo "ok   lakehouse ask prints hits, plan and iterations"; } || { echo "FAIL lakehouse ask: $out" >&2; exit 1; }
out=$("${LH[@]}" search "max_batch_size" --auto --corpora "$C" --url "$BASE")
grep -q "strategy keyword" <<<"$out" && grep -q "d5" <<<"$out" \
  && { PASSES=$((PASSES + 1)); echo "ok   lakehouse search --auto"; } || { echo "FAIL lakehouse search --auto: $out" >&2; exit 1; }
N="smoke_norm_$SUFFIX"
printf '%s\n' '{"_id": "t1", "text": "I went to a LGBTQ support group yesterday", "metadata": {"speaker": "Caroline", "date": "2023-05-08"}}' >"$SMOKE_TMP/talk.jsonl"
"${LH[@]}" ingest "$SMOKE_TMP/talk.jsonl" --corpus "$N" --normalize --quiet --url "$BASE" >/dev/null
at "$VBASE" GET "/v1/vectors/corpora/$N/items/t1%230"
check "ingest --normalize stores the normalised text" '.text == "Caroline went to a LGBTQ support group on 7 May 2023" and .metadata.original == "I went to a LGBTQ support group yesterday" and .metadata.dates == ["2023-05-07"]'
out=$("${LH[@]}" ingest "$SMOKE_TMP/talk.jsonl" --corpus "$N" --normalize --quiet --url "$BASE")
grep -q "1 unchanged" <<<"$out" \
  && { PASSES=$((PASSES + 1)); echo "ok   ingest --normalize rerun skips what is stored"; } || { echo "FAIL rerun: $out" >&2; exit 1; }

W="smoke_ctx_$SUFFIX"
{
  printf '%s\n' '{"_id": "s1", "text": "What kind of yoga is it?", "metadata": {"speaker": "Maria", "date": "2023-05-08", "session": 1}}'
  printf '%s\n' '{"_id": "s2", "text": "A beginner class: poses and breathing.", "metadata": {"speaker": "John", "date": "2023-05-08", "session": 1}}'
  printf '%s\n' '{"_id": "s3", "text": "New session, new topic.", "metadata": {"speaker": "John", "date": "2023-06-01", "session": 2}}'
} >"$SMOKE_TMP/ctx.jsonl"
"${LH[@]}" ingest "$SMOKE_TMP/ctx.jsonl" --corpus "$W" --normalize --quiet --url "$BASE" >/dev/null
at "$VBASE" GET "/v1/vectors/corpora/$W/items/s2%230"
check "ingest --normalize indexes a turn with the turns around it in its session" '.text == "A beginner class: poses and breathing.\nWhat kind of yoga is it?" and .metadata.original == "A beginner class: poses and breathing." and .metadata.context_window == "2:1"'
at "$VBASE" GET "/v1/vectors/corpora/$W/items/s3%230"
check "ingest --normalize: no context from another session" '.text == "New session, new topic."'
"${LH[@]}" ingest "$SMOKE_TMP/ctx.jsonl" --corpus "$W" --normalize --context 0:0 --quiet --url "$BASE" >/dev/null
at "$VBASE" GET "/v1/vectors/corpora/$W/items/s2%230"
check "ingest --normalize --context 0:0 indexes the turn alone" '.text == "A beginner class: poses and breathing."'

drop_corpus "$C"; drop_corpus "$N"; drop_corpus "$W"
smoke_done smart_smoke
