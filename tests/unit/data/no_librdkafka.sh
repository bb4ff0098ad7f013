#!/bin/sh
# kafka/ is the only room that calls librdkafka (docs/architecture.md).
# host/commit/*.c and *.h name no rd_kafka_ function, type or constant and
# include no librdkafka header; host/runtime/*.c and *.h call no rd_kafka_
# function and use no RD_KAFKA_ constant (the connector's state holds the
# consumer's handle, a type). Both go through kafka/consumer_ops.h. Then
# the check proves it bites: each planted use, alone in a probe file, must
# be caught.
# usage: no_librdkafka.sh COMMIT_DIR RUNTIME_DIR WORK_DIR
commit=$1
runtime=$2
work=$3
anything='rd_kafka_|RD_KAFKA_|librdkafka/'
calls='rd_kafka_[a-z0-9_]+[[:space:]]*\(|RD_KAFKA_'

# check DIR PATTERN: 0 when no code of DIR matches, 1 when some does.
check() {
    found=0
    for f in "$1"/*.c "$1"/*.h; do
        [ -e "$f" ] || continue
        found=$((found + 1))
        # Comments may name librdkafka's calls: only code counts.
        if sed -e 's|/\*.*\*/||g' -e 's|^[[:space:]]*/\*.*||' \
            -e 's|^[[:space:]]*\*.*||' -e 's|//.*||' "$f" |
            grep -nE "$2"; then
            echo "$f: uses librdkafka (above); go through kafka/"
            return 1
        fi
    done
    if [ "$found" -eq 0 ]; then
        echo "$1: no source to check"
        return 2
    fi
    return 0
}

for d in "$commit" "$runtime"; do
    n=$(ls "$d"/*.c 2>/dev/null | wc -l)
    if [ "$n" -lt 5 ]; then
        echo "expected a room's sources in $d, found $n file(s)"
        exit 1
    fi
done
check "$commit" "$anything" || exit 1
check "$runtime" "$calls" || exit 1
echo "no librdkafka in $commit and $runtime"

rm -rf "$work" && mkdir -p "$work" || exit 1
# probe PATTERN: every line of stdin, planted alone, is caught.
probe() {
    while IFS= read -r line; do
        [ -n "$line" ] || continue
        printf 'static void f(void) {\n    %s\n}\n' "$line" >"$work/probe.c"
        if check "$work" "$1" >/dev/null; then
            echo "the check misses: $line"
            exit 1
        fi
    done
}
probe "$anything" <<'PROBES' || exit 1
rd_kafka_pause_partitions(c->rk, l);
rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, 100);
rd_kafka_topic_partition_list_t *l = NULL;
tp->offset = RD_KAFKA_OFFSET_END;
int x = 0; rd_kafka_commit(rk, l, 1);
#include <librdkafka/rdkafka.h>
PROBES
probe "$calls" <<'PROBES' || exit 1
rd_kafka_resume_partitions(c->rk, l);
err = rd_kafka_query_watermark_offsets (c->rk, t, p, &lo, &hi, 100);
if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return;
PROBES
echo "bites: every planted use caught"
