#!/usr/bin/env bash
# Runs one libFuzzer target of a TIDEMARK_FUZZ build on its seed corpus.
#
#   tests/fuzz/run_fuzz.sh BUILD_DIR TARGET [libFuzzer flags...]
#   e.g. tests/fuzz/run_fuzz.sh build-fuzz fuzz_parquet -runs=1000000
#
# Seeds are made fresh into BUILD_DIR/fuzz-seeds/TARGET (fuzz_seeds, plus the
# repo's config files for fuzz_config); what the run finds worth keeping
# goes to BUILD_DIR/fuzz-corpus/TARGET (kept between runs, never
# committed), crash reproducers to BUILD_DIR/fuzz-artifacts/. Exit status
# is libFuzzer's: non-zero on a finding.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_DIR TARGET [libFuzzer flags...]" >&2
  exit 2
fi
build=$1 target=$2
shift 2
repo=$(cd "$(dirname "$0")/../.." && pwd)
fuzz="$build/tests/fuzz"
seeds="$build/fuzz-seeds/$target" # per target: runs may go in parallel

rm -rf "$seeds"
mkdir -p "$seeds/config" "$build/fuzz-corpus/$target" "$build/fuzz-artifacts"
"$fuzz/fuzz_seeds" "$seeds"
cp "$repo"/configs/*.json "$repo"/tests/config-battery/*.json "$seeds/config/"

case $target in
  fuzz_parquet) seed=parquet dict= ;;
  fuzz_thrift) seed=thrift dict= ;;
  fuzz_avro) seed=avro dict= ;;
  fuzz_table_meta) seed=table_meta dict=$repo/tests/fuzz/json.dict ;;
  fuzz_config) seed=config dict=$repo/tests/fuzz/json.dict ;;
  fuzz_status) seed=status dict=$repo/tests/fuzz/json.dict ;;
  fuzz_convert)
    # Record values: the benchmark's records, one a file.
    seed=convert dict=$repo/tests/fuzz/json.dict
    mkdir -p "$seeds/convert"
    python3 "$repo/tests/bench/gen_records.py" 20 |
      awk -v d="$seeds/convert" \
        '{ f = sprintf("%s/record-%02d.json", d, NR); printf "%s", $0 > f; close(f) }'
    ;;
  *) echo "run_fuzz.sh: unknown target $target" >&2; exit 2 ;;
esac
# Leaks are findings too (ASan's leak check runs at the end of each input
# that libFuzzer suspects, and at exit).
exec "$fuzz/$target" "$build/fuzz-corpus/$target" "$seeds/$seed" \
  ${dict:+-dict=$dict} -max_len=65536 \
  -artifact_prefix="$build/fuzz-artifacts/$target-" "$@"
