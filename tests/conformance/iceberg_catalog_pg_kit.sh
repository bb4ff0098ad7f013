#!/usr/bin/env bash
# The conformance kit against the iceberg-lite sink with its table in an
# Iceberg SQL catalog in PostgreSQL:
#   iceberg_catalog_pg_kit.sh SINKCHECK PLUGIN CONFIG_TEMPLATE [kit args...]
# The kit's config knows only ${tmpdir} and ${case}, so this writes the
# config at test time: ${TIDEMARK_ICE_CATALOG_URI}, a postgresql:// URI built
# from TIDEMARK_PG_CONNINFO (scripts/env.sh) whose search_path is a schema
# of this run's own (created here, dropped after), so that runs side by side
# never share a catalog. FAILS (never skips) when the server is not
# configured or not reachable.
set -euo pipefail
kit="$1" plugin="$2" template="$3"
shift 3
if [ -z "${TIDEMARK_PG_CONNINFO:-}" ]; then
  echo "iceberg_catalog_pg_kit.sh: FAIL: TIDEMARK_PG_CONNINFO is not set (bash scripts/postgres.sh start; source scripts/env.sh)" >&2
  exit 1
fi
declare -A kv=()
for pair in $TIDEMARK_PG_CONNINFO; do
  kv[${pair%%=*}]="${pair#*=}"
done
for key in host port dbname user; do
  if [ -z "${kv[$key]:-}" ]; then
    echo "iceberg_catalog_pg_kit.sh: FAIL: no $key= in TIDEMARK_PG_CONNINFO" >&2
    exit 1
  fi
done
schema="icecat_$$_$(date +%s)"
dir="$(mktemp -d "${TMPDIR:-/tmp}/tm-icecat-pg-XXXXXX")"
drop_schema() {
  psql -X -q "$TIDEMARK_PG_CONNINFO" -c "DROP SCHEMA IF EXISTS \"$schema\" CASCADE" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap drop_schema EXIT
if ! psql -X -q "$TIDEMARK_PG_CONNINFO" -c "CREATE SCHEMA \"$schema\"" >/dev/null 2>"$dir/psql.err"; then
  echo "iceberg_catalog_pg_kit.sh: FAIL: cannot create a schema at '$TIDEMARK_PG_CONNINFO': $(cat "$dir/psql.err")" >&2
  exit 1
fi
auth="${kv[user]}${kv[password]:+:${kv[password]}}"
uri="postgresql://$auth@${kv[host]}:${kv[port]}/${kv[dbname]}?options=-csearch_path%3D$schema"
content="$(cat "$template")"
content="${content//'${TIDEMARK_ICE_CATALOG_URI}'/"$uri"}"
printf '%s\n' "$content" > "$dir/config.json"
"$kit" "$plugin" --config "$dir/config.json" "$@"
