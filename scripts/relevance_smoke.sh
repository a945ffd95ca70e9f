#!/usr/bin/env bash
# matrixd's relevance filter: the adjacency-pollution case, bad input, the threshold.
source "$(dirname "$0")/smoke_lib.sh"
source "$(dirname "$0")/matrix_stack.sh"
matrix_stack_up matrixd-only

FOCUS='{"path": "src/net/connector.rs",
  "text": "use crate::registry::Registry;\npub struct Connector { registry: Registry }\nimpl Connector { pub fn dial(&self) {} }\n"}'
CHUNKS='[
  {"source": "src/net/dialer.rs", "text": "let c = Connector::new(); c.dial();"},
  {"source": "src/registry.rs", "text": "pub struct Registry { entries: Vec<Entry> }"},
  {"doc_id": "weather-1", "text": "Rain is expected tomorrow afternoon."}]'

req POST /v1/matrix/relevance "$(jq -nc --argjson f "$FOCUS" --argjson c "$CHUNKS" '{focus: $f, chunks: $c}')"
expect_status 200 "relevance answers"
check "symbols extracted from the Rust focus" '.focus.defined_symbols == ["Connector", "dial"] and .focus.imported_symbols == ["Registry"]'
check "Connector chunk kept with a positive score" '[.kept[] | select(.index == 0)][0].score > 0 and ([.kept[].index] == [0])'
check "Registry chunk dropped with a negative score" '[.dropped[] | select(.index == 1)][0] | (.score < 0 and .signals.import_penalty == -0.5)'
check "unrelated chunk dropped at 0" '[.dropped[] | select(.index == 2)][0].score == 0'
check "default threshold is 0.3" '.threshold == 0.3'

req POST /v1/matrix/relevance "$(jq -nc --argjson f "$FOCUS" '{focus: $f, chunks: []}')"
expect_status 400 "empty chunks -> 400"
check "400 names chunks" '.error.field == "chunks"'

# prefix only (0.3) and filename (0.6): the threshold decides between them
TWO='[{"source": "src/net/pool.rs", "text": "nothing in common"},
      {"source": "docs/readme.md", "text": "see connector.rs"}]'
req POST /v1/matrix/relevance "$(jq -nc --argjson c "$TWO" '{focus: {path: "src/net/connector.rs"}, chunks: $c, threshold: 0.3}')"
check "threshold 0.3 keeps 0.3 and 0.6" '[.kept[].score] == [0.3, 0.6]'
req POST /v1/matrix/relevance "$(jq -nc --argjson c "$TWO" '{focus: {path: "src/net/connector.rs"}, chunks: $c, threshold: 0.5}')"
check "threshold 0.5 keeps only 0.6" '[.kept[].score] == [0.6] and [.dropped[].score] == [0.3]'
req POST /v1/matrix/relevance "$(jq -nc --argjson c "$TWO" '{focus: {path: "src/net/connector.rs"}, chunks: $c, threshold: 0.7}')"
check "threshold 0.7 keeps none" '.kept == [] and (.dropped | length) == 2'

smoke_done relevance_smoke
