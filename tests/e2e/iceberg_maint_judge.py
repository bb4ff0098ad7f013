"""What the metadata files of an iceberg-lite table on disk hold, read with
the JSON parser alone (tests/e2e/iceberg_maint_e2e.c): not our code.

usage: iceberg_maint_judge.py --replace-snapshots TABLE_DIR
           prints "<n> replace snapshots in <m> metadata files": the
           snapshots of operation "replace" (a compaction) that any
           metadata file under TABLE_DIR/metadata holds"""
import glob
import json
import os
import sys


def main():
    if len(sys.argv) != 3 or sys.argv[1] != "--replace-snapshots":
        print(__doc__)
        return 2
    files = glob.glob(os.path.join(sys.argv[2], "metadata", "*.metadata.json"))
    ids = set()
    for path in files:
        with open(path) as f:
            meta = json.load(f)
        for snap in meta.get("snapshots", []):
            if snap.get("summary", {}).get("operation") == "replace":
                ids.add(snap["snapshot-id"])
    print(f"{len(ids)} replace snapshots in {len(files)} metadata files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
