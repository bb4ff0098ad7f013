#!/usr/bin/env bash
# The README's first command: deps, build, a real Kafka broker, a topic of
# Wikimedia-recentchange-shaped events, then a connector (configs/wikimedia-to-sqlite.json)
# into SQLite until caught up, a SIGKILL mid-stream and a restart, and the proof from the
# database itself that every offset landed exactly once.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec </dev/null
TOPIC=wikimedia.recentchange
COUNT="${TIDEMARK_DEMO_EVENTS:-2000}"
T0=$SECONDS
step() { echo; echo "=== [demo] $*"; }

step "install deps"
bash scripts/install-deps.sh

step "build (build/)"
GEN=()
command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
cmake -S . -B build "${GEN[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j2

step "start Kafka"
. scripts/env.sh
B="$TIDEMARK_KAFKA_BOOTSTRAP"
# A broker that already answers there (started by this clone's scripts or by
# another) is used as it is: the demo never stops or restarts it.
KAFKA_NOTE="Kafka was already running and still is."
if kcat -b "$B" -L -m 3 >/dev/null 2>&1; then
  echo "a broker already answers at $B: using it"
else
  bash scripts/kafka.sh start
  KAFKA_NOTE="Kafka is still running (scripts/kafka.sh stop)."
fi

step "topic $TOPIC (4 partitions, recreated so every run publishes the same records)"
bash scripts/kafka.sh topics --delete --if-exists --topic "$TOPIC"
for i in $(seq 1 30); do   # deletion is asynchronous: retry the create for ~15 s
  if bash scripts/kafka.sh topics --create --topic "$TOPIC" --partitions 4 --replication-factor 1 2>/dev/null; then
    break
  fi
  [ "$i" -lt 30 ] || { echo "demo: could not create $TOPIC" >&2; exit 1; }
  sleep 0.5
done
bash scripts/kafka.sh topics --describe --topic "$TOPIC"

step "publish $COUNT deterministic recentchange events (key = wiki:title)"
python3 scripts/demo/gen-recentchange.py "$COUNT" |
  kcat -q -P -b "$B" -t "$TOPIC" -K $'\t' -z lz4 -X enable.idempotence=true
echo "one event:"
kcat -q -C -b "$B" -t "$TOPIC" -p 0 -o beginning -c 1 -f 'key=%k partition=%p offset=%o\n%s\n'

step "per-partition watermarks"
kcat -q -Q -b "$B" -t "$TOPIC:0:-2" -t "$TOPIC:1:-2" -t "$TOPIC:2:-2" -t "$TOPIC:3:-2" \
  | sed 's/^/  low  /' || true
kcat -q -Q -b "$B" -t "$TOPIC:0:-1" -t "$TOPIC:1:-1" -t "$TOPIC:2:-1" -t "$TOPIC:3:-1" \
  | sed 's/^/  high /'

step "build/host/tidemark --help"
build/host/tidemark --help

step "build/host/tidemark plugins (plugins built in this tree: build/plugins-out)"
TIDEMARK_PLUGIN_PATH="$PWD/build/plugins-out${TIDEMARK_PLUGIN_PATH:+:$TIDEMARK_PLUGIN_PATH}" build/host/tidemark plugins

step "validate the demo connector config (configs/wikimedia-to-sqlite.json)"
rm -rf var/demo && mkdir -p var/demo
export KAFKA_BOOTSTRAP="$B" TIDEMARK_PLUGIN_PATH="$PWD/build/plugins-out"
TM=build/host/tidemark
$TM validate configs/wikimedia-to-sqlite.json

DB=var/demo/wikimedia.db
STATE=var/demo/state
# The sum of the high watermarks, asked of the broker.
hwm_sum() {
  kcat -q -Q -b "$B" -t "$TOPIC:0:-1" -t "$TOPIC:1:-1" -t "$TOPIC:2:-1" -t "$TOPIC:3:-1" |
    awk '{ s += $NF } END { print s + 0 }'
}
# The sum of the sink's markers, read from the database itself.
marker_sum() {
  sqlite3 "$DB" "SELECT coalesce(sum(next_offset), 0) FROM tidemark_markers" 2>/dev/null || echo 0
}
wait_caught_up() {
  local want; want="$(hwm_sum)"
  for _ in $(seq 1 600); do
    [ "$(marker_sum)" = "$want" ] && return 0
    sleep 0.1
  done
  echo "demo: the connector did not catch up to $want within 60 s" >&2
  tail -20 var/demo/run.log >&2
  exit 1
}
start_host() {
  $TM run configs/wikimedia-to-sqlite.json 2>>var/demo/run.log &
  HOST=$!
}

step "tidemark run configs/wikimedia-to-sqlite.json (in the background; log in var/demo/run.log)"
start_host
wait_caught_up
echo "caught up: markers at $(marker_sum) = the topic's high watermarks"

step "tidemark status"
$TM status --state-dir "$STATE"

step "what landed (sqlite3 $DB)"
sqlite3 -header -column "$DB" \
  "SELECT type, count(*) AS rows, sum(bot) AS by_bots FROM recentchange GROUP BY type"
sqlite3 -header -column "$DB" \
  "SELECT id, wiki, substr(title, 1, 30) AS title, user, dt FROM recentchange ORDER BY id LIMIT 5"

step "crash test: 3000 more events, 200 of them resent, 3 malformed; SIGKILL mid-stream; restart"
# The new records are all in the log before the host that is killed starts,
# and that host is stopped (SIGSTOP) inside its 5th commit, after the batch's
# rows are written and before its markers are (the SQLite sink's crash point
# after_effects, docs/exactly-once.md): the SIGKILL lands there, with most of
# the new records not applied, whatever the machine's speed.
kill -TERM "$HOST"
wait "$HOST"
python3 scripts/demo/gen-recentchange.py 3000 7 1760000000 |
  kcat -q -P -b "$B" -t "$TOPIC" -K $'\t' -X enable.idempotence=true
python3 scripts/demo/gen-recentchange.py 200 |
  kcat -q -P -b "$B" -t "$TOPIC" -K $'\t' -X enable.idempotence=true
printf 'bad:1\t{"id": "not a number", "type": "edit"}\nbad:2\t{"type": "edit"}\nbad:3\tnot json at all\n' |
  kcat -q -P -b "$B" -t "$TOPIC" -K $'\t' -p 0
before="$(marker_sum)"
want="$(hwm_sum)"
echo "published: markers at $before, the topic's high watermarks at $want"
FAULT=var/demo/fault-point
: >"$FAULT"
TIDEMARK_FAULT=after_effects TIDEMARK_FAULT_ACTION=stop TIDEMARK_FAULT_HIT=5 \
  TIDEMARK_FAULT_FD=3 $TM run configs/wikimedia-to-sqlite.json 2>>var/demo/run.log 3>"$FAULT" &
HOST=$!
stopped() { [ "$(awk '{ print $3 }' "/proc/$HOST/stat" 2>/dev/null)" = T ]; }
for _ in $(seq 1 600); do   # up to 60 s: wait for the crash point, not for a time
  { grep -qx after_effects "$FAULT" && stopped; } && break
  kill -0 "$HOST" 2>/dev/null || break
  [ "$(marker_sum)" = "$want" ] && break   # all applied: the point was never reached
  sleep 0.1
done
if ! grep -qx after_effects "$FAULT" || ! stopped; then
  kill -9 "$HOST" 2>/dev/null || true
  echo "demo: inconclusive: the host never reached its crash point inside a commit" >&2
  tail -20 var/demo/run.log >&2
  exit 1
fi
kill -9 "$HOST"
wait "$HOST" 2>/dev/null || true
at="$(marker_sum)"
echo "killed the host with SIGKILL inside a commit, at markers $at of $want"
if [ "$at" -le "$before" ] || [ "$at" -ge "$want" ]; then
  echo "demo: inconclusive: the kill did not land mid-stream (markers $at, before $before, end $want)" >&2
  exit 1
fi
$TM status --state-dir "$STATE" | head -3 || true
start_host
wait_caught_up
echo "restarted and caught up again: markers at $(marker_sum)"

step "the proof, from the database and the broker (never from the host's counters)"
sqlite3 -header -column "$DB" "
  SELECT (SELECT count(*) FROM recentchange) AS rows,
         (SELECT count(*) FROM (SELECT DISTINCT _tm_partition, _tm_offset FROM recentchange)) AS distinct_offsets,
         (SELECT count(DISTINCT id) FROM recentchange) AS distinct_ids,
         (SELECT count(*) FROM tidemark_dead_letters) AS dead_letters,
         (SELECT sum(filtered) FROM tidemark_markers) AS filtered,
         (SELECT sum(duplicates) FROM tidemark_markers) AS duplicates,
         (SELECT sum(next_offset) FROM tidemark_markers) AS markers"
sqlite3 -header -column "$DB" "SELECT reason, count(*) AS dead_letters, min(detail) AS example FROM tidemark_dead_letters GROUP BY reason"
rows="$(sqlite3 "$DB" "SELECT count(*) FROM recentchange")"
distinct="$(sqlite3 "$DB" "SELECT count(DISTINCT id) FROM recentchange")"
offsets="$(sqlite3 "$DB" "SELECT count(*) FROM (SELECT DISTINCT _tm_partition, _tm_offset FROM recentchange)")"
accounted="$(sqlite3 "$DB" "SELECT (SELECT count(*) FROM recentchange) + (SELECT count(*) FROM tidemark_dead_letters) + (SELECT sum(filtered) + sum(duplicates) FROM tidemark_markers)")"
total="$(hwm_sum)"
echo "records in Kafka: $total; accounted for (rows + dead letters + filtered + duplicates): $accounted"
if [ "$rows" != "$distinct" ] || [ "$rows" != "$offsets" ] || [ "$accounted" != "$total" ]; then
  echo "demo: FAILED: rows=$rows distinct ids=$distinct distinct offsets=$offsets accounted=$accounted of $total" >&2
  exit 1
fi
echo "exactly once: no duplicate row, no gap, through a SIGKILL"

step "stop the host (SIGTERM) and check its status"
kill -TERM "$HOST"
wait "$HOST"
$TM status --state-dir "$STATE" || true

step "prove the example sink with the conformance kit (build/sdk/sinkcheck/tidemark-sinkcheck)"
build/sdk/sinkcheck/tidemark-sinkcheck build/plugins-out/example_file.so \
  --config tests/conformance/example_file.json --expect-skip dedup \
  --expect-skip cdc --expect-skip schema_columns

echo
echo "=== [demo] done in $((SECONDS - T0)) s. $KAFKA_NOTE"
echo "=== [demo] The data: sqlite3 $DB; the log: var/demo/run.log."
