# shellcheck shell=bash
# Source me: the change-data-capture source of tests/cdc/replicate.sh and
# tests/bench/debezium_peer.sh. A PostgreSQL database with the tables of tests/cdc/workload.py,
# captured by Debezium's PostgreSQL connector in a Kafka Connect standalone worker into one
# topic per table (PARTITIONS partitions, JsonConverter with schemas), and the queries of
# the source of truth: Kafka's end offsets.
#
# The caller sets ROOT, RUN (a unique name: [a-z0-9_], it names the databases, the slot,
# the publication, the topic prefix), WORK (a directory), TIMEOUT (seconds), PARTITIONS,
# and defines say, die. It calls cdc_source_cleanup from its EXIT trap.
# shellcheck source=../../scripts/env.sh
. "$ROOT/scripts/env.sh"
# shellcheck source=../../scripts/connect/lib.sh
. "$ROOT/scripts/connect/lib.sh"

BOOTSTRAP="$TIDEMARK_KAFKA_BOOTSTRAP"
PG_ADMIN="host=127.0.0.1 port=$TIDEMARK_PG_PORT user=postgres dbname=postgres"
SRC_DB="${RUN}_src"
SRC="host=127.0.0.1 port=$TIDEMARK_PG_PORT user=postgres dbname=$SRC_DB"
TOPIC_PREFIX="$RUN"
TABLES=(orders customers)
CDC_DBS=()        # databases made (dropped by cdc_source_cleanup)
CDC_TOPICS=0
SOURCE_PID=""     # the source's Connect worker

psql_admin() { psql "$PG_ADMIN" -X -q -tA -v ON_ERROR_STOP=1 -c "$1"; }
topic_of() { echo "$TOPIC_PREFIX.public.$1"; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

cdc_tools_check() {
  local tool
  for tool in java kcat psql python3 sqlite3; do
    command -v "$tool" >/dev/null || die "$tool not found (scripts/install-deps.sh)"
  done
  [ "$(psql_admin 'SHOW wal_level')" = logical ] ||
    die "PostgreSQL at port $TIDEMARK_PG_PORT does not run with wal_level=logical (scripts/postgres.sh restart)"
}

# A database owned by OWNER (postgres or tidemark), dropped at cleanup.
cdc_make_db() { # name owner
  CDC_DBS+=("$1")
  psql_admin "CREATE DATABASE \"$1\" OWNER \"$2\"" >/dev/null
}

# The source database with the workload's tables, and the topics.
cdc_source_create() {
  cdc_make_db "$SRC_DB" postgres
  python3 "$ROOT/tests/cdc/workload.py" schema | psql "$SRC" -X -q -v ON_ERROR_STOP=1 >/dev/null
  CDC_TOPICS=1
  local t
  for t in "${TABLES[@]}"; do
    bash "$ROOT/scripts/kafka.sh" topics --create --topic "$(topic_of "$t")" \
      --partitions "$PARTITIONS" --replication-factor 1 >/dev/null
  done
}

# The log4j2 configuration of a Connect worker: INFO to its log file.
cdc_connect_log4j() { # file
  cat >"$1" <<'L4J'
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
logger.hibernate.name = org.hibernate
logger.hibernate.level = WARN
L4J
}

# A Connect standalone worker of DIR/worker.properties and DIR/connector.properties, its
# output in DIR/connect.log; prints its pid.
cdc_connect_start() { # dir
  cdc_connect_log4j "$1/log4j2.properties"
  java -Xms128m -Xmx768m -XX:+UseSerialGC -Djava.awt.headless=true \
    "-Dlog4j2.configurationFile=$1/log4j2.properties" -cp "$CONNECT_LIBS/*" \
    org.apache.kafka.connect.cli.ConnectStandalone "$1/worker.properties" "$1/connector.properties" \
    >>"$1/connect.log" 2>&1 </dev/null &
  echo $!
}

# The worker's properties: JSON with schemas for keys and values (what tidemark's
# "debezium" format and the JDBC sink read), offsets in DIR/connect.offsets. A null stays
# null: JsonConverter otherwise writes a field's schema default for a null value
# (replace.null.with.default, true by default), so a column added with a DEFAULT and then
# set to NULL would reach the targets as its default (tests/cdc/replicate.sh).
cdc_worker_properties() { # dir port flush-ms
  cat >"$1/worker.properties" <<CONF
bootstrap.servers=$BOOTSTRAP
key.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=true
value.converter=org.apache.kafka.connect.json.JsonConverter
value.converter.schemas.enable=true
key.converter.replace.null.with.default=false
value.converter.replace.null.with.default=false
offset.storage.file.filename=$1/connect.offsets
offset.flush.interval.ms=$3
listeners=http://127.0.0.1:$2
plugin.path=$CONNECT_PLUGINS
plugin.discovery=service_load
CONF
}

# Fails when the worker exited or its connector or task FAILED.
cdc_connect_check() { # pid dir port name
  kill -0 "$1" 2>/dev/null || { tail -n 40 "$2/connect.log" >&2; die "the Connect worker of $4 exited (log: $2/connect.log)"; }
  local st
  st="$(python3 -c 'import sys, urllib.request
print(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode())' \
          "http://127.0.0.1:$3/connectors/$4/status" 2>/dev/null || true)"
  case "$st" in
    *'"state":"FAILED"'*)
      grep -E 'ERROR|Caused by' "$2/connect.log" | tail -n 20 >&2
      die "the connector $4 or its task FAILED (log: $2/connect.log)" ;;
  esac
}

# Debezium's PostgreSQL source in a worker of its own, streaming when this returns.
# The settings tidemark's "debezium" format reads (docs/configuration.md, "Change data
# capture"): the envelope with its schema (the worker's converters), decimals as Connect
# Decimal (precise), times by their Debezium logical types (adaptive), tombstones after
# deletes; written out, not left to defaults. snapshot.mode no_data: no snapshot, every
# change after the slot's creation is streamed (the tables are empty until then).
SOURCE_DIR=""
SOURCE_PORT=""
cdc_source_start() {
  SOURCE_DIR="$WORK/source"
  SOURCE_PORT="$(free_port)"
  mkdir -p "$SOURCE_DIR"
  cdc_worker_properties "$SOURCE_DIR" "$SOURCE_PORT" 1000
  cat >"$SOURCE_DIR/connector.properties" <<CONF
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
  say "starting Kafka Connect (REST port $SOURCE_PORT) with the Debezium PostgreSQL source"
  SOURCE_PID="$(cdc_connect_start "$SOURCE_DIR")"
  local deadline=$((SECONDS + TIMEOUT))
  until [ "$(psql_admin "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$RUN' AND active")" = 1 ]; do
    cdc_source_check
    [ "$SECONDS" -lt "$deadline" ] || die "Debezium did not open slot $RUN in ${TIMEOUT}s (log: $SOURCE_DIR/connect.log)"
    sleep 0.5
  done
  say "Debezium streams from slot $RUN"
}
cdc_source_check() { cdc_connect_check "$SOURCE_PID" "$SOURCE_DIR" "$SOURCE_PORT" "$RUN"; }

# Sum of a table's topic's end offsets (kcat -Q: "TOPIC [P] offset N" per partition).
end_sum() { # table
  local t args=() p
  t="$(topic_of "$1")"
  for ((p = 0; p < PARTITIONS; p++)); do args+=(-t "$t:$p:-1"); done
  kcat -Q -b "$BOOTSTRAP" "${args[@]}" | awk -v n="$PARTITIONS" '
    $3 == "offset" { s += $4; c++ } END { if (c != n) exit 1; print s + 0 }'
}

# The workload's first rows (tests/cdc/workload.py seed), for a caller that needs its
# targets' tables made before the workload (then cdc_workload_start with --seeded).
cdc_seed() { # seed
  python3 "$ROOT/tests/cdc/workload.py" seed "$1" | psql "$SRC" -X -q -v ON_ERROR_STOP=1 >/dev/null
}

# The workload (tests/cdc/workload.py run) into the source, in the background: WORKLOAD_PID;
# the event counts it made in $WORK/counts when it is done.
WORKLOAD_PID=""
cdc_workload_start() { # seed ops rate [workload.py run's options]
  local seed="$1" ops="$2" rate="$3"
  shift 3
  { python3 "$ROOT/tests/cdc/workload.py" run "$seed" "$ops" "$rate" "$WORK/counts" "$@" |
      psql "$SRC" -X -q -v ON_ERROR_STOP=1 >/dev/null; } 2>"$WORK/workload.log" &
  WORKLOAD_PID=$!
}
workload_running() { kill -0 "$WORKLOAD_PID" 2>/dev/null; }

# Waits for the workload to end and for Debezium to have written every event it made:
# each topic's end offsets reach the count. Sets EXPECT[table].
declare -A EXPECT
cdc_drain_source() {
  wait "$WORKLOAD_PID" || { cat "$WORK/workload.log" >&2; die "the workload failed"; }
  WORKLOAD_PID=""
  local t n deadline=$((SECONDS + TIMEOUT))
  while read -r t n; do EXPECT[$t]="$n"; done <"$WORK/counts"
  say "waiting for Debezium to emit every event (orders ${EXPECT[orders]}, customers ${EXPECT[customers]})"
  for t in "${TABLES[@]}"; do
    while [ "$(end_sum "$t")" -lt "${EXPECT[$t]}" ]; do
      cdc_source_check
      [ "$SECONDS" -lt "$deadline" ] || die "topic $(topic_of "$t") holds $(end_sum "$t") of ${EXPECT[$t]} events after ${TIMEOUT}s"
      sleep 0.5
    done
    n="$(end_sum "$t")"
    [ "$n" -eq "${EXPECT[$t]}" ] || say "note: topic $(topic_of "$t") holds $n records, the workload made ${EXPECT[$t]}"
  done
}

# Stops a Connect worker: TERM, then KILL after 15 s.
cdc_connect_stop() { # pid
  [ -n "$1" ] || return 0
  kill -TERM "$1" 2>/dev/null || true
  local i
  for ((i = 0; i < 150; i++)); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# From the caller's EXIT trap: the workload and the source worker stopped; unless
# DEBSRC_KEEP=1, the slot (Debezium keeps it when it stops: it would hold WAL), the
# databases and the topics dropped.
cdc_source_cleanup() {
  [ -z "$WORKLOAD_PID" ] || { kill -TERM "$WORKLOAD_PID" 2>/dev/null || true; wait "$WORKLOAD_PID" 2>/dev/null || true; }
  cdc_connect_stop "$SOURCE_PID"
  [ "${DEBSRC_KEEP:-0}" != 1 ] || return 0
  psql_admin "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots
              WHERE slot_name = '$RUN' AND NOT active" >/dev/null 2>&1 || true
  local d
  for d in "${CDC_DBS[@]}"; do psql_admin "DROP DATABASE IF EXISTS \"$d\" WITH (FORCE)" >/dev/null 2>&1 || true; done
  [ "$CDC_TOPICS" = 0 ] ||
    bash "$ROOT/scripts/kafka.sh" topics --delete --topic "$TOPIC_PREFIX\\..*" >/dev/null 2>&1 || true
}

# --- tidemark's connectors -------------------------------------------------------------
# table -> its mapping columns: Decimal into text (its decimal text), the times into
# timestamps, Json into text. orders' are those of the example config
# configs/debezium-orders-to-postgres.json, so the example is what the tests run.
cdc_columns_of() { # table
  case "$1" in
    orders) python3 -c 'import json, sys
print(",\n".join(json.dumps(c) for c in json.load(open(sys.argv[1]))["mapping"]["columns"]))' \
              "$ROOT/configs/debezium-orders-to-postgres.json" ;;
    customers) cat <<'JSON'
{"name": "id", "pointer": "/id", "type": "int", "key": true},
{"name": "name", "pointer": "/name", "type": "text", "required": true},
{"name": "balance", "pointer": "/balance", "type": "text"},
{"name": "created_local", "pointer": "/created_local", "type": "timestamp"},
{"name": "birthday", "pointer": "/birthday", "type": "timestamp"},
{"name": "active", "pointer": "/active", "type": "bool"},
{"name": "score", "pointer": "/score", "type": "float"},
{"name": "version", "pointer": "/version", "type": "int", "required": true}
JSON
    ;;
  esac
}

# A tidemark connector config of a table's topic into a sink (format "debezium", upsert),
# with the table's column list, or with "schema" its columns from the events' schemas
# (docs/configuration.md, "Columns from the event's schema").
cdc_tidemark_config() { # file name table max-records sink-json [list|schema]
  local columns=""
  [ "${6:-list}" = schema ] || columns=", \"columns\": [
$(cdc_columns_of "$3")
  ]"
  cat >"$1" <<JSON
{
  "name": "$2",
  "kafka": {"bootstrap_servers": "$BOOTSTRAP", "topics": ["$(topic_of "$3")"], "start": "earliest"},
  "batch": {"max_records": $4, "max_wait_ms": 100},
  "sink": $5,
  "mapping": {"mode": "json", "format": "debezium"$columns},
  "dead_letters": {"sink": true}
}
JSON
}
cdc_sqlite_sink() { echo "{\"plugin\": \"sqlite\", \"settings\": {\"path\": \"$1\", \"table\": \"$2\", \"mode\": \"upsert\"}}"; } # path table
cdc_pg_sink() { echo "{\"plugin\": \"postgres\", \"settings\": {\"conninfo\": \"$1\", \"table\": \"$2\", \"mode\": \"upsert\"}}"; } # conninfo table

# Sum of a connector's next offsets, read from its sink's tidemark_markers (none yet: 0).
marker_sum_sqlite() { # db-file connector
  local q="SELECT coalesce(sum(next_offset), 0) FROM tidemark_markers WHERE connector = '$2'"
  [ -f "$1" ] || { echo 0; return; }
  [ "$(sqlite3 -cmd '.timeout 5000' "file:$1?mode=ro" \
        "SELECT count(*) FROM sqlite_master WHERE name = 'tidemark_markers'")" = 1 ] || { echo 0; return; }
  sqlite3 -cmd '.timeout 5000' "file:$1?mode=ro" "$q"
}
marker_sum_pg() { # conninfo connector
  [ "$(psql "$1" -X -q -tA -v ON_ERROR_STOP=1 -c "SELECT to_regclass('public.tidemark_markers') IS NOT NULL")" = t ] ||
    { echo 0; return; }
  psql "$1" -X -q -tA -v ON_ERROR_STOP=1 \
    -c "SELECT coalesce(sum(next_offset), 0) FROM tidemark_markers WHERE connector = '$2'"
}

# --- the write log: exactly once, not at least once ----------------------------------------
# Triggers on a target's tables log every row write (table, key, version) in write_log. The
# source gives every row state a version no other state has, rising (workload.py), so a key
# whose version does not rise from one logged write to the next re-applied an older change:
# the state a table ends in cannot tell that from exactly once, the log can. A write rolled
# back (a SIGKILL before the commit) takes its log row with it. The target's tables must
# exist (the sink made them) and be the workload's (columns id and version).
cdc_write_log_pg() { # conninfo
  local sql t
  sql="CREATE TABLE write_log (seq bigserial PRIMARY KEY, tbl text NOT NULL, id bigint NOT NULL,
         version bigint NOT NULL);
       CREATE INDEX write_log_key ON write_log (tbl, id, version);
       CREATE FUNCTION log_write() RETURNS trigger LANGUAGE plpgsql AS \$\$
       BEGIN
         INSERT INTO write_log (tbl, id, version) VALUES (TG_TABLE_NAME, NEW.id, NEW.version);
         RETURN NULL;
       END \$\$;"
  for t in "${TABLES[@]}"; do
    sql+=" CREATE TRIGGER ${t}_log AFTER INSERT OR UPDATE ON $t FOR EACH ROW EXECUTE FUNCTION log_write();"
  done
  psql "$1" -X -q -v ON_ERROR_STOP=1 -c "$sql" >/dev/null
}
cdc_write_log_sqlite() { # db-file
  local sql t op
  sql="CREATE TABLE write_log (seq INTEGER PRIMARY KEY, tbl TEXT NOT NULL, id INTEGER NOT NULL,
         version INTEGER NOT NULL);
       CREATE INDEX write_log_key ON write_log (tbl, id, version);"
  for t in "${TABLES[@]}"; do for op in INSERT UPDATE; do
    sql+=" CREATE TRIGGER ${t}_log_$op AFTER $op ON $t BEGIN
             INSERT INTO write_log (tbl, id, version) VALUES ('$t', NEW.id, NEW.version); END;"
  done; done
  sqlite3 -cmd '.timeout 5000' "$1" "$sql"
}
# "writes replayed": the logged writes, and those whose version is not above every version
# their key showed before (one SQL for both databases); and the first few replayed writes.
CDC_WRITE_LOG_PREV="SELECT seq, tbl, id, version, max(version) OVER (PARTITION BY tbl, id ORDER BY seq
    ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev FROM write_log"
CDC_WRITE_LOG_COUNTS="SELECT count(*) || ' ' || count(*) FILTER (WHERE version <= prev) FROM ($CDC_WRITE_LOG_PREV) w"
CDC_WRITE_LOG_REPLAYED="SELECT 'write ' || seq || ': ' || tbl || ' id ' || id || ' version ' || version
    || ' after version ' || prev FROM ($CDC_WRITE_LOG_PREV) w WHERE version <= prev ORDER BY seq LIMIT 3"
# A query's result, one row a line, columns |-separated: in PostgreSQL, in an SQLite file
# (read only).
cdc_pg_query() { psql "$1" -X -q -tA -v ON_ERROR_STOP=1 -c "$2"; } # conninfo sql
cdc_sqlite_query() { sqlite3 -cmd '.timeout 5000' "file:$1?mode=ro" "$2"; } # db-file sql

# The rows of a target the log misses: rows whose version is above FROM (written after the
# log began) and whose key and version no logged write has. Anything but 0: the triggers did
# not fire (one SQL for both databases).
cdc_write_log_unlogged_sql() { # from
  local t sql=""
  for t in "${TABLES[@]}"; do
    sql+="${sql:+ + }(SELECT count(*) FROM $t r WHERE r.version > $1 AND NOT EXISTS (
      SELECT 1 FROM write_log w WHERE w.tbl = '$t' AND w.id = r.id AND w.version = r.version))"
  done
  echo "SELECT $sql"
}
