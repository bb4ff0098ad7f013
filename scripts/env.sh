# shellcheck shell=bash
# Source me: `. scripts/env.sh`. Exports where the services started by scripts/kafka.sh
# and scripts/postgres.sh listen, so tests, the demo and the scripts agree.
# Respects ports already set in the environment. The addresses follow the ports: an
# address inherited from an earlier sourcing with other ports (a shell that sourced this
# file, then set TIDEMARK_PG_PORT for a second set of services) would send the tests to
# one set of services while the scripts stop and start the other.
export TIDEMARK_KAFKA_PORT="${TIDEMARK_KAFKA_PORT:-19092}"
export TIDEMARK_KAFKA_CONTROLLER_PORT="${TIDEMARK_KAFKA_CONTROLLER_PORT:-19093}"
export TIDEMARK_PG_PORT="${TIDEMARK_PG_PORT:-15432}"
tm_kafka_want="127.0.0.1:${TIDEMARK_KAFKA_PORT}"
tm_pg_want="host=127.0.0.1 port=${TIDEMARK_PG_PORT} dbname=tidemark user=tidemark"
if [ -n "${TIDEMARK_KAFKA_BOOTSTRAP:-}" ] && [ "$TIDEMARK_KAFKA_BOOTSTRAP" != "$tm_kafka_want" ]; then
  echo "env.sh: TIDEMARK_KAFKA_BOOTSTRAP=$TIDEMARK_KAFKA_BOOTSTRAP does not match TIDEMARK_KAFKA_PORT=$TIDEMARK_KAFKA_PORT: using $tm_kafka_want" >&2
fi
if [ -n "${TIDEMARK_PG_CONNINFO:-}" ] && [ "$TIDEMARK_PG_CONNINFO" != "$tm_pg_want" ]; then
  echo "env.sh: TIDEMARK_PG_CONNINFO does not match TIDEMARK_PG_PORT=$TIDEMARK_PG_PORT: using $tm_pg_want" >&2
fi
export TIDEMARK_KAFKA_BOOTSTRAP="$tm_kafka_want"
export TIDEMARK_PG_CONNINFO="$tm_pg_want"
unset tm_kafka_want tm_pg_want
