#!/bin/sh
# `tidemark status` over hand-written state directories (no host, no
# broker): a corrupt status.json among good ones, an empty directory with
# --json, bad --watch intervals, and names and errors carrying terminal
# escapes. Expectations are written here by hand.
# usage: status_cli.sh TIDEMARK_BINARY WORK_DIR
set -u
bin=$1 work=$2
failed=0
fail() { echo "FAIL: $*"; failed=1; }

rm -rf "$work" && mkdir -p "$work" || exit 1
esc=$(printf '\033')
bel=$(printf '\007')

# status NAME_IN_FILE LAST_ERROR TOPIC: a status.json (format 1) on stdout.
status_json() {
    cat <<JSON
{"format": 1, "connector": "$1", "state": "RUNNING", "plugin": "sqlite",
 "plugin_version": "1.0.0", "instance_id": "a1", "pid": 999999,
 "started_ms": 1764680000000, "updated_ms": 1764680042000,
 "last_batch": null,
 "totals": {"rows": 1, "dead_letters": 0, "filtered": 0, "duplicates": 0,
            "batches": 1, "fenced": 0, "conflicts": 0, "retries": 0},
 "last_error": $2,
 "partitions": [{"topic": "$3", "partition": 0, "next_offset": 5,
                 "epoch": 1, "high_watermark": 5, "rows": 1,
                 "dead_letters": 0, "filtered": 0, "duplicates": 0,
                 "paused": false}]}
JSON
}

# 1. One corrupt file among good ones: the others are shown, the corrupt
# one as an error line in its place, and the exit status is 1.
sd=$work/mixed
mkdir -p "$sd/alpha" "$sd/broken" "$sd/zeta" && chmod -R go-w "$sd"
status_json alpha null orders >"$sd/alpha/status.json"
printf '{ "format": 1, oops' >"$sd/broken/status.json"
status_json zeta null orders >"$sd/zeta/status.json"
"$bin" status --state-dir "$sd" >"$work/mixed.out" 2>"$work/mixed.err"
rc=$?
[ "$rc" -eq 1 ] || fail "corrupt among good: exit $rc, expected 1"
# (The parse error's own words are jansson's: only where it starts.)
got=$(grep -E '^connector |^  (state|error) ' "$work/mixed.out" |
    sed "s|^\(  error       $sd/broken/status.json: \).*|\1...|")
want="connector alpha
  state       STOPPED (host pid 999999 gone; it said RUNNING at 2025-12-02T12:54:02Z)
connector broken
  error       $sd/broken/status.json: ...
connector zeta
  state       STOPPED (host pid 999999 gone; it said RUNNING at 2025-12-02T12:54:02Z)"
[ "$got" = "$want" ] || fail "corrupt among good: got
$got
$(cat "$work/mixed.err")"
"$bin" status --state-dir "$sd" --json >"$work/mixed.json" 2>"$work/mixed.jerr"
rc=$?
[ "$rc" -eq 1 ] || fail "corrupt among good, --json: exit $rc, expected 1"
python3 - "$work/mixed.json" "$sd" <<'PY' || fail "corrupt among good, --json: $(cat "$work/mixed.json" "$work/mixed.jerr")"
import json, sys
doc = json.load(open(sys.argv[1]))
names = [(c["connector"], c["state"]) for c in doc["connectors"]]
assert names == [("alpha", "STOPPED"), ("broken", "ERROR"), ("zeta", "STOPPED")], names
b = doc["connectors"][1]
assert b["error"].startswith(sys.argv[2] + "/broken/status.json: "), b
assert doc["healthy"] is False, doc
PY

# 2. Nothing in the state directory: --json still prints JSON.
mkdir -p "$work/empty" && chmod go-w "$work/empty"
"$bin" status --state-dir "$work/empty" --json >"$work/empty.json" 2>"$work/empty.err"
rc=$?
[ "$rc" -eq 1 ] || fail "empty --json: exit $rc, expected 1"
python3 - "$work/empty.json" "$work/empty" <<'PY' || fail "empty --json: not the document: $(cat "$work/empty.json" "$work/empty.err")"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc == {"state_dir": sys.argv[2], "connectors": [], "healthy": False,
               "error": "no connector has a status in " + sys.argv[2]}, doc
PY

# 3. --watch with a bad interval: a clear error at once, never a redraw
# loop (timeout's 124 means it kept drawing).
for arg in "--watch 0" "--watch 86401" "--watch -5" "--watch=abc" "--watch=0"; do
    # shellcheck disable=SC2086
    timeout 10 "$bin" status --state-dir "$sd" $arg alpha >"$work/w.out" 2>"$work/w.err"
    rc=$?
    [ "$rc" -eq 1 ] || fail "status $arg: exit $rc, expected 1"
    v=${arg#--watch}
    v=${v# }
    v=${v#=}
    grep -qxF "tidemark status: --watch: \"$v\" is not a number of seconds (1..86400)" \
        "$work/w.err" || fail "status $arg: $(cat "$work/w.err")"
done
# A word after --watch is CONNECTOR; one with no status ends the watch at
# once (exit 1) instead of redrawing the error for ever.
timeout 10 "$bin" status --state-dir "$sd" --watch abc >"$work/w.out" 2>"$work/w.err"
rc=$?
[ "$rc" -eq 1 ] || fail "status --watch abc: exit $rc, expected 1"
grep -qxF "tidemark status: no status for connector abc in $sd (a word after --watch is CONNECTOR; SECONDS is a number, 1..86400)" \
    "$work/w.err" || fail "status --watch abc: $(cat "$work/w.err" "$work/w.out")"

# 4. Terminal escapes in a connector's name, its last error and a topic are
# shown escaped, never sent raw to the terminal.
sd=$work/escapes
evil="evil${esc}[2J"
mkdir -p "$sd/$evil" && chmod -R go-w "$sd"
status_json 'evil\u001b[2J' \
    '{"message": "boom \u001b]0;pwned\u0007 \u001b[31mred\u009b1m", "ms": 1764680030000}' \
    't\u001b[1m' >"$sd/$evil/status.json"
"$bin" status --state-dir "$sd" >"$work/esc.out" 2>"$work/esc.err"
rc=$?
[ "$rc" -eq 2 ] || fail "escapes: exit $rc, expected 2 (STOPPED)"
if grep -q "[$esc$bel]" "$work/esc.out" "$work/esc.err" ||
    LC_ALL=C grep -q "$(printf '\302\233')" "$work/esc.out"; then
    fail "escapes: a raw control character reached the terminal"
fi
grep -qxF 'connector evil\x1b[2J' "$work/esc.out" || fail "escapes: connector line: $(cat "$work/esc.out")"
grep -qxF '  last error  2025-12-02T12:53:50Z: boom \x1b]0;pwned\x07 \x1b[31mred\u009b1m' \
    "$work/esc.out" || fail "escapes: last error line: $(grep 'last error' "$work/esc.out")"
grep -q '^  t\\x1b\[1m  ' "$work/esc.out" || fail "escapes: topic cell: $(cat "$work/esc.out")"
# And in an error line (a corrupt file under such a name).
printf 'x' >"$sd/$evil/status.json"
"$bin" status --state-dir "$sd" "$evil" >"$work/esc2.out" 2>"$work/esc2.err"
if grep -q "[$esc$bel]" "$work/esc2.out" "$work/esc2.err"; then
    fail "escapes: a raw control character in the error line: $(cat -v "$work/esc2.err")"
fi
grep -qF 'evil\x1b[2J/status.json' "$work/esc2.err" || fail "escapes: error line: $(cat -v "$work/esc2.err")"

# 5. A host gone in the middle of a wait: its file still says what it
# waited on; `tidemark status` does not show it as waiting (nothing waits),
# and --json keeps the file's "waiting".
sd=$work/gone_waiting
mkdir -p "$sd/w" && chmod -R go-w "$sd"
status_json w null orders |
    sed 's|"last_batch": null,|"last_batch": null, "waiting": {"on": "the sink'"'"'s commit of batch b-1", "since_ms": 1764680040000},|' \
        >"$sd/w/status.json"
"$bin" status --state-dir "$sd" >"$work/gone.out" 2>"$work/gone.err"
grep -q '^  state       STOPPED' "$work/gone.out" ||
    fail "gone while waiting: $(cat "$work/gone.out" "$work/gone.err")"
grep -q '^  waiting' "$work/gone.out" &&
    fail "gone while waiting: shown as waiting: $(cat "$work/gone.out")"
"$bin" status --state-dir "$sd" --json >"$work/gone.json" 2>&1
grep -qF "the sink's commit of batch b-1" "$work/gone.json" ||
    fail "gone while waiting, --json: $(cat "$work/gone.json")"

[ "$failed" -eq 0 ] && echo "status_cli: OK"
exit "$failed"
