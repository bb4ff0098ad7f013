# shellcheck shell=bash
# Part "peer" of tests/bench/e2e_bench.sh (sourced): the Kafka Connect peer
# (tests/bench/connect_peer.sh: Connect + Debezium's JDBC sink into PostgreSQL, its own
# 200 000 records, or 5000 with --smoke), against tidemark -> postgres at batches of 1000
# (the peer's batch.size) when the throughput part measured it in this invocation.
part_peer() {
  local peer prate ours
  peer="$(bash tests/bench/connect_peer.sh $([ "$SMOKE" = 1 ] && echo --smoke) | grep '^peer:' | tail -1 || true)"
  [ -n "$peer" ] || die "peer: connect_peer.sh printed no figure"
  say "$peer"
  prate="$(sed -n 's/.*records_per_s=\([0-9]*\).*/\1/p' <<<"$peer")"
  printf '1000 %s\n' "$prate" >"$RESULTS/peer.tsv" # the plot's bar beside PostgreSQL
  ours="${TP_RATE["postgres 1000"]:-}"
  if [ -n "$ours" ]; then
    result peer "tidemark -> postgres, batches of 1000" "$ours" records/s \
      "Kafka Connect + Debezium JDBC (batch.size 1000)" "$prate"
  else
    result peer "Kafka Connect + Debezium JDBC (batch.size 1000)" "$prate" records/s
  fi
}
