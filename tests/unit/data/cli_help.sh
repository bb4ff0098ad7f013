#!/bin/sh
# Help is where the user asks for it: `tidemark help COMMAND` prints the
# command's own help (what `tidemark COMMAND --help` prints), and
# `tidemark table SUBCOMMAND --help` the table help, exit 0, on stdout.
# usage: cli_help.sh TIDEMARK_BINARY WORK_DIR
set -u
bin=$1 work=$2
failed=0
fail() { echo "FAIL: $*"; failed=1; }
rm -rf "$work" && mkdir -p "$work" || exit 1

for cmd in run plugins validate status offsets verify table; do
    "$bin" "$cmd" --help >"$work/$cmd.want" 2>&1 ||
        fail "$cmd --help: exit $?"
    head -1 "$work/$cmd.want" | grep -q "^usage: tidemark $cmd" ||
        fail "$cmd --help: no usage line: $(head -1 "$work/$cmd.want")"
    "$bin" help "$cmd" >"$work/$cmd.out" 2>"$work/$cmd.err"
    rc=$?
    [ "$rc" -eq 0 ] || fail "help $cmd: exit $rc, expected 0"
    [ -s "$work/$cmd.err" ] && fail "help $cmd: stderr: $(cat "$work/$cmd.err")"
    cmp -s "$work/$cmd.want" "$work/$cmd.out" ||
        fail "help $cmd: not $cmd's help: $(head -1 "$work/$cmd.out")"
done

"$bin" help no-such-command >"$work/unknown.out" 2>"$work/unknown.err"
rc=$?
[ "$rc" -eq 2 ] || fail "help no-such-command: exit $rc, expected 2"
grep -q "unknown command 'no-such-command'" "$work/unknown.err" ||
    fail "help no-such-command: $(cat "$work/unknown.err")"

for sub in scan history files dead-letters compact expire vacuum; do
    "$bin" table "$sub" --help >"$work/table-$sub.out" 2>"$work/table-$sub.err"
    rc=$?
    [ "$rc" -eq 0 ] || fail "table $sub --help: exit $rc, expected 0: $(cat "$work/table-$sub.err")"
    grep -q "^ *\(usage: \)\?tidemark table $sub TABLE" "$work/table-$sub.out" ||
        fail "table $sub --help: no usage of $sub on stdout"
done

# The two words of the top-level usage that are not commands: `help help`
# is the top-level help, `help version` says what version prints.
"$bin" --help >"$work/top.want" 2>&1 || fail "--help: exit $?"
"$bin" help help >"$work/help.out" 2>"$work/help.err"
rc=$?
[ "$rc" -eq 0 ] || fail "help help: exit $rc, expected 0: $(cat "$work/help.err")"
cmp -s "$work/top.want" "$work/help.out" || fail "help help: not the top-level help"
"$bin" help version >"$work/version.out" 2>"$work/version.err"
rc=$?
[ "$rc" -eq 0 ] || fail "help version: exit $rc, expected 0: $(cat "$work/version.err")"
grep -q "^usage: tidemark version" "$work/version.out" ||
    fail "help version: no usage line: $(head -1 "$work/version.out")"

[ "$failed" -eq 0 ] && echo "cli_help: all passed"
exit "$failed"
