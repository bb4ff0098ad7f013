#!/usr/bin/env bash
# Builds convert_bench with an earlier commit's converter as the
# "baseline" contender, timed in the same process and the same rounds as
# today's extractor (tests/bench/convert_bench.c, TM_BENCH_BASELINE).
#
#   tests/bench/convert_baseline.sh BUILD_DIR REV
#   BUILD_DIR/convert_bench_baseline records.jsonl 5
#
# REV's host/convert sources are compiled with BUILD_DIR's flags and
# linked into one object whose own symbols are renamed base_*, so both
# converters live in one binary; the config loader and the arena are
# the current ones (REV must share their structs: the config, the arena,
# tm_conv_input and tm_conv_result). BUILD_DIR is an ordinary build
# (convert_bench built in it).
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR REV" >&2
  exit 2
fi
build=$(cd "$1" && pwd) rev=$2
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=$build/convert-baseline
rm -rf "$out"
mkdir -p "$out/src" "$out/obj"
git -C "$repo" archive "$rev" host sdk | tar -x -C "$out/src"

# The flags convert_bench itself is compiled with (optimisation included).
flags=$(sed -n '/^build tests\/bench\/CMakeFiles\/convert_bench\.dir\/convert_bench\.c\.o:/,/^$/s/^ *FLAGS = //p' \
  "$build/build.ninja")
for c in "$out"/src/host/convert/*.c; do
  # shellcheck disable=SC2086
  cc $flags -D_POSIX_C_SOURCE=200809L -I"$out/src/host" \
    -I"$out/src/sdk/include" -c "$c" -o "$out/obj/$(basename "$c" .c).o"
done
ld -r -o "$out/all.o" "$out"/obj/*.o
nm --defined-only -g "$out/all.o" | awk '{ print $3 " base_" $3 }' \
  >"$out/renames"
objcopy --redefine-syms="$out/renames" "$out/all.o" "$out/convert_base.o"

libs=$(sed -n '/^build tests\/bench\/convert_bench:/,/^$/s/^ *LINK_LIBRARIES = //p' \
  "$build/build.ninja")
# shellcheck disable=SC2086
cc $flags -D_POSIX_C_SOURCE=200809L -DTM_BENCH_BASELINE \
  -I"$repo/tests/bench" -I"$repo/host" -I"$repo/sdk/include" \
  -o "$build/convert_bench_baseline" "$repo/tests/bench/convert_bench.c" \
  "$out/convert_base.o" -L"$build" $(cd "$build" && for l in $libs; do
    case $l in /*) echo "$l" ;; -*) echo "$l" ;; *) echo "$build/$l" ;; esac
  done) -lm
echo "$build/convert_bench_baseline: baseline $(git -C "$repo" rev-parse --short "$rev")"
