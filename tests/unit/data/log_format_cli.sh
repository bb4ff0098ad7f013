#!/bin/sh
# The log settings, end to end through the `tidemark` binary:
#  1. TIDEMARK_LOG_FORMAT / TIDEMARK_LOG_LEVEL with a value that means
#     nothing stop every command at start (exit 2, the variable named);
#  2. with TIDEMARK_LOG_FORMAT=json every line of `tidemark run` is one JSON
#     object (python3's json parses each), a connector's lines carry its
#     name and the SIGTERM line, which is about the whole process, has no
#     connector field. The SIGTERM line is waited for, not slept for: without
#     it the test is inconclusive (a failure).
# usage: log_format_cli.sh TIDEMARK_BINARY WORK_DIR
set -u
bin=$1 work=$2
failed=0
fail() { echo "FAIL: $*"; failed=1; }

rm -rf "$work" && mkdir -p "$work/state" || exit 1
chmod 700 "$work/state" || exit 1
cat >"$work/connector.json" <<'JSON'
{
  "name": "logfmt_cli",
  "kafka": {"bootstrap_servers": "127.0.0.1:1", "topics": ["logfmt_cli"]},
  "sink": {"plugin": "sqlite", "settings": {"path": "out.db", "table": "logfmt_cli"}},
  "mapping": {"mode": "raw"},
  "state_dir": "state"
}
JSON

# bad VAR VALUE COMMAND EXPECTED (a binary that does not refuse would run:
# timeout ends it, and the exit status says so)
bad() {
    (cd "$work" && timeout 20 env "$1=$2" "$bin" $3 connector.json) \
        >"$work/bad.out" 2>&1
    rc=$?
    [ "$rc" -eq 2 ] || fail "$1=$2 $3: exit $rc, expected 2"
    [ "$(cat "$work/bad.out")" = "$4" ] ||
        fail "$1=$2 $3: printed '$(cat "$work/bad.out")', expected '$4'"
}
bad TIDEMARK_LOG_FORMAT yaml validate \
    'tidemark: TIDEMARK_LOG_FORMAT: expected one of logfmt, json, found "yaml"'
bad TIDEMARK_LOG_FORMAT JSON run \
    'tidemark: TIDEMARK_LOG_FORMAT: expected one of logfmt, json, found "JSON"'
bad TIDEMARK_LOG_LEVEL bogus run \
    'tidemark: TIDEMARK_LOG_LEVEL: expected one of debug, info, warn, error, found "bogus"'

# JSON lines from a running host: started, waited for until it logs that it
# runs, stopped with SIGTERM, waited for.
(cd "$work" && TIDEMARK_LOG_FORMAT=json exec "$bin" run connector.json) \
    >"$work/run.out" 2>"$work/run.err" &
pid=$!
i=0
while [ "$i" -lt 600 ] && ! grep -q '"msg":"running: ' "$work/run.err"; do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
    i=$((i + 1))
done
kill -TERM "$pid" 2>/dev/null
wait "$pid"
rc=$?
[ "$rc" -eq 0 ] || fail "run: exit $rc after SIGTERM, expected 0 (see $work/run.err)"
grep -q '"msg":"SIGTERM: ' "$work/run.err" ||
    fail "run: inconclusive: no SIGTERM line (see $work/run.err)"
python3 - "$work/run.err" <<'PY' || failed=1
import json, sys
bad = 0
lines = open(sys.argv[1], "rb").read().split(b"\n")
if lines[-1] != b"":
    print("FAIL: the last line has no newline"); bad = 1
for n, raw in enumerate(lines[:-1], 1):
    try:
        o = json.loads(raw.decode("utf-8"))
    except Exception as e:
        print("FAIL: line %d is not a JSON object: %s: %r" % (n, e, raw[:200])); bad = 1
        continue
    if not isinstance(o, dict) or not isinstance(o.get("msg"), str):
        print("FAIL: line %d has no msg: %r" % (n, raw[:200])); bad = 1
        continue
    if o["msg"].startswith("SIGTERM: ") and "connector" in o:
        print("FAIL: the SIGTERM line has a connector field: %r" % raw); bad = 1
    if o["msg"].startswith("running: ") and o.get("connector") != "logfmt_cli":
        print("FAIL: the connector's line lacks its name: %r" % raw); bad = 1
sys.exit(bad)
PY

[ "$failed" -eq 0 ] && echo "log_format_cli: all passed"
exit "$failed"
