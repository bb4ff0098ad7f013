#!/bin/sh
# The Debian package, built by CPack from this build and installed with
# dpkg into a clean root (docs/operations.md, "Packaging and installing"):
#  - its metadata: Depends names the package of every shared library its
#    ELF files need (dpkg-shlibdeps' work) and each is satisfied on this
#    Debian; conffiles is every file it puts in /etc; postinst is there;
#  - `dpkg --root ROOT -i` into an empty root (an empty dpkg database, so
#    --force-depends; the maintainer scripts run chrootless with DPKG_ROOT,
#    as dpkg does for such roots): installed, and the postinst made the
#    tidemark system user in ROOT/etc/passwd;
#  - the systemd unit passes `systemd-analyze verify` (its man page found
#    in the root) with no warning;
#  - the installed man pages render without warnings;
#  - from the installed files only: `tidemark plugins` finds the built-in
#    plugins in ROOT, `tidemark validate`, `tidemark-sinkcheck sqlite` (by
#    name, found in ROOT) passes cases, `tidemark table` runs the table
#    tool ROOT/usr/bin/tidemark-iceberg;
#  - the unit's own ExecStart (its paths mapped into ROOT): with no config
#    it exits 2 (which the unit does not restart), with a config in
#    ROOT/etc/tidemark it runs a connector from a pkg_ topic of the
#    broker into SQLite; checked in the database against Kafka's own high
#    watermark, then `tidemark status` of the unit's state directory and
#    `tidemark verify`; then a config added to ROOT/etc/tidemark and the
#    unit's own ExecReload run its connector too (its marker at its
#    topic's high watermark), and one removed and ExecReload stop it
#    (STOPPED); then a SIGTERM exits 0;
#  - dpkg -r keeps the conffile, dpkg -P removes it, the user stays.
# usage: deb_install.sh BUILD_DIR SOURCE_DIR WORK_DIR
# Needs TIDEMARK_KAFKA_BOOTSTRAP (scripts/env.sh), kcat and sqlite3.
set -u
build=$1 src=$2 work=$3
failed=0
fail() { echo "FAIL: $*"; failed=1; }
die() { echo "FAIL: $*"; exit 1; }
step() { echo "# $*"; }

[ -n "${TIDEMARK_KAFKA_BOOTSTRAP:-}" ] || die "TIDEMARK_KAFKA_BOOTSTRAP is not set (. scripts/env.sh)"
for t in dpkg dpkg-deb dpkg-query readelf kcat sqlite3 man systemd-analyze systemd-sysusers; do
    command -v "$t" >/dev/null 2>&1 || die "$t is missing (bash scripts/install-deps.sh)"
done
rm -rf "$work" && mkdir -p "$work" || exit 1
work=$(cd "$work" && pwd -P) && src=$(cd "$src" && pwd -P) || exit 1
chmod 0755 "$work" || exit 1
unset TIDEMARK_PLUGIN_PATH TIDEMARK_STATE_DIR DESTDIR

step "cpack -G DEB"
cpack --config "$build/CPackConfig.cmake" -G DEB -B "$work/cpack" >"$work/cpack.log" 2>&1 ||
    { cat "$work/cpack.log"; die "cpack failed"; }
deb=$(find "$work/cpack" -maxdepth 1 -name 'tidemark_*.deb')
[ "$(printf '%s\n' "$deb" | grep -c .)" -eq 1 ] || die "not exactly one .deb: '$deb'"

step "metadata"
[ "$(dpkg-deb -f "$deb" Package)" = tidemark ] || fail "Package is not tidemark"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
# Each alternative list of Depends satisfied by a package installed here.
printf '%s\n' "$depends" | tr ',' '\n' | sed 's/^ *//' >"$work/depends"
while read -r dep; do
    ok=0
    for alt in $(printf '%s\n' "$dep" | sed 's/ *| */|/g; s/ (\([^ ]*\) \([^)]*\))/:\1:\2/g' | tr '|' ' '); do
        name=${alt%%:*} rest=${alt#"$name"}
        have=$(dpkg-query -W -f '${Status} ${Version}\n' "$name" 2>/dev/null |
            awk '$3 == "installed" { print $4 }' | head -1)
        [ -n "$have" ] || continue
        if [ -z "$rest" ]; then ok=1; break; fi
        op=${rest#:}; op=${op%%:*}; ver=${rest##*:}
        case $op in '>=') op=ge ;; '<=') op=le ;; '>>') op=gt ;; '<<') op=lt ;; '=') op=eq ;; esac
        dpkg --compare-versions "$have" "$op" "$ver" && { ok=1; break; }
    done
    [ "$ok" -eq 1 ] || fail "Depends '$dep' is not satisfied on this system"
done <"$work/depends"
depnames=$(sed 's/ *(.*//; s/ *|.*//' "$work/depends")

mkdir -p "$work/x" && dpkg-deb -x "$deb" "$work/x" || die "dpkg-deb -x failed"
# The package of every library an ELF file of the package needs.
nelf=0
for f in $(find "$work/x" -type f \( -perm -u+x -o -name '*.so' \)); do
    readelf -h "$f" >/dev/null 2>&1 || continue
    nelf=$((nelf + 1))
    for so in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
        path=$(ldconfig -p | awk -v so="$so" '$1 == so && /x86-64|64bit/ { print $NF; exit }')
        [ -n "$path" ] || path=$(ldconfig -p | awk -v so="$so" '$1 == so { print $NF; exit }')
        [ -n "$path" ] || { fail "${f#"$work/x"}: $so not found by ldconfig"; continue; }
        real=$(readlink -f "$path")
        pkg=""
        for p in "$path" "$real" "/usr${real#/usr}" "${real#/usr}"; do
            pkg=$(dpkg -S "$p" 2>/dev/null | head -1 | cut -d: -f1) && [ -n "$pkg" ] && break
        done
        [ -n "$pkg" ] || { fail "${f#"$work/x"}: no package owns $path"; continue; }
        printf '%s\n' "$depnames" | grep -qx "$pkg" ||
            fail "${f#"$work/x"} needs $so ($pkg), which Depends does not name"
    done
done
[ "$nelf" -ge 7 ] || fail "only $nelf ELF files in the package (tidemark, tidemark-sinkcheck, tidemark-iceberg, 4 plugins expected)"
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles 2>/dev/null | sort >"$work/conffiles"
(cd "$work/x" && find etc -type f | sed 's|^|/|' | sort) >"$work/etc-files"
[ -s "$work/etc-files" ] || fail "the package puts no file in /etc"
diff "$work/etc-files" "$work/conffiles" >"$work/conffiles.diff" ||
    fail "conffiles differ from the files in /etc (< files, > conffiles): $(cat "$work/conffiles.diff")"
dpkg-deb --ctrl-tarfile "$deb" | tar -tv ./postinst 2>/dev/null | grep -q '^-rwxr-xr-x' ||
    fail "no executable postinst"

step "dpkg --root into a clean root"
root=$work/root
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/etc" || exit 1
: >"$root/var/lib/dpkg/status" || exit 1
force=--force-depends,script-chrootless
[ "$(id -u)" -eq 0 ] || force=$force,not-root
if ! dpkg --root="$root" "$force" -i "$deb" >"$work/dpkg.log" 2>&1; then
    cat "$work/dpkg.log"
    die "dpkg -i into $root failed"
fi
dpkg --root="$root" -s tidemark 2>/dev/null | grep -qx 'Status: install ok installed' ||
    fail "dpkg --root: tidemark is not 'install ok installed': $(dpkg --root="$root" -s tidemark 2>&1 | head -3)"
dpkg --root="$root" -s tidemark | grep -q '^ /etc/default/tidemark [0-9a-f]*$' ||
    fail "dpkg did not record /etc/default/tidemark as a conffile"
grep -q '^tidemark:x:[0-9]*:[0-9]*:[^:]*:/var/lib/tidemark:' "$root/etc/passwd" 2>/dev/null ||
    fail "postinst made no tidemark user with home /var/lib/tidemark in $root/etc/passwd"
grep -q '^tidemark:' "$root/etc/group" 2>/dev/null || fail "postinst made no tidemark group"
tm=$root/usr/bin/tidemark kit=$root/usr/bin/tidemark-sinkcheck tool=$root/usr/bin/tidemark-iceberg
plugindir=$root/usr/lib/tidemark/plugins
unit=$root/lib/systemd/system/tidemark.service
for f in "$tm" "$kit" "$tool" "$unit" "$root/etc/default/tidemark" "$root/usr/lib/sysusers.d/tidemark.conf" \
    "$root/usr/share/man/man1/tidemark.1.gz" "$root/usr/share/man/man1/tidemark-sinkcheck.1.gz"; do
    [ -f "$f" ] || fail "not installed: ${f#"$root"}"
done
[ -d "$root/etc/tidemark" ] || fail "not installed: /etc/tidemark/"

step "systemd unit"
MANPATH=$root/usr/share/man systemd-analyze verify "$unit" >"$work/verify-unit.log" 2>&1 ||
    fail "systemd-analyze verify: exit $?: $(cat "$work/verify-unit.log")"
[ -s "$work/verify-unit.log" ] && fail "systemd-analyze verify warns: $(cat "$work/verify-unit.log")"
for want in 'Type=exec' 'User=tidemark' 'Group=tidemark' 'Restart=on-failure' \
    'RestartPreventExitStatus=2' 'StateDirectory=tidemark' 'WorkingDirectory=/var/lib/tidemark' \
    'EnvironmentFile=-/etc/default/tidemark' 'ExecReload=/bin/kill -HUP $MAINPID'; do
    grep -qx "$want" "$unit" || fail "the unit has no line $want"
done
for page in tidemark.1.gz tidemark-sinkcheck.1.gz; do
    LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z \
        "$root/usr/share/man/man1/$page" >/dev/null 2>"$work/man.err" || fail "man $page: exit $?"
    [ -s "$work/man.err" ] && fail "installed $page warns: $(cat "$work/man.err")"
done

step "the installed binaries"
(cd / && "$tm" plugins) >"$work/plugins.out" 2>&1 || fail "tidemark plugins: exit $? ($(cat "$work/plugins.out"))"
for name in sqlite postgres iceberg_lite example_file; do
    grep -Eq "^$name +.* ok +$plugindir/$name\\.so\$" "$work/plugins.out" ||
        fail "tidemark plugins does not list $plugindir/$name.so as ok: $(cat "$work/plugins.out")"
done
(cd / && "$kit" sqlite --config "$src/tests/conformance/sqlite.json" --seed 1 \
    --case claim --case contiguous_batch --case same_batch_again) >"$work/kit.out" 2>&1 ||
    fail "tidemark-sinkcheck sqlite: exit $?: $(cat "$work/kit.out")"
grep -qF "($plugindir/sqlite.so)" "$work/kit.out" ||
    fail "tidemark-sinkcheck did not load the installed sqlite.so: $(head -1 "$work/kit.out")"
grep -qx '3 passed, 0 failed' "$work/kit.out" || fail "tidemark-sinkcheck: $(cat "$work/kit.out")"
# `tidemark table` execs the installed tool: its refusal of a directory
# that is no table, exit 1.
mkdir -p "$work/notatable" || exit 1
(cd / && "$tm" table history "$work/notatable") >"$work/table.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] && grep -qF "tidemark table: $work/notatable/metadata: not a table" "$work/table.out" ||
    fail "tidemark table history: exit $rc: $(cat "$work/table.out")"

step "the unit's ExecStart, mapped into the root"
# /var/lib/tidemark as StateDirectory= makes it: the user's, 0700. As
# root, the service runs as a system user of its own (User=): here nobody,
# as the root's tidemark user does not exist on this machine.
state=$work/var-lib-tidemark
mkdir -m 0700 "$state" || exit 1
as_user=""
if [ "$(id -u)" -eq 0 ]; then
    as_user="setpriv --reuid=65534 --regid=65534 --clear-groups"
    chown 65534:65534 "$state" || exit 1
fi
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
for path in /usr/bin/tidemark /etc/tidemark /var/lib/tidemark; do
    case $exec_start in *"$path"*) ;; *) die "ExecStart names no $path: $exec_start" ;; esac
done
# The directory, not a glob of it: a reload reads it again.
case $exec_start in *'*'*) fail "ExecStart names a glob, not the directory: $exec_start" ;; esac
# systemd's $$ is a $ for sh; the unit's absolute paths into this root.
cmd=$(printf '%s\n' "$exec_start" | sed "s|\\\$\\\$|\$|g; s|/usr/bin/tidemark|$tm|g;
    s|/etc/tidemark|$root/etc/tidemark|g; s|/var/lib/tidemark|$state|g")
# As systemd starts it: in WorkingDirectory, with EnvironmentFile's
# variables, as its user, the command line exec'd (Type=exec: its pid is
# the service's).
run_unit() { cd "$state" && set -a && . "$root/etc/default/tidemark" && set +a && eval "exec $as_user $cmd"; }
(run_unit) >"$work/noconfig.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "ExecStart with no config in /etc/tidemark: exit $rc, expected 2: $(cat "$work/noconfig.log")"

run=$(date +%s)-$$
topic=pkg_deb_$run
n=300
i=0
while [ "$i" -lt "$n" ]; do
    printf '{"id": %d, "body": "event %d"}\n' "$i" "$i"
    i=$((i + 1))
done >"$work/records"
kcat -b "$TIDEMARK_KAFKA_BOOTSTRAP" -P -t "$topic" -p 0 -l "$work/records" >"$work/kcat.log" 2>&1 ||
    die "kcat could not produce to $topic: $(cat "$work/kcat.log")"
hw=$(kcat -b "$TIDEMARK_KAFKA_BOOTSTRAP" -Q -t "$topic:0:-1" 2>"$work/kcat.log" | awk '{ print $NF }')
[ "$hw" = "$n" ] || die "inconclusive: $topic[0] high watermark is '$hw', expected $n ($(cat "$work/kcat.log"))"

cat >"$root/etc/tidemark/pkg-deb.json" <<JSON
{
  "name": "pkg-deb-$run",
  "kafka": {"bootstrap_servers": "$TIDEMARK_KAFKA_BOOTSTRAP", "topics": ["$topic"],
            "start": "earliest"},
  "batch": {"max_records": 100, "max_wait_ms": 100},
  "sink": {"plugin": "sqlite", "settings": {"path": "pkg-deb.db", "table": "events"}},
  "mapping": {"mode": "json", "columns": [
    {"name": "id", "pointer": "/id", "type": "int", "required": true},
    {"name": "body", "pointer": "/body", "type": "text"}]}
}
JSON
(cd "$state" && "$tm" validate "$root/etc/tidemark/pkg-deb.json") >"$work/validate.out" 2>&1 ||
    fail "tidemark validate: exit $?: $(cat "$work/validate.out")"

(run_unit) >"$work/run.log" 2>&1 &
pid=$!
db=$state/pkg-deb.db
marker() {
    sqlite3 -readonly "$db" "SELECT next_offset FROM tidemark_markers
        WHERE topic = '$topic' AND partition = 0" 2>/dev/null
}
waited=0
while [ "$(marker)" != "$n" ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
        cat "$work/run.log"
        die "tidemark run exited before the marker reached $n"
    fi
    if [ "$waited" -ge 600 ]; then
        kill -TERM "$pid"
        cat "$work/run.log"
        die "the marker is '$(marker)' after 60 s, expected $n"
    fi
    sleep 0.1
    waited=$((waited + 1))
done
[ "$(readlink "/proc/$pid/exe")" = "$tm" ] ||
    fail "the service's main process is $(readlink "/proc/$pid/exe"), not $tm (sh must exec it)"
[ -z "$as_user" ] || [ "$(stat -c %u "/proc/$pid")" = 65534 ] ||
    fail "the service's process runs as uid $(stat -c %u "/proc/$pid"), not the service's user"
rows=$(sqlite3 -readonly "$db" "SELECT count(*) || ' ' || count(DISTINCT id) || ' ' || min(id) || ' ' || max(id) FROM events")
[ "$rows" = "$n $n 0 $((n - 1))" ] || fail "rows in $db: '$rows' (count, distinct ids, min, max), expected '$n $n 0 $((n - 1))'"
"$tm" status --state-dir "$state/state" >"$work/status.out" 2>&1 ||
    fail "tidemark status --state-dir /var/lib/tidemark/state while it runs: exit $?: $(cat "$work/status.out")"
grep -qx "connector pkg-deb-$run" "$work/status.out" && grep -Eq '^ +state +RUNNING ' "$work/status.out" || fail "tidemark status: not RUNNING: $(cat "$work/status.out")"
(cd "$state" && "$tm" verify "$root/etc/tidemark/pkg-deb.json") >"$work/verify.out" 2>&1 ||
    fail "tidemark verify: exit $?: $(cat "$work/verify.out")"

step "a config added to /etc/tidemark, then removed: the unit's ExecReload"
# As systemd runs it: its $MAINPID is the service's main process.
exec_reload=$(sed -n 's/^ExecReload=//p' "$unit")
reload_unit() {
    [ -n "$exec_reload" ] || { fail "the unit has no ExecReload"; return 1; }
    eval "$(printf '%s\n' "$exec_reload" | sed "s|\\\$MAINPID|$pid|g")" ||
        fail "ExecReload ($exec_reload): exit $?"
}
topic2=pkg_deb2_$run
head -n 50 "$work/records" >"$work/records2"
kcat -b "$TIDEMARK_KAFKA_BOOTSTRAP" -P -t "$topic2" -p 0 -l "$work/records2" >"$work/kcat.log" 2>&1 ||
    die "kcat could not produce to $topic2: $(cat "$work/kcat.log")"
sed "s/pkg-deb-$run/pkg-deb2-$run/; s/\"$topic\"/\"$topic2\"/; s/pkg-deb.db/pkg-deb2.db/" \
    "$root/etc/tidemark/pkg-deb.json" >"$root/etc/tidemark/pkg-deb2.json" || exit 1
reload_unit
db2=$state/pkg-deb2.db
marker2() {
    sqlite3 -readonly "$db2" "SELECT next_offset FROM tidemark_markers
        WHERE topic = '$topic2' AND partition = 0" 2>/dev/null
}
waited=0
while [ "$(marker2)" != 50 ]; do
    kill -0 "$pid" 2>/dev/null || die "tidemark run exited after the reload: $(tail -20 "$work/run.log")"
    if [ "$waited" -ge 600 ]; then
        fail "the added config's marker is '$(marker2)' 60 s after ExecReload, expected 50: $(tail -20 "$work/run.log")"
        break
    fi
    sleep 0.1
    waited=$((waited + 1))
done
rm -f "$root/etc/tidemark/pkg-deb2.json"
reload_unit
waited=0
until "$tm" status --state-dir "$state/state" "pkg-deb2-$run" 2>&1 | grep -Eq '^ +state +STOPPED'; do
    if [ "$waited" -ge 300 ]; then
        fail "the removed config's connector is not STOPPED 30 s after ExecReload: $("$tm" status --state-dir "$state/state" "pkg-deb2-$run" 2>&1)"
        break
    fi
    sleep 0.1
    waited=$((waited + 1))
done
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
[ "$rc" -eq 0 ] || fail "tidemark run after SIGTERM: exit $rc: $(tail -5 "$work/run.log")"

step "dpkg --remove, --purge"
dpkg --root="$root" "$force" -r tidemark >"$work/remove.log" 2>&1 ||
    fail "dpkg -r: $(cat "$work/remove.log")"
[ -e "$tm" ] && fail "dpkg -r left $tm"
[ -f "$root/etc/default/tidemark" ] || fail "dpkg -r removed the conffile /etc/default/tidemark"
dpkg --root="$root" "$force" -P tidemark >"$work/purge.log" 2>&1 ||
    fail "dpkg -P: $(cat "$work/purge.log")"
[ -e "$root/etc/default/tidemark" ] && fail "dpkg -P left /etc/default/tidemark"
grep -q '^tidemark:' "$root/etc/passwd" || fail "dpkg -P removed the tidemark user (docs say it stays)"

[ "$failed" -eq 0 ] && echo "deb_install: all passed"
exit "$failed"
