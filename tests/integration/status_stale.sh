#!/usr/bin/env bash
# `tidemark status` of a host that stopped rewriting its status file: a
# real `tidemark run` (SQLite sink, real broker) is frozen with SIGSTOP, as
# a hung host or one whose state directory's disk is full looks to a
# reader: the file keeps saying RUNNING. Past TM_STATUS_STALE_MS (10 s)
# `status` must say the file is stale and exit 3 (never 0, healthy); once
# the host runs again it is healthy again. Then a SIGTERM stops it cleanly.
# usage: status_stale.sh TIDEMARK SOURCE_DIR WORK_DIR
set -u
bin=$1 src=$2 work=$3
. "$src/tests/integration/lib.sh"
host_pid=
cleanup() { [ -n "$host_pid" ] && { kill -CONT "$host_pid"; kill -9 "$host_pid"; } 2>/dev/null; }
trap cleanup EXIT

need_kafka

rm -rf "$work" && mkdir -p "$work" || exit 1
topic=tm-status-stale-$$-$(date +%s)
name=status-stale-$$
state=$work/state
cfg=$work/connector.json

bash "$src/scripts/kafka.sh" topics --create --topic "$topic" --partitions 1 \
    --replication-factor 1 >/dev/null || { echo "FAIL: cannot create $topic"; exit 1; }
for i in 1 2 3 4 5; do echo "{\"id\":$i}"; done | kcat -b "$boot" -P -t "$topic" -p 0 ||
    { echo "FAIL: produce"; exit 1; }
cat >"$cfg" <<JSON
{
  "name": "$name",
  "kafka": {"bootstrap_servers": "$boot", "topics": ["$topic"]},
  "batch": {"max_wait_ms": 100},
  "sink": {"plugin": "sqlite", "settings": {"path": "$work/sink.db", "table": "events"}},
  "mapping": {"mode": "json",
              "columns": [{"name": "id", "pointer": "/id", "type": "int"}]},
  "state_dir": "$state"
}
JSON

"$bin" run "$cfg" >"$work/host.log" 2>&1 &
host_pid=$!

# Healthy and caught up: exit 0 and the five records applied (the
# partition's NEXT_OFFSET column, from the status file the host wrote).
st() { "$bin" status --state-dir "$state" "$name" >"$work/status.out" 2>&1; }
ok=0
for _ in $(seq 300); do
    st
    rc=$?
    if [ "$rc" -eq 0 ] && awk -v t="$topic" '$1 == t && $3 == 5 { f = 1 } END { exit !f }' \
        "$work/status.out"; then
        ok=1
        break
    fi
    sleep 0.1
done
[ "$ok" -eq 1 ] || { fail "the host never ran healthy to offset 5: $(cat "$work/status.out")"; exit 1; }

# Frozen: its file stays RUNNING. Within the first seconds that is still
# healthy (a file is at most a second old on a running host) ...
kill -STOP "$host_pid"
[ "$(ps -o stat= -p "$host_pid" | cut -c1)" = T ] ||
    { fail "inconclusive: the host is not stopped"; exit 1; }
frozen_at=$(date +%s%N)
st
rc=$?
# The file's last write, by the host's own clock reading: staleness counts
# from there (up to a second before the freeze), not from the freeze.
"$bin" status --state-dir "$state" "$name" --json >"$work/frozen.json" 2>&1
written_ms=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["connectors"][0]["updated_ms"])' \
    "$work/frozen.json") || { fail "inconclusive: no updated_ms in $(cat "$work/frozen.json")"; exit 1; }
[ "$rc" -eq 0 ] || fail "status right after the freeze: exit $rc, expected 0: $(cat "$work/status.out")"
# ... and past 10 s it must not be: exit 3, the stale line.
stale=0
for _ in $(seq 40); do
    sleep 0.5
    st
    rc=$?
    if [ "$rc" -eq 3 ] &&
        grep -q "^  stale       its status file is [0-9]*s old (a running host rewrites it every second): the host is hung or cannot write its state directory" \
            "$work/status.out"; then
        stale=1
        break
    fi
done
now_ms=$(($(date +%s%N) / 1000000))
waited_ms=$((($(date +%s%N) - frozen_at) / 1000000))
[ "$stale" -eq 1 ] ||
    fail "the host frozen for $waited_ms ms: status exit $rc, no stale line: $(cat "$work/status.out")"
[ "$stale" -eq 1 ] && [ $((now_ms - written_ms)) -le 10000 ] &&
    fail "stale $((now_ms - written_ms)) ms after the file's last write, before the 10 s the docs give"
grep -q '^  state       RUNNING (pid ' "$work/status.out" ||
    fail "the frozen host's state line: $(grep state "$work/status.out")"
"$bin" status --state-dir "$state" "$name" --json >"$work/status.json" 2>&1
rc=$?
[ "$rc" -eq 3 ] || fail "status --json of the frozen host: exit $rc, expected 3"
python3 - "$work/status.json" <<'PY' || fail "status --json of the frozen host: $(cat "$work/status.json")"
import json, sys
d = json.load(open(sys.argv[1]))
c = d["connectors"][0]
assert d["healthy"] is False, d
assert isinstance(c["stale_ms"], int) and c["stale_ms"] > 10000, c
PY

"$bin" status --state-dir "$state" "$name" --format prometheus >"$work/status.prom" 2>&1
rc=$?
[ "$rc" -eq 3 ] || fail "status --format prometheus of the frozen host: exit $rc, expected 3"
grep -qx "tidemark_connector_status_stale{connector=\"$name\"} 1" "$work/status.prom" ||
    fail "prometheus: no stale sample of 1: $(grep stale "$work/status.prom")"

# Running again: healthy within a few seconds (a write a second).
kill -CONT "$host_pid"
ok=0
for _ in $(seq 100); do
    st && ok=1 && break
    sleep 0.1
done
[ "$ok" -eq 1 ] || fail "the host continued: status still $(cat "$work/status.out")"
"$bin" status --state-dir "$state" "$name" --format prometheus >"$work/status.prom" 2>&1
grep -qx "tidemark_connector_status_stale{connector=\"$name\"} 0" "$work/status.prom" ||
    fail "prometheus after SIGCONT: $(grep stale "$work/status.prom")"

kill -TERM "$host_pid"
wait "$host_pid"
rc=$?
host_pid=
[ "$rc" -eq 0 ] || fail "the host's exit after SIGTERM: $rc: $(tail -3 "$work/host.log")"

[ "$failed" -eq 0 ] && echo "status_stale: OK" && rm -rf "$work"
exit "$failed"
