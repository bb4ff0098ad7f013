#!/usr/bin/env bash
# Reproducer: truncate[W] of a long within W of -2^63 wraps to a large
# positive partition value (as the docs say Iceberg's Java writer does),
# and pyiceberg's row filters then prune that file: `id < 0` and
# `id == -2^63` return no row although the table holds one.
# Exit 1 when reproduced.
# usage: truncate_min_long.sh ICE_WRITE_ROWS VENV_PYTHON
set -u
writer=$1 python=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo '[[{"id":-9223372036854775808}],[{"id":5}]]' >"$dir/rows.json"
"$writer" "$dir" '"partition": "truncate[10](id)"' "$dir/rows.json" || exit 2
"$python" - "$dir/table" <<'PY'
import sys
from pyiceberg.expressions import EqualTo, LessThan
from pyiceberg.table import StaticTable
t = StaticTable.from_metadata(sys.argv[1])
print("all rows:", t.scan().to_arrow()["id"].to_pylist())
print("partition values:", [f.file.partition for f in t.scan().plan_files()])
lt = t.scan(row_filter=LessThan("id", 0)).to_arrow()["id"].to_pylist()
eq = t.scan(row_filter=EqualTo("id", -2**63)).to_arrow()["id"].to_pylist()
print("id < 0:", lt)
print("id == -2^63:", eq)
sys.exit(1 if lt != [-2**63] or eq != [-2**63] else 0)
PY
