#!/usr/bin/env bash
# Debezium replication test (ctest cdc.debezium.replicate; docs/exactly-once.md, "Deletes
# and change events"): a real change-data-capture source replicated exactly once through
# SIGKILLs of tidemark.
#
#   tests/cdc/replicate.sh TIDEMARK PLUGIN_DIR
#
# 1. A source database DEBSRC_src (PostgreSQL, wal_level=logical) with two tables of several
#    column types (tests/cdc/workload.py), captured by Debezium's PostgreSQL connector
#    (pgoutput, its own slot and publication) in a Kafka Connect standalone worker, into one
#    topic per table (3 partitions, JsonConverter with schemas).
# 2. Four tidemark connectors in one `tidemark run`: each table into an SQLite file and into
#    the database DEBSRC_dst, format "debezium", upsert.
# 3. The workload: DEBSRC_OPS (20000) random inserts, updates, deletes and primary-key
#    changes, paced at DEBSRC_RATE changes/s; meanwhile tidemark is SIGKILLed DEBSRC_KILLS
#    (6) times and restarted. Each kill must land with work in flight, else the test is
#    INCONCLUSIVE (exit 1): for every connector, its markers (read from its sink) moved
#    since the previous kill, and the topic's end offsets (Kafka's) before the kill were
#    past the markers the kill left, i.e. a backlog the killed process was working through.
# 4. Then: the topics hold every event the workload made (their end offsets reach the count
#    workload.py computed), tidemark's markers reach those end offsets, and each target
#    table equals its source table row for row (tests/cdc/compare.py: a query on each
#    side), with no dead letter in either sink.
#
# Uses the running broker and PostgreSQL (scripts/env.sh). Fetches Connect and Debezium from
# Maven Central into .cache/connect on the first run (scripts/connect/lib.sh). Names its
# databases, slot, publication, topics and groups debsrc_<time>_<pid>, drops them at the
# end (DEBSRC_KEEP=1 keeps them; the work directory is kept when the test fails).
# Env: DEBSRC_SEED (1), DEBSRC_OPS (20000), DEBSRC_RATE (350), DEBSRC_KILLS (6 per connector),
#      DEBSRC_BACKLOG (records each topic gains while tidemark is down, 300),
#      DEBSRC_TIMEOUT seconds for each wait (180), DEBSRC_WORK (work directory).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/tests/cdc"
[ $# -eq 2 ] || { sed -n '2,30p' "$0" >&2; exit 2; }
TIDEMARK="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
PLUGIN_DIR="$(cd "$2" && pwd)"
# shellcheck source=../../scripts/env.sh
. "$ROOT/scripts/env.sh"

SEED="${DEBSRC_SEED:-1}"
OPS="${DEBSRC_OPS:-20000}"
RATE="${DEBSRC_RATE:-350}"
KILLS="${DEBSRC_KILLS:-6}"
BACKLOG="${DEBSRC_BACKLOG:-300}"
[ "$BACKLOG" -ge 300 ] || { echo "DEBSRC_BACKLOG must be >= 300 (3 batches)" >&2; exit 2; }
TIMEOUT="${DEBSRC_TIMEOUT:-180}"
PARTITIONS=3
TABLES=(orders customers)
TARGETS=(sqlite pg)
RUN="debsrc_$(date +%s)_$$"
WORK="${DEBSRC_WORK:-$ROOT/var/cdc-replicate/$RUN}"
BOOTSTRAP="$TIDEMARK_KAFKA_BOOTSTRAP"
PG_ADMIN="host=127.0.0.1 port=$TIDEMARK_PG_PORT user=postgres dbname=postgres"
SRC_DB="${RUN}_src"
DST_DB="${RUN}_dst"
SRC="host=127.0.0.1 port=$TIDEMARK_PG_PORT user=postgres dbname=$SRC_DB"
DST="host=127.0.0.1 port=$TIDEMARK_PG_PORT user=tidemark dbname=$DST_DB"
SQLITE_DB="$WORK/replica.db"
TOPIC_PREFIX="$RUN"

say() { echo "replicate: $*" >&2; }
die() { say "FAIL: $*"; exit 1; }
inconclusive() { echo "replicate: INCONCLUSIVE: $*"; exit 1; }

# shellcheck source=../../scripts/connect/lib.sh
. "$ROOT/scripts/connect/lib.sh"

CONNECT_PID=""
declare -A TM_PID    # connector (table.target) -> pid of its `tidemark run`, "" when down
WORKLOAD_PID=""
MADE_DBS=0
MADE_TOPICS=0
cleanup() {
  local rc=$?
  local c
  for c in "${!TM_PID[@]}"; do
    [ -z "${TM_PID[$c]}" ] || { kill -KILL "${TM_PID[$c]}" 2>/dev/null || true; wait "${TM_PID[$c]}" 2>/dev/null || true; }
  done
  [ -z "$WORKLOAD_PID" ] || { kill -TERM "$WORKLOAD_PID" 2>/dev/null || true; wait "$WORKLOAD_PID" 2>/dev/null || true; }
  if [ -n "$CONNECT_PID" ]; then
    kill -TERM "$CONNECT_PID" 2>/dev/null || true
    local i
    for ((i = 0; i < 150; i++)); do kill -0 "$CONNECT_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$CONNECT_PID" 2>/dev/null || true
    wait "$CONNECT_PID" 2>/dev/null || true
  fi
  if [ "${DEBSRC_KEEP:-0}" != 1 ]; then
    if [ "$MADE_DBS" = 1 ]; then
      # the slot outlives the worker (Debezium keeps it by default): it would hold WAL
      psql_admin "SELECT pg_drop_replication_slot('$RUN') FROM pg_replication_slots
                  WHERE slot_name = '$RUN' AND NOT active" >/dev/null 2>&1 || true
      psql_admin "DROP DATABASE IF EXISTS \"$SRC_DB\" WITH (FORCE)" >/dev/null 2>&1 || true
      psql_admin "DROP DATABASE IF EXISTS \"$DST_DB\" WITH (FORCE)" >/dev/null 2>&1 || true
    fi
    [ "$MADE_TOPICS" = 0 ] ||
      bash "$ROOT/scripts/kafka.sh" topics --delete --topic "$TOPIC_PREFIX\\..*" >/dev/null 2>&1 || true
    [ "$rc" -ne 0 ] || rm -rf "$WORK"
  fi
  [ "$rc" -eq 0 ] || say "work directory kept: $WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

psql_admin() { psql "$PG_ADMIN" -X -q -tA -v ON_ERROR_STOP=1 -c "$1"; }
topic_of() { echo "$TOPIC_PREFIX.public.$1"; }
connector_of() { echo "$RUN-$1-$2"; } # table target

for tool in java kcat psql python3 sqlite3 curl; do
  command -v "$tool" >/dev/null || die "$tool not found (scripts/install-deps.sh)"
done
[ -n "${TIDEMARK_KAFKA_BOOTSTRAP:-}" ] || die "TIDEMARK_KAFKA_BOOTSTRAP is not set (. scripts/env.sh)"
[ "$(psql_admin 'SHOW wal_level')" = logical ] ||
  die "PostgreSQL at port $TIDEMARK_PG_PORT does not run with wal_level=logical (scripts/postgres.sh restart)"
rm -rf "$WORK"
mkdir -p "$WORK/configs" "$WORK/state"
connect_fetch source-pom.xml

# --- source, target, topics -----------------------------------------------------------
say "run $RUN: databases $SRC_DB and $DST_DB, topics $TOPIC_PREFIX.public.*"
MADE_DBS=1
psql_admin "CREATE DATABASE \"$SRC_DB\"" >/dev/null
psql_admin "CREATE DATABASE \"$DST_DB\" OWNER tidemark" >/dev/null
python3 "$HERE/workload.py" schema | psql "$SRC" -X -q -v ON_ERROR_STOP=1 >/dev/null
MADE_TOPICS=1
for t in "${TABLES[@]}"; do
  bash "$ROOT/scripts/kafka.sh" topics --create --topic "$(topic_of "$t")" \
    --partitions "$PARTITIONS" --replication-factor 1 >/dev/null
done

# --- Kafka Connect with Debezium's PostgreSQL source ----------------------------------
CPORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
cat >"$WORK/worker.properties" <<CONF
bootstrap.servers=$BOOTSTRAP
key.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=true
value.converter=org.apache.kafka.connect.json.JsonConverter
value.converter.schemas.enable=true
offset.storage.file.filename=$WORK/connect.offsets
offset.flush.interval.ms=1000
listeners=http://127.0.0.1:$CPORT
plugin.path=$CONNECT_PLUGINS
plugin.discovery=service_load
CONF
# The settings tidemark's "debezium" format reads (docs/configuration.md, "Change data
# capture"): the envelope with its schema (above), decimals as Connect Decimal (precise),
# times by their Debezium logical types (adaptive); written out, not left to defaults.
cat >"$WORK/source.properties" <<CONF
name=$RUN
connector.class=io.debezium.connector.postgresql.PostgresConnector
tasks.max=1
database.hostname=127.0.0.1
database.port=$TIDEMARK_PG_PORT
database.user=postgres
database.password=unused-trust-auth
database.dbname=$SRC_DB
topic.prefix=$TOPIC_PREFIX
plugin.name=pgoutput
slot.name=$RUN
publication.name=${RUN}_pub
publication.autocreate.mode=filtered
table.include.list=public.orders,public.customers
snapshot.mode=no_data
decimal.handling.mode=precise
time.precision.mode=adaptive
tombstones.on.delete=true
CONF
cat >"$WORK/log4j2.properties" <<'L4J'
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
L4J
say "starting Kafka Connect (REST port $CPORT) with the Debezium PostgreSQL source"
java -Xms128m -Xmx768m -XX:+UseSerialGC -Djava.awt.headless=true \
  "-Dlog4j2.configurationFile=$WORK/log4j2.properties" -cp "$CONNECT_LIBS/*" \
  org.apache.kafka.connect.cli.ConnectStandalone "$WORK/worker.properties" "$WORK/source.properties" \
  >>"$WORK/connect.log" 2>&1 </dev/null &
CONNECT_PID=$!

connect_check() {
  kill -0 "$CONNECT_PID" 2>/dev/null || { tail -n 40 "$WORK/connect.log" >&2; die "the Connect worker exited"; }
  local st
  st="$(curl -s -m 2 "http://127.0.0.1:$CPORT/connectors/$RUN/status" 2>/dev/null || true)"
  case "$st" in
    *'"state":"FAILED"'*)
      grep -E 'ERROR|Caused by' "$WORK/connect.log" | tail -n 20 >&2
      die "the Debezium connector or its task FAILED (log: $WORK/connect.log)" ;;
  esac
}
# Streaming starts once the slot exists and Debezium holds it (snapshot.mode no_data: no
# snapshot, every change after the slot's creation is streamed).
deadline=$((SECONDS + TIMEOUT))
until [ "$(psql_admin "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$RUN' AND active")" = 1 ]; do
  connect_check
  [ "$SECONDS" -lt "$deadline" ] || die "Debezium did not open slot $RUN in ${TIMEOUT}s (log: $WORK/connect.log)"
  sleep 0.5
done
say "Debezium streams from slot $RUN"

# --- tidemark's connectors ---------------------------------------------------------------
# table -> its mapping columns: Decimal into text (its decimal text), the times into
# timestamps, Json into text
columns_of() {
  case "$1" in
    orders) cat <<'JSON'
      {"name": "id", "pointer": "/id", "type": "int", "key": true},
      {"name": "customer_id", "pointer": "/customer_id", "type": "int"},
      {"name": "note", "pointer": "/note", "type": "text"},
      {"name": "amount", "pointer": "/amount", "type": "text"},
      {"name": "placed_at", "pointer": "/placed_at", "type": "timestamp"},
      {"name": "ship_date", "pointer": "/ship_date", "type": "timestamp"},
      {"name": "paid", "pointer": "/paid", "type": "bool", "required": true},
      {"name": "weight", "pointer": "/weight", "type": "float"},
      {"name": "attrs", "pointer": "/attrs", "type": "text"}
JSON
    ;;
    customers) cat <<'JSON'
      {"name": "id", "pointer": "/id", "type": "int", "key": true},
      {"name": "name", "pointer": "/name", "type": "text", "required": true},
      {"name": "balance", "pointer": "/balance", "type": "text"},
      {"name": "created_local", "pointer": "/created_local", "type": "timestamp"},
      {"name": "birthday", "pointer": "/birthday", "type": "timestamp"},
      {"name": "active", "pointer": "/active", "type": "bool"},
      {"name": "score", "pointer": "/score", "type": "float"}
JSON
    ;;
  esac
}
sink_of() { # table target
  case "$2" in
    sqlite) echo "{\"plugin\": \"sqlite\", \"settings\": {\"path\": \"$SQLITE_DB\", \"table\": \"$1\", \"mode\": \"upsert\"}}" ;;
    pg) echo "{\"plugin\": \"postgres\", \"settings\": {\"conninfo\": \"$DST\", \"table\": \"$1\", \"mode\": \"upsert\"}}" ;;
  esac
}
# Small batches: a restart then works through its backlog in several commits, so a kill
# right after the first one lands with work in flight.
for t in "${TABLES[@]}"; do
  for g in "${TARGETS[@]}"; do
    cat >"$WORK/configs/$t-$g.json" <<JSON
{
  "name": "$(connector_of "$t" "$g")",
  "kafka": {"bootstrap_servers": "$BOOTSTRAP", "topics": ["$(topic_of "$t")"], "start": "earliest"},
  "batch": {"max_records": 100, "max_wait_ms": 100},
  "sink": $(sink_of "$t" "$g"),
  "mapping": {"mode": "json", "format": "debezium", "columns": [
$(columns_of "$t")
  ]},
  "dead_letters": {"sink": true}
}
JSON
  done
done
"$TIDEMARK" validate --plugin-dir "$PLUGIN_DIR" "$WORK"/configs/*.json >"$WORK/validate.log" 2>&1 ||
  { cat "$WORK/validate.log" >&2; die "tidemark validate refused the configs"; }

# One `tidemark run` per connector, so that each is killed on its own schedule. A start
# with a fault point (operations.md, "Crash points") SIGKILLs itself at the point's
# TIDEMARK_FAULT_HIT-th hit and first writes the point's name to the file on fd 3.
declare -A TM_STARTS
tm_start() { # table target [point hit]
  local c="$1.$2" n
  n=$((${TM_STARTS[$c]:-0} + 1))
  TM_STARTS[$c]=$n
  if [ $# -eq 4 ]; then
    TIDEMARK_FAULT="$3" TIDEMARK_FAULT_HIT="$4" TIDEMARK_FAULT_FD=3 \
      "$TIDEMARK" run --plugin-dir "$PLUGIN_DIR" --state-dir "$WORK/state" "$WORK/configs/$1-$2.json" \
      >"$WORK/tidemark.$c.$n.log" 2>&1 </dev/null 3>"$WORK/fault.$c.$n" &
  else
    "$TIDEMARK" run --plugin-dir "$PLUGIN_DIR" --state-dir "$WORK/state" "$WORK/configs/$1-$2.json" \
      >"$WORK/tidemark.$c.$n.log" 2>&1 </dev/null &
  fi
  TM_PID[$c]=$!
}
tm_check() { # table target: still running
  local c="$1.$2"
  kill -0 "${TM_PID[$c]}" 2>/dev/null && return 0
  tail -n 30 "$WORK/tidemark.$c.${TM_STARTS[$c]}.log" >&2
  die "tidemark run of $(connector_of "$1" "$2") exited by itself (log: $WORK/tidemark.$c.${TM_STARTS[$c]}.log)"
}

# --- the source of truth: Kafka's end offsets, the sinks' markers ------------------------
# sum of a topic's end offsets (kcat -Q: "TOPIC [P] offset N" per partition)
end_sum() { # table
  local t args=() p
  t="$(topic_of "$1")"
  for ((p = 0; p < PARTITIONS; p++)); do args+=(-t "$t:$p:-1"); done
  kcat -Q -b "$BOOTSTRAP" "${args[@]}" | awk -v n="$PARTITIONS" '
    $3 == "offset" { s += $4; c++ } END { if (c != n) exit 1; print s + 0 }'
}
# sum of a connector's next offsets over its topic's partitions, read from its sink (no
# marker yet: 0)
marker_sum() { # table target
  local c q
  c="$(connector_of "$1" "$2")"
  q="SELECT coalesce(sum(next_offset), 0) FROM tidemark_markers WHERE connector = '$c'"
  case "$2" in
    sqlite) [ -f "$SQLITE_DB" ] || { echo 0; return; }
            sqlite3 -cmd '.timeout 5000' "file:$SQLITE_DB?mode=ro" "SELECT CASE WHEN EXISTS (
              SELECT 1 FROM sqlite_master WHERE name = 'tidemark_markers') THEN 1 ELSE 0 END" |
              grep -q 1 || { echo 0; return; }
            sqlite3 -cmd '.timeout 5000' "file:$SQLITE_DB?mode=ro" "$q" ;;
    pg) [ "$(psql "$DST" -X -q -tA -c "SELECT to_regclass('public.tidemark_markers') IS NOT NULL")" = t ] ||
          { echo 0; return; }
        psql "$DST" -X -q -tA -v ON_ERROR_STOP=1 -c "$q" ;;
  esac
}

# --- the workload and the kills ----------------------------------------------------------
# Each connector's process is killed KILLS times, each time at a commit fault point of its
# sink, in turn: after_effects (rows written, the transaction open), after_marker (rows and
# markers written, not committed), after_commit (committed; the consumer's offsets not),
# before_begin (between two commits). Always at the point's 2nd hit, so one batch of the
# start has committed first. A start waits until the topic is BACKLOG (>= 3 batches of 100
# records) past the connector's markers: two batches commit at most before the kill, so the
# kill lands with records left to apply. Checked after each kill, else INCONCLUSIVE: the
# process died by SIGKILL, the fault file names the point (the kill happened there), the
# markers (read from the sink) moved past those of the previous kill, and Kafka's end
# offsets are past the markers.
POINTS=(after_effects after_marker after_commit before_begin)
HIT=2
say "workload: $OPS changes at $RATE/s (seed $SEED); each of the 4 connectors SIGKILLed $KILLS times meanwhile"
{ python3 "$HERE/workload.py" run "$SEED" "$OPS" "$RATE" "$WORK/counts" |
    psql "$SRC" -X -q -v ON_ERROR_STOP=1 >/dev/null; } 2>"$WORK/workload.log" &
WORKLOAD_PID=$!
workload_running() { kill -0 "$WORKLOAD_PID" 2>/dev/null; }

declare -A LAST_MARK NKILLS
CONNECTORS=()
for t in "${TABLES[@]}"; do for g in "${TARGETS[@]}"; do
  CONNECTORS+=("$t.$g"); LAST_MARK[$t.$g]=0; NKILLS[$t.$g]=0; TM_PID[$t.$g]=""
done; done
deadline=$((SECONDS + 2 * TIMEOUT))
while :; do
  pending=0
  for c in "${CONNECTORS[@]}"; do
    t="${c%.*}" g="${c#*.}" k=$((NKILLS[$c] + 1))
    [ "${NKILLS[$c]}" -lt "$KILLS" ] || continue
    pending=1
    pid="${TM_PID[$c]}"
    point="${POINTS[$(((k - 1) % ${#POINTS[@]}))]}"
    if [ -z "$pid" ]; then
      # down: start once the topic is BACKLOG past the markers
      if [ $(($(end_sum "$t") - LAST_MARK[$c])) -ge "$BACKLOG" ]; then
        tm_start "$t" "$g" "$point" "$HIT"
      else
        workload_running ||
          inconclusive "the workload ended before kill $k of $(connector_of "$t" "$g") (raise DEBSRC_OPS or lower DEBSRC_RATE)"
      fi
    elif ! kill -0 "$pid" 2>/dev/null; then
      rc=0; wait "$pid" || rc=$?
      TM_PID[$c]=""
      n="${TM_STARTS[$c]}"
      [ "$rc" = 137 ] || { tail -n 20 "$WORK/tidemark.$c.$n.log" >&2
        inconclusive "$(connector_of "$t" "$g"): expected a SIGKILL at $point, the process exited with status $rc"; }
      [ "$(cat "$WORK/fault.$c.$n")" = "$point" ] ||
        inconclusive "$(connector_of "$t" "$g"): killed, but its fault file does not name $point"
      m="$(marker_sum "$t" "$g")" e="$(end_sum "$t")"
      echo "replicate: kill $k of $c at $point: markers ${LAST_MARK[$c]} -> $m, end offsets $e, backlog $((e - m))"
      [ "$m" -gt "${LAST_MARK[$c]}" ] ||
        inconclusive "$(connector_of "$t" "$g"): the markers did not move between kill $((k - 1)) and kill $k"
      [ "$e" -gt "$m" ] ||
        inconclusive "$(connector_of "$t" "$g"): no backlog at kill $k (markers at the end offsets)"
      LAST_MARK[$c]="$m"
      NKILLS[$c]=$k
    fi
  done
  [ "$pending" = 1 ] || break
  connect_check
  [ "$SECONDS" -lt "$deadline" ] || die "the kills did not happen within $((2 * TIMEOUT))s"
  sleep 0.1
done
for c in "${CONNECTORS[@]}"; do tm_start "${c%.*}" "${c#*.}"; done

# --- drain and compare -------------------------------------------------------------------
say "kills done; waiting for the workload to end"
wait "$WORKLOAD_PID" || { cat "$WORK/workload.log" >&2; die "the workload failed"; }
WORKLOAD_PID=""
declare -A EXPECT
while read -r t n; do EXPECT[$t]="$n"; done <"$WORK/counts"
say "waiting for Debezium to emit every event (orders ${EXPECT[orders]}, customers ${EXPECT[customers]})"
deadline=$((SECONDS + TIMEOUT))
for t in "${TABLES[@]}"; do
  while [ "$(end_sum "$t")" -lt "${EXPECT[$t]}" ]; do
    connect_check
    [ "$SECONDS" -lt "$deadline" ] || die "topic $(topic_of "$t") holds $(end_sum "$t") of ${EXPECT[$t]} events after ${TIMEOUT}s"
    sleep 0.5
  done
done
say "waiting for tidemark's markers to reach the topics' end offsets"
deadline=$((SECONDS + TIMEOUT))
for t in "${TABLES[@]}"; do
  e="$(end_sum "$t")"
  [ "$e" -eq "${EXPECT[$t]}" ] || say "note: topic $(topic_of "$t") holds $e records, the workload made ${EXPECT[$t]}"
  for g in "${TARGETS[@]}"; do
    while [ "$(marker_sum "$t" "$g")" -lt "$e" ]; do
      tm_check "$t" "$g"
      [ "$SECONDS" -lt "$deadline" ] || die "connector $(connector_of "$t" "$g") at $(marker_sum "$t" "$g") of $e after ${TIMEOUT}s"
      sleep 0.2
    done
  done
done
for c in "${CONNECTORS[@]}"; do
  kill -TERM "${TM_PID[$c]}"
  wait "${TM_PID[$c]}" || die "tidemark run of $c exited with status $? on SIGTERM"
  TM_PID[$c]=""
done

failed=0
for t in "${TABLES[@]}"; do
  python3 "$HERE/compare.py" "$t" "$SRC" pg "$DST" public "$t" || failed=1
  python3 "$HERE/compare.py" "$t" "$SRC" sqlite "$SQLITE_DB" "$t" || failed=1
done
dl_pg="$(psql "$DST" -X -q -tA -v ON_ERROR_STOP=1 -c "SELECT count(*) FROM tidemark_dead_letters")"
dl_sqlite="$(sqlite3 "file:$SQLITE_DB?mode=ro" "SELECT count(*) FROM tidemark_dead_letters")"
echo "replicate: dead letters: pg=$dl_pg sqlite=$dl_sqlite"
if [ "$dl_pg" != 0 ] || [ "$dl_sqlite" != 0 ]; then
  psql "$DST" -X -q -c "SELECT connector, topic, partition, \"offset\", reason, detail FROM tidemark_dead_letters LIMIT 5" >&2 || true
  failed=1
fi
summary="seed=$SEED ops=$OPS kills=$KILLS events: orders=${EXPECT[orders]} customers=${EXPECT[customers]}"
[ "$failed" = 0 ] || die "the targets differ from the source ($summary; configs: $WORK/configs)"
echo "replicate: PASS $summary"
