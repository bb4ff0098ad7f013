#!/bin/sh
# `tidemark table` on a table in an Iceberg SQL catalog (ice_write_table
# --small --catalog: three appends, one dead letter): read and maintained
# through the catalog row with --catalog/--catalog-name/--catalog-table,
# refused without them (a file-system writer would fork it), vacuumed
# (grace 0) and read the same after, options checked.
#   catalog_cli.sh TIDEMARK ICE_WRITE_TABLE
set -eu
TM=$1
WRITE=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
T=$DIR/table
URI="sqlite:///$DIR/catalog.db"
"$WRITE" "$DIR" --small --catalog "$URI"
fail=0

# check NAME WANT-RC WANT-TEXT COMMAND...: exit status and a line of the
# output (stdout and stderr) that holds WANT-TEXT.
check() {
    name=$1 want_rc=$2 want=$3
    shift 3
    rc=0
    "$@" >"$DIR/out" 2>&1 || rc=$?
    if [ "$rc" -ne "$want_rc" ] || ! grep -qF -- "$want" "$DIR/out"; then
        echo "FAIL $name: exit $rc (want $want_rc), want '$want' in:"
        cat "$DIR/out"
        fail=1
    else
        echo "ok $name"
    fi
}
cat_opts() {
    echo --catalog "$URI" --catalog-name lake --catalog-table cli.small
}

# shellcheck disable=SC2046
check scan 0 "body-0-5" "$TM" table scan "$T" $(cat_opts)
rows=$(grep -c ' orders ' "$DIR/out" || true)
[ "$rows" -eq 7 ] || { echo "FAIL scan: $rows rows, want 7"; fail=1; }
# shellcheck disable=SC2046
check history 0 "current snapshot:" "$TM" table history "$T" $(cat_opts)
appends=$(grep -c ' append ' "$DIR/out" || true)
[ "$appends" -eq 3 ] || { echo "FAIL history: $appends appends"; fail=1; }
# shellcheck disable=SC2046
check dead-letters 0 "parse_error" "$TM" table dead-letters "$T" $(cat_opts)
# shellcheck disable=SC2046
check compact 0 "compacted 3 files into 1 (7 rows)" \
    "$TM" table compact "$T" $(cat_opts)
# shellcheck disable=SC2046
check after-compact 0 " replace " "$TM" table history "$T" $(cat_opts)
# shellcheck disable=SC2046
check files 0 "7 " "$TM" table files "$T" $(cat_opts)
# shellcheck disable=SC2046
check expire 0 "kept 1" "$TM" table expire "$T" --keep 1 $(cat_opts)
# Vacuum (grace 0): what compact replaced and expire dropped goes, the
# table reads the same.
# shellcheck disable=SC2046
check vacuum 0 "removed " "$TM" table vacuum "$T" --grace-seconds 0 $(cat_opts)
removed=$(sed -n 's/^removed \([0-9]*\) files$/\1/p' "$DIR/out")
[ "${removed:-0}" -ge 3 ] || { echo "FAIL vacuum: removed '$removed'"; fail=1; }
# shellcheck disable=SC2046
check after-vacuum 0 "body-0-5" "$TM" table scan "$T" $(cat_opts)
rows=$(grep -c ' orders ' "$DIR/out" || true)
[ "$rows" -eq 7 ] || { echo "FAIL after-vacuum: $rows rows, want 7"; fail=1; }
[ -f "$T/metadata/catalog-table.text" ] ||
    { echo "FAIL vacuum removed catalog-table.text"; fail=1; }
check without-catalog 1 "managed by an Iceberg SQL catalog (catalog \"lake\", table cli.small" \
    "$TM" table scan "$T"
check not-in-catalog 1 "catalog \"lake\", table cli.other: not in the catalog" \
    "$TM" table scan "$T" --catalog "$URI" --catalog-name lake \
    --catalog-table cli.other
check no-namespace 1 "--catalog-table 'small': expected NAMESPACE.TABLE" \
    "$TM" table scan "$T" --catalog "$URI" --catalog-name lake \
    --catalog-table small
check options-together 2 "go together" \
    "$TM" table scan "$T" --catalog "$URI"
check no-catalog-db 1 "catalog \"lake\", table cli.small: not in the catalog" \
    "$TM" table scan "$T" --catalog "sqlite:///$DIR/none.db" \
    --catalog-name lake --catalog-table cli.small
exit $fail
