# shellcheck shell=bash
# Part "restart" of tests/bench/e2e_bench.sh (sourced): how long a restarted host takes
# to claim its partitions and to make its first commit, for each backlog in
# RESTART_BACKLOGS pending (0 included: then there is nothing to commit and only the claim
# is timed). One connector into SQLite on the big topic; before each start its markers are
# moved offline (`tidemark offsets --reset-to`) so that N records are pending, which also
# makes every start a restart (markers, table and group exist). The clock starts when
# `tidemark run` is launched; the claim is when marker_sampler (every 10 ms) sees every
# partition's epoch raised, the first commit when it sees a marker move. The connector
# joins its group dynamically (see below), so each start includes the group's rebalance.
# Baseline: the first backlog of the list (0 by default).

part_restart() {
  local n cfg name spid launch t0 claim first pending base_claim="" base_first="" base_n=""
  big_topic "$(max_of "$RESTART_BACKLOGS")"
  name="rs-$$"
  cfg="$WORK/$name.json"
  config "$name" sqlite "$cfg" "$BIG_TOPIC" "$BATCH"
  # A static member stays in the group for session.timeout.ms after its host stopped, and
  # the offline reset between runs needs an empty group: these runs join dynamically (their
  # host leaves the group as it stops). The static restart is e2e.static.restart_backlog.
  sed -i 's/"kafka": {/"kafka": {"static_membership": false, /' "$cfg"
  grep -q '"static_membership": false' "$cfg" || die "$cfg: static_membership not set"
  for n in ${RESTART_BACKLOGS//,/ }; do
    set_backlog "$cfg" "$n"
    sampler_start "$cfg" "$cfg.samples-$n" 10
    spid=$SAMPLER_PID
    launch=$(now_ms)
    host_start "$WORK/$name-$n.log" "$cfg"
    t0=$SECONDS
    while :; do
      clock "$cfg.samples-$n"
      if [ "$CLK_claim" -gt 0 ] && { [ "$n" = 0 ] || [ "$CLK_first" -gt 0 ]; }; then break; fi
      kill -0 "$HOST_PID" 2>/dev/null || { tail -5 "$WORK/$name-$n.log" >&2; die "$name: tidemark exited"; }
      [ $((SECONDS - t0)) -lt 120 ] || die "$name with $n pending: no claim/first commit in 120 s"
      sleep 0.2
    done
    host_stop "$HOST_PID"
    kill -TERM "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
    pending=$((BIG_TOTAL - CLK_start_sum))
    claim=$((CLK_claim - launch))
    if [ -z "$base_claim" ]; then base_claim=$claim base_n=$pending; fi
    result restart "launch -> every partition claimed, $pending pending" "$claim" ms \
      "$base_n pending" "$base_claim"
    if [ "$CLK_first" -gt 0 ]; then
      first=$((CLK_first - launch))
      [ -n "$base_first" ] || base_first="$first $pending"
      result restart "launch -> first commit, $pending pending" "$first" ms \
        "${base_first#* } pending" "${base_first%% *}"
    fi
    say "[restart] sampler: $(sampler_resolution "$cfg.samples-$n")"
  done
  rm -f "$WORK/$name.db" "$WORK/$name.db-wal" "$WORK/$name.db-shm"
}
