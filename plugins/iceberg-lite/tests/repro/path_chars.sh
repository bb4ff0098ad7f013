#!/usr/bin/env bash
# Reproducer: a table path holding '#' or '?' is accepted by the sink, and
# pyiceberg cannot read the table it writes (the file:// URIs of the
# metadata are not percent-encoded, and pyiceberg parses every location as
# a URI: '#' starts a fragment, '?' a query). Exit 1 when reproduced.
# usage: path_chars.sh ICE_WRITE_ROWS VENV_PYTHON
set -u
writer=$1 python=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo '[[{"id":1,"body":"a"},{"id":2}],[{"id":3}]]' >"$dir/rows.json"
bad=0
for name in 'plain' 'sp ace' 'hash#1' 'q?x=1'; do
  mkdir -p "$dir/$name"
  if ! "$writer" "$dir/$name" '' "$dir/rows.json" 2>/dev/null; then
    echo "$name: refused by the sink"
    continue
  fi
  if out=$("$python" - "$dir/$name/table" 2>&1 <<'PY'
import sys
from pyiceberg.table import StaticTable
t = StaticTable.from_metadata(sys.argv[1])
print(t.scan().to_arrow().num_rows, "rows")
PY
  ); then
    echo "$name: written, pyiceberg reads $out"
  else
    echo "$name: written, pyiceberg FAILS: $(echo "$out" | tail -1)"
    bad=1
  fi
done
exit $bad
