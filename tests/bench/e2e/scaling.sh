# shellcheck shell=bash
# Part "scaling" of tests/bench/e2e_bench.sh (sourced), for each sink of SCALING_SINKS:
# - K connectors (each of SCALING_CONNECTORS) in ONE `tidemark run` process, all reading
#   the same main topic, each its own connector: its own consumer group, its own target
#   (SQLite: its own database file; PostgreSQL: its own table) -- so K connectors write
#   K x $RECORDS records; throughput = all they wrote / (first commit of any -> last one done);
# - 2 processes of ONE connector (the same config, so one group and one target; two state
#   directories), splitting the partitions between them: $RECORDS records. Into SQLite
#   the two processes write one database file, whose writer lock serialises them.
# Ratios against the 1-connector figure of the same sink in this invocation.

part_scaling() {
  local sink k i name cfgs base spid a b cfg
  main_topic
  for sink in ${SCALING_SINKS//,/ }; do
    base=""
    for k in ${SCALING_CONNECTORS//,/ }; do
      cfgs=()
      for ((i = 1; i <= k; i++)); do
        name="sc-$sink-$k-$i-$$"
        config "$name" "$sink" "$WORK/$name.json" "$MAIN_TOPIC" "$BATCH"
        cfgs+=("$WORK/$name.json")
      done
      drain "sc-$sink-$k-$$" "$RECORDS" 100 "${cfgs[@]}"
      [ -n "$base" ] || base=$DRAIN_RATE
      result scaling "$sink, $k connector(s) in one process, batches of $BATCH" "$DRAIN_RATE" records/s \
        "$sink, 1 connector" "$base"
      say "[scaling] peak RSS of that process: $((DRAIN_RSS_KIB / 1024)) MiB"
      rm -rf "$WORK"/sc-"$sink"-"$k"-*-$$.db* "$WORK"/sc-"$sink"-"$k"-*-$$-table
    done
    # Two processes, one group.
    name="sc-$sink-2p-$$"
    cfg="$WORK/$name.json"
    config "$name" "$sink" "$cfg" "$MAIN_TOPIC" "$BATCH"
    sampler_start "$cfg" "$cfg.samples" 100 "$RECORDS"
    spid=$SAMPLER_PID
    host_start "$WORK/$name-a.log" --state-dir "$WORK/state-a" "$cfg"
    a=$HOST_PID
    host_start "$WORK/$name-b.log" --state-dir "$WORK/state-b" "$cfg"
    b=$HOST_PID
    SAMPLES_OF_WAIT="$cfg.samples"
    wait_pid "$spid" "$a" "$WORK/$name-a.log" "$name"
    kill -0 "$b" 2>/dev/null || die "$name: the second process exited"
    host_stop "$a"
    host_stop "$b"
    clock "$cfg.samples" "$RECORDS"
    DRAIN_RATE=$(awk -v r="$((RECORDS - CLK_first_sum))" -v ms="$((CLK_done - CLK_first))" \
      'BEGIN { printf "%.0f\n", (ms > 0 ? r * 1000 / ms : 0) }')
    result scaling "$sink, 2 processes in one group (one target), batches of $BATCH" "$DRAIN_RATE" records/s \
      "$sink, 1 connector" "$base"
    rm -rf "$WORK/$name.db"* "$WORK/$name-table"
  done
}
