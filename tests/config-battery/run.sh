#!/bin/sh
# The malformed-config battery: `tidemark validate` on every NN-*.json of
# this directory, each broken in one way (a few in two), must exit 2 and
# print exactly the lines of the table below on stderr, nothing on stdout,
# and never a resolved secret. `tidemark run`, `verify` and `offsets` on
# the same file must refuse it at start the same way:
# the same exit status, the same lines, nothing on stdout (every command
# loads configs through one path). The good-*.json files must pass
# validate, and two files defining one connector name must be refused by
# validate and run.
#
# Every expected line is written by hand from the loader
# (host/config/*.c) and docs/configuration.md, never captured from the
# program. The table gives each line without its "FILE: " prefix, which
# the script adds. A file without a table entry, or an entry without a
# file, fails; so does a battery of fewer than 30 files.
#
# usage: run.sh TIDEMARK_BINARY WORK_DIR
# TIDEMARK_PLUGIN_PATH must name the directory of the build's sqlite.so
# (ctest sets it); the files are copied to WORK_DIR and run from there, so
# the sqlite paths of the configs (battery.db) are relative to it.
set -u
if [ "$#" -ne 2 ]; then
    echo "usage: $0 TIDEMARK_BINARY WORK_DIR" >&2
    exit 2
fi
bin=$1 work=$2
case $bin in /*) ;; *) bin=$PWD/$bin ;; esac # the script runs in WORK_DIR
here=$(cd "$(dirname "$0")" && pwd) || exit 2
MIN_FILES=30
INVALID=2 # every command's exit status for an invalid config
# Refused by validate through the plugin (its loading, its validate
# callback); run makes the same checks before it starts anything, while
# verify and offsets open the sink instead of validating it, so only
# validate and run are held to the table for them.
PLUGIN_CHECKED="64-plugin-not-found.json 65-plugin-refuses-upsert-without-key.json"
if [ -z "${TIDEMARK_PLUGIN_PATH:-}" ]; then
    echo "config_battery: TIDEMARK_PLUGIN_PATH is not set (the build's plugin dir)" >&2
    exit 2
fi

# The environment the table assumes: one variable set (its value must never
# show), one certainly unset.
SECRET=battery-s3cret-7f2e
TM_BATTERY_SECRET=$SECRET
export TM_BATTERY_SECRET
unset TM_BATTERY_UNSET

rm -rf "$work" && mkdir -p "$work/expected" "$work/state" || exit 2
# Should run ever accept a file, its status goes here, not to the user's.
TIDEMARK_STATE_DIR=$work/state
export TIDEMARK_STATE_DIR
cp "$here"/*.json "$work"/ || exit 2
mkdir "$work/run" && cp "$here"/*.json "$work/run"/ || exit 2

# "@ FILE" starts a file's entry; each line after it, up to the next "@",
# is one expected stderr line, in order. "#" lines and blank lines are
# comments.
cat >"$work/table" <<'TABLE'
# --- JSON itself: jansson's message, line and column of the token's end
@ 01-syntax-missing-comma.json
$: expected JSON, found a syntax error at line 3, column 9: '}' expected near '"kafka"'
@ 02-syntax-duplicate-key.json
$: expected JSON, found a syntax error at line 3, column 8: duplicate object key near '"name"'
@ 03-root-array.json
$: expected an object (one connector), found array

# --- JSON errors jansson words its own way, in plain words at the JSON path
# of the value being read, with jansson's line and column
@ 22-batch-too-large.json
$.batch.max_bytes: expected an integer from -9223372036854775808 to 9223372036854775807, found 9223372036854775808 (line 4, column 44)
@ 88-syntax-nul-in-string.json
$.state_dir: expected a string without \u0000 (a NUL character), found one (line 6, column 29)
@ 89-syntax-bom.json
$: expected JSON, found a UTF-8 byte order mark (BOM) at the start: save the file without one
@ 90-syntax-control-char.json
$.kafka.topics[0]: expected a string without raw control characters (write them as escapes, \t or \u0009), found the character 0x09 (line 3, column 69)
@ 91-syntax-bad-utf8.json
$.sink.settings.table: expected UTF-8 text, found the byte 0xff (line 4, column 79)
@ 92-syntax-real-overflow.json
$.batch.max_wait_ms: expected a number within the range of a double, found 1e400 (line 6, column 32)

# --- name
@ 04-name-missing.json
$.name: missing required setting (expected a name of letters, digits, '.', '_' or '-')
@ 05-name-bad-chars.json
$.name: expected a name of letters, digits, '.', '_' or '-', found string "orders/sqlite"

# --- unknown keys, with and without "did you mean"
@ 06-unknown-top-level-hint.json
$.dead_letter: unknown setting (did you mean "dead_letters"?)
@ 07-unknown-top-level-no-hint.json
$.version: unknown setting
@ 08-unknown-kafka-key.json
$.kafka.propertis: unknown setting (did you mean "properties"?)
@ 09-unknown-batch-key.json
$.batch.max_record: unknown setting (did you mean "max_records"?)
@ 10-unknown-sink-key.json
$.sink.setting: unknown setting (did you mean "settings"?)
@ 11-unknown-mapping-key.json
$.mapping.filtre: unknown setting (did you mean "filter"?)
@ 12-unknown-column-key.json
$.mapping.columns[1].requierd: unknown setting (did you mean "required"?)
@ 13-unknown-dead-letters-key.json
$.dead_letters.topik: unknown setting (did you mean "topic"?)

# --- wrong types
@ 14-type-string-for-int.json
$.batch.max_records: expected a positive integer, found string "5000"
@ 15-type-int-for-string.json
$.kafka.bootstrap_servers: expected a non-empty string, found integer 9092
@ 16-type-array-for-object.json
$.batch: expected an object, found array
@ 17-type-bool-as-string.json
$.dead_letters.sink: expected a boolean, found string "false"
@ 18-type-null.json
$.state_dir: expected a non-empty string, found null
@ 19-type-float-for-int.json
$.batch.max_wait_ms: expected a positive integer, found number 2.5

# --- batch limits
@ 20-batch-negative.json
$.batch.max_records: expected a positive integer, found integer -5
@ 21-batch-zero.json
$.batch.max_wait_ms: expected a positive integer, found integer 0

# --- kafka
@ 23-topics-and-regex.json
$.kafka: expected exactly one of "topics" or "topic_regex", found both
@ 24-topics-neither.json
$.kafka: expected exactly one of "topics" or "topic_regex", found neither
@ 25-topics-empty.json
$.kafka.topics: expected an array of topic names, found array
@ 26-topic-not-string.json
$.kafka.topics[1]: expected a topic name (non-empty string), found integer 42
@ 27-topic-regex-invalid.json
$.kafka.topic_regex: expected a regular expression (POSIX extended), found string "orders.[0-9" (Unmatched [, [^, [:, [., or [=)
@ 28-start-bad.json
$.kafka.start: expected "earliest" or "latest", found string "beginning"
@ 29-reserved-enable-auto-commit.json
$.kafka.properties["enable.auto.commit"]: reserved: tidemark sets "enable.auto.commit" itself (offsets are committed to the group by tidemark, only after the sink's commit)
@ 30-reserved-enable-auto-offset-store.json
$.kafka.properties["enable.auto.offset.store"]: reserved: tidemark sets "enable.auto.offset.store" itself (offsets are stored by tidemark, only after the sink's commit)
@ 31-reserved-auto-offset-reset.json
$.kafka.properties["auto.offset.reset"]: reserved: tidemark sets "auto.offset.reset" itself (the start position comes from the sink's markers (set $.kafka.start for partitions without one))
@ 32-reserved-group-id.json
$.kafka.properties["group.id"]: reserved: tidemark sets "group.id" itself (set $.kafka.group_id instead)
@ 33-reserved-bootstrap-servers.json
$.kafka.properties["bootstrap.servers"]: reserved: tidemark sets "bootstrap.servers" itself (set $.kafka.bootstrap_servers instead)
@ 34-reserved-isolation-level.json
$.kafka.properties["isolation.level"]: reserved: tidemark sets "isolation.level" itself (tidemark reads committed records only (read_committed))
@ 35-property-not-string.json
$.kafka.properties["fetch.max.bytes"]: expected a string (librdkafka takes string values), found integer 1048576
@ 72-kafka-missing.json
$.kafka: missing required setting (expected an object)
@ 73-batch-too-large.json
$.batch.max_bytes: expected at most 1073741824, found 9223372036854775807
@ 74-reserved-metadata-broker-list.json
$.kafka.properties["metadata.broker.list"]: reserved: tidemark sets "metadata.broker.list" itself (an alias of bootstrap.servers: set $.kafka.bootstrap_servers instead)

# --- kafka properties librdkafka itself refuses (the message after the
# second ": " is librdkafka's own)
@ 85-property-bad-value.json
$.kafka.properties["session.timeout.ms"]: librdkafka refused "session.timeout.ms": Invalid value for configuration property "session.timeout.ms"
@ 86-property-unknown.json
$.kafka.properties["sesion.timeout.ms"]: librdkafka refused "sesion.timeout.ms": No such configuration property: "sesion.timeout.ms"
@ 87-two-errors-properties.json
$.kafka.properties["heartbeat.interval.ms"]: librdkafka refused "heartbeat.interval.ms": Invalid value for configuration property "heartbeat.interval.ms"
$.kafka.properties["socket.timeout.mss"]: librdkafka refused "socket.timeout.mss": No such configuration property: "socket.timeout.mss"
@ 93-properties-conflict.json
$.kafka.properties: librdkafka refused the consumer's configuration: `fetch.max.bytes` must be >= `message.max.bytes`

# --- the dead-letter producer's own settings: a user's property would
# override them (acks=0: a dead letter lost, unseen)
@ 94-dead-letter-producer-acks.json
$.kafka.properties.acks: reserved: tidemark sets "acks" itself (the dead-letter producer waits for every in-sync replica (acks=all): with less a dead letter can be lost)
@ 95-reserved-dead-letter-acks.json
$.kafka.properties["enable.idempotence"]: reserved: tidemark sets "enable.idempotence" itself (the dead-letter producer is idempotent: a retry never writes a dead letter twice)
$.kafka.properties.acks: reserved: tidemark sets "acks" itself (the dead-letter producer waits for every in-sync replica (acks=all): with less a dead letter can be lost)
@ 96-reserved-transactional-id.json
$.kafka.properties["transactional.id"]: reserved: tidemark sets "transactional.id" itself (the dead-letter producer is not transactional: with a transactional.id it delivers nothing)
$.kafka.properties["request.required.acks"]: reserved: tidemark sets "request.required.acks" itself (an alias of acks: the dead-letter producer waits for every in-sync replica (acks=all))
@ 101-reserved-auto-commit-enable.json
$.kafka.properties["auto.commit.enable"]: reserved: tidemark sets "auto.commit.enable" itself (an alias of enable.auto.commit: offsets are committed to the group by tidemark, only after the sink's commit)

# --- properties that make librdkafka load or run code: refused in every
# command, validate included
@ 98-refused-code-loading-properties.json
$.kafka.properties["plugin.library.paths"]: not allowed: librdkafka would load and run the libraries it names, in every command that reads the config (validate included)
$.kafka.properties["ssl.engine.location"]: not allowed: librdkafka would load and run the OpenSSL engine it names, in every command that reads the config (validate included)
$.kafka.properties["sasl.kerberos.kinit.cmd"]: not allowed: librdkafka would run it as a shell command, in every command that reads the config (validate included)

# --- sink
@ 36-sink-plugin-missing.json
$.sink.plugin: missing required setting (expected a non-empty string)

# --- mapping and columns
@ 37-mapping-mode-unknown.json
$.mapping.mode: expected "raw" or "json", found string "avro"
@ 38-raw-with-columns.json
$.mapping.columns: not allowed with mode "raw" (its columns are fixed: key, value, headers, topic, partition, offset, timestamp)
@ 39-raw-with-filter.json
$.mapping.filter: not allowed with mode "raw" (record values are not parsed)
@ 40-json-without-columns.json
$.mapping.columns: missing required setting (expected a non-empty array of columns)
@ 41-json-columns-empty.json
$.mapping.columns: expected a non-empty array of columns, found array
@ 42-column-duplicate-name.json
$.mapping.columns[1].name: expected a unique column name, found string "id" (also $.mapping.columns[0])
@ 43-column-bad-type.json
$.mapping.columns[1].type: expected "text", "int", "float", "bool", "timestamp" or "json", found string "varchar"
@ 44-pointer-no-slash.json
$.mapping.columns[0].pointer: expected a JSON pointer (RFC 6901), found string "id": a JSON pointer starts with '/'
@ 45-pointer-bad-tilde.json
$.mapping.columns[1].pointer: expected a JSON pointer (RFC 6901), found string "/meta~2dt": '~' must be followed by 0 or 1 (~0 is '~', ~1 is '/')
@ 70-column-not-object.json
$.mapping.columns[0]: expected an object (name, pointer, type), found string "id"
@ 71-column-pointer-missing.json
$.mapping.columns[0].pointer: missing required setting (expected a JSON pointer (RFC 6901))

# --- filter
@ 46-filter-bad-operator.json
$.mapping.filter: expected "/pointer in [a, b, ...]" or "/pointer == value", found string "/type != edit": the operator must be "==" or "in"
@ 47-filter-unterminated-quote.json
$.mapping.filter: expected "/pointer in [a, b, ...]" or "/pointer == value", found string "/type == "edit": unterminated quoted value
@ 48-filter-missing-value.json
$.mapping.filter: expected "/pointer in [a, b, ...]" or "/pointer == value", found string "/type ==": a value is missing
@ 49-filter-list-unclosed.json
$.mapping.filter: expected "/pointer in [a, b, ...]" or "/pointer == value", found string "/type in [edit, new": the list is not closed with ']'
@ 50-filter-no-pointer.json
$.mapping.filter: expected "/pointer in [a, b, ...]" or "/pointer == value", found string "type == edit": it must start with a JSON pointer ("/field")

# --- dedup and dead letters
@ 51-dedup-key-not-column.json
$.dedup.key[0]: expected a column of $.mapping.columns, found string "sku"
@ 52-dedup-key-typo.json
$.dedup.key[1]: expected a column of $.mapping.columns, found string "tpye" (did you mean "type"?)
@ 53-dedup-key-empty.json
$.dedup.key: expected a non-empty array of column names, found array
@ 54-dedup-key-empty-name.json
$.dedup.key[0]: expected a column of $.mapping.columns, found string ""
@ 55-dead-letters-topic-empty.json
$.dead_letters.topic: expected a non-empty string, found string ""

# --- names Kafka, files and the sink's markers can hold
@ 78-name-too-long.json
$.name: expected a name of at most 200 bytes, found 201 bytes
@ 79-name-dot.json
$.name: expected a name other than "." or "..", found string "."
@ 80-name-dotdot.json
$.name: expected a name other than "." or "..", found string ".."
@ 81-topic-illegal-chars.json
$.kafka.topics[1]: expected a Kafka topic name (1 to 249 letters, digits, '.', '_' or '-'; not "." or ".."), found string "bad topic!"
@ 83-topic-too-long.json
$.kafka.topics[0]: expected a Kafka topic name (1 to 249 letters, digits, '.', '_' or '-'; not "." or ".."), found string "tttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttt..."
@ 84-topic-dotdot.json
$.kafka.topics[0]: expected a Kafka topic name (1 to 249 letters, digits, '.', '_' or '-'; not "." or ".."), found string ".."
@ 82-dead-letters-topic-illegal.json
$.dead_letters.topic: expected a Kafka topic name (1 to 249 letters, digits, '.', '_' or '-'; not "." or ".."), found string "bad topic!"

# --- dead letters that would be lost, or read back for ever
@ 75-dead-letters-nowhere.json
$.dead_letters: expected "sink": true or a "topic" (dead letters must go somewhere), found "sink": false and no topic
@ 76-dead-letters-topic-subscribed.json
$.dead_letters.topic: expected a topic the connector does not read, found string "orders.dlq" (also $.kafka.topics[1]: each dead letter would be read back and fail again, for ever)
@ 77-dead-letters-topic-matched-by-regex.json
$.dead_letters.topic: expected a topic the connector does not read, found string "t_rx_dl" (matched by $.kafka.topic_regex: each dead letter would be read back and fail again, for ever)
@ 97-dead-letters-topic-matched-by-backref.json
$.dead_letters.topic: expected a topic the connector does not read, found string "t_aba" (matched by $.kafka.topic_regex: each dead letter would be read back and fail again, for ever)
@ 99-dead-letters-topic-internal.json
$.dead_letters.topic: expected a topic that is not one of Kafka's internal ones (starting with "__"), found string "__consumer_offsets"
@ 100-dead-letters-delivery-timeout.json
$.dead_letters.delivery_timeout_ms: expected a positive integer, found integer 0
@ 101-dead-letters-delivery-timeout-max.json
$.dead_letters.delivery_timeout_ms: expected at most 240000, found 240001
@ 102-dead-letters-delivery-timeout-no-topic.json
$.dead_letters.delivery_timeout_ms: expected it only with "topic" (it bounds the delivery to the topic), found no topic

# --- a state directory run could not use
@ 100-state-dir-uncreatable.json
$.state_dir: expected a directory tidemark can create or write, found string "/proc/battery-state" (cannot create a directory in /proc: No such file or directory)

# --- interpolation
@ 56-env-unset.json
$.kafka.bootstrap_servers: environment variable TM_BATTERY_UNSET is not set
@ 57-file-unreadable.json
$.kafka.properties["sasl.password"]: cannot read file /nonexistent/tidemark-battery/password: No such file or directory
@ 58-file-too-large.json
$.sink.settings.path: cannot read file /dev/zero: File too large
@ 59-ref-unterminated.json
$.kafka.group_id: unterminated "${": expected ${env:NAME} or ${file:PATH} (write $${ for a literal "${")
@ 60-ref-unknown-kind.json
$.kafka.properties["sasl.password"]: unknown reference "${vault:kafka/password}": expected ${env:NAME} or ${file:PATH} (write $${ for a literal "${")
@ 61-ref-bad-env-name.json
$.kafka.bootstrap_servers: expected ${env:NAME} with NAME of letters, digits and '_', found "${env:KAFKA-HOST}"
@ 62-ref-file-no-path.json
$.state_dir: expected ${file:PATH}, found "${file:}"
@ 63-secret-redacted.json
$.batch.max_wait_ms: expected a positive integer, found string "***"

# --- past the loader: the plugin
@ 64-plugin-not-found.json
$.sink.plugin: plugin ./no-such-sink.so: path is relative; expected an absolute path, or a plain name to look up in the plugin directories
@ 65-plugin-refuses-upsert-without-key.json
$.sink: plugin "sqlite" refused the config (INVALID): setting "mode": "upsert" needs key columns ("key": true on at least one column); none has it

# --- two errors in one file: both reported, in the loader's order
# (interpolation of the whole tree first, then the sections in order)
@ 66-two-errors-dedup-keys.json
$.dedup.keys: unknown setting (did you mean "key"?)
$.dedup.key: missing required setting (expected a non-empty array of column names)
@ 67-two-errors-dotted-bootstrap.json
$.kafka["bootstrap.servers"]: unknown setting (did you mean "bootstrap_servers"?)
$.kafka.bootstrap_servers: missing required setting (expected a non-empty string)
@ 68-two-errors-name-and-batch.json
$.name: expected a name of letters, digits, '.', '_' or '-', found string "battery!"
$.batch.max_records: expected a positive integer, found integer 0
@ 69-two-errors-env-and-start.json
$.kafka.bootstrap_servers: environment variable TM_BATTERY_UNSET is not set
$.kafka.start: expected "earliest" or "latest", found string "first"
TABLE

# Split the table into WORK_DIR/expected/FILE, each line prefixed "FILE: ".
awk -v dir="$work/expected" '
    /^#/ || /^[ \t]*$/ { next }
    /^@ / { file = substr($0, 3); out = dir "/" file; printf "" > out; next }
    file == "" { print "config_battery: table line before any @: " $0 > "/dev/stderr"; exit 1 }
    { print file ": " $0 > out }
' "$work/table" || exit 2

cd "$work" || exit 2
checked=0 failed=0
fail() { # FILE REASON
    echo "FAIL $1: $2"
    failed=$((failed + 1))
}

# check_refused LABEL COMMAND STATUS EXPECTED FILE...: `tidemark COMMAND
# FILE...` exits STATUS with exactly the EXPECTED lines on stderr, nothing
# on stdout and no secret. Commands other than validate are stopped after
# 10 s should they accept the files (a failure: they must refuse them
# before starting anything).
check_refused() {
    label=$1 cmd=$2 want=$3 expected=$4
    shift 4
    out=$label.$cmd.out err=$label.$cmd.err
    if [ "$cmd" = validate ]; then
        "$bin" validate "$@" >"$out" 2>"$err"
    else
        # In a copy of the files of its own: a command that wrongly
        # starts must not leave a store behind for the other checks.
        (cd run && timeout -s INT 10 "$bin" "$cmd" "$@") >"$out" 2>"$err"
    fi
    rc=$?
    bad=
    [ "$rc" -eq "$want" ] || bad="$cmd: exit status $rc, expected $want"
    if [ -z "$bad" ] && [ -s "$out" ]; then
        bad="$cmd: unexpected output on stdout: $(cat "$out")"
    fi
    if [ -z "$bad" ] && grep -qF "$SECRET" "$out" "$err"; then
        bad="$cmd: the secret value shows in the output"
    fi
    if [ -z "$bad" ] && ! cmp -s "$expected" "$err"; then
        bad="$cmd: stderr differs from the expected lines (- expected, + got):"
    fi
    if [ -n "$bad" ]; then
        fail "$label" "$bad"
        diff -u "$expected" "$err" | sed '1,2d; s/^/    /'
    else
        echo "ok   $label ($cmd)"
    fi
}

for path in "$here"/[0-9][0-9]-*.json "$here"/[0-9][0-9][0-9]-*.json; do
    [ -e "$path" ] || continue
    f=${path##*/}
    checked=$((checked + 1))
    if [ ! -f "expected/$f" ]; then
        fail "$f" "no entry in the table of run.sh"
        continue
    fi
    check_refused "$f" validate "$INVALID" "expected/$f" "$f"
    check_refused "$f" run "$INVALID" "expected/$f" "$f"
    case " $PLUGIN_CHECKED " in
    *" $f "*)
        echo "skip $f: verify, offsets (the plugin's checks)"
        continue
        ;;
    esac
    check_refused "$f" verify "$INVALID" "expected/$f" "$f"
    check_refused "$f" offsets "$INVALID" "expected/$f" "$f"
done

# Every table entry names a file that exists (the battery cannot shrink
# by deleting files and leaving their entries behind).
for e in expected/*; do
    f=${e##*/}
    [ -f "$here/$f" ] || fail "$f" "in the table of run.sh, but no such file"
done

# The good configs pass, so the validator is shown to accept something.
good=0
for path in "$here"/good-*.json; do
    [ -e "$path" ] || continue
    f=${path##*/}
    good=$((good + 1))
    "$bin" validate "$f" >"$f.out" 2>"$f.err"
    rc=$?
    if [ "$rc" -ne 0 ]; then
        fail "$f" "exit status $rc, expected 0; stderr:"
        sed 's/^/    /' "$f.err"
    elif [ -s "$f.err" ]; then
        fail "$f" "unexpected stderr: $(cat "$f.err")"
    elif ! grep -q "^$f: OK (connector \"" "$f.out"; then
        fail "$f" "no OK line on stdout: $(cat "$f.out")"
    elif grep -qF "$SECRET" "$f.out"; then
        fail "$f" "the secret value shows in the output"
    else
        echo "ok   $f (valid)"
    fi
done
[ "$good" -ge 1 ] || fail "good-*.json" "no good config to check"

# Two files of one connector name: markers, status files and locks are per
# name, so both commands refuse the second file. validate still checks the
# first one: its OK line is the only line on stdout.
cp good-raw.json same-name.json && cp good-raw.json run/same-name.json || exit 2
printf '%s\n' 'same-name.json: $.name: connector "battery.raw_bronze-1" is also defined by good-raw.json; names must be unique' >expected/same-name
check_refused same-name run "$INVALID" expected/same-name good-raw.json same-name.json
"$bin" validate good-raw.json same-name.json >same-name.validate.out 2>same-name.validate.err
rc=$?
if [ "$rc" -ne "$INVALID" ]; then
    fail same-name "validate: exit status $rc, expected $INVALID"
elif [ "$(grep -c . same-name.validate.out)" -ne 1 ] ||
    ! grep -q '^good-raw.json: OK (connector "' same-name.validate.out; then
    fail same-name "validate: stdout is not good-raw.json's OK line alone: $(cat same-name.validate.out)"
elif ! cmp -s expected/same-name same-name.validate.err; then
    fail same-name "validate: stderr differs from the expected lines (- expected, + got):"
    diff -u expected/same-name same-name.validate.err | sed '1,2d; s/^/    /'
else
    echo "ok   same-name (validate)"
fi

# Configs each valid on its own that one process cannot run together
# (pair-*.json): validate refuses them with a line for each file the
# problem is about, and prints no OK line for those.
printf '%s\n' \
    'pair-loop-a.json: $.dead_letters.topic: expected a topic that does not lead back to this connector, found "pairs.b" (dead letters would go round "loop-a" (pair-loop-a.json) -> "loop-b" (pair-loop-b.json) -> "loop-a", for ever)' \
    'pair-loop-b.json: $.dead_letters.topic: expected a topic that does not lead back to this connector, found "pairs.a" (dead letters would go round "loop-b" (pair-loop-b.json) -> "loop-a" (pair-loop-a.json) -> "loop-b", for ever)' \
    >expected/pair-loop
check_refused pair-loop validate "$INVALID" expected/pair-loop pair-loop-a.json pair-loop-b.json
printf '%s\n' \
    'pair-group-b.json: $.kafka.group_id: expected a consumer group no other connector of the process uses, found "tidemark-group-a" (also the group of connector "group-a" (pair-group-a.json): the two would split the partitions between them)' \
    >expected/pair-group
"$bin" validate pair-group-a.json pair-group-b.json >pair-group.out 2>pair-group.err
rc=$?
if [ "$rc" -ne "$INVALID" ]; then
    fail pair-group "validate: exit status $rc, expected $INVALID"
elif [ "$(grep -c . pair-group.out)" -ne 1 ] ||
    ! grep -q '^pair-group-a.json: OK (connector "' pair-group.out; then
    fail pair-group "validate: stdout is not pair-group-a.json's OK line alone: $(cat pair-group.out)"
elif ! cmp -s expected/pair-group pair-group.err; then
    fail pair-group "validate: stderr differs from the expected lines (- expected, + got):"
    diff -u expected/pair-group pair-group.err | sed '1,2d; s/^/    /'
else
    echo "ok   pair-group (validate)"
fi
# A chain is not a loop: B reading A's dead letters is allowed.
"$bin" validate pair-chain-a.json pair-chain-b.json >pair-chain.out 2>pair-chain.err
rc=$?
if [ "$rc" -ne 0 ] || [ -s pair-chain.err ] || [ "$(grep -c ': OK (connector "' pair-chain.out)" -ne 2 ]; then
    fail pair-chain "validate: exit status $rc (expected 0 and two OK lines); stderr: $(cat pair-chain.err)"
else
    echo "ok   pair-chain (valid)"
fi

echo "config_battery: $checked malformed and $good good configs checked, $failed failed"
if [ "$checked" -lt "$MIN_FILES" ]; then
    echo "config_battery: FAIL: only $checked malformed configs, at least $MIN_FILES expected"
    exit 1
fi
[ "$failed" -eq 0 ] || exit 1
exit 0
