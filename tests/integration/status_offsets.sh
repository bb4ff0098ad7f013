#!/usr/bin/env bash
# `tidemark status` and `tidemark offsets` against the real broker and real
# SQLite files: markers absent at first, resets (explicit, latest) written
# to the sink's marker table with raised epochs and to the consumer group,
# refusals (a local host holds the connector's lock, an active group
# member, an offset outside the log, a partition the connector lacks),
# `status --config` of a connector that is not running, and status files
# of a live and a killed host with the health-check exit codes.
# Every expected value below is written by hand.
# usage: status_offsets.sh TIDEMARK STATUS_HOLDER SOURCE_DIR WORK_DIR
set -u
bin=$1 holder=$2 src=$3 work=$4
. "$src/tests/integration/lib.sh"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; }
trap cleanup EXIT

need_kafka
command -v python3 >/dev/null || { echo "FAIL: python3 not found"; exit 1; }
libs=$src/.cache/kafka/libs
[ -d "$libs" ] || { echo "FAIL: no Kafka jars in $libs (scripts/kafka.sh start)"; exit 1; }

rm -rf "$work" && mkdir -p "$work" || exit 1
topic=tm-status-offsets-$$-$(date +%s)
name=status-offsets-$$
group=tidemark-$name
state=$work/state
db=$work/sink.db
cfg=$work/connector.json

# The topic: 2 partitions, 5 records in p0, 3 in p1.
bash "$src/scripts/kafka.sh" topics --create --topic "$topic" --partitions 2 \
    --replication-factor 1 >/dev/null || { echo "FAIL: cannot create $topic"; exit 1; }
for i in 1 2 3 4 5; do echo "{\"id\":$i}"; done | kcat -b "$boot" -P -t "$topic" -p 0 ||
    fail "produce p0"
for i in 6 7 8; do echo "{\"id\":$i}"; done | kcat -b "$boot" -P -t "$topic" -p 1 ||
    fail "produce p1"

cat >"$cfg" <<JSON
{
  "name": "$name",
  "kafka": {"bootstrap_servers": "$boot", "topics": ["$topic"]},
  "sink": {"plugin": "sqlite", "settings": {"path": "$db", "table": "events"}},
  "mapping": {"mode": "json",
              "columns": [{"name": "id", "pointer": "/id", "type": "int"}]},
  "state_dir": "$state"
}
JSON

# The marker table, straight from the file: "partition next_offset epoch".
markers() {
    python3 - "$db" "$name" "$topic" <<'PY'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1])
for row in con.execute("SELECT partition, next_offset, epoch FROM tidemark_markers"
                       " WHERE connector = ? AND topic = ? ORDER BY partition",
                       (sys.argv[2], sys.argv[3])):
    print(*row)
PY
}

# The group's committed offsets, from Kafka's own tool: "partition offset".
group_offsets() {
    java -Xmx256m -XX:TieredStopAtLevel=1 \
        "-Dlog4j2.configurationFile=$src/var/kafka/tools-log4j2.properties" \
        -cp "$libs/*" org.apache.kafka.tools.consumer.group.ConsumerGroupCommand \
        --bootstrap-server "$boot" --describe --group "$group" 2>/dev/null |
        awk -v t="$topic" '$2 == t { print $3, $4 }' | sort -n
}

# 1 while process $1 runs (a stopped one included), 0 once it exited.
running() {
    local st
    st=$(ps -o stat= -p "$1" 2>/dev/null | cut -c1)
    [ -n "$st" ] && [ "$st" != Z ]
}

# Starts status_holder (a host stand-in holding the lock) and waits for it
# to say so, however long a loaded machine takes (ctest's timeout bounds it).
start_holder() { # STATE_DIR CONNECTOR STATE [ERROR]
    local out=$work/holder.$RANDOM
    "$holder" "$@" >"$out" 2>&1 &
    holder_pid=$!
    pids+=("$holder_pid")
    while running "$holder_pid"; do
        grep -q '^ready$' "$out" 2>/dev/null && return 0
        sleep 0.1
    done
    grep -q '^ready$' "$out" 2>/dev/null && return 0
    fail "status_holder did not start: $(cat "$out")"
    return 1
}
stop_holder() { kill -9 "$holder_pid"; wait "$holder_pid" 2>/dev/null; }

# 1. offsets: no marker yet; log bounds from the broker.
"$bin" offsets "$cfg" >"$work/o1.out" 2>"$work/o1.err"
rc=$?
[ "$rc" -eq 0 ] || fail "offsets: exit $rc, expected 0: $(cat "$work/o1.err")"
# TOPIC PARTITION NEXT_OFFSET EPOCH LAST_BATCH ROWS DL FILTERED DUP LOG_START HW LAG GROUP
got=$(awk -v t="$topic" '$1 == t { print $2, $3, $4, $5, $10, $11, $12, $13 }' "$work/o1.out")
want="0 - - - 0 5 - -
1 - - - 0 3 - -"
[ "$got" = "$want" ] || fail "offsets before any claim: got [$got], want [$want]"
grep -q "^connector $name (group $group)\$" "$work/o1.out" || fail "offsets: no header line"
[ ! -s "$work/o1.err" ] || fail "offsets: unexpected stderr: $(cat "$work/o1.err")"
[ -z "$(markers)" ] || fail "offsets (read-only) wrote markers: $(markers)"

# 2. status --config on a connector that is not running: exit 2.
"$bin" status --config "$cfg" >"$work/s1.out" 2>"$work/s1.err"
rc=$?
[ "$rc" -eq 2 ] || fail "status --config (not running): exit $rc, expected 2: $(cat "$work/s1.err")"
grep -qx '  state       not running' "$work/s1.out" || fail "status --config: no 'not running' line"
grep -qx '  plugin      sqlite 1.0.0' "$work/s1.out" || fail "status --config: no plugin line"
# TOPIC PARTITION NEXT_OFFSET EPOCH HIGH_WATERMARK LAG ... PAUSED
got=$(awk -v t="$topic" '$1 == t { print $2, $3, $4, $5, $6, $11 }' "$work/s1.out")
want="0 - - 5 - no
1 - - 3 - no"
[ "$got" = "$want" ] || fail "status --config before a claim: got [$got], want [$want]"

# 3. A host holding the connector's lock here: the reset is refused and
# nothing changes; status shows the host RUNNING (exit 0), up 1h02m03s
# (the holder's start, 3723 s back) plus the seconds since it started.
t_start=$(date +%s)
start_holder "$state" "$name" RUNNING
"$bin" offsets "$cfg" --reset-to earliest >"$work/r1.out" 2>"$work/r1.err"
rc=$?
[ "$rc" -eq 1 ] || fail "reset with a live host: exit $rc, expected 1"
grep -qF "tidemark offsets: refused: connector $name is running on this machine (pid $holder_pid, state directory $state): stop it first (a reset is offline only)" \
    "$work/r1.err" || fail "reset with a live host: $(cat "$work/r1.err")"
[ -z "$(markers)" ] || fail "refused reset wrote markers: $(markers)"
"$bin" status --state-dir "$state" >"$work/s2.out" 2>&1
rc=$?
t_end=$(date +%s)
[ "$rc" -eq 0 ] || fail "status of a live RUNNING host: exit $rc, expected 0"
up=$(sed -n "s/^  state       RUNNING (pid $holder_pid, up \([0-9]*\)h\([0-5][0-9]\)m\([0-5][0-9]\)s)\$/\1 \2 \3/p" \
    "$work/s2.out")
if [ -z "$up" ]; then
    fail "status live: $(grep state "$work/s2.out")"
else
    read -r uh um us <<<"$up"
    up=$((uh * 3600 + 10#$um * 60 + 10#$us))
    # whole seconds: the holder started at t_start or later, status ran by
    # t_end + 1
    [ "$up" -ge 3723 ] && [ "$up" -le $((3723 + t_end + 1 - t_start)) ] ||
        fail "status live: up ${up}s, expected 3723 to $((3723 + t_end + 1 - t_start)): $(grep state "$work/s2.out")"
fi
stop_holder

# ... and a lock held by any process (flock(1)) refuses too.
mkdir -p "$state/$name"
# (-o: flock itself holds the lock, not the command it runs, so killing it
# frees the lock). The command runs once the lock is taken: its line is the
# proof the reset below meets a held lock (a fixed pause raced flock's
# start: a flock later than the pause would let the reset through).
flock -o "$state/$name/host.lock" sh -c 'echo "held $$"; exec sleep 300' \
    >"$work/flock.out" 2>&1 &
flock_pid=$!
pids+=("$flock_pid")
while running "$flock_pid" && ! grep -q '^held ' "$work/flock.out"; do
    sleep 0.05
done
flock_child=$(sed -n 's/^held //p' "$work/flock.out")
[ -n "$flock_child" ] || fail "flock(1) did not take the lock: $(cat "$work/flock.out")"
pids+=("$flock_child")
"$bin" offsets "$cfg" --reset-to earliest >/dev/null 2>"$work/r1b.err"
rc=$?
[ "$rc" -eq 1 ] || fail "reset under flock(1): exit $rc, expected 1"
grep -qF "refused: connector $name is running on this machine" "$work/r1b.err" ||
    fail "reset under flock(1): $(cat "$work/r1b.err")"
kill "$flock_pid" $flock_child; wait "$flock_pid" 2>/dev/null

# 4. An explicit reset: p0 to 2, p1 to 3 (its high watermark).
"$bin" offsets "$cfg" --reset-to "$topic:0=2,$topic:1=3" >"$work/r2.out" 2>"$work/r2.err"
rc=$?
[ "$rc" -eq 0 ] || fail "explicit reset: exit $rc, expected 0: $(cat "$work/r2.err")"
want="$topic [0]: next_offset - -> 2, epoch - -> 1
$topic [1]: next_offset - -> 3, epoch - -> 1
committed to consumer group $group"
[ "$(cat "$work/r2.out")" = "$want" ] || fail "explicit reset printed: $(cat "$work/r2.out")"
got=$(markers)
[ "$got" = "0 2 1
1 3 1" ] || fail "explicit reset: marker table [$got], want p0 2/1, p1 3/1"
got=$(group_offsets)
[ "$got" = "0 2
1 3" ] || fail "explicit reset: group offsets [$got], want 0 2, 1 3"

# 5. latest: every partition to its high watermark, every epoch raised
# (p1 was there already: its epoch still rises, fencing a straggler).
"$bin" offsets "$cfg" --reset-to latest >"$work/r3.out" 2>"$work/r3.err"
rc=$?
[ "$rc" -eq 0 ] || fail "reset latest: exit $rc: $(cat "$work/r3.err")"
want="$topic [0]: next_offset 2 -> 5, epoch 1 -> 2
$topic [1]: next_offset 3 -> 3, epoch 1 -> 2
committed to consumer group $group"
[ "$(cat "$work/r3.out")" = "$want" ] || fail "reset latest printed: $(cat "$work/r3.out")"
got=$(markers)
[ "$got" = "0 5 2
1 3 2" ] || fail "reset latest: marker table [$got], want p0 5/2, p1 3/2"
got=$(group_offsets)
[ "$got" = "0 5
1 3" ] || fail "reset latest: group offsets [$got], want 0 5, 1 3"

# 6. Refusals that change nothing: outside the log, unknown partition,
# malformed spec (a usage error).
"$bin" offsets "$cfg" --reset-to "$topic:0=6" >/dev/null 2>"$work/r4.err"
rc=$?
[ "$rc" -eq 1 ] || fail "offset past the high watermark: exit $rc, expected 1"
grep -qxF "tidemark offsets: refused: $topic [0]: offset 6 is outside the log [0, 5] (log start, high watermark)" \
    "$work/r4.err" || fail "offset past the high watermark: $(cat "$work/r4.err")"
"$bin" offsets "$cfg" --reset-to "$topic:7=0" >/dev/null 2>"$work/r5.err"
rc=$?
[ "$rc" -eq 1 ] || fail "unknown partition: exit $rc, expected 1"
grep -qxF "tidemark offsets: refused: $topic [7] is not a partition of the connector's topics" \
    "$work/r5.err" || fail "unknown partition: $(cat "$work/r5.err")"
"$bin" offsets "$cfg" --reset-to "nonsense" >/dev/null 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "malformed --reset-to: exit $rc, expected 2"
got=$(markers)
[ "$got" = "0 5 2
1 3 2" ] || fail "refusals changed the marker table: [$got]"

# 7. The offsets view now: markers, lag 0, the group agrees.
"$bin" offsets "$cfg" >"$work/o2.out" 2>&1
got=$(awk -v t="$topic" '$1 == t { print $2, $3, $4, $10, $11, $12, $13 }' "$work/o2.out")
want="0 5 2 0 5 0 5
1 3 2 0 3 0 3"
[ "$got" = "$want" ] || fail "offsets after the resets: got [$got], want [$want]"

# 7b. The group commit went through, then the sink refuses the claim (RETRY:
# another writer holds the SQLite file past the sink's busy timeout): the
# markers are unchanged, and the group's offsets are put back as they were,
# so that lag tools do not show a lag the connector does not have.
# The writer holds the file until the reset has ended, however late the
# reset reaches its claim (a lock held for a fixed 12 s let a claim that
# came after it through: "inconclusive: the claim was not refused"), and is
# waited for until it says it holds it, however late it starts.
python3 - "$db" >"$work/lock.out" 2>&1 <<'PY_LOCK' &
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
while True:
    time.sleep(60)
PY_LOCK
lock_pid=$!
pids+=("$lock_pid")
while running "$lock_pid" && ! grep -qx locked "$work/lock.out"; do sleep 0.1; done
grep -qx locked "$work/lock.out" || fail "inconclusive: the SQLite lock was not taken: $(cat "$work/lock.out")"
"$bin" offsets "$cfg" --reset-to "$topic:0=2" >/dev/null 2>"$work/r8.err"
rc=$?
kill "$lock_pid" 2>/dev/null; wait "$lock_pid" 2>/dev/null
[ "$rc" -eq 1 ] || fail "reset while the sink is locked: exit $rc, expected 1"
grep -q "the sink refused the reset (RETRY)" "$work/r8.err" ||
    fail "inconclusive: the claim was not refused: $(cat "$work/r8.err")"
grep -q "consumer group $group is back at its offsets" "$work/r8.err" ||
    fail "claim refused after the group commit: $(cat "$work/r8.err")"
got=$(markers)
[ "$got" = "0 5 2
1 3 2" ] || fail "a refused claim changed the marker table: [$got]"
got=$(group_offsets)
[ "$got" = "0 5
1 3" ] || fail "a refused claim left the group's offsets moved: [$got], want [0 5 / 1 3]"

# The group's members, from Kafka's own tool: how many it describes.
group_members() {
    java -Xmx256m -XX:TieredStopAtLevel=1 \
        "-Dlog4j2.configurationFile=$src/var/kafka/tools-log4j2.properties" \
        -cp "$libs/*" org.apache.kafka.tools.consumer.group.ConsumerGroupCommand \
        --bootstrap-server "$boot" --describe --members --group "$group" 2>/dev/null |
        awk -v g="$group" '$1 == g' | wc -l
}
# kcat joins the group as a member (no commits of its own); waits until
# the broker describes it, so the steps below never race its join.
start_member() {
    kcat -b "$boot" -G "$group" -X enable.auto.commit=false -q "$topic" >/dev/null 2>&1 &
    kcat_pid=$!
    pids+=("$kcat_pid")
    while running "$kcat_pid"; do
        [ "$(group_members)" -ge 1 ] && return 0
        sleep 0.5
    done
    fail "kcat exited before it became a member of $group"
    return 1
}

# 8. A member that joins after the reset found the group empty, before it
# writes anything: the reset must still be refused and change nothing (the
# broker refuses the group commit while the group has a member, so that
# commit goes first). The reset is held by SIGSTOP at the failure point
# right after its emptiness check; the fault must be seen there, else the
# step is inconclusive.
TIDEMARK_FAULT=offsets.group_checked TIDEMARK_FAULT_ACTION=stop TIDEMARK_FAULT_FD=3 \
    "$bin" offsets "$cfg" --reset-to earliest >/dev/null 2>"$work/r7.err" 3>"$work/r7.fault" &
reset_pid=$!
pids+=("$reset_pid")
# Waited for until it stops there or exits, however long a loaded machine
# takes to get there (ctest's timeout bounds it): a fixed limit made a slow
# start inconclusive.
stopped=0
while running "$reset_pid"; do
    if grep -qx offsets.group_checked "$work/r7.fault" 2>/dev/null &&
        [ "$(ps -o stat= -p "$reset_pid" | cut -c1)" = T ]; then
        stopped=1
        break
    fi
    sleep 0.1
done
if [ "$stopped" -ne 1 ]; then
    fail "inconclusive: the reset never stopped at offsets.group_checked: $(cat "$work/r7.err")"
else
    start_member
    kill -CONT "$reset_pid"
fi
wait "$reset_pid"
rc=$?
[ "$rc" -eq 1 ] || fail "reset with a member that joined after the check: exit $rc, expected 1"
grep -q "refused: consumer group $group has 1 active member (state " "$work/r7.err" ||
    fail "member joined after the check: $(cat "$work/r7.err")"
got=$(markers)
[ "$got" = "0 5 2
1 3 2" ] || fail "a member that joined after the check let the reset change the markers: [$got]"

# 9. A member in the consumer group (still kcat): refused before anything.
"$bin" offsets "$cfg" --reset-to earliest >/dev/null 2>"$work/r6.err"
rc=$?
[ "$rc" -eq 1 ] || fail "reset with a group member: exit $rc, expected 1"
grep -q "refused: consumer group $group has 1 active member (state " "$work/r6.err" ||
    fail "reset with a group member: $(cat "$work/r6.err")"
grep -q "stop every host of connector $name first (a reset is offline only)" "$work/r6.err" ||
    fail "group refusal wording: $(cat "$work/r6.err")"
kill "$kcat_pid"; wait "$kcat_pid" 2>/dev/null
got=$(markers)
[ "$got" = "0 5 2
1 3 2" ] || fail "the group refusal changed the marker table: [$got]"

# 10. status --config with a status file left by a killed host: STOPPED,
# partitions from the sink and the broker, exit 2.
start_holder "$state" "$name" RUNNING
stop_holder
"$bin" status --config "$cfg" >"$work/s3.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "status --config of a killed host: exit $rc, expected 2"
grep -q "^  state       STOPPED (host pid $holder_pid gone; it said RUNNING at " "$work/s3.out" ||
    fail "status --config killed: $(grep state "$work/s3.out")"
got=$(awk -v t="$topic" '$1 == t { print $2, $3, $4, $5, $6 }' "$work/s3.out")
want="0 5 2 5 0
1 3 2 3 0"
[ "$got" = "$want" ] || fail "status --config after resets: got [$got], want [$want]"

# 11. Status files alone (no --config): a live FAILED host (exit 2), a live
# RUNNING one (exit 0), then killed (STOPPED, exit 2).
sd=$work/state2
start_holder "$sd" failing FAILED "sink: disk full"
fail_pid=$holder_pid
"$bin" status --state-dir "$sd" failing >"$work/s4.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "status of a FAILED host: exit $rc, expected 2"
grep -qx '  last error  2025-12-02T12:53:50Z: sink: disk full' "$work/s4.out" ||
    fail "FAILED host: no last error line: $(cat "$work/s4.out")"
grep -q "^  state       FAILED (pid $fail_pid, up 1h02m" "$work/s4.out" || fail "FAILED host: state line"

start_holder "$sd" orders RUNNING
run_pid=$holder_pid
"$bin" status --state-dir "$sd" orders >"$work/s5.out" 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "status of a RUNNING host: exit $rc, expected 0"
cat "$work/s5.out"
grep -qx 'connector orders' "$work/s5.out" || fail "RUNNING host: no connector line"
grep -qx '  plugin      sqlite 1.0.0' "$work/s5.out" || fail "RUNNING host: plugin line"
grep -qx '  last batch  hold01-000007 at 2025-12-02T12:54:01Z, 250 records' "$work/s5.out" ||
    fail "RUNNING host: last batch line"
grep -qx '  totals      rows 230, dead letters 3, filtered 5, duplicates 2, batches 7, fenced 0, conflicts 1, retries 4' \
    "$work/s5.out" || fail "RUNNING host: totals line"
grep -qx '  last error  -' "$work/s5.out" || fail "RUNNING host: last error line"
# TOPIC PARTITION NEXT_OFFSET EPOCH HIGH_WATERMARK LAG ROWS DL FILTERED DUP PAUSED
got=$(awk '$1 == "orders" { print $2, $3, $4, $5, $6, $7, $8, $9, $10, $11 }' "$work/s5.out")
want="0 240 2 250 10 230 3 5 2 no
1 - - 12 - 0 0 0 0 yes"
[ "$got" = "$want" ] || fail "RUNNING host partitions: got [$got], want [$want]"
# Both connectors at once: one is FAILED, so exit 2.
"$bin" status --state-dir "$sd" >"$work/s6.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "status of all (one FAILED): exit $rc, expected 2"
[ "$(grep -c '^connector ' "$work/s6.out")" -eq 2 ] || fail "status of all: not two connectors"
# --json: one document.
"$bin" status --state-dir "$sd" orders --json >"$work/s7.json" 2>&1
rc=$?
[ "$rc" -eq 0 ] || fail "status --json: exit $rc, expected 0"
python3 - "$work/s7.json" "$run_pid" <<'PY' || fail "status --json content"
import json, sys
doc = json.load(open(sys.argv[1]))
c = doc["connectors"][0]
assert doc["healthy"] is True, doc
assert c["connector"] == "orders" and c["state"] == "RUNNING", c
assert c["live"] is True and c["pid"] == int(sys.argv[2]), c
assert 3723000 <= c["uptime_ms"] < 3723000 + 60000, c
assert c["last_batch"] == {"id": "hold01-000007", "ms": 1764680041000, "records": 250}, c
assert c["last_error"] is None, c
assert c["totals"]["retries"] == 4 and c["totals"]["conflicts"] == 1, c
p = c["partitions"]
assert [(x["partition"], x["next_offset"], x["high_watermark"], x["lag"], x["paused"]) for x in p] \
    == [(0, 240, 250, 10, False), (1, -1, 12, None, True)], p
PY
# --watch redraws until SIGINT: interrupted once its second frame is out
# (a fixed 2.5 s held two frames only if the command started within 1.5 s).
"$bin" status --state-dir "$sd" orders --watch 1 >"$work/w.out" 2>&1 &
watch_pid=$!
while running "$watch_pid" &&
    [ "$(grep -c '^every 1s: tidemark status' "$work/w.out")" -lt 2 ]; do
    sleep 0.1
done
kill -INT "$watch_pid"
wait "$watch_pid"
rc=$?
[ "$rc" -eq 0 ] || fail "status --watch: exit $rc after SIGINT, expected 0"
[ "$(grep -c '^every 1s: tidemark status' "$work/w.out")" -ge 2 ] ||
    fail "status --watch: fewer than two frames"

kill -9 "$run_pid"; wait "$run_pid" 2>/dev/null
"$bin" status --state-dir "$sd" orders >"$work/s8.out" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "status of a killed host: exit $rc, expected 2"
grep -q "^  state       STOPPED (host pid $run_pid gone; it said RUNNING at " "$work/s8.out" ||
    fail "killed host: $(grep state "$work/s8.out")"
kill -9 "$fail_pid"; wait "$fail_pid" 2>/dev/null

# 12. Errors: unknown connector, missing state dir, usage.
"$bin" status --state-dir "$sd" nobody >/dev/null 2>"$work/e1.err"
rc=$?
[ "$rc" -eq 1 ] || fail "unknown connector: exit $rc, expected 1"
grep -qxF "tidemark status: no status for connector nobody in $sd" "$work/e1.err" ||
    fail "unknown connector: $(cat "$work/e1.err")"
"$bin" status --state-dir "$work/none" >/dev/null 2>"$work/e2.err"
rc=$?
[ "$rc" -eq 1 ] || fail "missing state dir: exit $rc, expected 1"
grep -qF "tidemark status: state directory $work/none does not exist" "$work/e2.err" ||
    fail "missing state dir: $(cat "$work/e2.err")"
"$bin" status --bogus >/dev/null 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "status --bogus: exit $rc, expected 1"
"$bin" offsets >/dev/null 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "offsets without CONFIG: exit $rc, expected 2"

bash "$src/scripts/kafka.sh" topics --delete --topic "$topic" >/dev/null 2>&1
[ "$failed" -eq 0 ] && echo "status_offsets: all checks passed"
exit "$failed"
