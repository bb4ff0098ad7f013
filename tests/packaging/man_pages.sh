#!/bin/sh
# The man pages (docs/man) are well-formed and true to the binaries:
#  - man --warnings renders each without a single warning;
#  - tidemark.1 has one COMMANDS subsection (.SS) per command
#    `tidemark help` lists, no more, no fewer, and each subsection names
#    exactly the options `tidemark help COMMAND` prints;
#  - its ENVIRONMENT names every variable `tidemark help` names;
#  - tidemark-sinkcheck.1's OPTIONS are the options of its --help (and
#    --help itself);
#  - both title lines carry the version `tidemark --version` prints.
# usage: man_pages.sh TIDEMARK SINKCHECK MAN_DIR WORK_DIR
set -u
tm=$1 kit=$2 mandir=$3 work=$4
failed=0
fail() { echo "FAIL: $*"; failed=1; }
rm -rf "$work" && mkdir -p "$work" || exit 1

for page in tidemark.1 tidemark-sinkcheck.1; do
    # lintian's check: groff's warnings on stderr, the page on stdout.
    LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l \
        -Tutf8 -Z "$mandir/$page" >"$work/$page.out" 2>"$work/$page.err"
    rc=$?
    [ "$rc" -eq 0 ] || fail "$page: man exits $rc"
    [ -s "$work/$page.err" ] && fail "$page: warnings: $(cat "$work/$page.err")"
    [ -s "$work/$page.out" ] || fail "$page: renders nothing"
done

# The man source with \- as -, one line per request.
plain() { sed 's/\\-/-/g; s/\\f[BIRP]//g' "$1"; }
plain "$mandir/tidemark.1" >"$work/tidemark.src"
plain "$mandir/tidemark-sinkcheck.1" >"$work/sinkcheck.src"
# Lines of section $2 (.SH or .SS heading $3) of file $1.
section() {
    awk -v h="$2 $3" -v lvl="$2" '
        $0 == h { on = 1; next }
        on && ($1 == ".SH" || ($1 == lvl && lvl == ".SS")) { on = 0 }
        on { print }' "$1"
}
opts() { grep -oE -- '--[a-z][a-z-]*' | sort -u; }

"$tm" help >"$work/help.out" 2>&1 || fail "tidemark help: exit $?"
sed -n '/^Commands:$/,/^$/p' "$work/help.out" | awk 'NF && $1 != "Commands:" { print $1 }' |
    sort >"$work/help.cmds"
grep -E '^\.SS ' "$work/tidemark.src" | awk '{ print $2 }' | sort >"$work/man.cmds"
n=$(wc -l <"$work/help.cmds")
[ "$n" -ge 9 ] || fail "tidemark help lists $n commands: parsed wrong? ($(cat "$work/help.out"))"
diff "$work/help.cmds" "$work/man.cmds" >"$work/cmds.diff" ||
    fail "commands of tidemark help (<) and tidemark.1's COMMANDS (>) differ: $(cat "$work/cmds.diff")"

while read -r c; do
    # 'tidemark help help' is the overview (its summaries name options of
    # other commands): help has no option of its own.
    [ "$c" = help ] && continue
    "$tm" help "$c" 2>&1 | opts | grep -vx -- '--help' >"$work/help.$c" ||
        true # a command without options: an empty list
    section "$work/tidemark.src" .SS "$c" | opts | grep -vx -- '--help' >"$work/man.$c" || true
    diff "$work/help.$c" "$work/man.$c" >"$work/opts.diff" ||
        fail "options of 'tidemark help $c' (<) and tidemark.1's '$c' (>) differ: $(cat "$work/opts.diff")"
    [ -n "$(section "$work/tidemark.src" .SS "$c")" ] || fail "tidemark.1: '$c' is empty"
done <"$work/help.cmds"
[ -s "$work/help.run" ] || fail "'tidemark help run' lists no option: parsed wrong?"

grep -oE 'TIDEMARK_[A-Z_]+' "$work/help.out" | sort -u >"$work/help.env"
[ -s "$work/help.env" ] || fail "tidemark help names no environment variable: parsed wrong?"
section "$work/tidemark.src" .SH ENVIRONMENT >"$work/man.env"
while read -r v; do
    grep -qE "^\\.B $v\$" "$work/man.env" || fail "tidemark.1: ENVIRONMENT does not describe $v"
done <"$work/help.env"

"$kit" --help >"$work/kit.help" 2>&1 || fail "tidemark-sinkcheck --help: exit $?"
opts <"$work/kit.help" >"$work/kit.opts"
[ "$(wc -l <"$work/kit.opts")" -ge 5 ] || fail "tidemark-sinkcheck --help: options parsed wrong? ($(cat "$work/kit.help"))"
section "$work/sinkcheck.src" .SH OPTIONS | opts | grep -vx -- '--help' >"$work/man.kit.opts"
diff "$work/kit.opts" "$work/man.kit.opts" >"$work/kit.diff" ||
    fail "options of tidemark-sinkcheck --help (<) and tidemark-sinkcheck.1 (>) differ: $(cat "$work/kit.diff")"

version=$("$tm" --version | awk '{ print $2 }')
for page in tidemark.1 tidemark-sinkcheck.1; do
    grep -qE "^\\.TH .* \"tidemark $version\"" "$mandir/$page" ||
        fail "$page: its .TH line does not say tidemark $version"
done

[ "$failed" -eq 0 ] && echo "man_pages: all passed"
exit "$failed"
