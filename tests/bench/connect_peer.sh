#!/usr/bin/env bash
# The Kafka Connect peer benchmark (docs/benchmarks.md, "Kafka Connect peer"):
# Apache Kafka Connect standalone with Debezium's JDBC sink connector writing the
# benchmark records (tests/bench/gen_records.py) into PostgreSQL.
#
#   tests/bench/connect_peer.sh [--smoke] [COUNT] [TOPIC]
#
# 1. throughput: COUNT records (in Connect's JSON schema envelope) into a fresh 8-partition
#    topic, Connect started, timed until the table holds COUNT rows:
#      peer: records=N seconds=S records_per_s=R
# 2. kill test: a fresh topic and table, the Connect JVM SIGKILLed when the table holds
#    20-80 % of the rows, restarted, run until the consumer group's lag is 0; then
#      peer_kill: records=N rows=R duplicates=D gaps=G
#    (a kill outside 20-80 % prints "peer_kill: inconclusive ..." and exits 1).
# --smoke: 5000 records, a quick check that the script works (CI; about 80 s here).
#
# Uses the running broker (scripts/kafka.sh) and PostgreSQL (scripts/postgres.sh); starts
# either if it is down and leaves it running. Stops the Connect JVMs it started, deletes its
# topics and drops its tables (PEER_KEEP=1 keeps topics and tables).
# Env: PEER_COUNT, PEER_TOPIC (topic name prefix), PEER_SEED (1), PEER_BATCH (1000),
#      PEER_TASKS (1), PEER_OFFSET_FLUSH_MS (10000), PEER_UNNEST (false),
#      PEER_SKIP_KILL=1, PEER_TIMEOUT seconds per phase (900), PEER_CONNECT_PORT (18083).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=../../scripts/env.sh
. "$ROOT/scripts/env.sh"

SMOKE=0
ARGS=()
for a in "$@"; do
  case "$a" in
    --smoke) SMOKE=1 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) ARGS+=("$a") ;;
  esac
done
# --smoke: small, and offsets committed every 2 s so that the lag reaches 0 soon
if [ "$SMOKE" = 1 ]; then DEFAULT_COUNT=5000; DEFAULT_TIMEOUT=120; DEFAULT_FLUSH=2000
else DEFAULT_COUNT=200000; DEFAULT_TIMEOUT=900; DEFAULT_FLUSH=10000; fi
COUNT="${ARGS[0]:-${PEER_COUNT:-$DEFAULT_COUNT}}"
PREFIX="${ARGS[1]:-${PEER_TOPIC:-connect_peer}}"
SEED="${PEER_SEED:-1}"
BATCH="${PEER_BATCH:-1000}"
TASKS="${PEER_TASKS:-1}"
FLUSH_MS="${PEER_OFFSET_FLUSH_MS:-$DEFAULT_FLUSH}"
UNNEST="${PEER_UNNEST:-false}"
TIMEOUT="${PEER_TIMEOUT:-$DEFAULT_TIMEOUT}"
CPORT="${PEER_CONNECT_PORT:-18083}"
BOOTSTRAP="$TIDEMARK_KAFKA_BOOTSTRAP"
PGPORT="$TIDEMARK_PG_PORT"
[[ "$COUNT" =~ ^[0-9]+$ ]] && [ "$COUNT" -ge 100 ] || { echo "COUNT must be an integer >= 100" >&2; exit 2; }
[[ "$PREFIX" =~ ^[a-z][a-z0-9_]*$ ]] || { echo "TOPIC must match [a-z][a-z0-9_]* (it names the table too)" >&2; exit 2; }

KAFKA_LIBS="$ROOT/.cache/kafka/libs"
RUN_ID="$(date +%s)_$$"
VAR="$ROOT/var/connect-peer/$RUN_ID"

say() { echo "connect_peer: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

CONNECT_PID=""
TOPICS_MADE=()
TABLES_MADE=()
cleanup() {
  local rc=$?
  stop_connect KILL || true
  if [ "${PEER_KEEP:-0}" != 1 ]; then
    local t
    for t in "${TABLES_MADE[@]}"; do psql_q "DROP TABLE IF EXISTS public.\"$t\"" >/dev/null 2>&1 || true; done
    # one tool run for all of them (--topic takes a regular expression)
    [ "${#TOPICS_MADE[@]}" = 0 ] || \
      topics --delete --topic "$(IFS='|'; echo "${TOPICS_MADE[*]}")" >/dev/null 2>&1 || true
    [ "$rc" -ne 0 ] || rm -rf "$VAR"  # logs kept when it failed
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the jars ------------------------------------------------------------------------
# shellcheck source=../../scripts/connect/lib.sh
. "$ROOT/scripts/connect/lib.sh"
LIBS="$CONNECT_LIBS"
PLUGIN_DIR="$CONNECT_PLUGINS"
# the worker and, in a plugin folder of its own (plugin.path=$PLUGIN_DIR), the connector
fetch_jars() { connect_fetch plugin-pom.xml; }

# --- services ----------------------------------------------------------------------
ensure_services() {
  command -v java >/dev/null || die "java not found (run scripts/install-deps.sh)"
  command -v kcat >/dev/null || die "kcat not found"
  command -v psql >/dev/null || die "psql not found"
  command -v curl >/dev/null || die "curl not found"
  bash "$ROOT/scripts/kafka.sh" status >/dev/null 2>&1 || bash "$ROOT/scripts/kafka.sh" start >/dev/null
  bash "$ROOT/scripts/postgres.sh" status >/dev/null 2>&1 || bash "$ROOT/scripts/postgres.sh" start >/dev/null
  psql_q "SELECT 1" >/dev/null || die "cannot reach PostgreSQL with '$TIDEMARK_PG_CONNINFO'"
}
psql_q() { psql "$TIDEMARK_PG_CONNINFO" -X -q -tA -v ON_ERROR_STOP=1 -c "$1"; }
row_count() { psql_q "SELECT count(*) FROM public.\"$1\"" 2>/dev/null || echo 0; }

TOOLS_LOG4J=""
write_tools_log4j() {
  TOOLS_LOG4J="$VAR/tools-log4j2.properties"
  cat > "$TOOLS_LOG4J" <<'L4J'
status = warn
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
L4J
}
kafka_tool() { # class args...
  local cls="$1"; shift
  java -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC "-Dlog4j2.configurationFile=$TOOLS_LOG4J" \
      -cp "$KAFKA_LIBS/*" "$cls" --bootstrap-server "$BOOTSTRAP" "$@"
}
topics() { kafka_tool org.apache.kafka.tools.TopicCommand "$@"; }
# Sum of the group's lag over the topic's partitions; "-" (no committed offset) counts as
# the whole partition. Prints the sum, or nothing when the group is not described yet.
group_lag() { # group topic
  kafka_tool org.apache.kafka.tools.consumer.group.ConsumerGroupCommand --describe --group "$1" 2>/dev/null \
    | awk -v t="$2" '$2 == t { n++; if ($6 == "-") { lag += $5 } else { lag += $6 } }
                     END { if (n == 8) print lag + 0 }'
}

# --- one topic and table ---------------------------------------------------------------
make_topic_and_table() { # name
  local name="$1"
  topics --create --topic "$name" --partitions 8 --replication-factor 1 >/dev/null
  TOPICS_MADE+=("$name")
  # the payload columns with the types tidemark's PostgreSQL sink gives the same mapping
  # (docs/sinks/postgres.md: int→bigint, text→text, float→double precision, bool→boolean,
  # timestamp→timestamptz; id required → NOT NULL); no index, no primary key
  psql_q "DROP TABLE IF EXISTS public.\"$name\"; CREATE TABLE public.\"$name\" (
      id bigint NOT NULL, user_id bigint, username text, event_type text,
      amount double precision, quantity bigint, is_active boolean, created_at timestamptz,
      country text, note text)" >/dev/null
  TABLES_MADE+=("$name")
  say "producing $COUNT records (schema envelope) into $name"
  python3 "$ROOT/tests/bench/gen_records.py" "$COUNT" "$SEED" --envelope \
    | kcat -P -b "$BOOTSTRAP" -t "$name" -z lz4 -X linger.ms=50 -X batch.num.messages=10000 \
           -X queue.buffering.max.kbytes=262144
  local n
  # the end offsets, "topic:partition:offset" per partition
  n="$(kafka_tool org.apache.kafka.tools.GetOffsetShell --topic "$name" --time -1 2>/dev/null \
       | awk -F: '{s += $NF} END {print s + 0}')" || n=0
  [ "$n" = "$COUNT" ] || say "warning: end offsets sum to $n, expected $COUNT"
}

# --- Connect ---------------------------------------------------------------------------
write_connect_config() { # name dir
  local name="$1" dir="$2"
  mkdir -p "$dir"
  cat > "$dir/worker.properties" <<CONF
bootstrap.servers=$BOOTSTRAP
key.converter=org.apache.kafka.connect.storage.StringConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
value.converter.schemas.enable=true
offset.storage.file.filename=$dir/connect.offsets
offset.flush.interval.ms=$FLUSH_MS
listeners=http://127.0.0.1:$CPORT
plugin.path=$PLUGIN_DIR
plugin.discovery=service_load
# the sink task gets up to one connector batch per put()
consumer.max.poll.records=$BATCH
CONF
  cat > "$dir/connector.properties" <<CONF
name=$name
connector.class=io.debezium.connector.jdbc.JdbcSinkConnector
tasks.max=$TASKS
topics=$name
connection.url=jdbc:postgresql://127.0.0.1:$PGPORT/tidemark
connection.username=tidemark
connection.password=unused-trust-auth
insert.mode=insert
primary.key.mode=none
schema.evolution=none
delete.enabled=false
batch.size=$BATCH
dialect.postgres.unnest.insert.enabled=$UNNEST
collection.name.format=\${topic}
use.time.zone=UTC
CONF
  cat > "$dir/log4j2.properties" <<'L4J'
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

start_connect() { # dir
  local dir="$1"
  (exec 3<>"/dev/tcp/127.0.0.1/$CPORT") 2>/dev/null && die "port $CPORT is in use (PEER_CONNECT_PORT)"
  # heap as Kafka's connect-standalone.sh sets it
  java -Xms256m -Xmx2g -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
      "-Dlog4j2.configurationFile=$dir/log4j2.properties" -cp "$LIBS/*" \
      org.apache.kafka.connect.cli.ConnectStandalone "$dir/worker.properties" "$dir/connector.properties" \
      >>"$dir/connect.log" 2>&1 </dev/null &
  CONNECT_PID=$!
}
stop_connect() { # TERM|KILL
  [ -n "$CONNECT_PID" ] || return 0
  kill "-${1:-TERM}" "$CONNECT_PID" 2>/dev/null || true
  local i
  for ((i = 0; i < 300; i++)); do kill -0 "$CONNECT_PID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$CONNECT_PID" 2>/dev/null && { kill -KILL "$CONNECT_PID" 2>/dev/null || true; }
  wait "$CONNECT_PID" 2>/dev/null || true
  CONNECT_PID=""
}
connect_alive() { [ -n "$CONNECT_PID" ] && kill -0 "$CONNECT_PID" 2>/dev/null; }
# The worker stays up when its task fails: ask its REST API too (every few calls).
CHECKS=0
check_alive() { # dir name
  if ! connect_alive; then
    tail -n 40 "$1/connect.log" >&2
    die "the Connect worker exited (log above: $1/connect.log)"
  fi
  CHECKS=$((CHECKS + 1))
  [ $((CHECKS % 8)) = 0 ] || return 0
  local st
  st="$(curl -s -m 2 "http://127.0.0.1:$CPORT/connectors/$2/status" 2>/dev/null || true)"
  case "$st" in
    *'"state":"FAILED"'*)
      grep -E 'ERROR|Caused by' "$1/connect.log" | tail -n 20 >&2
      die "the connector or its task FAILED (log: $1/connect.log)" ;;
  esac
}
now() { date +%s.%N; }

# --- 1. throughput ---------------------------------------------------------------------
throughput() {
  local name="${PREFIX}_t_${RUN_ID}" dir="$VAR/throughput"
  make_topic_and_table "$name"
  write_connect_config "$name" "$dir"
  say "starting Connect standalone ($name, batch.size $BATCH, tasks.max $TASKS)"
  local t0 t1 tfirst="" n=0
  t0="$(now)"
  start_connect "$dir"
  local deadline=$((SECONDS + TIMEOUT))
  while :; do
    n="$(row_count "$name")"
    [ -z "$tfirst" ] && [ "$n" -gt 0 ] && tfirst="$(now)"
    [ "$n" -ge "$COUNT" ] && break
    check_alive "$dir" "$name"
    [ "$SECONDS" -lt "$deadline" ] || die "table $name holds $n of $COUNT rows after ${TIMEOUT}s"
    sleep 0.25
  done
  t1="$(now)"
  stop_connect TERM
  awk -v n="$COUNT" -v t0="$t0" -v t1="$t1" -v tf="$tfirst" 'BEGIN {
    s = t1 - t0; printf "peer: records=%d seconds=%.2f records_per_s=%.0f\n", n, s, n / s
    printf "peer_detail: startup_to_first_row_s=%.2f first_row_to_last_s=%.2f\n", tf - t0, t1 - tf }'
}

# --- 2. kill test ----------------------------------------------------------------------
kill_test() {
  local name="${PREFIX}_k_${RUN_ID}" dir="$VAR/kill"
  make_topic_and_table "$name"
  write_connect_config "$name" "$dir"
  local lo=$((COUNT / 5)) hi=$((COUNT * 4 / 5)) target=$((COUNT / 2)) n=0
  say "kill test: starting Connect, SIGKILL once the table holds >= $target rows"
  start_connect "$dir"
  local deadline=$((SECONDS + TIMEOUT))
  while :; do
    n="$(row_count "$name")"
    [ "$n" -ge "$target" ] && break
    check_alive "$dir" "$name"
    [ "$SECONDS" -lt "$deadline" ] || die "table $name holds $n of $COUNT rows after ${TIMEOUT}s"
    sleep 0.1
  done
  kill -KILL "$CONNECT_PID"
  wait "$CONNECT_PID" 2>/dev/null || true
  CONNECT_PID=""
  local at_kill; at_kill="$(row_count "$name")"
  say "SIGKILLed the Connect JVM with $n rows seen before the kill, $at_kill after it"
  if [ "$at_kill" -lt "$lo" ] || [ "$at_kill" -gt "$hi" ]; then
    echo "peer_kill: inconclusive records=$COUNT rows_at_kill=$at_kill (outside 20-80 %)"
    return 1
  fi
  say "restarting Connect; waiting for the consumer group's lag to be 0"
  start_connect "$dir"
  deadline=$((SECONDS + TIMEOUT))
  local lag=""
  while :; do
    sleep 2
    check_alive "$dir" "$name"
    lag="$(group_lag "connect-$name" "$name" || true)"
    [ "$lag" = 0 ] && break
    [ "$SECONDS" -lt "$deadline" ] || die "lag still '${lag}' after ${TIMEOUT}s"
  done
  stop_connect TERM
  local rows distinct gaps
  rows="$(row_count "$name")"
  distinct="$(psql_q "SELECT count(DISTINCT id) FROM public.\"$name\"")"
  gaps="$(psql_q "SELECT count(*) FROM generate_series(0, $COUNT - 1) g(id)
                  WHERE NOT EXISTS (SELECT 1 FROM public.\"$name\" t WHERE t.id = g.id)")"
  echo "peer_kill: records=$COUNT rows=$rows duplicates=$((rows - distinct)) gaps=$gaps"
  echo "peer_kill_detail: rows_at_kill=$at_kill offset_flush_interval_ms=$FLUSH_MS"
}

mkdir -p "$VAR"
ensure_services
fetch_jars
write_tools_log4j
throughput
if [ "${PEER_SKIP_KILL:-0}" != 1 ]; then kill_test; fi
