#!/bin/sh
# Resolved secrets never reach the log, whatever writes the line:
#  1. a host name from ${env:} in bootstrap_servers shows in librdkafka's
#     own FAIL lines (an unreachable port) at the default level;
#  2. a client.id from ${file:} shows in librdkafka's configuration dump
#     and thread names with "debug": "all" (TIDEMARK_LOG_LEVEL=debug).
# Both must come out as "***". The lines are waited for (not slept for):
# without them the test proves nothing and fails as inconclusive.
# usage: log_secrets.sh TIDEMARK_BINARY WORK_DIR
set -u
bin=$1 work=$2
failed=0
fail() { echo "FAIL: $*"; failed=1; }

rm -rf "$work" && mkdir -p "$work/state" || exit 1
chmod 700 "$work/state" || exit 1
printf 'hs-client-7f3a9c\n' >"$work/client-id.secret" || exit 1
cat >"$work/connector.json" <<'JSON'
{
  "name": "hostsec_log_secrets",
  "kafka": {
    "bootstrap_servers": "${env:TM_HS_BROKER}:1",
    "topics": ["hostsec_log_secrets"],
    "properties": {"client.id": "${file:client-id.secret}", "debug": "all"}
  },
  "sink": {"plugin": "sqlite",
           "settings": {"path": "out.db", "table": "hs_log_secrets"}},
  "mapping": {"mode": "raw"}
}
JSON

# run NAME LEVEL PATTERN: runs the host at log level LEVEL (the host name
# "localhost" is the ${env:} secret: it resolves without DNS) until its
# stderr has a line matching PATTERN (at most 60 s), then stops it.
run() {
    (cd "$work" && TM_HS_BROKER=localhost TIDEMARK_LOG_LEVEL=$2 \
        TIDEMARK_STATE_DIR="$work/state" exec "$bin" run connector.json) \
        >"$work/$1.out" 2>"$work/$1.err" &
    pid=$!
    i=0
    while [ "$i" -lt 600 ] && ! grep -q "$3" "$work/$1.err"; do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
        i=$((i + 1))
    done
    kill "$pid" 2>/dev/null
    wait "$pid"
    grep -q "$3" "$work/$1.err" ||
        fail "$1: inconclusive: no line matching '$3' (see $work/$1.err)"
}

# check NAME SECRET WHAT EXPECTED: no SECRET in NAME's log, EXPECTED there.
check() {
    if grep -n "$2" "$work/$1.err" | head -3 | grep .; then
        fail "$1: $3 shows in the log"
    fi
    grep -q "$4" "$work/$1.err" || fail "$1: no line matching '$4'"
}

run default info 'librdkafka FAIL'
check default localhost 'the host name from ${env:TM_HS_BROKER}' \
    'librdkafka FAIL: \[thrd:\*\*\*:1/bootstrap\]'

# Waits for the broker thread's lines (':1/bootstrap', redacted or not),
# which come after the configuration dump: stopping at the dump's
# 'client.id = ' could stop the host before the broker thread logged.
run debug debug ':1/bootstrap'
check debug hs-client-7f3a 'the client.id from ${file:}' \
    'client\.id = \*\*\*"'
check debug localhost 'the host name from ${env:TM_HS_BROKER}' \
    '\*\*\*:1/bootstrap'

# 3. a secret longer than the 64 bytes a "found ..." shows, given to a
#    declared setting of the wrong type (an enumeration, an integer): the
#    error of `tidemark validate` and of `tidemark run` shows "***", not
#    the secret's first 64 bytes (redacted before it is cut).
long=hs-long-secret-0123456789abcdefghijklmnopqrstuvwxyz-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ
for key in mode busy_timeout_ms; do
    cat >"$work/long-$key.json" <<JSON
{
  "name": "hostsec_log_secrets_long",
  "kafka": {"bootstrap_servers": "127.0.0.1:1", "topics": ["hostsec_long"]},
  "sink": {"plugin": "sqlite",
           "settings": {"path": "out.db", "table": "hs_long",
                        "$key": "\${env:TM_HS_LONG}"}},
  "mapping": {"mode": "raw"}
}
JSON
    for cmd in validate run; do
        (cd "$work" && TM_HS_LONG=$long TIDEMARK_STATE_DIR="$work/state" \
            "$bin" "$cmd" "long-$key.json") >"$work/long-$key-$cmd.out" \
            2>"$work/long-$key-$cmd.err" </dev/null
        grep -q "settings.$key: expected " "$work/long-$key-$cmd.err" ||
            fail "long-$key-$cmd: inconclusive: no error about $key (see $work/long-$key-$cmd.err)"
        if grep -n 'hs-long-secret' "$work/long-$key-$cmd.err" "$work/long-$key-$cmd.out"; then
            fail "long-$key-$cmd: the long secret from \${env:TM_HS_LONG} shows"
        fi
        grep -q 'found string "\*\*\*"' "$work/long-$key-$cmd.err" ||
            fail "long-$key-$cmd: no 'found string \"***\"' (see $work/long-$key-$cmd.err)"
    done
done

# 4. A secret librdkafka refuses, or a plugin cuts, is never echoed, not
#    even in part: a PEM key as an enumeration's value (rd_kafka_conf_set)
#    and as sasl.mechanisms, a 613-byte ${env:} value as "debug", an
#    element of a ${env:} list OpenSSL quotes alone (ssl.curves.list,
#    refused by rd_kafka_new), and a 2 KB ${env:} value inside the sqlite
#    "path"; ${env:} values making an iceberg-lite "path" too long.
#    Each secret's every 12-byte piece is looked for in the output.
{
    echo '-----BEGIN PRIVATE KEY-----'
    head -c 1216 /dev/urandom | base64 -w 64
    echo '-----END PRIVATE KEY-----'
} >"$work/key.pem" || exit 1
vlong=hs-vlong-
while [ "${#vlong}" -lt 613 ]; do
    vlong="${vlong}$(head -c 48 /dev/urandom | base64 -w 0 | tr -d '+/=')"
done
vlong=$(printf %s "$vlong" | cut -c1-613)
vhuge=$vlong
while [ "${#vhuge}" -lt 2048 ]; do vhuge="${vhuge}-$vlong"; done
vhuge=$(printf %s "$vhuge" | cut -c1-2048)
printf %s "$vlong" >"$work/vlong.secret" && printf %s "$vhuge" >"$work/vhuge.secret" || exit 1
# A list whose one element OpenSSL quotes (through rd_kafka_new).
curves="P-256:hs-curve-$(head -c 24 /dev/urandom | base64 -w 0 | tr -d '+/=')"
printf %s "$curves" >"$work/curves.secret" || exit 1

# pieces FILE: every 12-byte piece of every line of FILE but the PEM markers.
pieces() {
    awk '!/^-----/ { for (i = 1; i + 11 <= length($0); i++)
                         print substr($0, i, 12) }' "$1"
}

# secret_case NAME SECRET_FILE EXPECTED KAFKA_PROPERTIES SETTINGS_PATH [PLUGIN]
secret_case() {
    cat >"$work/$1.json" <<JSON
{
  "name": "hostsec_log_secrets_$1",
  "kafka": {"bootstrap_servers": "127.0.0.1:1", "topics": ["hostsec_$1"],
            "properties": {$4}},
  "sink": {"plugin": "${6:-sqlite}",
           "settings": {"path": "$5"$([ "${6:-sqlite}" = sqlite ] && printf ', "table": "hs_%s"' "$1")}},
  "mapping": {"mode": "raw"}
}
JSON
    pieces "$work/$2" >"$work/$1.pieces"
    for cmd in validate run; do
        (cd "$work" && TM_HS_VLONG=$vlong TM_HS_VHUGE=$vhuge TM_HS_CURVES=$curves \
            TIDEMARK_STATE_DIR="$work/state" "$bin" "$cmd" "$1.json") \
            >"$work/$1-$cmd.out" 2>"$work/$1-$cmd.err" </dev/null
        grep -q "$3" "$work/$1-$cmd.err" ||
            fail "$1-$cmd: inconclusive: no line matching '$3' (see $work/$1-$cmd.err)"
        if cat "$work/$1-$cmd.err" "$work/$1-$cmd.out" |
            grep -F -f "$work/$1.pieces" | head -3 | cut -c1-200 | grep .; then
            fail "$1-$cmd: a piece of the secret from $2 shows"
        fi
    done
}

secret_case pem_enum key.pem \
    'kafka.properties\["ssl.endpoint.identification.algorithm"\]: librdkafka refused' \
    '"ssl.endpoint.identification.algorithm": "${file:key.pem}"' out.db
secret_case pem_sasl key.pem 'librdkafka refused' \
    '"sasl.mechanisms": "${file:key.pem}"' out.db
secret_case env_debug vlong.secret \
    'kafka.properties.debug: librdkafka refused' \
    '"debug": "${env:TM_HS_VLONG}"' out.db
secret_case curves_part curves.secret \
    'refused the consumer.s configuration: ssl.curves.list failed' \
    '"security.protocol": "ssl", "ssl.curves.list": "${env:TM_HS_CURVES}"' out.db
secret_case sqlite_path vhuge.secret 'setting "path": cannot create' '' '${env:TM_HS_VHUGE}/x.db'
# iceberg-lite: a table directory whose name (one component) and whose
# path are too long (the plugin's messages once showed such a path cut to
# 200 bytes, ending in part of the secret).
mkdir -p "$work/ice" || exit 1
secret_case iceberg_long_name vlong.secret 'File name too long' '' \
    "$work/ice/\${env:TM_HS_VLONG}" iceberg_lite
secret_case iceberg_long_path vhuge.secret 'path of [0-9]* bytes' '' \
    "$work/ice/\${env:TM_HS_VHUGE}/\${env:TM_HS_VHUGE}/t" iceberg_lite

[ "$failed" -eq 0 ] && echo "log_secrets: OK"
exit "$failed"
