#!/bin/sh
# `tidemark table compact` and `expire` beside running connectors: a run
# whose files are older than the writers' 240 s bound at its publish check
# (TIDEMARK_FAULT_STALL_MS stands in for a run paused that long, e.g. by
# SIGSTOP) publishes nothing, removes its files and says why (exit 1); the
# same run without the stall publishes (docs/iceberg-lite.md, "Vacuum
# beside writers"). pyiceberg (not our code) reads the table after each
# refusal: the same current snapshot and rows as before.
#   table_late.sh TIDEMARK ICE_WRITE_TABLE PYTHON
set -eu
TM=$1
WRITE=$2
PY=$3
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
T=$DIR/table
"$WRITE" "$DIR" --small
fail=0

current() {
    "$TM" table history "$T" | sed -n 's/^current snapshot: //p'
}
# "<current snapshot id> <rows>" as pyiceberg reads the newest version.
judged() {
    "$PY" - "$T" <<'PYEOF'
import glob, re, sys
from pyiceberg.table import StaticTable
meta = max(glob.glob(sys.argv[1] + "/metadata/v*.metadata.json"),
           key=lambda p: int(re.search(r"/v(\d+)\.metadata\.json$", p).group(1)))
t = StaticTable.from_metadata(meta)
print(t.current_snapshot().snapshot_id, t.scan().to_arrow().num_rows)
PYEOF
}
data_files() {
    ls "$T/data" | sort
}

# late NAME COMMAND...: refused naming the bound, nothing published, no
# file of the run left.
late() {
    name=$1
    shift
    before=$(current)
    judged_before=$(judged)
    data_files >"$DIR/data.before"
    ls "$T/metadata" | sort >"$DIR/meta.before"
    rc=0
    TIDEMARK_FAULT_STALL_MS=240001 "$@" >"$DIR/out" 2>"$DIR/err" || rc=$?
    data_files >"$DIR/data.after"
    ls "$T/metadata" | sort >"$DIR/meta.after"
    if [ "$rc" != 1 ] ||
        ! grep -q "more than the 240000 ms a writer may take to publish them" \
            "$DIR/err" ||
        ! grep -q "TIDEMARK_FAULT_STALL_MS=240001" "$DIR/err" ||
        [ "$(grep -c "warning: TIDEMARK_FAULT_STALL_MS=240001 is set" \
            "$DIR/err")" != 1 ] ||
        [ "$(current)" != "$before" ] ||
        [ "$(judged)" != "$judged_before" ] ||
        ! cmp -s "$DIR/data.before" "$DIR/data.after" ||
        ! cmp -s "$DIR/meta.before" "$DIR/meta.after"; then
        echo "FAIL: $name late (exit $rc, want 1; current $(current), was" \
            "$before; pyiceberg $(judged), was $judged_before)"
        cat "$DIR/out" "$DIR/err"
        diff "$DIR/data.before" "$DIR/data.after" || true
        diff "$DIR/meta.before" "$DIR/meta.after" || true
        fail=1
    else
        echo "ok: $name late (pyiceberg: snapshot, rows $judged_before): $(cat "$DIR/err")"
    fi
}

late compact "$TM" table compact "$T"
# Past half the bound (130 s of stall at each check) a run takes no more
# files: it publishes the first two it rewrote, says there is more, and
# pyiceberg reads the same 7 rows; the next run takes the rest.
rows_before=$(judged | cut -d' ' -f2)
if TIDEMARK_FAULT_STALL_MS=130000 "$TM" table compact "$T" >"$DIR/out" \
    2>"$DIR/err" &&
    grep -q '^compacted 2 files into 1 (' "$DIR/out" &&
    grep -q '^more to compact: ' "$DIR/out" &&
    [ "$(judged | cut -d' ' -f2)" = "$rows_before" ]; then
    echo "ok: compact bounded: $(cat "$DIR/out")"
else
    echo "FAIL: compact bounded (pyiceberg $(judged), rows were $rows_before)"
    cat "$DIR/out" "$DIR/err"
    fail=1
fi
if "$TM" table compact "$T" >"$DIR/out" 2>&1 &&
    grep -q '^compacted 2 files into 1 (7 rows)' "$DIR/out" &&
    ! grep -q '^more to compact' "$DIR/out"; then
    echo "ok: compact in time: $(cat "$DIR/out")"
else
    echo "FAIL: compact in time"
    cat "$DIR/out"
    fail=1
fi

late expire "$TM" table expire "$T" --keep 1
if "$TM" table expire "$T" --keep 1 >"$DIR/out" 2>&1 &&
    grep -q '^expired 4 snapshots, kept 1' "$DIR/out"; then
    echo "ok: expire in time: $(cat "$DIR/out")"
else
    echo "FAIL: expire in time"
    cat "$DIR/out"
    fail=1
fi
exit $fail
