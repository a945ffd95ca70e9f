#!/usr/bin/env bash
# Sourced by the matrix smoke scripts (after smoke_lib.sh): find or start what they need.
# With LAKEHOUSE_URL (the gateway) every API is behind one URL; otherwise start the
# daemons on free loopback ports. Sets BASE (matrixd), VBASE (vectord), EBASE (embedd).

# matrix_stack_up [matrixd-only]: with an argument, start matrixd alone (no backends).
matrix_stack_up() {
  if [ -n "${LAKEHOUSE_URL:-}" ]; then
    BASE=$LAKEHOUSE_URL; VBASE=$LAKEHOUSE_URL; EBASE=$LAKEHOUSE_URL
    return
  fi
  local vport eport mport
  vport=$(free_port); eport=$(free_port); mport=$(free_port)
  VBASE="http://127.0.0.1:$vport"; EBASE="http://127.0.0.1:$eport"
  BASE="http://127.0.0.1:$mport"
  if [ -z "${1:-}" ]; then
    start_daemon vectord LAKEHOUSE_VECTORD_PORT="$vport" LAKEHOUSE_VECTORD_EMBEDD_URL="$EBASE" \
      LAKEHOUSE_VECTORD_DATA_DIR="${LAKEHOUSE_VECTORD_DATA_DIR:-$SMOKE_TMP/pg}"
    start_daemon embedd LAKEHOUSE_EMBEDD_PORT="$eport"
  fi
  start_daemon matrixd LAKEHOUSE_MATRIXD_PORT="$mport" \
    LAKEHOUSE_MATRIXD_VECTORD_URL="$VBASE" LAKEHOUSE_MATRIXD_EMBEDD_URL="$EBASE"
  if [ -z "${1:-}" ]; then
    wait_http "$VBASE/readyz" 120
    wait_http "$EBASE/readyz" 120
  fi
  wait_http "$BASE/healthz" 60
}

# at URL METHOD PATH [JSON]: req against another daemon's base URL.
at() {
  local saved=$BASE
  BASE=$1; shift
  req "$@"
  BASE=$saved
}

# make_corpus NAME TEXTS_JSON [METADATA_JSON_ARRAY]: create NAME and upsert the texts
# (ids d0, d1, ...) with their embeddings; metadata defaults to {"n": i, "corpus": NAME}.
make_corpus() {
  local name=$1 texts=$2 meta=${3:-null} emb items
  at "$EBASE" POST /v1/embed "$(jq -nc --argjson t "$texts" '{texts: $t, input_type: "document"}')"
  [ "$STATUS" = 200 ] || { echo "FAIL embed: $STATUS $BODY" >&2; exit 1; }
  emb=$BODY
  at "$VBASE" POST /v1/vectors/corpora "$(printf '%s' "$emb" | jq -c --arg n "$name" '{name: $n, dim: .dim, model: .model}')"
  [ "$STATUS" = 201 ] || { echo "FAIL create $name: $STATUS $BODY" >&2; exit 1; }
  items=$(printf '%s' "$emb" | jq -c --arg n "$name" --argjson t "$texts" --argjson m "$meta" '
    {model: .model, items: [.vectors | to_entries[] | {id: "d\(.key)", vector: .value,
      text: $t[.key], metadata: (if $m == null then {n: .key, corpus: $n} else $m[.key] end)}]}')
  at "$VBASE" POST "/v1/vectors/corpora/$name/items" "$items"
  [ "$STATUS" = 200 ] || { echo "FAIL upsert $name: $STATUS $BODY" >&2; exit 1; }
}

drop_corpus() { at "$VBASE" DELETE "/v1/vectors/corpora/$1"; }
