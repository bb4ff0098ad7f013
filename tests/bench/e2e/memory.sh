# shellcheck shell=bash
# Part "memory" of tests/bench/e2e_bench.sh (sourced): the peak RSS (VmHWM) of a host
# draining a backlog of each size in MEM_BACKLOGS into SQLite (one sink is enough to show
# whether memory follows the backlog: the host's buffers are the same for every sink),
# batches of $BATCH. The backlog is set offline with `tidemark offsets --reset-to` on a
# fresh connector, the latest N records of the big topic. VmRSS is also traced every
# second ($WORK/NAME.rss) to show the plateau. Baseline: the smallest backlog.

rss_trace() {   # rss_trace PID: "SECONDS VmRSS_KiB" every second while PID lives
  local pid="$1" t0=$SECONDS
  while [ -r "/proc/$pid/status" ]; do
    echo "$((SECONDS - t0)) $(awk '/VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null)"
    sleep 1
  done
}
mem_hook() { rss_trace "$1" >"$WORK/$MEM_NAME.rss" 2>/dev/null & }

part_memory() {
  local n name cfg pending base_rss="" base_n="" rss_max
  big_topic "$(max_of "$MEM_BACKLOGS")"
  for n in ${MEM_BACKLOGS//,/ }; do
    name="mem-$n-$$"
    MEM_NAME=$name
    cfg="$WORK/$name.json"
    config "$name" sqlite "$cfg" "$BIG_TOPIC" "$BATCH"
    set_backlog "$cfg" "$n"
    DRAIN_HOOK=mem_hook
    drain "$name" "$BIG_TOTAL" 200 "$cfg"
    DRAIN_HOOK=""
    clock "$cfg.samples" "$BIG_TOTAL"
    pending=$((BIG_TOTAL - CLK_start_sum))
    rss_max="$(awk '$2 > m { m = $2 } END { print int(m / 1024) }' "$WORK/$name.rss")"
    if [ -z "$base_rss" ]; then base_rss=$((DRAIN_RSS_KIB / 1024)) base_n=$pending; fi
    result memory "peak RSS (VmHWM) draining $pending pending records into sqlite" \
      "$((DRAIN_RSS_KIB / 1024))" MiB "backlog of $base_n" "$base_rss"
    say "[memory] $name: drained at $DRAIN_RATE records/s; VmRSS sampled each second peaked at $rss_max MiB ($WORK/$name.rss)"
    rm -f "$WORK/$name.db" "$WORK/$name.db-wal" "$WORK/$name.db-shm"
  done
}
