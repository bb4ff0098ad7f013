#!/bin/sh
# Another engine (pyiceberg's SqlCatalog, not our code) changes the same
# catalog table (issue 16 part 5); each case failed on the code before its
# fix unless marked "holds". The truth is read back with pyiceberg and the
# catalog's own SQLite rows.
#   catalog_rivals.sh TIDEMARK ICE_WRITE_TABLE PYTHON [CASE...]
# CASE: refs expire rename second interrupted outside (default: all).
#
# 1 refs_kept_by_compact: a tag and a branch pyiceberg made are dropped by
#   the next tidemark commit (ice_meta_add_snapshot replaces "refs" with
#   {"main": ...}, table_meta.c).
# 2 expire_keeps_tagged_snapshot: `tidemark table expire` drops the
#   snapshot a tag names, leaving "refs" pointing at a snapshot that does
#   not exist (invalid metadata: Iceberg's Java reader refuses it), and
#   vacuum then deletes that snapshot's files.
# 3 renamed_table_not_reregistered: after pyiceberg renames the table, the
#   sink (create) registers a brand-new table under the old name in the
#   same directory (catalog_meta.c no_row ignores catalog-table.text and
#   the <N>-<uuid> files); vacuum of the new table deletes every file of
#   the renamed one.
# 5 second_catalog_refused: a second connector with another catalog_uri
#   (or catalog_name/namespace/table) and the same path registers a second
#   table in the directory (same cause as 3): two catalogs own one table
#   directory, each one's vacuum deletes the other's files.
# 4 outside_location_refused (holds): a row naming a file outside the
#   table's directory is refused.
set -eu
TM=$1
WRITE=$2
PY=$3
shift 3
CASES=" ${*:-refs expire rename second interrupted outside} "
ICE_MARK=catalog-table.text
want() {
    case "$CASES" in *" $1 "*) return 0 ;; *) return 1 ;; esac
}
BASE=$(mktemp -d)
trap 'rm -rf "$BASE"' EXIT
fail=0

# fresh NAME: a table written by the sink in catalog lake as cli.small.
fresh() {
    D=$BASE/$1
    mkdir -p "$D"
    URI="sqlite:///$D/catalog.db"
    "$WRITE" "$D" --small --catalog "$URI" >"$D/write.out" 2>&1 ||
        { echo "FAIL $1: writing the table"; cat "$D/write.out"; exit 1; }
}
cat_opts() {
    echo --catalog "$URI" --catalog-name lake --catalog-table "${1:-cli.small}"
}
py() {
    "$PY" - "$URI" "$@"
}

# ---- 1 ----
if want refs; then
fresh refs
py <<'EOF' || { echo "FAIL refs: pyiceberg could not tag"; exit 1; }
import sys
from pyiceberg.catalog.sql import SqlCatalog
t = SqlCatalog("lake", uri=sys.argv[1]).load_table("cli.small")
s = t.metadata.snapshots
t.manage_snapshots().create_tag(s[0].snapshot_id, "audit") \
    .create_branch(s[1].snapshot_id, "dev").commit()
EOF
# shellcheck disable=SC2046
"$TM" table compact "$D/table" $(cat_opts) >"$D/out" 2>&1 ||
    { echo "FAIL refs: compact failed"; cat "$D/out"; exit 1; }
grep -q "compacted" "$D/out" ||
    { echo "FAIL refs inconclusive: compact made no commit"; exit 1; }
if py <<'EOF'; then echo "ok refs_kept_by_compact"; else fail=1; fi
import sys
from pyiceberg.catalog.sql import SqlCatalog
refs = SqlCatalog("lake", uri=sys.argv[1]).load_table("cli.small").metadata.refs
missing = {"audit", "dev"} - set(refs)
if missing:
    print(f"FAIL refs_kept_by_compact: refs {sorted(missing)} made by "
          f"pyiceberg are gone after tidemark's commit (refs now "
          f"{sorted(refs)})")
    sys.exit(1)
EOF
fi

# ---- 2 ----
if want expire; then
fresh expire
py <<'EOF' || { echo "FAIL expire: pyiceberg could not tag"; exit 1; }
import sys
from pyiceberg.catalog.sql import SqlCatalog
t = SqlCatalog("lake", uri=sys.argv[1]).load_table("cli.small")
t.manage_snapshots().create_tag(t.metadata.snapshots[0].snapshot_id,
                                "audit").commit()
EOF
# shellcheck disable=SC2046
"$TM" table expire "$D/table" --keep 1 $(cat_opts) >"$D/out" 2>&1 ||
    { echo "FAIL expire: expire failed"; cat "$D/out"; exit 1; }
# shellcheck disable=SC2046
"$TM" table vacuum "$D/table" --grace-seconds 0 $(cat_opts) >"$D/out" 2>&1 ||
    { echo "FAIL expire: vacuum failed"; cat "$D/out"; exit 1; }
if py <<'EOF'; then echo "ok expire_keeps_tagged_snapshot"; else fail=1; fi
import sys
from pyiceberg.catalog.sql import SqlCatalog
t = SqlCatalog("lake", uri=sys.argv[1]).load_table("cli.small")
ids = {s.snapshot_id for s in t.metadata.snapshots}
tag = t.metadata.refs.get("audit")
if tag is None:
    print("FAIL expire_keeps_tagged_snapshot: the tag is gone")
    sys.exit(1)
if tag.snapshot_id not in ids:
    print(f"FAIL expire_keeps_tagged_snapshot: tag audit names snapshot "
          f"{tag.snapshot_id}, which expire removed (snapshots now "
          f"{sorted(ids)}): dangling ref")
    sys.exit(1)
rows = len(t.scan(snapshot_id=tag.snapshot_id).to_arrow())
if rows != 3:
    print(f"FAIL expire_keeps_tagged_snapshot: the tag reads {rows} rows, "
          f"want 3")
    sys.exit(1)
EOF
# The tagged snapshot holds the table's one dead letter (offset 3), which
# the walk from the current snapshot no longer reaches: listed once, also
# after a second expire on top of a compact.
# shellcheck disable=SC2046
{ "$TM" table compact "$D/table" $(cat_opts) &&
    "$TM" table expire "$D/table" --keep 1 $(cat_opts) &&
    "$TM" table dead-letters "$D/table" $(cat_opts); } >"$D/out" 2>&1 || {
    echo "FAIL expire: compact, expire or dead-letters failed"
    cat "$D/out"
    exit 1
}
n=$(grep -c "parse_error" "$D/out" || true)
if [ "$n" -eq 1 ]; then
    echo "ok expire_keeps_tagged_dead_letters"
else
    echo "FAIL expire_keeps_tagged_dead_letters: listed $n times, want 1"
    cat "$D/out"
    fail=1
fi
fi

# ---- 3 ----
if want rename; then
fresh rename
py <<'EOF' || { echo "FAIL rename: pyiceberg could not rename"; exit 1; }
import sys
from pyiceberg.catalog.sql import SqlCatalog
SqlCatalog("lake", uri=sys.argv[1]).rename_table("cli.small", "cli.small_2025")
EOF
# The connector restarted with its settings unchanged (create true).
rc=0
"$WRITE" "$D" --small --catalog "$URI" >"$D/out" 2>&1 || rc=$?
if [ "$rc" -ne 0 ] &&
    ! grep -q "already holds a catalog table's metadata" "$D/out"; then
    echo "FAIL renamed_table_not_reregistered: refused for another reason"
    cat "$D/out"
    fail=1
fi
if [ "$rc" -eq 0 ]; then
    # It registered a new table in a directory a catalog row already
    # manages; vacuum of that table then deletes the renamed one's files.
    # shellcheck disable=SC2046
    "$TM" table vacuum "$D/table" --grace-seconds 0 $(cat_opts) \
        >"$D/vac.out" 2>&1 || true
fi
if py <<'EOF'; then echo "ok renamed_table_not_reregistered"; else fail=1; fi
import sys
from pyiceberg.catalog.sql import SqlCatalog
c = SqlCatalog("lake", uri=sys.argv[1])
names = sorted(n for _, n in c.list_tables("cli"))
try:
    rows = len(c.load_table("cli.small_2025").scan().to_arrow())
except Exception as e:  # noqa: BLE001 (the finding)
    print(f"FAIL renamed_table_not_reregistered: tables {names}; the "
          f"renamed table cli.small_2025 is unreadable after vacuum of the "
          f"re-registered cli.small in the same directory: "
          f"{type(e).__name__}: {str(e)[:160]}")
    sys.exit(1)
if "small" in names:
    print(f"FAIL renamed_table_not_reregistered: a second table cli.small "
          f"was registered in the directory of cli.small_2025 ({rows} rows)")
    sys.exit(1)
EOF
fi

# ---- 5 ----
if want second; then
fresh second
rc=0
"$WRITE" "$D" --small --catalog "sqlite:///$D/second.db" >"$D/out" 2>&1 ||
    rc=$?
if [ "$rc" -ne 0 ] &&
    grep -q "already holds a catalog table's metadata" "$D/out"; then
    echo "ok second_catalog_refused"
else
    echo "FAIL second_catalog_refused: a second catalog registered the table" \
        "directory already managed by catalog lake (exit $rc)"
    fail=1
fi
fi

# ---- first registration interrupted ----
# A first registration killed between its metadata file and its INSERT
# leaves 00001-<uuid>.metadata.json (and the mark naming this table):
# the restarted sink registers the table anew. A mark naming another
# table is refused even with no metadata file.
if want interrupted; then
fresh interrupted
mkdir -p "$D/again/table/metadata"
cp "$D/table/metadata/$ICE_MARK" "$D/table/metadata"/00001-*.metadata.json \
    "$D/again/table/metadata/"
rc=0
"$WRITE" "$D/again" --small --catalog "sqlite:///$D/again.db" \
    >"$D/out" 2>&1 || rc=$?
if [ "$rc" -eq 0 ]; then
    echo "ok interrupted_first_registration_continues"
else
    echo "FAIL interrupted_first_registration_continues: exit $rc"
    cat "$D/out"
    fail=1
fi
mkdir -p "$D/marked/table/metadata"
echo 'catalog "other", table x.y' >"$D/marked/table/metadata/$ICE_MARK"
rc=0
"$WRITE" "$D/marked" --small --catalog "sqlite:///$D/marked.db" \
    >"$D/out" 2>&1 || rc=$?
if [ "$rc" -ne 0 ] && grep -q 'marked as the directory of catalog "other"' \
    "$D/out"; then
    echo "ok other_tables_mark_refused"
else
    echo "FAIL other_tables_mark_refused: exit $rc"
    cat "$D/out"
    fail=1
fi
fi

# ---- 4 (holds) ----
if want outside; then
fresh outside
mkdir -p "$D/other/metadata"
cur=$(py <<'EOF'
import sqlite3, sys
db = sys.argv[1].removeprefix("sqlite:///")
print(sqlite3.connect(db).execute(
    "SELECT metadata_location FROM iceberg_tables").fetchone()[0])
EOF
)
cp "${cur#file://}" "$D/other/metadata/x.metadata.json"
for loc in "file://$D/other/metadata/x.metadata.json" \
    "file://$D/table/metadata/../../other/metadata/x.metadata.json"; do
    py "$loc" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1].removeprefix("sqlite:///"))
c.execute("UPDATE iceberg_tables SET metadata_location = ?", (sys.argv[2],))
c.commit()
EOF
    rc=0
    # shellcheck disable=SC2046
    "$TM" table scan "$D/table" $(cat_opts) >"$D/out" 2>&1 || rc=$?
    if [ "$rc" -ne 0 ] && grep -q "outside the table" "$D/out"; then
        echo "ok outside_location_refused $loc"
    else
        echo "FAIL outside_location_refused $loc: exit $rc"
        cat "$D/out"
        fail=1
    fi
done
fi

exit $fail
