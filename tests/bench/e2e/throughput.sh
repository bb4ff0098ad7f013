# shellcheck shell=bash
# Part "throughput" of tests/bench/e2e_bench.sh (sourced): the consume ceiling, then for
# each batch size and sink tidemark end to end (drain of the main topic) against that
# sink's own ceiling at the same batch size. Also writes $RESULTS/throughput.tsv for the
# plot part.

# sink_ceiling SINK BATCH: "CEILING ALONE" in rows/s: the sink's bare loop (its per-sink
# benchmark's ceiling) and the sink alone through the plugin API (the same benchmark's
# sink loop, no Kafka, no conversion), on at most 200 000 rows (50 000 at 100 rows a
# batch, where the iceberg-lite sink is slow), medians of 3. Those benchmarks use their
# own rows, of a similar width. e2e / alone is what the host costs on top of the sink.
sink_ceiling() {
  local sink="$1" batch="$2" rows=$((RECORDS < 200000 ? RECORDS : 200000))
  [ "$batch" -gt 100 ] || rows=$((rows < 50000 ? rows : 50000))
  case "$sink" in
    sqlite) "$B/tests/bench/sqlite_bench" --rows "$rows" --batch "$batch" --reps 3 --dir "$WORK" |
      awk '/^bare loop:/ { c = $3 } /^sink:/ { a = $2 } END { print c, a }' ;;
    postgres) "$B/tests/bench/postgres_bench" --rows "$rows" --batch "$batch" --reps 3 \
      --json text --loops sink,text |
      awk '/^doc text: \(b\) copy text/ { c = $6 } /^doc text: sink / { a = $4 } END { print c, a }' ;;
    iceberg_lite) "$B/tests/bench/iceberg_bench" --rows "$rows" --batch "$batch" --reps 3 --dir "$WORK" |
      awk '/^ceiling \(encoder/ { c = $7 } /^sink:/ { a = $2 } END { print c, a }' ;;
  esac
}

CONSUME_CEIL=""
consume_ceiling() {
  local out
  main_topic
  if [ -z "$CONSUME_CEIL" ]; then
    out="$("$B/tests/bench/consume_ceiling" "$KB" "$MAIN_TOPIC" "$PARTS_N" "$RECORDS")"
    say "$out"
    CONSUME_CEIL="$(sed -n 's/.*records_per_s=\([0-9]*\).*/\1/p' <<<"$out")"
    result throughput "consume ceiling (bare librdkafka loop, $RECORDS records)" "$CONSUME_CEIL" records/s
  fi
}

declare -A TP_RATE   # "SINK BATCH" -> tidemark end to end records/s, for the peer part
part_throughput() {
  local b sink name ceil alone
  consume_ceiling
  : >"$RESULTS/throughput.tsv"
  for b in ${BATCHES//,/ }; do
    for sink in ${SINKS//,/ }; do
      name="tp-$sink-$b-$$"
      config "$name" "$sink" "$WORK/$name.json" "$MAIN_TOPIC" "$b"
      drain "$name" "$RECORDS" 50 "$WORK/$name.json"
      TP_RATE["$sink $b"]=$DRAIN_RATE
      say "[throughput] $name: launch to first commit $DRAIN_START_TO_FIRST_MS ms; sampler: $DRAIN_RES"
      read -r ceil alone <<<"$(sink_ceiling "$sink" "$b")"
      result throughput "$sink ceiling (bare loop), batches of $b" "$ceil" rows/s \
        "consume ceiling" "$CONSUME_CEIL"
      result throughput "tidemark -> $sink, batches of $b" "$DRAIN_RATE" records/s \
        "$sink ceiling, batches of $b" "$ceil"
      result throughput "$sink sink alone (plugin API), batches of $b" "$alone" rows/s \
        "$sink ceiling, batches of $b" "$ceil"
      result throughput "tidemark -> $sink, batches of $b, / sink alone" "$DRAIN_RATE" records/s \
        "$sink sink alone, batches of $b" "$alone"
      result throughput "tidemark -> $sink, batches of $b, / consume ceiling" "$DRAIN_RATE" records/s \
        "consume ceiling" "$CONSUME_CEIL"
      result throughput "peak RSS, tidemark -> $sink, batches of $b" "$((DRAIN_RSS_KIB / 1024))" MiB
      printf '%s %s %s %s %s\n' "$sink" "$b" "$DRAIN_RATE" "${ceil:-0}" "$CONSUME_CEIL" \
        >>"$RESULTS/throughput.tsv"
      rm -rf "$WORK/$name.db" "$WORK/$name.db-wal" "$WORK/$name-table"
    done
  done
}
