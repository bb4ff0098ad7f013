# shellcheck shell=bash
# What every part of tests/bench/e2e_bench.sh shares (sourced, not run): results,
# topics, connector configs, hosts and the marker sampler. Expects from the caller:
# ROOT, B (build dir), WORK, RESULTS, KB (bootstrap), TM (tidemark), PARTS_N,
# RECORDS, MAPPING, PG_SCHEMA, TIMEOUT.

say() { echo "e2e_bench: $*"; }
die() { say "ERROR: $*" >&2; exit 1; }
now_ms() { date +%s%3N; }

# a / b with three decimals ("n/a" when b is 0 or empty): ratios are the figures to read
# on a shared machine, both sides measured in the same invocation.
ratio() { awk -v a="$1" -v b="${2:-0}" 'BEGIN { if (b + 0 == 0) print "n/a"; else printf "%.3f\n", a / b }'; }

# result PART LABEL VALUE UNIT [BASE_LABEL BASE_VALUE [RATIO]]: one figure, printed and
# appended to $RESULTS/results.tsv (bench_analyze.py report makes the table). RATIO
# defaults to VALUE / BASE_VALUE.
result() {
  local part="$1" label="$2" value="$3" unit="$4" bl="${5:-}" bv="${6:-}" r="${7:-}"
  if [ -z "$r" ]; then
    if [ -n "$bl" ]; then r="$(ratio "$value" "$bv")"; else r="-"; fi
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$part" "$label" "$value" "$unit" "$bl" "$bv" "$r" \
    >>"$RESULTS/results.tsv"
  say "[$part] $label: $value $unit${bl:+ (vs $bl: $bv; ratio $r)}"
}

# Topics made by this invocation, deleted at exit (BENCH_KEEP=1 keeps them).
TOPICS_MADE=()
topic() {   # topic PREFIX -> a fresh topic of $PARTS_N partitions; its name on stdout
  local t
  t="$1-$(date +%s%N | cut -c8-16)-$$"
  bash scripts/kafka.sh topics --create --topic "$t" --partitions "$PARTS_N" \
    --replication-factor 1 >/dev/null
  wait_leaders "$t" "$PARTS_N"
  echo "$t"
}
# wait_leaders TOPIC N: until the broker's metadata shows N partitions, each with a
# leader. CreateTopics answers once the controller has the topic; a producer that reads
# the metadata before the broker's cache caught up fails its records to the partitions it
# does not see yet (a 500-partition topic held 499 998 of 500 000 records).
wait_leaders() {
  local t="$1" n="$2" i
  for ((i = 0; i < 300; i++)); do
    kcat -L -J -b "$KB" -t "$t" 2>/dev/null | python3 -c '
import json, sys
m = json.load(sys.stdin)
ps = [p for tp in m.get("topics", []) if not tp.get("error")
      for p in tp.get("partitions", []) if p.get("leader", -1) >= 0 and not p.get("error")]
sys.exit(0 if len(ps) == int(sys.argv[1]) else 1)' "$n" && return 0
    sleep 0.1
  done
  die "topic $t: not every one of its $n partitions has a leader after 30 s"
}
# end_sum TOPIC: the sum of the topic's end offsets, as the broker answers them.
end_sum() {
  local t="$1" p i out args=()
  for ((p = 0; p < PARTS_N; p++)); do args+=(-t "$t:$p:-1"); done
  # Right after the topic is made the broker may still answer "Not leader
  # for partition" for one whose leader the metadata already names (seen
  # with 500 partitions, the bench then died): asked again, 30 s at most.
  for ((i = 0; i < 100; i++)); do
    if out="$(kcat -Q -b "$KB" "${args[@]}" 2>"$WORK/end_sum.err")"; then
      awk '{ s += $NF } END { print s + 0 }' <<<"$out"
      return 0
    fi
    sleep 0.3
  done
  die "topic $t: no end offsets in 30 s: $(tail -1 "$WORK/end_sum.err")"
}
delete_topics() {
  [ "${#TOPICS_MADE[@]}" -gt 0 ] || return 0
  # one tool run for all of them (--topic takes a regular expression)
  bash scripts/kafka.sh topics --delete --topic "$(IFS='|'; echo "${TOPICS_MADE[*]}")" \
    >/dev/null 2>&1 || say "could not delete topics ${TOPICS_MADE[*]}"
  TOPICS_MADE=()
}

# fill TOPIC COPIES: the records file, COPIES times over (ids repeat after the first
# copy; no connector here deduplicates, so every record is a row).
fill() {
  local t="$1" copies="$2" i t0 t1 base held
  base="$(end_sum "$t")"
  t0=$(now_ms)
  for ((i = 0; i < copies; i++)); do cat "$WORK/records.jsonl"; done |
    kcat -P -b "$KB" -t "$t" -X linger.ms=20 -X batch.num.messages=10000 \
      -X enable.idempotence=true 2>"$WORK/fill.err" ||
    die "kcat could not publish into $t: $(tail -3 "$WORK/fill.err")"
  t1=$(now_ms)
  # What the topic holds, not what kcat was given: a failed delivery is an error here.
  held=$(($(end_sum "$t") - base))
  [ "$held" -eq $((copies * RECORDS)) ] ||
    die "$t holds $held new records, not $((copies * RECORDS)): $(tail -3 "$WORK/fill.err")"
  say "published $((copies * RECORDS)) records into $t in $(((t1 - t0) / 1000)) s"
}

# The topic of $RECORDS records every throughput-like part reads (made once).
MAIN_TOPIC=""
main_topic() {
  if [ -z "$MAIN_TOPIC" ]; then
    MAIN_TOPIC="$(topic bench)"
    TOPICS_MADE+=("$MAIN_TOPIC")
    fill "$MAIN_TOPIC" 1
  fi
}

# config NAME SINK FILE TOPIC BATCH: a connector reading TOPIC into SINK, every field of
# the records mapped, batches of BATCH records or 200 ms. SQLite: its own file per
# connector name (synchronous FULL); PostgreSQL: a table per name in this invocation's
# schema; iceberg-lite: a table directory per name.
config() {
  local name="$1" sink="$2" file="$3" t="$4" batch="$5" settings
  case "$sink" in
    sqlite) settings="{\"path\": \"$WORK/$name.db\", \"table\": \"t\", \"synchronous\": \"FULL\"}" ;;
    postgres) settings="{\"conninfo\": \"\${env:TIDEMARK_PG_CONNINFO}\", \"schema\": \"$PG_SCHEMA\", \"table\": \"$name\"}" ;;
    iceberg_lite) settings="{\"path\": \"$WORK/$name-table\"}" ;;
    *) die "unknown sink $sink" ;;
  esac
  # BENCH_KAFKA_PROPERTIES: a JSON object of librdkafka settings for every connector
  # ($.kafka.properties), to rerun a part with other queue sizes.
  local props="${BENCH_KAFKA_PROPERTIES:+, \"properties\": $BENCH_KAFKA_PROPERTIES}"
  cat >"$file" <<EOF
{"name": "$name", "kafka": {"bootstrap_servers": "$KB", "topics": ["$t"]$props},
 "batch": {"max_records": $batch, "max_wait_ms": 200},
 "sink": {"plugin": "$sink", "settings": $settings},
 "mapping": $MAPPING, "state_dir": "$WORK/state"}
EOF
}

# sampler_start CONFIG OUT INTERVAL_MS [UNTIL_SUM]: marker_sampler in the background
# (pid in SAMPLER_PID), returned once its first read is in OUT. Started before the host,
# it is also the one that creates the sink's tables (the plugins' open is idempotent).
SAMPLER_PID=""
sampler_start() {
  local cfg="$1" out="$2" interval="$3" until="${4:-}" i
  local args=(--interval-ms "$interval" --seconds "$TIMEOUT" --partitions "$PARTS_N")
  [ -z "$until" ] || args+=(--until-sum "$until")
  : >"$out"   # exists before the sampler opens it, for the wait below
  "$B/tests/bench/marker_sampler" "${args[@]}" "$cfg" >"$out" 2>"$out.err" &
  SAMPLER_PID=$!
  for ((i = 0; i < 3000; i++)); do
    [ "$(wc -l <"$out")" -lt "$PARTS_N" ] || return 0
    kill -0 "$SAMPLER_PID" 2>/dev/null || { cat "$out.err" >&2; die "marker_sampler on $cfg died"; }
    sleep 0.02
  done
  die "marker_sampler on $cfg: no first read in 60 s"
}
# The sampler's own line about its reads (interval, read times): its resolution.
sampler_resolution() { sed -n 's/^marker_sampler: //p' "$1.err" | tail -1; }

# host_start LOG ARGS...: `tidemark run ARGS` in the background, pid in HOST_PID.
HOST_PID=""
host_start() {
  local log="$1"
  shift
  "$TM" run "$@" 2>"$log" &
  HOST_PID=$!
}
host_stop() {   # host_stop PID: SIGTERM, then wait (a stop takes up to ~10 s)
  kill -TERM "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
peak_rss_kib() { awk '/VmHWM/ {print $2}' "/proc/$1/status"; }
# thread_cpu PID: the CPU time of the process's threads by name (ms; schedstat's time on
# CPU), largest first, a "NAME<TAB>MS" line each: tm:connector and tm:sink are ours,
# rdk:* librdkafka's.
thread_cpu() {
  local t
  for t in /proc/"$1"/task/*; do
    printf '%s\t%s\n' "$(cat "$t/comm" 2>/dev/null)" "$(awk '{print $1}' "$t/schedstat" 2>/dev/null)"
  done | awk -F'\t' '$2 != "" { ms[$1] += $2 / 1e6 } END { for (n in ms) printf "%s\t%.0f\n", n, ms[n] }' |
    sort -t"$(printf '\t')" -k2,2nr
}

# wait_pid PID HOST_PID LOG WHAT: waits for PID (a sampler with --until-sum) to exit,
# failing when the host dies first or after $TIMEOUT s.
wait_pid() {
  local pid="$1" host="$2" log="$3" what="$4" t0=$SECONDS
  while kill -0 "$pid" 2>/dev/null; do
    if ! kill -0 "$host" 2>/dev/null; then tail -5 "$log" >&2; die "$what: tidemark exited"; fi
    [ $((SECONDS - t0)) -lt "$TIMEOUT" ] || die "$what: not done in $TIMEOUT s"
    sleep 0.2
  done
  wait "$pid" || die "$what: marker_sampler failed ($(sampler_resolution "$SAMPLES_OF_WAIT"))"
}

# clock FILE [TOTAL]: sets CLK_start CLK_start_sum CLK_claim CLK_first CLK_first_sum CLK_done
# CLK_done_sum from bench_analyze.py clock.
clock() {
  local line k v
  line="$(python3 tests/bench/bench_analyze.py clock "$1" ${2:+--total "$2"})"
  for kv in $line; do
    k="${kv%%=*}" v="${kv#*=}"
    case "$k" in
      start_ms) CLK_start="$v" ;; start_sum) CLK_start_sum="$v" ;; claim_ms) CLK_claim="$v" ;; first_ms) CLK_first="$v" ;;
      first_sum) CLK_first_sum="$v" ;; done_ms) CLK_done="$v" ;; done_sum) CLK_done_sum="$v" ;;
    esac
  done
}

# drain NAME TOTAL INTERVAL_MS CONFIG...: one `tidemark run` of the configs (each with a
# sampler waiting for its markers to sum to TOTAL), timed from the first commit of any to
# the last sampler done, as the consume ceiling is timed from the first record: process
# start and the group join are not throughput. Sets DRAIN_RATE (records/s over the sum of
# what the connectors wrote in that window), DRAIN_RSS_KIB (the host's VmHWM),
# DRAIN_RES (the first sampler's resolution), DRAIN_START_TO_FIRST_MS.
drain() {
  local name="$1" total="$2" interval="$3" cfg i first=-1 done_ms=0 recs=0 launch
  shift 3
  local spids=() outs=()
  for cfg in "$@"; do
    sampler_start "$cfg" "$cfg.samples" "$interval" "$total"
    spids+=("$SAMPLER_PID")
    outs+=("$cfg.samples")
  done
  launch=$(now_ms)
  host_start "$WORK/$name.log" "$@"
  [ -z "${DRAIN_HOOK:-}" ] || "$DRAIN_HOOK" "$HOST_PID"
  # BENCH_PERF=1: where the host's time goes, per shared object and per symbol
  # (perf record -g at 499 Hz, software clock: this VM has no hardware counters).
  local perf_pid=""
  if [ "${BENCH_PERF:-0}" = 1 ]; then
    perf record -q -F 499 -g -o "$RESULTS/$name.perf.data" -p "$HOST_PID" >/dev/null 2>&1 &
    perf_pid=$!
  fi
  for i in "${!spids[@]}"; do
    SAMPLES_OF_WAIT="${outs[$i]}"
    wait_pid "${spids[$i]}" "$HOST_PID" "$WORK/$name.log" "$name"
  done
  DRAIN_RSS_KIB="$(peak_rss_kib "$HOST_PID")"
  thread_cpu "$HOST_PID" >"$RESULTS/$name.threads.tsv"
  if [ -n "$perf_pid" ]; then
    kill -INT "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
    perf report -q -i "$RESULTS/$name.perf.data" --no-children --sort dso -g none --stdio 2>/dev/null |
      grep -v '^$' | head -15 >"$RESULTS/$name.perf-dso.txt" || true
    say "[perf] $name: $RESULTS/$name.perf.data; by shared object: $(head -6 "$RESULTS/$name.perf-dso.txt" | awk '{printf "%s %s; ", $1, $2}')"
  fi
  host_stop "$HOST_PID"
  for i in "${!outs[@]}"; do
    clock "${outs[$i]}" "$total"
    if [ "$CLK_first" -le 0 ] || [ "$CLK_done" -le 0 ]; then die "$name: no first commit or end in ${outs[$i]}"; fi
    if [ "$first" -lt 0 ] || [ "$CLK_first" -lt "$first" ]; then first=$CLK_first; fi
    [ "$CLK_done" -le "$done_ms" ] || done_ms=$CLK_done
    recs=$((recs + total - CLK_first_sum))
  done
  DRAIN_START_TO_FIRST_MS=$((first - launch))
  DRAIN_RATE=$(awk -v r="$recs" -v ms="$((done_ms - first))" 'BEGIN { printf "%.0f\n", (ms > 0 ? r * 1000 / ms : 0) }')
  DRAIN_RES="$(sampler_resolution "${outs[0]}")"
  # CPU per record of each busy thread (from launch: the join and the claim count too,
  # a few ms against a drain of seconds).
  say "[threads] $name: $(awk -F'\t' -v n="$total" -v k="$#" '$2 >= 10 {
    printf "%s %s ms (%.2f us a record); ", $1, $2, $2 * 1000 / (n * k) }' "$RESULTS/$name.threads.tsv")"
}

# high_sum CONFIG: the sum of the high watermarks of the config's topic (through
# `tidemark offsets --json`, which also opens the sink and so creates it).
offsets_json() { "$TM" offsets "$1" --json 2>>"$WORK/offsets.log"; }
high_sum() {
  offsets_json "$1" | python3 -c '
import json, sys
print(sum(p["high_watermark"] for p in json.load(sys.stdin)["partitions"]))'
}

# set_backlog CONFIG N: moves the connector's markers (offline, `tidemark offsets
# --reset-to`) so that N records are pending: the latest N of each partition in
# proportion to its size; `latest` for 0, `earliest` for N >= the whole topic.
set_backlog() {
  local cfg="$1" n="$2" spec
  spec="$(offsets_json "$cfg" | python3 -c '
import json, sys
n = int(sys.argv[1])
parts = json.load(sys.stdin)["partitions"]
size = sum(p["high_watermark"] - p["log_start"] for p in parts)
if n <= 0:
    print("latest")
elif n >= size:
    print("earliest")
else:
    print(",".join("%s:%d=%d" % (p["topic"], p["partition"], p["high_watermark"] -
                   round(n * (p["high_watermark"] - p["log_start"]) / size)) for p in parts))
' "$n")"
  "$TM" offsets "$cfg" --reset-to "$spec" >>"$WORK/offsets.log" 2>&1 ||
    { tail -5 "$WORK/offsets.log" >&2; die "offsets --reset-to on $cfg failed"; }
}
