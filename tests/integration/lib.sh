# shellcheck shell=bash
# What the integration scripts share: source it after `set -u`.
#   fail MSG          says FAIL: MSG and marks the run failed ($failed)
#   need_kafka        the broker's address in $boot (TIDEMARK_KAFKA_BOOTSTRAP,
#                     from scripts/env.sh) and kcat, or the run fails at once
failed=0
fail() { echo "FAIL: $*"; failed=1; }

need_kafka() {
    if [ -z "${TIDEMARK_KAFKA_BOOTSTRAP:-}" ]; then
        echo "FAIL: TIDEMARK_KAFKA_BOOTSTRAP is not set (. scripts/env.sh)"
        exit 1
    fi
    boot=$TIDEMARK_KAFKA_BOOTSTRAP
    command -v kcat >/dev/null || { echo "FAIL: kcat not found"; exit 1; }
}
