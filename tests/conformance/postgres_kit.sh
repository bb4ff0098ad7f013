#!/usr/bin/env bash
# The conformance kit against the PostgreSQL sink:
#   postgres_kit.sh SINKCHECK PLUGIN CONFIG_TEMPLATE [kit args...]
# The kit's config knows only ${tmpdir} and ${case}, so this writes the config
# at test time: ${TIDEMARK_PG_CONNINFO} from the environment (scripts/env.sh)
# and ${TIDEMARK_PG_SCHEMA}, a schema of its own for this run (dropped after),
# so runs side by side (plain and sanitizer builds) never share a table.
# FAILS (never skips) when the server is not configured or not reachable.
set -euo pipefail
kit="$1" plugin="$2" template="$3"
shift 3
if [ -z "${TIDEMARK_PG_CONNINFO:-}" ]; then
  echo "postgres_kit.sh: FAIL: TIDEMARK_PG_CONNINFO is not set (bash scripts/postgres.sh start; source scripts/env.sh)" >&2
  exit 1
fi
schema="sinkcheck_$$_$(date +%s)"
dir="$(mktemp -d "${TMPDIR:-/tmp}/tm-pgkit-XXXXXX")"
drop_schema() {
  if command -v psql >/dev/null 2>&1; then
    psql -X -q "$TIDEMARK_PG_CONNINFO" -c "DROP SCHEMA IF EXISTS \"$schema\" CASCADE" >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}
trap drop_schema EXIT
if command -v psql >/dev/null 2>&1 &&
   ! psql -X -q "$TIDEMARK_PG_CONNINFO" -c "SELECT 1" >/dev/null 2>"$dir/psql.err"; then
  echo "postgres_kit.sh: FAIL: cannot reach PostgreSQL at '$TIDEMARK_PG_CONNINFO': $(cat "$dir/psql.err")" >&2
  exit 1
fi
# JSON-escape the conninfo (backslash, double quote), then substitute.
conn="${TIDEMARK_PG_CONNINFO//\\/\\\\}"
conn="${conn//\"/\\\"}"
content="$(cat "$template")"
content="${content//'${TIDEMARK_PG_CONNINFO}'/"$conn"}"
content="${content//'${TIDEMARK_PG_SCHEMA}'/"$schema"}"
printf '%s\n' "$content" > "$dir/postgres.json"
"$kit" "$plugin" --config "$dir/postgres.json" "$@"
