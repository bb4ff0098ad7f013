#!/usr/bin/env bash
# Debezium replication test (ctest cdc.debezium.replicate; docs/exactly-once.md, "Deletes
# and change events"): a real change-data-capture source replicated exactly once through
# SIGKILLs of tidemark.
#
#   tests/cdc/replicate.sh [--self-check] TIDEMARK PLUGIN_DIR
#
# 1. A source database <run>_src (PostgreSQL, wal_level=logical) with two tables of several
#    column types (tests/cdc/workload.py), captured by Debezium's PostgreSQL connector
#    (pgoutput, its own slot and publication) in a Kafka Connect standalone worker, into one
#    topic per table (3 partitions, JsonConverter with schemas) (tests/cdc/lib.sh).
# 2. Four tidemark connectors, each in its own `tidemark run`: each table into an SQLite
#    file and into the database <run>_dst, format "debezium", upsert, batches of 100;
#    orders' with a column list, customers' with the columns from the events' schemas
#    (docs/configuration.md, "Columns from the event's schema"). The workload's first row
#    of each table (workload.py seed) makes the target tables, then the write log (4.)
#    is installed on them.
# 3. The workload: DEBSRC_OPS random inserts, updates, deletes and primary-key changes
#    (and a few many-row updates), paced at DEBSRC_RATE changes/s; after DEBSRC_ALTER_AT
#    of them, ALTER TABLE customers ADD COLUMN (text and integer without a default, text
#    with one), filled by the later changes (workload.py --alter-at). Meanwhile each
#    connector's process is SIGKILLed DEBSRC_KILLS times at its sink's commit fault points
#    and restarted (below, "the workload and the kills"); a kill that does not land with
#    work in flight makes the test INCONCLUSIVE (exit 1), and so does a customers
#    connector none of whose kills came after its table got the added columns.
# 4. Then: the topics hold every event the workload made (their end offsets reach the count
#    workload.py computed), tidemark's markers reach those end offsets, and each target
#    table equals its source table row for row (tests/cdc/compare.py: a query on each
#    side), with no dead letter in either sink; and no change was applied twice: triggers
#    on the target tables log every row write (tests/cdc/lib.sh, "the write log"), and a
#    key's version must rise from one logged write to the next (an older event re-applied,
#    at-least-once, leaves the same final table but not the same log). The schema change:
#    Debezium's last events of customers carry the added fields in their schema, both
#    targets' catalogs show the added columns (nullable, of the documented types), the
#    comparison includes them, and the source holds values written in each and a row last
#    written before the ALTER TABLE (else INCONCLUSIVE).
#
# --self-check proves the write log's check can fail: after the run (no kills by default,
# DEBSRC_OPS 2000), the connector of orders into PostgreSQL is stopped, its markers reset to
# the earliest offsets (`tidemark offsets --reset-to earliest`, the operator's documented
# rewind; it joins its group as a dynamic member, so the group is empty at once) and it
# runs again to the end offsets: it re-applies every event. The self-check passes when the
# tables still equal the source (a final table cannot tell) and the write log of the
# PostgreSQL target reports replayed writes (and that of SQLite none); a reset that did not
# move the markers back is INCONCLUSIVE.
#
# Uses the running broker and PostgreSQL (scripts/env.sh). Fetches Connect and Debezium from
# Maven Central into .cache/connect on the first run (scripts/connect/lib.sh). Names its
# databases, slot, publication, topics and connectors debsrc_<time>_<pid>, drops them at
# the end (DEBSRC_KEEP=1 keeps them; the work directory is kept when the test fails).
# Env: DEBSRC_SEED (1), DEBSRC_OPS (20000; 2000 with --self-check), DEBSRC_RATE (350),
#      DEBSRC_ALTER_AT (DEBSRC_OPS / 100, below DEBSRC_OPS), DEBSRC_KILLS (6 per
#      connector; 0 with --self-check), DEBSRC_BACKLOG (records past a connector's markers
#      before it restarts, 300, at least 3 batches), DEBSRC_TIMEOUT seconds for each wait
#      (180), DEBSRC_WORK (the work directory).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/tests/cdc"
SELF_CHECK=0
[ "${1:-}" != --self-check ] || { SELF_CHECK=1; shift; }
[ $# -eq 2 ] || { sed -n '2,60p' "$0" >&2; exit 2; }
TIDEMARK="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
PLUGIN_DIR="$(cd "$2" && pwd)"

SEED="${DEBSRC_SEED:-1}"
if [ "$SELF_CHECK" = 1 ]; then
  OPS="${DEBSRC_OPS:-2000}"
  KILLS="${DEBSRC_KILLS:-0}"
else
  OPS="${DEBSRC_OPS:-20000}"
  KILLS="${DEBSRC_KILLS:-6}"
fi
RATE="${DEBSRC_RATE:-350}"
ALTER_AT="${DEBSRC_ALTER_AT:-$((OPS / 100))}"
[ "$ALTER_AT" -lt "$OPS" ] || { echo "DEBSRC_ALTER_AT must be below DEBSRC_OPS ($OPS)" >&2; exit 2; }
BACKLOG="${DEBSRC_BACKLOG:-300}"
[ "$BACKLOG" -ge 300 ] || { echo "DEBSRC_BACKLOG must be >= 300 (3 batches)" >&2; exit 2; }
TIMEOUT="${DEBSRC_TIMEOUT:-180}"
PARTITIONS=3
TARGETS=(sqlite pg)
RUN="debsrc_$(date +%s)_$$"
WORK="${DEBSRC_WORK:-$ROOT/var/cdc-replicate/$RUN}"

say() { echo "replicate: $*" >&2; }
die() { say "FAIL: $*"; exit 1; }
inconclusive() { echo "replicate: INCONCLUSIVE: $*"; exit 1; }

# shellcheck source=lib.sh
. "$HERE/lib.sh"
DST_DB="${RUN}_dst"
DST="host=127.0.0.1 port=$TIDEMARK_PG_PORT user=tidemark dbname=$DST_DB"
SQLITE_DB="$WORK/replica.db"

declare -A TM_PID # connector (table.target) -> pid of its `tidemark run`, "" when down
cleanup() {
  local rc=$? c
  for c in "${!TM_PID[@]}"; do
    [ -z "${TM_PID[$c]}" ] || { kill -KILL "${TM_PID[$c]}" 2>/dev/null || true; wait "${TM_PID[$c]}" 2>/dev/null || true; }
  done
  cdc_source_cleanup
  [ "${DEBSRC_KEEP:-0}" = 1 ] || [ "$rc" -ne 0 ] || rm -rf "$WORK"
  [ "$rc" -eq 0 ] || say "work directory kept: $WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

connector_of() { echo "$RUN-$1-$2"; } # table target
marker_sum() { # table target
  case "$2" in
    sqlite) marker_sum_sqlite "$SQLITE_DB" "$(connector_of "$1" "$2")" ;;
    pg) marker_sum_pg "$DST" "$(connector_of "$1" "$2")" ;;
  esac
}

cdc_tools_check
rm -rf "$WORK"
mkdir -p "$WORK/configs" "$WORK/state"
connect_fetch source-pom.xml
say "run $RUN: databases ${RUN}_src and $DST_DB, topics $TOPIC_PREFIX.public.*"
cdc_source_create
cdc_make_db "$DST_DB" tidemark
cdc_source_start

# --- tidemark's connectors -----------------------------------------------------------------
# Small batches: a start works through its backlog in several commits, so a kill at the
# second one lands with work left (below). customers' columns come from the events' schemas,
# so its targets follow the source's ALTER TABLE; orders' are listed.
SCHEMA_TABLE=customers
read -r -a ADDED <<<"$(python3 "$HERE/workload.py" added)"
for t in "${TABLES[@]}"; do
  cols=list
  [ "$t" != "$SCHEMA_TABLE" ] || cols=schema
  cdc_tidemark_config "$WORK/configs/$t-sqlite.json" "$(connector_of "$t" sqlite)" "$t" 100 \
    "$(cdc_sqlite_sink "$SQLITE_DB" "$t")" "$cols"
  cdc_tidemark_config "$WORK/configs/$t-pg.json" "$(connector_of "$t" pg)" "$t" 100 \
    "$(cdc_pg_sink "$DST" "$t")" "$cols"
done
# --self-check rewinds orders.pg offline: a dynamic member leaves its group when it stops,
# so the reset finds the group empty without waiting out a static member's session
REPLAY=orders.pg
if [ "$SELF_CHECK" = 1 ]; then
  python3 -c 'import json, sys
c = json.load(open(sys.argv[1])); c["kafka"]["static_membership"] = False
json.dump(c, open(sys.argv[1], "w"), indent=2)' "$WORK/configs/${REPLAY%.*}-${REPLAY#*.}.json"
fi
"$TIDEMARK" validate --plugin-dir "$PLUGIN_DIR" "$WORK"/configs/*.json >"$WORK/validate.log" 2>&1 ||
  { cat "$WORK/validate.log" >&2; die "tidemark validate refused the configs"; }

# The write log's triggers need the target tables: each connector's first start makes its
# table (with a column list at the sink's open, from the events' schemas at the first
# batch: the seed's rows), then stops. The log begins above SEED_VERSION.
tm_table_made() { # table target
  case "$2" in
    sqlite) [ -f "$SQLITE_DB" ] && [ "$(sqlite3 -cmd '.timeout 5000' "file:$SQLITE_DB?mode=ro"                  "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '$1'")" = 1 ] ;;
    pg) [ "$(psql "$DST" -X -q -tA -v ON_ERROR_STOP=1 -c "SELECT to_regclass('public.$1') IS NOT NULL")" = t ] ;;
  esac
}
make_tables() {
  local t g deadline=$((SECONDS + TIMEOUT))
  cdc_seed "$SEED"
  SEED_VERSION="$(cdc_pg_query "$SRC" "SELECT last_value FROM change_version")"
  for t in "${TABLES[@]}"; do for g in "${TARGETS[@]}"; do
    tm_start "$t" "$g"
    until tm_table_made "$t" "$g"; do
      tm_check "$t" "$g"
      [ "$SECONDS" -lt "$deadline" ] || die "$(connector_of "$t" "$g") made no table $t in ${TIMEOUT}s"
      sleep 0.2
    done
    kill -TERM "${TM_PID[$t.$g]}"
    wait "${TM_PID[$t.$g]}" || die "tidemark run of $t.$g exited with status $? on SIGTERM"
    TM_PID[$t.$g]=""
  done; done
  cdc_write_log_pg "$DST"
  cdc_write_log_sqlite "$SQLITE_DB"
}

# One `tidemark run` per connector, so that each is killed on its own schedule. A start
# with a fault point (operations.md, "Crash points") SIGKILLs itself at the point's
# TIDEMARK_FAULT_HIT-th hit and first writes the point's name to the file on fd 3 (bash
# reports each such job as "Killed" on stderr).
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
# offsets are past the markers. A customers connector's kill whose target table has the
# columns of the source's ALTER TABLE counts in AFTER_ALTER: each such connector needs one
# (its restart learns its columns again from the events and finds them in the table).
#
# The added columns in a target's catalog: "name type nullable, ..." (empty: none yet).
added_columns() { # target
  local in
  in="$(printf "'%s'," "${ADDED[@]}")" in="${in%,}"
  case "$1" in
    sqlite) cdc_sqlite_query "$SQLITE_DB" "SELECT coalesce(group_concat(name || ' ' || type || ' '
              || CASE \"notnull\" WHEN 0 THEN 'null' ELSE 'not null' END, ', '), '') FROM
              (SELECT * FROM pragma_table_info('$SCHEMA_TABLE') WHERE name IN ($in) ORDER BY cid)" ;;
    pg) cdc_pg_query "$DST" "SELECT coalesce(string_agg(column_name || ' ' || data_type || ' '
          || CASE is_nullable WHEN 'YES' THEN 'null' ELSE 'not null' END, ', ' ORDER BY ordinal_position), '')
          FROM information_schema.columns WHERE table_schema = 'public'
          AND table_name = '$SCHEMA_TABLE' AND column_name IN ($in)" ;;
  esac
}
make_tables
POINTS=(after_effects after_marker after_commit before_begin)
HIT=2
say "workload: $OPS changes at $RATE/s (seed $SEED); each of the 4 connectors SIGKILLed $KILLS times meanwhile"
cdc_workload_start "$SEED" "$OPS" "$RATE" --seeded --alter-at "$ALTER_AT"

declare -A LAST_MARK NKILLS AFTER_ALTER
CONNECTORS=()
for t in "${TABLES[@]}"; do for g in "${TARGETS[@]}"; do
  CONNECTORS+=("$t.$g"); LAST_MARK[$t.$g]=0; NKILLS[$t.$g]=0; TM_PID[$t.$g]=""; AFTER_ALTER[$t.$g]=0
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
      m="$(marker_sum "$t" "$g")" e="$(end_sum "$t")" cols=""
      if [ "$t" = "$SCHEMA_TABLE" ]; then
        cols="$(added_columns "$g")"
        [ -z "$cols" ] || AFTER_ALTER[$c]=$((AFTER_ALTER[$c] + 1))
        cols=", added columns in the target: ${cols:-none}"
      fi
      echo "replicate: kill $k of $c at $point: markers ${LAST_MARK[$c]} -> $m, end offsets $e, backlog $((e - m))$cols"
      [ "$m" -gt "${LAST_MARK[$c]}" ] ||
        inconclusive "$(connector_of "$t" "$g"): the markers did not move between kill $((k - 1)) and kill $k"
      [ "$e" -gt "$m" ] ||
        inconclusive "$(connector_of "$t" "$g"): no backlog at kill $k (markers at the end offsets)"
      LAST_MARK[$c]="$m"
      NKILLS[$c]=$k
    fi
  done
  [ "$pending" = 1 ] || break
  cdc_source_check
  [ "$SECONDS" -lt "$deadline" ] || die "the kills did not happen within $((2 * TIMEOUT))s"
  sleep 0.1
done
if [ "$KILLS" -gt 0 ]; then
  for g in "${TARGETS[@]}"; do
    [ "${AFTER_ALTER[$SCHEMA_TABLE.$g]}" -ge 1 ] ||
      inconclusive "$(connector_of "$SCHEMA_TABLE" "$g"): no kill after its table got the columns of the ALTER TABLE (lower DEBSRC_ALTER_AT)"
  done
fi
for c in "${CONNECTORS[@]}"; do tm_start "${c%.*}" "${c#*.}"; done

# --- drain and compare -------------------------------------------------------------------
say "kills done; waiting for the workload to end"
cdc_drain_source
say "waiting for tidemark's markers to reach the topics' end offsets"
markers_at_end() { # connector...: each one's markers reach its topic's end offsets
  local c t g e deadline=$((SECONDS + TIMEOUT))
  for c in "$@"; do
    t="${c%.*}" g="${c#*.}" e="$(end_sum "$t")"
    while [ "$(marker_sum "$t" "$g")" -lt "$e" ]; do
      tm_check "$t" "$g"
      [ "$SECONDS" -lt "$deadline" ] || die "connector $(connector_of "$t" "$g") at $(marker_sum "$t" "$g") of $e after ${TIMEOUT}s"
      sleep 0.2
    done
  done
}
tm_stop() { # connector: SIGTERM, a clean exit
  kill -TERM "${TM_PID[$1]}"
  wait "${TM_PID[$1]}" || die "tidemark run of $1 exited with status $? on SIGTERM"
  TM_PID[$1]=""
}
markers_at_end "${CONNECTORS[@]}"
for c in "${CONNECTORS[@]}"; do tm_stop "$c"; done

if [ "$SELF_CHECK" = 1 ]; then
  # the mutant: REPLAY's markers rewound by the operator's reset, every event applied again
  t="${REPLAY%.*}" g="${REPLAY#*.}"
  before="$(marker_sum "$t" "$g")"
  "$TIDEMARK" offsets --plugin-dir "$PLUGIN_DIR" --state-dir "$WORK/state" --reset-to earliest \
    "$WORK/configs/$t-$g.json" >"$WORK/reset.log" 2>&1 ||
    { cat "$WORK/reset.log" >&2; die "tidemark offsets --reset-to earliest of $REPLAY failed"; }
  after="$(marker_sum "$t" "$g")"
  echo "replicate: self-check: $(connector_of "$t" "$g") reset to earliest: markers $before -> $after"
  [ "$after" -lt "$before" ] || inconclusive "the reset did not move the markers of $REPLAY back ($before -> $after)"
  tm_start "$t" "$g"
  markers_at_end "$REPLAY"
  tm_stop "$REPLAY"
fi

failed=0
for t in "${TABLES[@]}"; do
  change=()
  [ "$t" != "$SCHEMA_TABLE" ] || change=(--schema-change)
  python3 "$HERE/compare.py" "$t" "$SRC" pg "$DST" public "$t" "${change[@]}" || failed=1
  python3 "$HERE/compare.py" "$t" "$SRC" sqlite "$SQLITE_DB" "$t" "${change[@]}" || failed=1
done
dl_pg="$(cdc_pg_query "$DST" "SELECT count(*) FROM tidemark_dead_letters")"
dl_sqlite="$(cdc_sqlite_query "$SQLITE_DB" "SELECT count(*) FROM tidemark_dead_letters")"
echo "replicate: dead letters: pg=$dl_pg sqlite=$dl_sqlite"
if [ "$dl_pg" != 0 ] || [ "$dl_sqlite" != 0 ]; then
  psql "$DST" -X -q -c "SELECT connector, topic, partition, \"offset\", reason, detail FROM tidemark_dead_letters LIMIT 5" >&2 || true
  failed=1
fi

# The schema change reached Debezium's events and both targets' tables, and was filled.
# The last events of each partition (tombstones aside) are after the ALTER TABLE: the
# fields of their row image's schema (Debezium sets them from the table once it writes a
# row of it; tidemark reads the columns from there).
fields="$(kcat -C -b "$BOOTSTRAP" -t "$(topic_of "$SCHEMA_TABLE")" -o -5 -e -q -f '%s\n' |
  python3 -c 'import json, sys
added, found = sys.argv[1:], set()
for line in sys.stdin:
    if not line.strip():
        continue  # a tombstone
    schema = json.loads(line)["schema"]
    image = next(f for f in schema["fields"] if f["field"] == "after")
    fields = {f["field"]: f for f in image["fields"]}
    found.add(", ".join("%s %s%s%s" % (n, fields[n]["type"],
                                       "" if fields[n].get("optional") else " required",
                                       " default %s" % json.dumps(fields[n]["default"])
                                       if "default" in fields[n] else "")
                        if n in fields else n + " missing" for n in added))
print(" | ".join(sorted(found)))' "${ADDED[@]}")"
echo "replicate: Debezium's last events of $SCHEMA_TABLE carry: $fields"
case "$fields" in
  "nickname string, visits int32, tier string default \"basic\"") ;;
  *) say "the events after the ALTER TABLE do not carry the added fields as expected"; failed=1 ;;
esac
for g in "${TARGETS[@]}"; do
  cols="$(added_columns "$g")"
  echo "replicate: added columns in the $g target: ${cols:-none}"
  case "$g" in
    sqlite) want="nickname TEXT null, visits INTEGER null, tier TEXT null" ;;
    pg) want="nickname text null, visits bigint null, tier text null" ;;
  esac
  [ "$cols" = "$want" ] || { say "the $g target's $SCHEMA_TABLE has not the added columns $want"; failed=1; }
done
# (and rows last written before it: their tier is the DEFAULT in the source, null in the
# targets, compare.py)
filled="$(cdc_pg_query "$SRC" "SELECT count(r.nickname) || ' ' || count(r.visits) || ' ' ||
  count(r.tier) FILTER (WHERE r.version > a.version) || ' ' || count(*) FILTER (WHERE r.version <= a.version)
  FROM $SCHEMA_TABLE r, schema_change a")"
echo "replicate: rows of the source's $SCHEMA_TABLE with a value in nickname, visits, tier; last written before the ALTER TABLE: $filled"
case " $filled " in *" 0 "*) inconclusive "an added column holds no value written after the ALTER TABLE, or no row is older than it ($filled)" ;; esac

# Exactly once, not at least once: every logged write raised its key's version.
read -r w_pg r_pg <<<"$(cdc_pg_query "$DST" "$CDC_WRITE_LOG_COUNTS")"
read -r w_sqlite r_sqlite <<<"$(cdc_sqlite_query "$SQLITE_DB" "$CDC_WRITE_LOG_COUNTS")"
echo "replicate: write log: pg $w_pg writes, $r_pg replayed; sqlite $w_sqlite writes, $r_sqlite replayed"
# every row the workload wrote is in the log: else its triggers did not fire
u_pg="$(cdc_pg_query "$DST" "$(cdc_write_log_unlogged_sql "$SEED_VERSION")")"
u_sqlite="$(cdc_sqlite_query "$SQLITE_DB" "$(cdc_write_log_unlogged_sql "$SEED_VERSION")")"
[ "$u_pg" = 0 ] && [ "$u_sqlite" = 0 ] ||
  die "rows whose write the log misses (pg $u_pg, sqlite $u_sqlite): its triggers did not fire"
replayed() { # target writes: the check's verdict
  [ "$2" != 0 ] || return 0
  say "$1: a key's version did not rise from one applied write to the next: an older event applied again ($2 writes), first:"
  case "$1" in
    pg) cdc_pg_query "$DST" "$CDC_WRITE_LOG_REPLAYED" ;;
    sqlite) cdc_sqlite_query "$SQLITE_DB" "$CDC_WRITE_LOG_REPLAYED" ;;
  esac | sed 's/^/  /' >&2
  return 1
}
summary="seed=$SEED ops=$OPS alter_at=$ALTER_AT kills=$((KILLS * ${#CONNECTORS[@]})) events: orders=${EXPECT[orders]} customers=${EXPECT[customers]}"
if [ "$SELF_CHECK" = 1 ]; then
  # the mutant must fail the check where it replayed, and only there
  replayed sqlite "$r_sqlite" || failed=1
  [ "$failed" = 0 ] || die "the self-check's run differs from the source ($summary; configs: $WORK/configs)"
  replayed pg "$r_pg" && die "self-check: the write log did not see $REPLAY re-apply every event after its reset ($summary)"
  other="$(cdc_pg_query "$DST" "SELECT count(*) FROM ($CDC_WRITE_LOG_PREV) w WHERE version <= prev AND tbl <> '${REPLAY%.*}'")"
  [ "$other" = 0 ] || die "self-check: the write log reports $other replayed writes in tables $REPLAY does not write"
  echo "replicate: PASS self-check: the write log's check failed on the replay of $REPLAY, the tables equal the source ($summary)"
  exit 0
fi
replayed pg "$r_pg" || failed=1
replayed sqlite "$r_sqlite" || failed=1
[ "$failed" = 0 ] || die "the targets differ from the source ($summary; configs: $WORK/configs)"
echo "replicate: PASS $summary"
