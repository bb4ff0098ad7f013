#!/bin/sh
# The connector core's state machine stays pure (host/commit/machine.h): no
# librdkafka, no plugin loading, no sink call, no clock, no log, no thread,
# no sleep in host/commit/machine*.c. Then the check proves it bites: each
# forbidden call, planted alone in a probe file, must be caught.
# usage: machine_pure.sh SOURCE_DIR WORK_DIR
src=$1
work=$2
forbidden='rd_kafka_|librdkafka|dlopen|dlsym|dlfcn|->api->|api->commit|->claim\(|->read_markers\(|->commit\(|(^|[^a-z_])time\(|clock_gettime|gettimeofday|tm_now_ms|tm_wall_ms|<time\.h>|tm_log|tm_conn_log|tm_conn_error|services/log\.h|fprintf|(^|[^a-z_])printf\(|puts\(|syslog|pthread|sleep\(|getenv'

check() {
    found=0
    for f in "$1"/machine*.c; do
        [ -e "$f" ] || continue
        found=$((found + 1))
        # Comments may name what the code must not do: only code counts.
        if sed -e 's|/\*.*\*/||g' -e 's|^[[:space:]]*/\*.*||' \
            -e 's|^[[:space:]]*\*.*||' -e 's|//.*||' "$f" |
            grep -nE "$forbidden"; then
            echo "$f: calls out of the machine (above)"
            return 1
        fi
    done
    if [ "$found" -eq 0 ]; then
        echo "$1: no machine*.c to check"
        return 2
    fi
    return 0
}

n=$(ls "$src"/machine*.c 2>/dev/null | wc -l)
if [ "$n" -lt 2 ]; then
    echo "expected machine.c and machine_part.c in $src, found $n file(s)"
    exit 1
fi
check "$src" || exit 1
echo "pure: $n file(s) of $src"

rm -rf "$work" && mkdir -p "$work" || exit 1
while IFS= read -r probe; do
    [ -n "$probe" ] || continue
    printf 'static void f(void) {\n    %s\n}\n' "$probe" >"$work/machine_probe.c"
    if check "$work" >/dev/null; then
        echo "the check misses: $probe"
        exit 1
    fi
done <<'PROBES'
rd_kafka_pause_partitions(rk, l);
void *h = dlopen("x.so", RTLD_NOW);
st = c->sink.api->commit(c->sink.sink, &b, &err);
st = api->claim(sink, m, n, 0, &err);
st = s->read_markers(sink, m, n, &err);
time_t t = time(NULL);
clock_gettime(CLOCK_MONOTONIC, &ts);
int64_t now = tm_now_ms();
tm_log(TM_LOG_WARN, "c", "x");
tm_conn_error(c, 1, "x");
fprintf(stderr, "x");
printf("x");
pthread_mutex_lock(&mu);
nanosleep(&ts, NULL);
const char *e = getenv("X");
PROBES
echo "bites: every planted call caught"
