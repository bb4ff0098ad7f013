#!/usr/bin/env bash
# The Python judges of the tests (pyiceberg, pyarrow, DuckDB, fastavro read
# what the iceberg-lite sink writes; SQLAlchemy and psycopg2 under
# pyiceberg's SqlCatalog) and matplotlib (the throughput plot of
# tests/bench/e2e_bench.sh) and prometheus_client (its text parser judges
# the metrics: tests/unit/metrics_parse.py), in a venv under .cache/venv.
# Idempotent: when the venv already holds exactly these pins nothing is
# downloaded.
# Versions are pinned so that a judge does not change under the tests.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

VENV="${TIDEMARK_VENV:-$PWD/.cache/venv}"
PYTHON="${TIDEMARK_PYTHON:-python3}"
PINS=(pyiceberg==0.12.0 pyarrow==26.0.1 duckdb==2.0.0 fastavro==1.13.1 matplotlib==3.11.2
      prometheus-client==0.26.0 sqlalchemy==2.1.9 psycopg2-binary==2.9.13)
STAMP="$VENV/.tidemark-pins"
want="${PINS[*]}"

if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  echo "python-venv: $VENV already has ${PINS[*]}"
  exit 0
fi

# python3-venv (Debian) provides ensurepip; scripts/install-deps.sh installs it.
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check "${PINS[@]}" </dev/null
"$VENV/bin/python" -c 'import pyiceberg, pyarrow, duckdb, fastavro, matplotlib, prometheus_client, sqlalchemy, psycopg2'
printf '%s\n' "$want" >"$STAMP"
echo "python-venv: $VENV ready with ${PINS[*]}"
