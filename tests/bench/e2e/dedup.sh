# shellcheck shell=bash
# Part "dedup" of tests/bench/e2e_bench.sh (sourced): what business-key dedup and upsert
# cost end to end. For each sink of DEDUP_SINKS (sqlite, postgres), batch size of BATCHES
# and share of resent records of DEDUP_RESENT (percent), tidemark drains the same topic
# three ways, each into a table of its own: append without dedup, append with
# "dedup": {"key": ["id"]}, and "mode": "upsert" with id the key. Figures: records/s of
# each (timed as the throughput part: first commit to the markers at the topic's end) and
# the ratios dedup / append and upsert / append, all three sides in this invocation.
# A resent record repeats an earlier record byte for byte at a new offset, as a
# producer's resend does: with dedup a duplicate, in upsert an update, in append a row.

# dedup_topic RESENT: sets DEDUP_T to a topic of $RECORDS records, RESENT percent of them
# resends (record i repeats record i / 2 when i % 100 < RESENT, spread evenly, as
# dedup_bench does), made once per share.
declare -A DEDUP_TOPICS
DEDUP_T=""
dedup_topic() {
  local resent="$1" t t0
  if [ -z "${DEDUP_TOPICS[$resent]:-}" ]; then
    t="$(topic "dedup$resent")"
    TOPICS_MADE+=("$t")
    python3 -c '
import sys
resent, n = int(sys.argv[1]), int(sys.argv[2])
fresh = iter(open(sys.argv[3]))
out = []
for i in range(n):
    out.append(out[i // 2] if i > 0 and i % 100 < resent else next(fresh))
sys.stdout.writelines(out)' "$resent" "$RECORDS" "$WORK/records.jsonl" >"$WORK/dedup-$resent.jsonl"
    t0=$(now_ms)
    kcat -q -P -b "$KB" -t "$t" -X linger.ms=20 -X batch.num.messages=10000 \
      -X enable.idempotence=true <"$WORK/dedup-$resent.jsonl"
    say "published $RECORDS records ($resent % resent) into $t in $((($(now_ms) - t0) / 1000)) s"
    rm -f "$WORK/dedup-$resent.jsonl"
    DEDUP_TOPICS[$resent]="$t"
  fi
  DEDUP_T="${DEDUP_TOPICS[$resent]}"
}

# dedup_config NAME SINK FILE TOPIC BATCH MODE: config's connector, then for MODE dedup
# "dedup": {"key": ["id"]}, for MODE upsert the sink's "mode": "upsert" with id the key.
dedup_config() {
  local mode="$6"
  config "$1" "$2" "$3" "$4" "$5"
  python3 -c '
import json, sys
path, mode = sys.argv[1], sys.argv[2]
c = json.load(open(path))
if mode == "dedup":
    c["dedup"] = {"key": ["id"]}
elif mode == "upsert":
    c["sink"]["settings"]["mode"] = "upsert"
    for col in c["mapping"]["columns"]:
        if col["name"] == "id":
            col["key"] = True
json.dump(c, open(path, "w"))' "$3" "$mode"
}

part_dedup() {
  local sink b resent mode name
  local -A rate
  for sink in ${DEDUP_SINKS//,/ }; do
    for b in ${BATCHES//,/ }; do
      for resent in ${DEDUP_RESENT//,/ }; do
        dedup_topic "$resent"
        for mode in append dedup upsert; do
          name="dd-$sink-$b-$resent-$mode-$$"
          dedup_config "$name" "$sink" "$WORK/$name.json" "$DEDUP_T" "$b" "$mode"
          drain "$name" "$RECORDS" 50 "$WORK/$name.json"
          rate[$mode]=$DRAIN_RATE
          rm -rf "$WORK/$name.db" "$WORK/$name.db-wal"
        done
        local what="tidemark -> $sink, batches of $b, $resent % resent"
        result dedup "$what, append" "${rate[append]}" records/s
        result dedup "$what, dedup" "${rate[dedup]}" records/s "$what, append" "${rate[append]}"
        result dedup "$what, upsert" "${rate[upsert]}" records/s "$what, append" "${rate[append]}"
      done
    done
  done
}
