#!/usr/bin/env bash
# The Debezium peer benchmark (docs/benchmarks.md, "Change data capture: tidemark and the
# Debezium JDBC sink"): one Debezium change stream of a real PostgreSQL source applied by
# tidemark (PostgreSQL sink, format "debezium", upsert) and by Debezium's JDBC sink
# connector (upsert, deletes, primary key from the record key) in Kafka Connect.
#
#   tests/bench/debezium_peer.sh TIDEMARK PLUGIN_DIR
#
# 0. The source of tests/cdc/replicate.sh (tests/cdc/lib.sh): PEER_OPS random changes
#    (tests/cdc/workload.py, unpaced) captured by Debezium's PostgreSQL connector into two
#    topics; both sinks read the same topics once the workload is in them.
# 1. throughput: each sink into a fresh database, timed from its process's start until both
#    target tables hold the source's rows (count and sum of the version column, polled):
#      throughput: sink=S events=N seconds=T events_per_s=R
# 2. kills: each sink into another fresh database, its process SIGKILLed PEER_KILLS times
#    from outside, when the target has taken 1/(K+1), 2/(K+1) ... of the row writes of its
#    throughput run (a trigger logs every row write), restarted at once; run until the
#    tables hold the source's rows; then compared row for row (tests/cdc/compare.py) and
#      kills: sink=S kills=K writes=W replayed=P differing_rows=D
#    replayed: row writes that re-applied a change the key had already shown or passed
#    (the version column never falls in the source; a key whose version falls or repeats in
#    the target's write log took an older change again: what a reader saw go back in time).
#    A kill after the target already matched the source, or with no new write since the
#    previous kill, prints "kills: inconclusive ..." and exits 1.
#
# Uses the running broker and PostgreSQL; fetches Connect, the Debezium PostgreSQL source and
# the JDBC sink from Maven Central into .cache/connect (scripts/connect/lib.sh). Drops its
# databases, slot and topics at the end (DEBSRC_KEEP=1 keeps them).
# Env: PEER_SEED (1), PEER_OPS (20000), PEER_KILLS (3), PEER_BATCH (1000: tidemark's
#      batch.max_records and the JDBC sink's batch.size and max.poll.records),
#      PEER_OFFSET_FLUSH_MS (10000: the JDBC sink worker's offset.flush.interval.ms; Connect's
#      default is 60000), PEER_TIMEOUT seconds per wait (600).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[ $# -eq 2 ] || { sed -n '2,34p' "$0" >&2; exit 2; }
TIDEMARK="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
PLUGIN_DIR="$(cd "$2" && pwd)"
SEED="${PEER_SEED:-1}"
OPS="${PEER_OPS:-20000}"
KILLS="${PEER_KILLS:-3}"
BATCH="${PEER_BATCH:-1000}"
FLUSH_MS="${PEER_OFFSET_FLUSH_MS:-10000}"
TIMEOUT="${PEER_TIMEOUT:-600}"
PARTITIONS=3
RUN="debsrc_peer_$(date +%s)_$$"
WORK="$ROOT/var/debezium-peer/$RUN"

say() { echo "debezium_peer: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# shellcheck source=../cdc/lib.sh
. "$ROOT/tests/cdc/lib.sh"

SINK_PID=""
cleanup() {
  local rc=$?
  [ -z "$SINK_PID" ] || { kill -KILL "$SINK_PID" 2>/dev/null || true; wait "$SINK_PID" 2>/dev/null || true; }
  cdc_source_cleanup
  [ "${DEBSRC_KEEP:-0}" = 1 ] || [ "$rc" -ne 0 ] || rm -rf "$WORK"
  [ "$rc" -eq 0 ] || say "work directory kept: $WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

target_conninfo() { echo "host=127.0.0.1 port=$TIDEMARK_PG_PORT user=tidemark dbname=$1"; }
q() { psql "$1" -X -q -tA -v ON_ERROR_STOP=1 -c "$2"; }

# A fresh target database: the tables (tidemark's shape, or the source's for the JDBC sink)
# and a trigger logging every row write (table, key, version, time) in write_log.
make_target() { # db kind(tidemark|jdbc)
  local db="$1" c
  c="$(target_conninfo "$db")"
  cdc_make_db "$db" tidemark
  if [ "$2" = jdbc ]; then
    python3 "$ROOT/tests/cdc/workload.py" tables | psql "$c" -X -q -v ON_ERROR_STOP=1 >/dev/null
  else
    # the tables tidemark's PostgreSQL sink creates for the mappings (docs/sinks/postgres.md,
    # "The tables it creates"), made here first so the trigger sees the first write
    q "$c" "CREATE TABLE orders (id bigint NOT NULL, customer_id bigint, note text, amount text,
              placed_at timestamptz, ship_date timestamptz, paid boolean NOT NULL,
              weight double precision, attrs text, version bigint NOT NULL,
              _tm_topic text NOT NULL, _tm_partition integer NOT NULL,
              _tm_offset bigint NOT NULL, _tm_identity text);
            CREATE UNIQUE INDEX orders_tm_key ON orders (id);
            CREATE TABLE customers (id bigint NOT NULL, name text NOT NULL, balance text,
              created_local timestamptz, birthday timestamptz, active boolean,
              score double precision, version bigint NOT NULL,
              _tm_topic text NOT NULL, _tm_partition integer NOT NULL,
              _tm_offset bigint NOT NULL, _tm_identity text);
            CREATE UNIQUE INDEX customers_tm_key ON customers (id);" >/dev/null
  fi
  q "$c" "CREATE TABLE write_log (seq bigserial PRIMARY KEY, tbl text NOT NULL, id bigint NOT NULL,
            version bigint NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
          CREATE FUNCTION log_write() RETURNS trigger LANGUAGE plpgsql AS \$\$
          BEGIN
            INSERT INTO write_log (tbl, id, version) VALUES (TG_TABLE_NAME, NEW.id, NEW.version);
            RETURN NULL;
          END \$\$;
          CREATE TRIGGER orders_log AFTER INSERT OR UPDATE ON orders
            FOR EACH ROW EXECUTE FUNCTION log_write();
          CREATE TRIGGER customers_log AFTER INSERT OR UPDATE ON customers
            FOR EACH ROW EXECUTE FUNCTION log_write();" >/dev/null
}

# count and sum of versions of both tables: "n s n s"
fingerprint() { # conninfo
  q "$1" "SELECT (SELECT count(*) || ' ' || coalesce(sum(version), 0) FROM orders) || ' ' ||
                 (SELECT count(*) || ' ' || coalesce(sum(version), 0) FROM customers)"
}
writes() { q "$(target_conninfo "$1")" "SELECT count(*) FROM write_log"; }
replayed() {
  q "$(target_conninfo "$1")" "SELECT count(*) FROM (SELECT version, max(version) OVER (
       PARTITION BY tbl, id ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev
     FROM write_log) w WHERE version <= prev"
}

# --- the sinks ---------------------------------------------------------------------------
SINK_LOGS=0
start_tidemark() { # db
  local dir="$WORK/tm.$1" t
  mkdir -p "$dir/configs"
  if [ ! -f "$dir/configs/orders.json" ]; then
    for t in "${TABLES[@]}"; do
      cdc_tidemark_config "$dir/configs/$t.json" "$1-$t" "$t" "$BATCH" \
        "$(cdc_pg_sink "$(target_conninfo "$1")" "$t")"
    done
  fi
  SINK_LOGS=$((SINK_LOGS + 1))
  "$TIDEMARK" run --plugin-dir "$PLUGIN_DIR" --state-dir "$dir/state" "$dir/configs" \
    >"$dir/run.$SINK_LOGS.log" 2>&1 </dev/null &
  SINK_PID=$!
}
JDBC_PORT=""
start_jdbc() { # db
  local dir="$WORK/jdbc.$1"
  mkdir -p "$dir"
  if [ ! -f "$dir/connector.properties" ]; then
    JDBC_PORT="$(free_port)"
    cdc_worker_properties "$dir" "$JDBC_PORT" "$FLUSH_MS"
    echo "consumer.max.poll.records=$BATCH" >>"$dir/worker.properties"
    # the topic's last part names the table (RegexRouter); Debezium's envelope is read as
    # it is (the JDBC sink unwraps it), a delete deletes, a tombstone is skipped
    cat >"$dir/connector.properties" <<CONF
name=$1
connector.class=io.debezium.connector.jdbc.JdbcSinkConnector
tasks.max=1
topics=$(topic_of orders),$(topic_of customers)
connection.url=jdbc:postgresql://127.0.0.1:$TIDEMARK_PG_PORT/$1
connection.username=tidemark
connection.password=unused-trust-auth
insert.mode=upsert
delete.enabled=true
primary.key.mode=record_key
schema.evolution=none
batch.size=$BATCH
use.time.zone=UTC
collection.name.format=\${topic}
transforms=route
transforms.route.type=org.apache.kafka.connect.transforms.RegexRouter
transforms.route.regex=.*\\\\.public\\\\.(.*)
transforms.route.replacement=\$1
CONF
  fi
  SINK_PID="$(cdc_connect_start "$dir")"
}
check_sink() { # kind db
  if [ "$1" = jdbc ]; then
    cdc_connect_check "$SINK_PID" "$WORK/jdbc.$2" "$JDBC_PORT" "$2"
  else
    kill -0 "$SINK_PID" 2>/dev/null || { tail -n 20 "$WORK/tm.$2/run.$SINK_LOGS.log" >&2; die "tidemark run exited"; }
  fi
}
stop_sink() { # signal
  kill "-$1" "$SINK_PID" 2>/dev/null || true
  wait "$SINK_PID" 2>/dev/null || true
  SINK_PID=""
}
now() { date +%s.%N; }

SOURCE_PRINT=""
# waits until the target's tables hold the source's rows
wait_applied() { # kind db
  local c deadline=$((SECONDS + TIMEOUT))
  c="$(target_conninfo "$2")"
  until [ "$(fingerprint "$c")" = "$SOURCE_PRINT" ]; do
    check_sink "$1" "$2"
    [ "$SECONDS" -lt "$deadline" ] || die "$1: the target does not hold the source's rows after ${TIMEOUT}s"
    sleep 0.2
  done
}

declare -A BASE_WRITES
throughput() { # kind
  local db="${RUN}_${1}_t" t0 t1 span
  make_target "$db" "$1"
  t0="$(now)"
  "start_$1" "$db"
  wait_applied "$1" "$db"
  t1="$(now)"
  stop_sink TERM
  BASE_WRITES[$1]="$(writes "$db")"
  span="$(q "$(target_conninfo "$db")" "SELECT extract(epoch FROM max(at) - min(at)) FROM write_log")"
  awk -v s="$1" -v n="$EVENTS" -v t0="$t0" -v t1="$t1" -v w="${BASE_WRITES[$1]}" -v sp="$span" 'BEGIN {
    printf "throughput: sink=%s events=%d seconds=%.2f events_per_s=%.0f writes=%d first_to_last_write_s=%.2f\n",
      s, n, t1 - t0, n / (t1 - t0), w, sp }'
  compare_all "$1" "$db" >/dev/null || die "$1: the throughput run's target differs from the source"
}

compare_all() { # kind db: prints the differing rows' count
  local t out rc=0 d=0 n
  for t in "${TABLES[@]}"; do
    out="$(python3 "$ROOT/tests/cdc/compare.py" "$t" "$SRC" \
      "$([ "$1" = jdbc ] && echo mirror || echo pg)" "$(target_conninfo "$2")" public "$t")" || rc=1
    say "$out"
    n="$(echo "$out" | head -n 1 | sed -E 's/.* missing=([0-9]+) extra=([0-9]+) different=([0-9]+)/\1 \2 \3/' |
         awk '{ print $1 + $2 + $3 }')"
    d=$((d + n))
  done
  echo "$d"
  return "$rc"
}

kills() { # kind
  local db="${RUN}_${1}_k" k w target prev=0 diff
  make_target "$db" "$1"
  "start_$1" "$db"
  for ((k = 1; k <= KILLS; k++)); do
    target=$((BASE_WRITES[$1] * k / (KILLS + 1)))
    local deadline=$((SECONDS + TIMEOUT))
    while [ "$(writes "$db")" -lt "$target" ]; do
      check_sink "$1" "$db"
      [ "$SECONDS" -lt "$deadline" ] || die "$1: $target writes not reached in ${TIMEOUT}s"
      sleep 0.05
    done
    stop_sink KILL
    w="$(writes "$db")"
    say "$1: SIGKILL $k at $w row writes (target $target)"
    if [ "$(fingerprint "$(target_conninfo "$db")")" = "$SOURCE_PRINT" ] || [ "$w" -le "$prev" ]; then
      echo "kills: inconclusive sink=$1 kill=$k writes=$w (already applied, or no write since the last kill)"
      exit 1
    fi
    prev="$w"
    "start_$1" "$db"
  done
  wait_applied "$1" "$db"
  # the JDBC sink: until its offsets are committed too, so that nothing more is replayed
  stop_sink TERM
  diff="$(compare_all "$1" "$db")" || true
  echo "kills: sink=$1 kills=$KILLS writes=$(writes "$db") replayed=$(replayed "$db") differing_rows=$diff"
}

cdc_tools_check
mkdir -p "$WORK"
connect_fetch source-pom.xml plugin-pom.xml
say "run $RUN: $OPS changes (seed $SEED)"
cdc_source_create
cdc_source_start
cdc_workload_start "$SEED" "$OPS" 0
cdc_drain_source
EVENTS=$((EXPECT[orders] + EXPECT[customers]))
SOURCE_PRINT="$(fingerprint "$SRC")"
say "the topics hold $EVENTS events; the source: $SOURCE_PRINT (count, sum of versions)"
cdc_connect_stop "$SOURCE_PID"
SOURCE_PID=""
throughput tidemark
throughput jdbc
kills tidemark
kills jdbc
