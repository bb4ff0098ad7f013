# shellcheck shell=bash
# The big topic of the memory and restart parts of tests/bench/e2e_bench.sh (sourced):
# the records file published as many times as the largest backlog needs (made once per
# invocation, deleted at exit with the others: at 10 M records it holds about 3 GB).
BIG_TOPIC=""
BIG_TOTAL=0
big_topic() {   # big_topic N: a topic of at least N records
  local copies=$((($1 + RECORDS - 1) / RECORDS))
  [ "$copies" -ge 1 ] || copies=1
  if [ -z "$BIG_TOPIC" ] || [ "$BIG_TOTAL" -lt "$1" ]; then
    BIG_TOPIC="$(topic big)"
    TOPICS_MADE+=("$BIG_TOPIC")
    fill "$BIG_TOPIC" "$copies"
    BIG_TOTAL=$((copies * RECORDS))
  fi
}
max_of() { tr ',' '\n' <<<"$1" | sort -n | tail -1; }
