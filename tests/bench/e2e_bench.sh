#!/usr/bin/env bash
# tidemark end to end, in one invocation, every figure with its ratio against a baseline
# measured in the same invocation (docs/benchmarks.md, "End to end"). Parts (--parts):
#   throughput  the consume ceiling (bare librdkafka loop); tidemark run into each sink for
#               each batch size, from the first commit to the markers at the topic's end,
#               against that sink's own ceiling (its per-sink benchmark's bare loop);
#   freshness   each sink at fixed publish rates: p50/p95/p99 of (the sink's marker passing
#               a record - the record's timestamp), against a bare consumer's arrival;
#   memory      peak RSS of a host draining backlogs of MEM_BACKLOGS records into each sink of
#               --mem-sinks (SQLite), from a topic of --mem-partitions partitions (8); with
#               BENCH_MEM_VARIANTS, each variant's librdkafka settings in turn, --mem-rounds times;
#   scaling     1, 2, 4 connectors in one process; 2 processes in one group;
#   restart     launch -> claim and -> first commit with RESTART_BACKLOGS pending;
#   dedup       each sink of --dedup-sinks for each batch size and share of resent records
#               (--dedup-resent, percent): append, append with dedup and upsert, records/s
#               and the ratios dedup/append and upsert/append;
#   plot        the throughput by sink and batch size as a PNG (matplotlib, scripts/python-venv.sh);
#   peer        the Kafka Connect peer (tests/bench/connect_peer.sh), when postgres is a sink.
# The parts are in tests/bench/e2e/*.sh; marker_sampler (tests/bench/marker_sampler.c)
# is the clock of every part: it reads the sink's own markers through the plugin.
#
# Usage: tests/bench/e2e_bench.sh [--parts LIST] [--records N] [--batch N] [--batches LIST]
#          [--sinks LIST] [--rates LIST] [--fresh-seconds S] [--mem-backlogs LIST]
#          [--mem-sinks LIST] [--mem-partitions N] [--mem-rounds N]
#          [--restart-backlogs LIST] [--scaling-sinks LIST] [--connectors LIST]
#          [--dedup-sinks LIST] [--dedup-resent LIST]
#          [--results DIR] [--smoke]
#   --smoke: tiny sizes for every part, a couple of minutes, for CI: checks that the
#            script still works; the numbers are not judged.
# Env: TIDEMARK_BENCH_BUILD (build dir, default build), BENCH_KEEP=1 (keep topics, the
#      PostgreSQL schema and the work dir), BENCH_TIMEOUT (seconds per wait, 1800),
#      BENCH_PERF=1 (perf record -g of every drained host, reports by shared object),
#      BENCH_KAFKA_PROPERTIES (a JSON object of librdkafka settings for every connector),
#      BENCH_MEM_VARIANTS (the memory part's A/B: one variant a line, "NAME JSON-OBJECT" or
#      "NAME" alone for tidemark's own sizing; run alternately, the first is the baseline).
# Results: every figure in RESULTS/results.tsv, the table (markdown) in RESULTS/report.md,
# the plot in RESULTS/bench-throughput.png; RESULTS defaults to var/bench/e2e-DATE-PID.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT="$PWD"
exec </dev/null

PARTS="throughput,freshness,memory,scaling,restart,dedup,plot,peer"
RECORDS=1000000
BATCH=10000
BATCHES="100,1000,10000"
SINKS="sqlite,postgres,iceberg_lite"
RATES="1000,10000"
FRESH_SECONDS=20
FRESH_INTERVAL=10
MEM_BACKLOGS="1000000,10000000"
MEM_SINKS="sqlite"
MEM_PARTS=8
MEM_ROUNDS=1
RESTART_BACKLOGS="0,1000000,10000000"
SCALING_SINKS="sqlite,postgres"
SCALING_CONNECTORS="1,2,4"
DEDUP_SINKS="sqlite,postgres"
DEDUP_RESENT="0,10"
RESULTS=""
SMOKE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --parts) PARTS="$2"; shift 2 ;;
    --records) RECORDS="$2"; shift 2 ;;
    --batch) BATCH="$2"; shift 2 ;;
    --batches) BATCHES="$2"; shift 2 ;;
    --sinks) SINKS="$2"; shift 2 ;;
    --rates) RATES="$2"; shift 2 ;;
    --fresh-seconds) FRESH_SECONDS="$2"; shift 2 ;;
    --mem-backlogs) MEM_BACKLOGS="$2"; shift 2 ;;
    --mem-sinks) MEM_SINKS="$2"; shift 2 ;;
    --mem-partitions) MEM_PARTS="$2"; shift 2 ;;
    --mem-rounds) MEM_ROUNDS="$2"; shift 2 ;;
    --restart-backlogs) RESTART_BACKLOGS="$2"; shift 2 ;;
    --scaling-sinks) SCALING_SINKS="$2"; shift 2 ;;
    --connectors) SCALING_CONNECTORS="$2"; shift 2 ;;
    --dedup-sinks) DEDUP_SINKS="$2"; shift 2 ;;
    --dedup-resent) DEDUP_RESENT="$2"; shift 2 ;;
    --results) RESULTS="$2"; shift 2 ;;
    --smoke) SMOKE=1; shift ;;
    -h|--help) awk 'NR > 1 && /^# shellcheck/ { next } NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "e2e_bench: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ "$SMOKE" = 1 ]; then
  RECORDS=20000 BATCH=1000 BATCHES=1000 RATES=1000 FRESH_SECONDS=4
  MEM_BACKLOGS=20000,40000 RESTART_BACKLOGS=0,40000 SCALING_SINKS=sqlite SCALING_CONNECTORS=1,2
  DEDUP_RESENT=10
fi
TIMEOUT="${BENCH_TIMEOUT:-$([ "$SMOKE" = 1 ] && echo 300 || echo 1800)}"
PARTS_N=8
has_part() { [[ ",$PARTS," == *",$1,"* ]]; }

# The parts, one file each (sourced one by one so that shellcheck -x follows them).
# shellcheck source-path=SCRIPTDIR
. tests/bench/e2e/lib.sh
# shellcheck source=e2e/big_topic.sh
. tests/bench/e2e/big_topic.sh
# shellcheck source=e2e/throughput.sh
. tests/bench/e2e/throughput.sh
# shellcheck source=e2e/freshness.sh
. tests/bench/e2e/freshness.sh
# shellcheck source=e2e/memory.sh
. tests/bench/e2e/memory.sh
# shellcheck source=e2e/scaling.sh
. tests/bench/e2e/scaling.sh
# shellcheck source=e2e/restart.sh
. tests/bench/e2e/restart.sh
# shellcheck source=e2e/dedup.sh
. tests/bench/e2e/dedup.sh
# shellcheck source=e2e/plot.sh
. tests/bench/e2e/plot.sh
# shellcheck source=e2e/peer.sh
. tests/bench/e2e/peer.sh

B="${TIDEMARK_BENCH_BUILD:-build}"
[ -f "$B/CMakeCache.txt" ] || cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$B" -j2 --target tidemark consume_ceiling marker_sampler tm_sink_sqlite \
  tm_sink_postgres tm_sink_iceberg_lite sqlite_bench postgres_bench iceberg_bench >/dev/null
# Absolute from here on (the build dir may be configured from another source tree, e.g.
# a clean export of a commit, so that the figures belong to that commit).
B="$(cd "$B" && pwd)"
bash scripts/kafka.sh start >/dev/null
bash scripts/postgres.sh start >/dev/null
# shellcheck source=../../scripts/env.sh
. scripts/env.sh
export TIDEMARK_PLUGIN_PATH="$B/plugins-out"
KB="$TIDEMARK_KAFKA_BOOTSTRAP"
TM="$B/host/tidemark"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/tidemark-bench.XXXXXX")"
RESULTS="${RESULTS:-var/bench/e2e-$(date -u +%Y%m%dT%H%M%SZ)-$$}"
mkdir -p "$RESULTS"
RESULTS="$(cd "$RESULTS" && pwd)"
# This invocation's PostgreSQL tables live in their own schema, dropped at exit.
PG_SCHEMA="tm_e2e_bench_$$"

cleanup() {
  local rc=$?
  set +e
  # Whatever this script started and is still running (hosts, samplers, producers).
  local pids
  pids="$(jobs -pr)"
  # shellcheck disable=SC2086 # one pid per word
  [ -z "$pids" ] || { kill $pids 2>/dev/null; wait 2>/dev/null; }
  if [ "${BENCH_KEEP:-0}" != 1 ]; then
    delete_topics
    psql "$TIDEMARK_PG_CONNINFO" -qXc "DROP SCHEMA IF EXISTS $PG_SCHEMA CASCADE" >/dev/null 2>&1
    [ "$rc" -ne 0 ] || rm -rf "$WORK"   # kept for the logs when it failed
  fi
  [ "$rc" -eq 0 ] || say "FAILED (exit $rc); work dir $WORK"
  exit "$rc"
}
trap cleanup EXIT

say "parts $PARTS; $RECORDS records; work dir $WORK; results $RESULTS"
say "build $B (source $(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$B/CMakeCache.txt"), $(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$B/CMakeCache.txt"))"
say "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), kernel $(uname -r), $(date)"
: >"$RESULTS/results.tsv"

# The records, generated once, when a part reads them (the big topic repeats them; plot
# and peer alone need none).
if [[ ",$PARTS," =~ ,(throughput|freshness|memory|scaling|restart|dedup), ]]; then
  python3 tests/bench/gen_records.py "$RECORDS" 1 >"$WORK/records.jsonl"
else
  python3 tests/bench/gen_records.py 1 1 >"$WORK/records.jsonl"
fi
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

T_ALL=$SECONDS
for part in throughput freshness memory scaling restart dedup; do
  if has_part "$part"; then
    t0=$SECONDS
    "part_$part"
    say "part $part took $((SECONDS - t0)) s"
  fi
done
# The big topic is the disk's main tenant: gone as soon as its parts are done.
if [ "${BENCH_KEEP:-0}" != 1 ]; then delete_topics; fi
if has_part peer && [[ ",$SINKS," == *,postgres,* ]] && [ -x tests/bench/connect_peer.sh ]; then
  part_peer
fi
# Last, so that the peer's bar stands beside PostgreSQL's when it ran.
if has_part plot; then
  t0=$SECONDS
  part_plot
  say "part plot took $((SECONDS - t0)) s"
fi

python3 tests/bench/bench_analyze.py report "$RESULTS/results.tsv" >"$RESULTS/report.md"
cat "$RESULTS/report.md"
say "done in $((SECONDS - T_ALL)) s; results in $RESULTS"
