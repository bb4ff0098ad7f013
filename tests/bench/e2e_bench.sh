#!/usr/bin/env bash
# tidemark end to end against the ceilings, in one invocation (docs/benchmarks.md):
#   1. consume ceiling: a bare librdkafka loop (consume_ceiling) on the same topic;
#   2. tidemark run into each sink, from the first record to the sink's markers at the
#      topic's end: records/s, its ratio to (1), and peak RSS;
#   3. each sink's own ceiling (the per-sink benchmarks' bare loop, same batch size);
#   4. freshness into SQLite at fixed publish rates: p50/p95/p99 of (the moment the sink's
#      marker passed a record - the record's timestamp);
#   5. the Kafka Connect peer (tests/bench/connect_peer.sh) when present.
# Usage: tests/bench/e2e_bench.sh [--records N] [--batch N] [--sinks LIST] [--smoke]
#   --smoke: small sizes, a couple of minutes, for CI: checks the script still works.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT="$PWD"
exec </dev/null

RECORDS=1000000
BATCH=10000
SINKS="sqlite,postgres,iceberg_lite"
RATES="1000,10000"
FRESH_SECONDS=20
SMOKE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --records) RECORDS="$2"; shift 2 ;;
    --batch) BATCH="$2"; shift 2 ;;
    --sinks) SINKS="$2"; shift 2 ;;
    --rates) RATES="$2"; shift 2 ;;
    --smoke) SMOKE=1; shift ;;
    *) echo "e2e_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ "$SMOKE" = 1 ]; then
  RECORDS=20000 BATCH=1000 RATES=1000 FRESH_SECONDS=5
fi

say() { echo "e2e_bench: $*"; }
B=build
[ -x "$B/host/tidemark" ] || { cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null; }
cmake --build "$B" -j2 --target tidemark consume_ceiling tm_sink_sqlite tm_sink_postgres \
  tm_sink_iceberg_lite sqlite_bench postgres_bench iceberg_bench >/dev/null
bash scripts/kafka.sh start >/dev/null
bash scripts/postgres.sh start >/dev/null
# shellcheck source=../../scripts/env.sh
. scripts/env.sh
export TIDEMARK_PLUGIN_PATH="$ROOT/$B/plugins-out"
KB="$TIDEMARK_KAFKA_BOOTSTRAP"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/tidemark-bench.XXXXXX")"
TM="$ROOT/$B/host/tidemark"
say "work dir $WORK; $RECORDS records, batches of $BATCH, sinks $SINKS"
say "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r), $(date -u +%F)"

topic() {
  local t="$1-$(date +%s%N | cut -c8-16)"
  bash scripts/kafka.sh topics --create --topic "$t" --partitions 8 --replication-factor 1 >/dev/null
  echo "$t"
}

# The topic, filled once; every measurement reads the same records.
TOPIC="$(topic bench)"
python3 "${TIDEMARK_BENCH_GEN:-tests/bench/gen_records.py}" "$RECORDS" 1 >"$WORK/records.jsonl"
t0=$(date +%s.%N)
kcat -q -P -b "$KB" -t "$TOPIC" -X linger.ms=20 -X batch.num.messages=10000 \
  -X enable.idempotence=true <"$WORK/records.jsonl"
t1=$(date +%s.%N)
say "produced $RECORDS records ($(du -h "$WORK/records.jsonl" | cut -f1)) in $(python3 -c "print(round($t1-$t0,1))") s"

# The connector's mapping: every field of the generated records, typed from a sample.
MAPPING="$(head -1 "$WORK/records.jsonl" | python3 -c '
import json, re, sys
rec = json.loads(sys.stdin.readline())
cols = []
for k, v in rec.items():
    t = ("bool" if isinstance(v, bool) else "int" if isinstance(v, int) else
         "float" if isinstance(v, float) else
         "timestamp" if isinstance(v, str) and re.match(r"\d{4}-\d\d-\d\dT", v) else
         "json" if isinstance(v, (dict, list)) else "text")
    cols.append({"name": k, "pointer": "/" + k, "type": t, "required": k == "id"})
print(json.dumps({"mode": "json", "columns": cols}))')"

ceiling="$("$B/tests/bench/consume_ceiling" "$KB" "$TOPIC" 8 "$RECORDS")"
say "$ceiling"
ceil_rate="$(sed -n 's/.*records_per_s=\([0-9]*\).*/\1/p' <<<"$ceiling")"

config() {   # config NAME SINK FILE [TOPIC]
  local name="$1" sink="$2" file="$3" t="${4:-$TOPIC}" settings
  case "$sink" in
    sqlite) settings="{\"path\": \"$WORK/$name.db\", \"table\": \"t\", \"synchronous\": \"FULL\"}" ;;
    postgres) settings="{\"conninfo\": \"\${env:TIDEMARK_PG_CONNINFO}\", \"table\": \"bench_$name\"}" ;;
    iceberg_lite) settings="{\"path\": \"$WORK/$name-table\"}" ;;
  esac
  cat >"$file" <<EOF
{"name": "$name", "kafka": {"bootstrap_servers": "$KB", "topics": ["$t"]},
 "batch": {"max_records": $BATCH, "max_wait_ms": 200},
 "sink": {"plugin": "$sink", "settings": $settings},
 "mapping": $MAPPING, "state_dir": "$WORK/state"}
EOF
}

# The sum of the markers, from the host's status file (rewritten at every commit).
marker_sum() {
  python3 - "$WORK/state/$1/status.json" <<'EOF' 2>/dev/null || echo 0
import json, sys
d = json.load(open(sys.argv[1]))
print(sum(p["next_offset"] for p in d.get("partitions", [])))
EOF
}

declare -A RATE RSS
for sink in ${SINKS//,/ }; do
  name="e2e-$sink-$$"
  config "$name" "$sink" "$WORK/$name.json"
  "$TM" run "$WORK/$name.json" 2>"$WORK/$name.log" &
  pid=$!
  # Timed from the first commit, as the ceiling is timed from the first record: process
  # start and the group join are not throughput.
  first=0
  until [ "$first" -gt 0 ]; do
    kill -0 "$pid" 2>/dev/null || { say "tidemark into $sink died"; tail "$WORK/$name.log"; exit 1; }
    first="$(marker_sum "$name")"
    sleep 0.01
  done
  t0=$(date +%s.%N)
  until [ "$(marker_sum "$name")" = "$RECORDS" ]; do
    kill -0 "$pid" 2>/dev/null || { say "tidemark into $sink died"; tail "$WORK/$name.log"; exit 1; }
    sleep 0.05
  done
  t1=$(date +%s.%N)
  RSS[$sink]="$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")"
  kill -TERM "$pid"; wait "$pid" || true
  RATE[$sink]="$(python3 -c "print(round(($RECORDS-$first)/($t1-$t0)))")"
  say "tidemark -> $sink: ${RATE[$sink]} records/s ($(python3 -c "print(round(${RATE[$sink]}/$ceil_rate,3))") x the consume ceiling), peak RSS $((RSS[$sink] / 1024)) MiB"
done

# Each sink's own ceiling at the same batch size (its per-sink benchmark's bare loop).
declare -A SCEIL
rows=$((RECORDS < 200000 ? RECORDS : 200000))
for sink in ${SINKS//,/ }; do
  case "$sink" in
    sqlite) SCEIL[$sink]="$("$B/tests/bench/sqlite_bench" --rows "$rows" --batch "$BATCH" --reps 3 | sed -n 's/^bare loop: \([0-9]*\).*/\1/p')" ;;
    postgres) SCEIL[$sink]="$("$B/tests/bench/postgres_bench" --rows "$rows" --batch "$BATCH" --reps 3 | sed -n 's/^doc text: (b) copy text *\([0-9]*\).*/\1/p')" ;;
    iceberg_lite) SCEIL[$sink]="$("$B/tests/bench/iceberg_bench" --rows "$rows" --batch "$BATCH" --reps 3 | sed -n 's/^ceiling (encoder + fdatasync per batch): \([0-9]*\).*/\1/p')" ;;
  esac
  say "$sink ceiling (bare loop, batches of $BATCH): ${SCEIL[$sink]} rows/s; tidemark end to end / ceiling: $(python3 -c "print(round(${RATE[$sink]}/${SCEIL[$sink]},3))")"
done

# Freshness into SQLite: publish at a fixed rate while the host runs; sample the sink's
# markers every 10 ms; a record is fresh in the sink when its partition's marker passes it.
for rate in ${RATES//,/ }; do
  ft="$(topic fresh)"
  name="fresh-$rate-$$"
  config "$name" sqlite "$WORK/$name.json" "$ft"
  "$TM" run "$WORK/$name.json" 2>"$WORK/$name.log" &
  pid=$!
  sleep 3   # joined and claimed
  python3 - "$WORK/$name.db" "$WORK/$name.samples" "$((FRESH_SECONDS + 5))" <<'EOF' &
import sqlite3, sys, time
db, out, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
end = time.time() + seconds
with open(out, "w") as f:
    while time.time() < end:
        try:
            c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            rows = c.execute('SELECT "partition", next_offset FROM tidemark_markers').fetchall()
            c.close()
            now = int(time.time() * 1000)
            for p, n in rows:
                f.write(f"{now} {p} {n}\n")
        except sqlite3.Error:
            pass
        time.sleep(0.01)
EOF
  sampler=$!
  python3 - "$rate" "$FRESH_SECONDS" "$WORK/records.jsonl" <<'EOF' | kcat -q -P -b "$KB" -t "$ft" -X linger.ms=5
import sys, time
rate, seconds = int(sys.argv[1]), float(sys.argv[2])
start, n = time.time(), 0
for line in open(sys.argv[3]):
    if n >= rate * seconds:
        break
    due = start + n / rate
    while time.time() < due:
        time.sleep(max(0.0, min(0.001, due - time.time())))
    sys.stdout.write(line)
    n += 1
    if n % 100 == 0:
        sys.stdout.flush()
EOF
  wait "$sampler"
  kill -TERM "$pid"; wait "$pid" || true
  kcat -q -C -b "$KB" -t "$ft" -o beginning -e -f '%p %o %T\n' >"$WORK/$name.ts"
  python3 - "$WORK/$name.ts" "$WORK/$name.samples" "$rate" <<'EOF'
import bisect, collections, sys
ts_file, samples_file, rate = sys.argv[1], sys.argv[2], sys.argv[3]
seen = collections.defaultdict(list)          # partition -> [(time, next_offset)]
for line in open(samples_file):
    t, p, n = map(int, line.split())
    seen[p].append((t, n))
lat = []
for line in open(ts_file):
    p, o, t = map(int, line.split())
    s = seen.get(p, [])
    offs = [n for _, n in s]
    i = bisect.bisect_right(offs, o)           # first sample with next_offset > o
    if i < len(s):
        lat.append(s[i][0] - t)
lat.sort()
if not lat:
    print(f"e2e_bench: freshness at {rate} records/s: no samples"); sys.exit(1)
q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))]
print(f"e2e_bench: freshness into sqlite at {rate} records/s ({len(lat)} records): "
      f"p50 {q(0.5)} ms, p95 {q(0.95)} ms, p99 {q(0.99)} ms")
EOF
done

if [ -x tests/bench/connect_peer.sh ] && [[ ",$SINKS," == *,postgres,* ]]; then
  peer="$(bash tests/bench/connect_peer.sh $([ "$SMOKE" = 1 ] && echo --smoke) | grep '^peer:' | tail -1 || true)"
  if [ -n "$peer" ]; then
    say "$peer"
    prate="$(sed -n 's/.*records_per_s=\([0-9]*\).*/\1/p' <<<"$peer")"
    say "tidemark -> postgres / Kafka Connect peer: $(python3 -c "print(round(${RATE[postgres]}/$prate,2))")"
  fi
fi
say "done; work dir $WORK"
