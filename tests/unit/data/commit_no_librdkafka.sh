#!/bin/sh
# kafka/ is the only room that calls librdkafka (docs/architecture.md):
# host/commit/*.c and *.h name no rd_kafka_ function, type or constant and
# include no librdkafka header; they go through kafka/consumer_ops.h. Then
# the check proves it bites: each planted use, alone in a probe file, must
# be caught.
# usage: commit_no_librdkafka.sh COMMIT_DIR WORK_DIR
src=$1
work=$2
forbidden='rd_kafka_|RD_KAFKA_|librdkafka/'

check() {
    found=0
    for f in "$1"/*.c "$1"/*.h; do
        [ -e "$f" ] || continue
        found=$((found + 1))
        # Comments may name librdkafka's calls: only code counts.
        if sed -e 's|/\*.*\*/||g' -e 's|^[[:space:]]*/\*.*||' \
            -e 's|^[[:space:]]*\*.*||' -e 's|//.*||' "$f" |
            grep -nE "$forbidden"; then
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

n=$(ls "$src"/*.c 2>/dev/null | wc -l)
if [ "$n" -lt 5 ]; then
    echo "expected the commit room's sources in $src, found $n file(s)"
    exit 1
fi
check "$src" || exit 1
echo "no librdkafka: $n source file(s) of $src"

rm -rf "$work" && mkdir -p "$work" || exit 1
while IFS= read -r probe; do
    [ -n "$probe" ] || continue
    printf 'static void f(void) {\n    %s\n}\n' "$probe" >"$work/probe.c"
    if check "$work" >/dev/null; then
        echo "the check misses: $probe"
        exit 1
    fi
done <<'PROBES'
rd_kafka_pause_partitions(c->rk, l);
rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, 100);
rd_kafka_topic_partition_list_t *l = NULL;
tp->offset = RD_KAFKA_OFFSET_END;
int x = 0; rd_kafka_commit(rk, l, 1);
#include <librdkafka/rdkafka.h>
PROBES
echo "bites: every planted use caught"
