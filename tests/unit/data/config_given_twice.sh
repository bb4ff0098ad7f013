#!/bin/sh
# The same config file named twice among validate's or run's CONFIG
# arguments (a directory and a file in it, or a symlink in the directory to
# another of its files) is read once, with a note: it is not reported as
# two connectors of the same name.
# usage: config_given_twice.sh TIDEMARK_BINARY WORK_DIR
set -u
bin=$1 work=$2
failed=0
fail() { echo "FAIL: $*"; failed=1; }

rm -rf "$work" && mkdir -p "$work/dd" "$work/state" || exit 1
chmod 700 "$work/state" || exit 1
cat >"$work/dd/a.json" <<'JSON'
{
  "name": "given_twice",
  "kafka": {"bootstrap_servers": "127.0.0.1:1", "topics": ["given_twice"]},
  "sink": {"plugin": "sqlite",
           "settings": {"path": "out.db", "table": "given_twice"}},
  "mapping": {"mode": "raw"}
}
JSON

# validate NAME ARGS...: exit 0, the note, no "also defined by".
validate() {
    name=$1
    shift
    (cd "$work" && TIDEMARK_STATE_DIR="$work/state" "$bin" validate "$@") \
        >"$work/$name.out" 2>&1 </dev/null
    rc=$?
    [ "$rc" -eq 0 ] || fail "$name: validate $*: exit $rc, expected 0 (see $work/$name.out)"
    grep -q 'given twice' "$work/$name.out" ||
        fail "$name: validate $*: no note 'given twice' (see $work/$name.out)"
    if grep 'also defined by' "$work/$name.out"; then
        fail "$name: validate $*: one file reported as two connectors"
    fi
    [ "$(grep -c 'dd/a.json: OK' "$work/$name.out")" -eq 1 ] ||
        fail "$name: validate $*: dd/a.json not checked exactly once (see $work/$name.out)"
}

validate dir_and_file dd dd/a.json
validate file_twice dd/a.json ./dd/a.json
ln -s a.json "$work/dd/b.json" || exit 1
validate symlink_in_dir dd

# Two files of one name remain an error.
rm "$work/dd/b.json" && cp "$work/dd/a.json" "$work/dd/c.json" || exit 1
(cd "$work" && "$bin" validate dd) >"$work/two.out" 2>&1 </dev/null
grep -q 'dd/c.json: $.name: connector "given_twice" is also defined by dd/a.json' \
    "$work/two.out" || fail "two files of one name: not refused (see $work/two.out)"

[ "$failed" -eq 0 ] && echo "config_given_twice: OK"
exit "$failed"
