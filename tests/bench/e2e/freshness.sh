# shellcheck shell=bash
# Part "freshness" of tests/bench/e2e_bench.sh (sourced): for each sink and publish rate,
# records published at that fixed rate for FRESH_SECONDS into a fresh topic while a host
# runs (batches of up to 10 000 records or 200 ms); marker_sampler reads the sink's
# markers every FRESH_INTERVAL ms. A record is in the sink at the first read whose marker
# for its partition is past it: p50/p95/p99 of (that read - the record's timestamp).
# The baseline, on the same records at the same moment: a bare consumer (kcat, no group,
# doing nothing) stamping each record's arrival, the freshness floor of any consumer.
#
# Resolution: a commit is seen up to one interval plus one read after it happened (the
# sampler prints both per run); the record timestamp is kcat's CreateTime, set when the
# producer took the line (its linger.ms=5 is part of the figure, as it is of the floor).

part_freshness() {
  local sink rate ft name cfg total res floor q r spid cpid t0
  for sink in ${SINKS//,/ }; do
    for rate in ${RATES//,/ }; do
      total=$((rate * FRESH_SECONDS))
      [ "$total" -le "$RECORDS" ] || die "freshness: $rate records/s for $FRESH_SECONDS s needs $total records; --records is $RECORDS"
      ft="$(topic fresh)"
      TOPICS_MADE+=("$ft")
      name="fr-$sink-$rate-$$"
      cfg="$WORK/$name.json"
      config "$name" "$sink" "$cfg" "$ft" 10000
      sampler_start "$cfg" "$cfg.samples" "$FRESH_INTERVAL" "$total"
      spid=$SAMPLER_PID
      # The bare consumer: from the beginning of the empty topic, so nothing is missed.
      kcat -C -u -b "$KB" -t "$ft" -o beginning -c "$total" -f '%p %o %T\n' 2>/dev/null |
        python3 tests/bench/bench_analyze.py stamp >"$WORK/$name.arrivals" &
      cpid=$!
      host_start "$WORK/$name.log" "$cfg"
      t0=$SECONDS
      until clock "$cfg.samples" && [ "$CLK_claim" -gt 0 ]; do   # joined and claimed
        kill -0 "$HOST_PID" 2>/dev/null || { tail -5 "$WORK/$name.log" >&2; die "$name: tidemark exited"; }
        [ $((SECONDS - t0)) -lt 60 ] || die "$name: no claim in 60 s"
        sleep 0.2
      done
      python3 tests/bench/paced_produce.py "$rate" "$FRESH_SECONDS" "$WORK/records.jsonl" \
        2>"$WORK/$name.paced" | kcat -q -P -b "$KB" -t "$ft" -X linger.ms=5
      SAMPLES_OF_WAIT="$cfg.samples"
      wait_pid "$spid" "$HOST_PID" "$WORK/$name.log" "$name"
      host_stop "$HOST_PID"
      t0=$SECONDS
      while kill -0 "$cpid" 2>/dev/null && [ $((SECONDS - t0)) -lt 30 ]; do sleep 0.2; done
      kill "$cpid" 2>/dev/null || true
      wait "$cpid" 2>/dev/null || true
      kcat -C -b "$KB" -t "$ft" -o beginning -e -q -f '%p %o %T\n' >"$WORK/$name.ts"
      read -r -a q <<<"$(python3 tests/bench/bench_analyze.py fresh "$WORK/$name.ts" "$cfg.samples" |
        sed 's/[a-z0-9]*=//g')"   # n p50 p95 p99 max missing
      read -r -a floor <<<"$(python3 tests/bench/bench_analyze.py arrive "$WORK/$name.arrivals" |
        sed 's/[a-z0-9]*=//g')"   # n p50 p95 p99 max
      res="$(sampler_resolution "$cfg.samples")"
      say "[freshness] $sink at $rate/s: $(cat "$WORK/$name.paced"); sampler: $res; records seen ${q[0]:-0}, missing ${q[5]:-?}; bare consumer saw ${floor[0]:-0}"
      r="$(ratio "${q[1]:-0}" "${floor[1]:-0}") / $(ratio "${q[2]:-0}" "${floor[2]:-0}") / $(ratio "${q[3]:-0}" "${floor[3]:-0}")"
      result freshness "$sink at $rate records/s, 200 ms batch wait, p50 / p95 / p99" \
        "${q[1]:-?} / ${q[2]:-?} / ${q[3]:-?}" ms \
        "bare consumer p50 / p95 / p99" "${floor[1]:-?} / ${floor[2]:-?} / ${floor[3]:-?} ms" "$r"
      rm -rf "$WORK/$name.db" "$WORK/$name.db-wal" "$WORK/$name-table"
    done
  done
}
