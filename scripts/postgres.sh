#!/usr/bin/env bash
# A private PostgreSQL cluster for tests and the demo.
#   scripts/postgres.sh start|stop|status|reset
# Data in <repo>/var/postgres/data, unix socket in <repo>/var/postgres/run, TCP only on
# 127.0.0.1:$TIDEMARK_PG_PORT (15432). Trust auth for local and loopback connections
# (a throwaway cluster reachable only from this machine). fsync stays on: tidemark's
# claims are about durability, so the test database must not cheat on it.
#
# PostgreSQL refuses to run as root, so when invoked as root the server runs as the
# `postgres` OS user (runuser) and owns the cluster directory. That user must be able
# to traverse every parent of the repository; a repo under /root (mode 0700) is not
# reachable, so in that case the cluster lives in /var/tmp/tidemark-pg-<hash of repo
# path> instead (the hash keeps several clones apart) and <repo>/var/postgres.location
# records where. Socket paths are limited to 107 bytes, which can force the same fallback.
#
# Last stdout line of `start`: the libpq conninfo for role and database `tidemark`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PORT="${TIDEMARK_PG_PORT:-15432}"
CONNINFO="host=127.0.0.1 port=$PORT dbname=tidemark user=tidemark"

say() { echo "postgres.sh: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

PGBIN="${TIDEMARK_PG_BIN:-}"
if [ -z "$PGBIN" ]; then
  PGBIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1 || true)"
fi
[ -n "$PGBIN" ] && [ -x "$PGBIN/pg_ctl" ] || die "PostgreSQL server binaries not found (run scripts/install-deps.sh)"

AS=()
if [ "$(id -u)" -eq 0 ]; then
  id postgres >/dev/null 2>&1 || die "running as root but there is no 'postgres' user"
  AS=(runuser -u postgres --)
fi
as_pg() { "${AS[@]}" "$@"; }

# Pick the cluster directory.
BASE="$ROOT/var/postgres"
choose_base() {
  local fallback="/var/tmp/tidemark-pg-$(printf '%s' "$ROOT" | sha256sum | cut -c1-12)"
  if [ -d "$fallback/data" ]; then BASE="$fallback"; return; fi
  mkdir -p "$ROOT/var"
  local ok=1
  if [ "${#AS[@]}" -gt 0 ] && ! as_pg test -x "$ROOT/var" 2>/dev/null; then ok=0; fi
  # unix socket path: $BASE/run/.s.PGSQL.<port> must fit in sun_path (107 bytes)
  if [ $(( ${#BASE} + 20 + ${#PORT} )) -gt 107 ]; then ok=0; fi
  if [ "$ok" -eq 0 ]; then
    BASE="$fallback"
    echo "$BASE" > "$ROOT/var/postgres.location"
  fi
}
choose_base
DATA="$BASE/data"
RUN="$BASE/run"
LOGFILE="$BASE/server.log"

is_up() { [ -f "$DATA/postmaster.pid" ] && as_pg "$PGBIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; }
psql_super() { as_pg "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$RUN" -p "$PORT" -d postgres "$@"; }

init_cluster() {
  [ -f "$DATA/PG_VERSION" ] && return 0
  say "initdb in $DATA"
  mkdir -p "$BASE"
  [ "${#AS[@]}" -gt 0 ] && chown postgres: "$BASE"
  chmod 0700 "$BASE"
  as_pg mkdir -p "$DATA" "$RUN"
  as_pg "$PGBIN/initdb" -D "$DATA" --auth=trust -E UTF8 --locale=C.UTF-8 --no-instructions \
      >"$BASE/initdb.log" 2>&1 || { cat "$BASE/initdb.log" >&2; die "initdb failed"; }
  as_pg tee -a "$DATA/postgresql.conf" >/dev/null <<CONF

# --- tidemark (scripts/postgres.sh) ---
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$RUN'
fsync = on
synchronous_commit = on
full_page_writes = on
max_connections = 100
max_prepared_transactions = 10
logging_collector = off
log_min_messages = warning
CONF
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

ensure_db() {
  if [ "$(psql_super -tAc "SELECT 1 FROM pg_roles WHERE rolname='tidemark'")" != 1 ]; then
    psql_super -c "CREATE ROLE tidemark LOGIN CREATEDB"
  fi
  if [ "$(psql_super -tAc "SELECT 1 FROM pg_database WHERE datname='tidemark'")" != 1 ]; then
    psql_super -c "CREATE DATABASE tidemark OWNER tidemark"
  fi
}

cmd_start() {
  if is_up; then
    say "already running ($DATA)"
  else
    port_busy "$PORT" && die "port $PORT on 127.0.0.1 is in use by another process"
    init_cluster
    as_pg mkdir -p "$RUN"
    say "starting on 127.0.0.1:$PORT (data: $DATA, log: $LOGFILE)"
    # wal_level=logical on every start (not only at initdb, so older clusters get it too):
    # the change-data-capture tests run a Debezium source connector against this server.
    as_pg "$PGBIN/pg_ctl" -D "$DATA" -l "$LOGFILE" -w -t 60 \
        -o "-c wal_level=logical -c max_replication_slots=20 -c max_wal_senders=20" start >/dev/null \
      || { tail -n 20 "$LOGFILE" >&2; die "pg_ctl start failed"; }
  fi
  ensure_db
  echo "$CONNINFO"
}

cmd_stop() {
  if ! is_up; then say "not running"; return 0; fi
  as_pg "$PGBIN/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >/dev/null
  say "stopped"
}

cmd_status() {
  if is_up; then echo "postgres: up at 127.0.0.1:$PORT ($DATA)"; return 0; fi
  echo "postgres: down"; return 1
}

cmd_reset() {
  cmd_stop
  rm -rf "$BASE"
  [ "$BASE" = "$ROOT/var/postgres" ] || rm -f "$ROOT/var/postgres.location"
  say "removed $BASE"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  reset) cmd_reset ;;
  *) echo "usage: $0 start|stop|status|reset" >&2; exit 2 ;;
esac
