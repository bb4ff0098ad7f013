#!/usr/bin/env bash
# Soak of the iceberg-lite sink's background maintenance: the same steady load
# (RATE records/s for MINUTES, batches of BATCH records, max_wait_ms WAIT_MS,
# records of 200-300 bytes on 4 partitions) into a table without maintenance,
# then into one with "maintenance": true, each run printing every minute
# (and at the end) the files in data/ and metadata/ and the table directory's
# size, counted in the directory (find, du), never from the connector's
# counters. Prints a summary line per run at the end.
#
#   tests/bench/iceberg_soak.sh [MINUTES] [RATE]     (defaults 5 and 20000)
#
# Environment: BATCH (5000), WAIT_MS (500), MODES ("off on"), GRACE (60),
# VACUUM_EVERY (30), KEEP (100), MIN_FILES (16), TARGET (target_file_size,
# 134217728), TIDEMARK_BENCH_BUILD (build). Services must be running
# (scripts/env.sh); topics and tables are made here and removed at exit.
set -euo pipefail
cd "$(dirname "$0")/../.."

MINUTES="${1:-5}"
RATE="${2:-20000}"
BATCH="${BATCH:-5000}"
WAIT_MS="${WAIT_MS:-500}"
MODES="${MODES:-off on}"
GRACE="${GRACE:-60}"
VACUUM_EVERY="${VACUUM_EVERY:-30}"
KEEP="${KEEP:-100}"
MIN_FILES="${MIN_FILES:-16}"
TARGET="${TARGET:-134217728}"
B="${TIDEMARK_BENCH_BUILD:-build}"
cmake --build "$B" -j2 --target tidemark tm_sink_iceberg_lite >/dev/null
B="$(cd "$B" && pwd)"
# shellcheck source=../../scripts/env.sh
. scripts/env.sh
export TIDEMARK_PLUGIN_PATH="$B/plugins-out"
TM="$B/host/tidemark"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/tidemark-soak.XXXXXX")"
TOPICS=()
say() { echo "[soak $(date -u +%H:%M:%S)] $*"; }

cleanup() {
  local rc=$? pids
  set +e
  pids="$(jobs -pr)"
  # shellcheck disable=SC2086 # one pid per word
  [ -z "$pids" ] || { kill $pids 2>/dev/null; wait 2>/dev/null; }
  if [ "${#TOPICS[@]}" -gt 0 ]; then
    bash scripts/kafka.sh topics --delete --topic "$(IFS='|'; echo "${TOPICS[*]}")" \
      >/dev/null 2>&1
  fi
  if [ "$rc" -eq 0 ]; then rm -rf "$WORK"; else say "FAILED (exit $rc); work dir $WORK"; fi
  exit "$rc"
}
trap cleanup EXIT

# Records at RATE per second for SECONDS on stdout (for kcat -P), paced in
# 1 ms steps; ids from 0, a note padding each to 200-300 bytes.
produce() {
  python3 - "$1" "$2" <<'PY'
import json, random, sys, time
rate, seconds = int(sys.argv[1]), float(sys.argv[2])
rnd = random.Random(1)
pad = "".join(rnd.choice("abcdefghij ") for _ in range(400))
start, n, out = time.time(), 0, sys.stdout
while n < rate * seconds:
    due = start + n / rate
    now = time.time()
    while now < due:
        time.sleep(max(0.0, min(0.001, due - now)))
        now = time.time()
    out.write(json.dumps({"id": n, "user_id": rnd.randint(1, 10**6),
                          "amount": round(rnd.uniform(0, 1e4), 2),
                          "note": pad[: rnd.randint(120, 220)]}) + "\n")
    n += 1
    if n % 200 == 0:
        out.flush()
out.flush()
took = time.time() - start
sys.stderr.write(f"produced {n} records in {took:.1f} s ({n / took:.0f}/s)\n")
PY
}

sample() {  # sample TABLE LABEL
  local data meta size
  data="$(find "$1/data" -type f 2>/dev/null | wc -l)"
  meta="$(find "$1/metadata" -type f 2>/dev/null | wc -l)"
  size="$(du -sm "$1" 2>/dev/null | cut -f1)"
  say "$2 data_files=$data metadata_files=$meta dir_mib=${size:-0}"
}

SUMMARY=()
for mode in $MODES; do
  topic="icesoak-$mode-$(date +%s%N | cut -c8-16)-$$"
  bash scripts/kafka.sh topics --create --topic "$topic" --partitions 4 \
    --replication-factor 1 >/dev/null
  TOPICS+=("$topic")
  table="$WORK/table-$mode"
  maint=""
  if [ "$mode" = on ]; then
    maint=", \"maintenance\": true, \"maintenance_min_files\": $MIN_FILES,
      \"maintenance_grace_seconds\": $GRACE,
      \"maintenance_vacuum_interval_seconds\": $VACUUM_EVERY"
  fi
  cat >"$WORK/$mode.json" <<JSON
{"name": "$topic", "kafka": {"bootstrap_servers": "$TIDEMARK_KAFKA_BOOTSTRAP",
  "topics": ["$topic"]},
 "batch": {"max_records": $BATCH, "max_wait_ms": $WAIT_MS},
 "sink": {"plugin": "iceberg_lite", "settings": {"path": "$table",
   "keep_snapshots": $KEEP, "target_file_size": $TARGET $maint}},
 "state_dir": "$WORK/state-$mode",
 "mapping": {"mode": "json", "columns": [
   {"name": "id", "pointer": "/id", "type": "int", "required": true},
   {"name": "user_id", "pointer": "/user_id", "type": "int"},
   {"name": "amount", "pointer": "/amount", "type": "float"},
   {"name": "note", "pointer": "/note", "type": "text"}]}}
JSON
  "$TM" run "$WORK/$mode.json" >"$WORK/$mode.log" 2>&1 &
  host=$!
  say "maintenance $mode: $RATE records/s for $MINUTES min, batches of $BATCH ($WAIT_MS ms)"
  produce "$RATE" "$((MINUTES * 60))" 2>"$WORK/produce-$mode.err" |
    kcat -P -q -b "$TIDEMARK_KAFKA_BOOTSTRAP" -t "$topic" -X linger.ms=20 &
  producer=$!
  t0=$SECONDS
  for ((m = 1; m <= MINUTES; m++)); do
    while [ $((SECONDS - t0)) -lt $((m * 60)) ]; do sleep 1; done
    sample "$table" "maintenance $mode, minute $m:"
  done
  wait "$producer"
  cat "$WORK/produce-$mode.err"
  # Caught up: verify's count of what the table holds against Kafka's.
  want=$((RATE * MINUTES * 60))
  for _ in $(seq 1 600); do
    if "$TM" verify "$WORK/$mode.json" 2>/dev/null | grep -q "kafka_records=$want "; then
      break
    fi
    sleep 1
  done
  "$TM" verify "$WORK/$mode.json" | tail -1
  sample "$table" "maintenance $mode, caught up after $((SECONDS - t0)) s:"
  SUMMARY+=("$(sample "$table" "maintenance $mode, end:")")
  compactions="$(grep -c 'maintenance: after batch' "$WORK/$mode.log" || true)"
  vacuums="$(grep -c 'maintenance: vacuum removed' "$WORK/$mode.log" || true)"
  say "maintenance $mode: $compactions compactions, $vacuums vacuums that removed files"
  kill -TERM "$host"
  wait "$host" || true
done
for line in "${SUMMARY[@]}"; do echo "$line"; done
