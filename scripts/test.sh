#!/usr/bin/env bash
# THE test command (README; .ci/run execs it): deps, release + ASan + TSan builds, format
# check, services, all tests but e2e in the release build, unit/conformance/abi under
# ASan+UBSan, unit under TSan, e2e under both sanitizers side by side. Non-interactive,
# fresh-clone safe.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"
export CI="${CI:-}"
exec </dev/null

T_ALL=$SECONDS
stage_start=0
stage() { stage_name="$1"; stage_start=$SECONDS; echo; echo "=== [test.sh] $1"; }
stage_end() { echo "=== [test.sh] $stage_name: ok in $((SECONDS - stage_start)) s"; }

services_started=0
cleanup() {
  rc=$?
  if [ "$services_started" = 1 ]; then
    echo "=== [test.sh] stopping services"
    bash "$ROOT/scripts/kafka.sh" stop || true
    bash "$ROOT/scripts/postgres.sh" stop || true
  fi
  if [ "$rc" -ne 0 ]; then
    echo "=== [test.sh] FAILED in stage '${stage_name:-?}' (exit $rc) after $((SECONDS - T_ALL)) s" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT

stage "install deps"
bash scripts/install-deps.sh
stage_end

stage "python venv (pyiceberg, pyarrow, DuckDB, fastavro: independent readers of our files)"
bash scripts/python-venv.sh
stage_end

GEN=()
command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)

stage "configure+build release (build/)"
cmake -S . -B build "${GEN[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j2
stage_end

stage "configure+build sanitized (build-asan/)"
cmake -S . -B build-asan "${GEN[@]}" -DCMAKE_BUILD_TYPE=Debug -DTIDEMARK_SANITIZE=ON
cmake --build build-asan -j2
stage_end

stage "configure+build thread-sanitized (build-tsan/)"
cmake -S . -B build-tsan "${GEN[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTIDEMARK_TSAN=ON
cmake --build build-tsan -j2
stage_end

stage "clang-format check"
if [ ! -f .clang-format ]; then
  echo "FAIL: .clang-format is missing at the repository root" >&2
  exit 1
fi
files="$(git ls-files '*.c' '*.h')"
if [ -n "$files" ]; then
  printf '%s\n' "$files" | xargs clang-format --dry-run --Werror
fi
stage_end

stage "fuzz smoke (tests/fuzz: each parser's libFuzzer target, 20 000 inputs under ASan+UBSan)"
# A short run on the seed corpora: a parser change that crashes on its own
# files or on a first mutation fails here. The long runs: docs/fuzzing.md.
FUZZ_TARGETS=(fuzz_parquet fuzz_thrift fuzz_avro fuzz_table_meta fuzz_config fuzz_status)
CC=clang cmake -S . -B build-fuzz "${GEN[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTIDEMARK_FUZZ=ON -DTIDEMARK_SANITIZE=ON
cmake --build build-fuzz -j2 --target "${FUZZ_TARGETS[@]}" fuzz_seeds
mkdir -p build-fuzz/fuzz-logs
for t in "${FUZZ_TARGETS[@]}"; do
  log="build-fuzz/fuzz-logs/$t.smoke.log"
  if ! bash tests/fuzz/run_fuzz.sh build-fuzz "$t" -runs=20000 -seed=1 >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "FAIL: $t: a finding (reproducer in build-fuzz/fuzz-artifacts/)" >&2
    exit 1
  fi
  echo "$t: $(grep -E '^Done ' "$log")"
done
stage_end

stage "start kafka + postgres"
services_started=1
bash scripts/kafka.sh start
bash scripts/postgres.sh start
# shellcheck source=env.sh
. scripts/env.sh
echo "TIDEMARK_KAFKA_BOOTSTRAP=$TIDEMARK_KAFKA_BOOTSTRAP"
echo "TIDEMARK_PG_CONNINFO=$TIDEMARK_PG_CONNINFO"
stage_end

stage "validate configs/ (every file, the build's plugins, the running PostgreSQL)"
ctest --test-dir build -R '^integration\.configs_validate$' --output-on-failure
stage_end

stage "Debian package (cpack .deb installed by dpkg into a clean root, run from there; man pages)"
ctest --test-dir build -L packaging --output-on-failure
stage_end

# The crash suite, benchmarks and integration tests run in the release
# build: their kills and timings want an unslowed host. The e2e scenarios
# run in the two sanitized builds instead (below).
stage "ctest build/ (all tests but e2e)"
ctest --test-dir build --output-on-failure -LE 'packaging|e2e'
stage_end

# Unit tests touch no shared state (each its own files, schemas and
# topics): two at a time. The conversion's differential test stays out of
# the ThreadSanitizer build (one thread, six minutes under it).
stage "ctest build-asan/ (unit, two at a time; then conformance|abi) and build-tsan/ (unit, two at a time)"
ctest --test-dir build-asan --output-on-failure -L unit -j2
ctest --test-dir build-asan --output-on-failure -L 'conformance|abi' -LE 'unit|e2e'
ctest --test-dir build-tsan --output-on-failure -L unit -j2 -E '^test_convert_differential$'
stage_end

# The e2e scenarios under AddressSanitizer+UBSan and under ThreadSanitizer
# (threads: a connector each, the stop watch, signals, the control and
# metrics servers, librdkafka's callbacks), side by side, two at a time
# each: a scenario mostly waits on the broker (a run of all of them at -j2
# used 0.4 of a core), its names are its run's own (tests/e2e/harness.h,
# h_name), and none restarts a shared service. One after the other they
# would take this script past its 45 minutes. Each build's output is
# printed whole when both are done.
stage "ctest e2e: build-asan/ and build-tsan/ side by side, two at a time each"
e2e_log_dir=$(mktemp -d)
ctest --test-dir build-asan --output-on-failure -L e2e -LE unit -j2 \
    > "$e2e_log_dir/asan.log" 2>&1 &
asan_pid=$!
ctest --test-dir build-tsan --output-on-failure -L e2e -LE unit -j2 \
    > "$e2e_log_dir/tsan.log" 2>&1 &
tsan_pid=$!
asan_rc=0
tsan_rc=0
wait "$asan_pid" || asan_rc=$?
wait "$tsan_pid" || tsan_rc=$?
echo "--- e2e, AddressSanitizer+UBSan (build-asan/): exit $asan_rc"
cat "$e2e_log_dir/asan.log"
echo "--- e2e, ThreadSanitizer (build-tsan/): exit $tsan_rc"
cat "$e2e_log_dir/tsan.log"
rm -rf "$e2e_log_dir"
if [ "$asan_rc" -ne 0 ] || [ "$tsan_rc" -ne 0 ]; then
    echo "=== [test.sh] e2e failed: build-asan exit $asan_rc, build-tsan exit $tsan_rc" >&2
    exit 1
fi
stage_end

stage "benchmark smoke (tests/bench/e2e_bench.sh --smoke: the script still works; numbers not judged)"
bash tests/bench/e2e_bench.sh --smoke
stage_end

stage "stop services"
services_started=0
bash scripts/kafka.sh stop
bash scripts/postgres.sh stop
stage_end

echo
echo "=== [test.sh] ALL OK in $((SECONDS - T_ALL)) s"
