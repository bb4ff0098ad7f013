# shellcheck shell=bash
# Part "memory" of tests/bench/e2e_bench.sh (sourced): the peak RSS (VmHWM) of a host
# draining a backlog of each size in MEM_BACKLOGS into each sink of MEM_SINKS (SQLite by
# default: the host's buffers are the same for every sink, the sink's own are not),
# batches of $BATCH, from a topic of MEM_PARTS partitions (the big topic; its own when
# MEM_PARTS is not the other parts' 8). The backlog is set offline with `tidemark offsets
# --reset-to` on a fresh connector, the latest N records of the big topic. VmRSS is also
# traced every second ($WORK/NAME.rss) to show the plateau.
# BENCH_MEM_VARIANTS: an A/B of librdkafka settings, one variant a line, "NAME JSON" (the
# connector's $.kafka.properties) or "NAME" alone (tidemark's own sizing), run one after
# the other for each backlog and sink, MEM_ROUNDS times over (alternating, so that the
# shared machine's drift falls on every variant alike). Baseline: the first variant with
# the same backlog, sink and round; without variants, the smallest backlog.

rss_trace() {   # rss_trace PID: "SECONDS VmRSS_KiB" every second while PID lives
  local pid="$1" t0=$SECONDS
  while [ -r "/proc/$pid/status" ]; do
    echo "$((SECONDS - t0)) $(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null)"
    sleep 1
  done
}
mem_hook() { rss_trace "$1" >"$WORK/$MEM_NAME.rss" 2>/dev/null & }

# mem_drain NAME SINK N PROPS: one drain of the latest N records into SINK with PROPS
# ($.kafka.properties, JSON; empty for none); sets MEM_RSS (MiB), MEM_RATE, MEM_PENDING.
mem_drain() {
  local name="$1" sink="$2" n="$3" cfg="$WORK/$1.json" rss_max total
  MEM_NAME=$name
  BENCH_KAFKA_PROPERTIES="$4" config "$name" "$sink" "$cfg" "$BIG_TOPIC" "$BATCH"
  # What the topic holds, as the sink's view of it (fill already checked the broker's
  # end offsets against what it published); the drain waits for this sum.
  total="$(high_sum "$cfg")"
  [ "$total" = "$BIG_TOTAL" ] || say "[memory] $BIG_TOPIC holds $total records, not $BIG_TOTAL"
  set_backlog "$cfg" "$n"
  DRAIN_HOOK=mem_hook
  drain "$name" "$total" 200 "$cfg"
  DRAIN_HOOK=""
  clock "$cfg.samples" "$total"
  MEM_PENDING=$((total - CLK_start_sum))
  MEM_RSS=$((DRAIN_RSS_KIB / 1024))
  MEM_RATE=$DRAIN_RATE
  rss_max="$(awk '$2 > m { m = $2 } END { print int(m / 1024) }' "$WORK/$name.rss")"
  say "[memory] $name: drained at $DRAIN_RATE records/s; VmRSS sampled each second peaked at $rss_max MiB ($WORK/$name.rss)"
  rm -f "$WORK/$name.db" "$WORK/$name.db-wal" "$WORK/$name.db-shm"
}

part_memory() {
  local n sink round v name props base_rss="" base_rate="" base_n="" parts="$PARTS_N"
  local PARTS_N=$MEM_PARTS
  # Another partition count: another big topic (the outer one stays for the restart part).
  if [ "$MEM_PARTS" != "$parts" ]; then local BIG_TOPIC="" BIG_TOTAL=0; fi
  big_topic "$(max_of "$MEM_BACKLOGS")"
  local names=() jsons=()
  if [ -n "${BENCH_MEM_VARIANTS:-}" ]; then
    while read -r v props; do
      [ -n "$v" ] || continue
      names+=("$v")
      jsons+=("$props")
    done <<<"$BENCH_MEM_VARIANTS"
  else
    names=("")
    jsons=("${BENCH_KAFKA_PROPERTIES:-}")
  fi
  for ((round = 1; round <= MEM_ROUNDS; round++)); do
    for n in ${MEM_BACKLOGS//,/ }; do
      for sink in ${MEM_SINKS//,/ }; do
        for v in "${!names[@]}"; do
          name="mem-$n-$sink${names[$v]:+-${names[$v]}}-r$round-$$"
          mem_drain "$name" "$sink" "$n" "${jsons[$v]}"
          local what="draining $MEM_PENDING pending records from $MEM_PARTS partitions into $sink"
          if [ -n "${names[$v]}" ]; then
            what="${names[$v]}, round $round: $what"
            if [ "$v" = 0 ]; then base_rss=$MEM_RSS base_rate=$MEM_RATE; fi
            result memory "peak RSS (VmHWM) $what" "$MEM_RSS" MiB "${names[0]}" "$base_rss"
            result memory "drain rate $what" "$MEM_RATE" records/s "${names[0]}" "$base_rate"
          else
            if [ -z "$base_rss" ]; then base_rss=$MEM_RSS base_n=$MEM_PENDING; fi
            result memory "peak RSS (VmHWM) $what" "$MEM_RSS" MiB "backlog of $base_n" "$base_rss"
          fi
        done
      done
    done
  done
}
