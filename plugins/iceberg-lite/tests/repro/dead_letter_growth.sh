#!/usr/bin/env bash
# Reproducer: a steady trickle of dead letters (one per batch).
# 1. Past keep_snapshots (default 100), every commit drops a snapshot that
#    had a dead-letter file and rewrites the whole dead-letter index (one
#    line per dead-letter file the table ever had): the index, and the
#    commit's latency, grow with the table's age. The same batches without
#    dead letters are the control.
# 2. With background maintenance on, dead_letters/ gains one file per
#    batch that nothing merges or removes, while data/ stays compacted.
# usage: dead_letter_growth.sh ICE_WRITE_ROWS TIDEMARK [BATCHES]
set -u
writer=$1 tidemark=$2 n=${3:-8000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
batches() { # COUNT DEAD(0/1): COUNT batches of 2 records (and 1 dead letter)
  python3 -c "
import json, sys
count, dead = int(sys.argv[1]), sys.argv[2] == '1'
json.dump([[{'id': 3 * b}, {'id': 3 * b + 1}] + ([{'dead': True}] if dead else [])
           for b in range(count)], sys.stdout)" "$1" "$2"
}
index_size() {
  python3 - "$1" <<'PY'
import glob, json, os, sys
t = sys.argv[1]
v = max(glob.glob(t + "/metadata/v*.metadata.json"),
        key=lambda p: int(os.path.basename(p)[1:].split(".")[0]))
idx = json.load(open(v))["properties"].get("tidemark.dead-letters-index")
p = os.path.join(t, idx) if idx else None
print("%d bytes, %d lines" % (os.path.getsize(p), sum(1 for _ in open(p)))
      if p else "none")
PY
}
p50() { sed -n "$2,$3p" "$1" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for dead in 1 0; do
  mkdir -p "$dir/l$dead"
  batches "$n" "$dead" >"$dir/l$dead.json"
  ICE_TIMES="$dir/t$dead" "$writer" "$dir/l$dead" '"fsync": false' \
    "$dir/l$dead.json" 2>/dev/null || exit 2
  echo "dead letters $dead/batch, $n commits: commit p50 $(p50 "$dir/t$dead" 200 1200) us" \
    "at commits 200-1200, $(p50 "$dir/t$dead" $((n - 1000)) "$n") us at the last 1000;" \
    "index $(index_size "$dir/l$dead/table")"
done
settings='"fsync": false, "maintenance": true, "maintenance_min_files": 4, "maintenance_grace_seconds": 0, "maintenance_min_age_seconds": 0, "maintenance_vacuum_interval_seconds": 0, "target_file_size": 65536, "keep_snapshots": 5'
mkdir -p "$dir/m"
batches 2000 1 >"$dir/m.json"
"$writer" "$dir/m" "$settings" "$dir/m.json" 2>/dev/null || exit 2
"$tidemark" table vacuum "$dir/m/table" --grace-seconds 0 >/dev/null || exit 2
echo "with maintenance, 2000 batches, then a vacuum:" \
  "data/ $(ls "$dir/m/table/data" | wc -l) files" \
  "($("$tidemark" table files "$dir/m/table" | tail -n +2 | wc -l) live)," \
  "dead_letters/ $(ls "$dir/m/table/dead_letters" | wc -l) files"
