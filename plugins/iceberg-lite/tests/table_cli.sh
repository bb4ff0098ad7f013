#!/bin/sh
# End to end: every `tidemark table` subcommand on a table the plugin wrote
# (ice_write_table --small: three appends, one dead letter), against
# outputs written by hand. Snapshot ids, times and uuids differ per run:
# they are replaced by S1, S2... (in history order), TIME (the ms times
# of history; scan's µs values are the rows' own) and UUID, and
# the column padding (which follows their widths) squeezed to one blank.
#   table_cli.sh TIDEMARK ICE_WRITE_TABLE
set -eu
TM=$1
WRITE=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
T=$DIR/table
"$WRITE" "$DIR" --small
fail=0

# Snapshot ids from the table's history, oldest first, into $DIR/ids.
learn_ids() {
    "$TM" table history "$T" | awk 'NR > 1 && $1 ~ /^[0-9]+$/ {print $1}' \
        >>"$DIR/ids"
}

mask() {
    script=""
    n=0
    for id in $(awk '!seen[$0]++' "$DIR/ids"); do
        n=$((n + 1))
        script="$script s/$id/S$n/g;"
    done
    sed -E "s/[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]+\.[0-9]{3}Z/TIME/g;
            s/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/UUID/g;
            $script" | sed -E 's/  +/ /g; s/ +$//'
}

# expect NAME EXIT-STATUS COMMAND... with the expected stdout on stdin.
expect() {
    name=$1
    want_rc=$2
    shift 2
    cat >"$DIR/want"
    rc=0
    "$@" >"$DIR/out" 2>"$DIR/err" || rc=$?
    mask <"$DIR/out" >"$DIR/got"
    if [ "$rc" != "$want_rc" ] || ! cmp -s "$DIR/want" "$DIR/got"; then
        echo "FAIL: $name (exit $rc, want $want_rc)"
        diff -u "$DIR/want" "$DIR/got" || true
        cat "$DIR/err"
        fail=1
    else
        echo "ok: $name"
    fi
}

: >"$DIR/ids"
learn_ids

expect history 0 "$TM" table history "$T" <<'OUT'
SNAPSHOT PARENT SEQ TIME OPERATION ADDED-RECORDS TOTAL-RECORDS
S1 - 1 TIME append 3 3
S2 S1 2 TIME append 2 5
S3 S2 3 TIME append 2 7
current snapshot: S3
OUT

expect scan 0 "$TM" table scan "$T" <<'OUT'
id body amount flag at doc raw _tm_topic _tm_partition _tm_offset
0 body-0-0 0 false 2023-11-14T22:13:20.000000Z {"o":0} cjA6MA== orders 0 0
1 body-0-1 0.25 true 2023-11-14T22:13:20.000001Z {"o":1} cjA6MQ== orders 0 1
2 body-0-2 0.5 false 2023-11-14T22:13:20.000002Z {"o":2} cjA6Mg== orders 0 2
0 body-1-0 0 false 2023-11-14T22:13:20.000000Z {"o":0} cjE6MA== orders 1 0
1 body-1-1 0.25 true 2023-11-14T22:13:20.000001Z {"o":1} cjE6MQ== orders 1 1
4 - 1 false 2023-11-14T22:13:20.000004Z {"o":4} cjA6NA== orders 0 4
5 body-0-5 1.25 true 2023-11-14T22:13:20.000005Z {"o":5} cjA6NQ== orders 0 5
OUT

expect scan-snapshot-json 0 "$TM" table scan "$T" --snapshot "$(sed -n 1p "$DIR/ids")" --json <<'OUT'
{"id":0,"body":"body-0-0","amount":0.0,"flag":false,"at":"2023-11-14T22:13:20.000000Z","doc":"{\"o\":0}","raw":"cjA6MA==","_tm_topic":"orders","_tm_partition":0,"_tm_offset":0}
{"id":1,"body":"body-0-1","amount":0.25,"flag":true,"at":"2023-11-14T22:13:20.000001Z","doc":"{\"o\":1}","raw":"cjA6MQ==","_tm_topic":"orders","_tm_partition":0,"_tm_offset":1}
{"id":2,"body":"body-0-2","amount":0.5,"flag":false,"at":"2023-11-14T22:13:20.000002Z","doc":"{\"o\":2}","raw":"cjA6Mg==","_tm_topic":"orders","_tm_partition":0,"_tm_offset":2}
OUT

# The exact sizes depend on the encoder: the shape is what is checked.
"$TM" table files "$T" | mask | sed -E 's/ [0-9]+$/ BYTES/' >"$DIR/files"
expect files 0 cat "$DIR/files" <<'OUT'
PATH SNAPSHOT SEQ RECORDS BYTES
data/S1-0-UUID.parquet S1 1 3 BYTES
data/S2-0-UUID.parquet S2 2 2 BYTES
data/S3-0-UUID.parquet S3 3 2 BYTES
OUT

expect dead-letters 0 "$TM" table dead-letters "$T" <<'OUT'
TOPIC PARTITION OFFSET REASON DETAIL FILE
orders 0 3 parse_error not JSON\nat all dead_letters/S1-UUID.jsonl
OUT

"$TM" table compact "$T" >"$DIR/compact"
learn_ids
expect compact 0 cat "$DIR/compact" <<'OUT'
compacted 3 files into 1 (7 rows): snapshot S4 (replace)
OUT

expect compact-again 0 "$TM" table compact "$T" <<'OUT'
nothing to compact: fewer than 2 data files below 134217728 bytes
OUT

expect history-after-compact 0 "$TM" table history "$T" <<'OUT'
SNAPSHOT PARENT SEQ TIME OPERATION ADDED-RECORDS TOTAL-RECORDS
S1 - 1 TIME append 3 3
S2 S1 2 TIME append 2 5
S3 S2 3 TIME append 2 7
S4 S3 4 TIME replace 7 7
current snapshot: S4
OUT

# The same rows, now from one file (the order of the rewrite).
expect scan-after-compact 0 sh -c "'$TM' table scan '$T' | awk '{print \$1, \$NF}'" <<'OUT'
id _tm_offset
0 0
1 1
2 2
0 0
1 1
4 4
5 5
OUT

expect expire 0 "$TM" table expire "$T" --keep 2 <<'OUT'
expired 2 snapshots, kept 2
OUT

expect history-after-expire 0 "$TM" table history "$T" <<'OUT'
SNAPSHOT PARENT SEQ TIME OPERATION ADDED-RECORDS TOTAL-RECORDS
S3 S2 3 TIME append 2 7
S4 S3 4 TIME replace 7 7
current snapshot: S4
OUT

expect dead-letters-after-expire 0 "$TM" table dead-letters "$T" <<'OUT'
TOPIC PARTITION OFFSET REASON DETAIL FILE
orders 0 3 parse_error not JSON\nat all dead_letters/S1-UUID.jsonl
OUT

expect expired-snapshot 1 "$TM" table scan "$T" --snapshot "$(sed -n 1p "$DIR/ids")" <<'OUT'
OUT

# An orphan of a crashed commit, two hours old, and a young one.
printf 'PAR1' >"$T/data/0-0-old-orphan.parquet"
touch -d '2 hours ago' "$T/data/0-0-old-orphan.parquet"
printf 'PAR1' >"$T/data/0-0-young-orphan.parquet"
expect vacuum 0 "$TM" table vacuum "$T" <<'OUT'
removed data/0-0-old-orphan.parquet
removed 1 files
OUT

# With no grace: the young orphan and the manifest lists of the expired
# snapshots go; the kept snapshots' files stay.
"$TM" table vacuum "$T" --grace-seconds 0 | mask | LC_ALL=C sort >"$DIR/vacuum0"
expect vacuum-no-grace 0 cat "$DIR/vacuum0" <<'OUT'
removed 3 files
removed data/0-0-young-orphan.parquet
removed metadata/snap-S1-1-UUID.avro
removed metadata/snap-S2-1-UUID.avro
OUT

expect scan-after-vacuum 0 sh -c "'$TM' table scan '$T' | wc -l" <<'OUT'
8
OUT

expect usage 2 "$TM" table expire "$T" <<'OUT'
OUT
expect not-a-table 1 "$TM" table history "$DIR" <<'OUT'
OUT
grep -q "no metadata/v<N>.metadata.json" "$DIR/err" || {
    echo "FAIL: not-a-table message"
    fail=1
}
exit $fail
