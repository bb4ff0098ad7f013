#!/usr/bin/env bash
# Every file in configs/ passes `tidemark validate` with the plugins of the
# build, against the running services (the PostgreSQL sink's validate
# connects and checks privileges read-only; nothing is created). Each file
# alone, then all of them in one command, as `tidemark run` would load them
# together (unique names and groups, no dead-letter cycle). A file that is
# not a .json config, or an empty configs/, fails: nothing goes unchecked.
# usage: configs_validate.sh TIDEMARK_BINARY PLUGIN_DIR SOURCE_DIR WORK_DIR
# env: TIDEMARK_KAFKA_BOOTSTRAP, TIDEMARK_PG_CONNINFO (scripts/env.sh)
set -u
bin=$1 plugins=$2 src=$3 work=$4
# The commands run from the work directory: absolute paths.
bin="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")" || exit 1
plugins="$(cd "$plugins" && pwd)" || exit 1
failed=0
fail() { echo "FAIL: $*"; failed=1; }

: "${TIDEMARK_KAFKA_BOOTSTRAP:?not set: . scripts/env.sh}"
: "${TIDEMARK_PG_CONNINFO:?not set: . scripts/env.sh}"
# What the configs read from the environment and from files, relative to the
# directory they are run from (var/...): as an operator would provide them.
export KAFKA_BOOTSTRAP="$TIDEMARK_KAFKA_BOOTSTRAP"
export PG_CONNINFO="$TIDEMARK_PG_CONNINFO"
secret=cfgval-pw-5e1d0a9c
rm -rf "$work" && mkdir -p "$work/var/demo" "$work/var/lake" "$work/var/secrets" || exit 1
printf '%s\n' "$secret" >"$work/var/secrets/pg-password" || exit 1

files=()
for f in "$src"/configs/*; do
    [ -e "$f" ] || continue
    case "$f" in
    *.json) files+=("$f") ;;
    *) fail "$f: not a connector config (.json); configs/ holds configs only" ;;
    esac
done
[ "${#files[@]}" -ge 5 ] || fail "configs/: ${#files[@]} configs, expected at least 5"

for f in "${files[@]}"; do
    (cd "$work" && "$bin" validate --plugin-dir "$plugins" "$f") >"$work/one.out" 2>&1
    rc=$?
    cat "$work/one.out"
    [ "$rc" -eq 0 ] || fail "$f: exit $rc, expected 0"
    grep -qF "$f: OK (" "$work/one.out" || fail "$f: no OK line"
    ! grep -qF "$secret" "$work/one.out" || fail "$f: the secret shows in the output"
done

(cd "$work" && "$bin" validate --plugin-dir "$plugins" "${files[@]}") >"$work/all.out" 2>&1
rc=$?
[ "$rc" -eq 0 ] || { cat "$work/all.out"; fail "all configs together: exit $rc, expected 0"; }
[ "$(grep -c ': OK (' "$work/all.out")" -eq "${#files[@]}" ] ||
    fail "all configs together: $(grep -c ': OK (' "$work/all.out") OK lines of ${#files[@]}"

[ "$failed" -eq 0 ] && echo "configs_validate: all ${#files[@]} configs valid"
exit "$failed"
