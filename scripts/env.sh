# shellcheck shell=bash
# Source me: `. scripts/env.sh`. Exports where the services started by scripts/kafka.sh
# and scripts/postgres.sh listen, so tests, the demo and the scripts agree.
# Respects ports already set in the environment.
export TIDEMARK_KAFKA_PORT="${TIDEMARK_KAFKA_PORT:-19092}"
export TIDEMARK_KAFKA_CONTROLLER_PORT="${TIDEMARK_KAFKA_CONTROLLER_PORT:-19093}"
export TIDEMARK_PG_PORT="${TIDEMARK_PG_PORT:-15432}"
export TIDEMARK_KAFKA_BOOTSTRAP="${TIDEMARK_KAFKA_BOOTSTRAP:-127.0.0.1:${TIDEMARK_KAFKA_PORT}}"
export TIDEMARK_PG_CONNINFO="${TIDEMARK_PG_CONNINFO:-host=127.0.0.1 port=${TIDEMARK_PG_PORT} dbname=tidemark user=tidemark}"
