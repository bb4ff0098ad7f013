"""Independent judges of a whole table: ice_write_table writes one through
the plugin; pyiceberg (StaticTable, no catalog), pyarrow, DuckDB and
fastavro, none of which we wrote, must read exactly the rows the writer
was given (recomputed here from the offsets, not read back through the
plugin), our markers in the snapshot summaries, and well-formed files."""
import datetime
import glob
import json
import os
import subprocess
import sys
import tempfile

import duckdb
import fastavro
import pyarrow.parquet as pq
from pyiceberg.table import StaticTable

UTC = datetime.timezone.utc
BASE = datetime.datetime.fromtimestamp(1700000000, tz=UTC)
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


def row(p, o):
    return {
        "id": o,
        "body": None if o % 5 == 4 else f"body-{p}-{o}",
        "amount": o / 4,
        "flag": o % 2 == 1,
        "at": BASE + datetime.timedelta(microseconds=o),
        "doc": json.dumps({"o": o}, separators=(",", ":")),
        "raw": None if o % 7 == 6 else f"r{p}:{o}".encode(),
        "_tm_topic": "orders",
        "_tm_partition": p,
        "_tm_offset": o,
    }


EXPECTED = ([row(0, o) for o in range(8)] + [row(0, o) for o in range(10, 30010)]
            + [row(1, o) for o in range(41)])
KEY = lambda r: (r["_tm_partition"], r["_tm_offset"])
TYPES = [("id", "long", True), ("body", "string", False), ("amount", "double", False),
         ("flag", "boolean", False), ("at", "timestamptz", False),
         ("doc", "string", False), ("raw", "binary", False),
         ("_tm_topic", "string", True), ("_tm_partition", "long", True),
         ("_tm_offset", "long", True)]


def latest_metadata(table):
    files = glob.glob(f"{table}/metadata/v*.metadata.json")
    return max(files, key=lambda f: int(os.path.basename(f)[1:].split(".")[0]))


def judge_pyiceberg(table):
    t = StaticTable.from_metadata(latest_metadata(table))
    md = t.metadata
    check(md.format_version == 2, f"format version {md.format_version}")
    check(md.location == "file://" + os.path.realpath(table), f"location {md.location}")
    got_types = [(f.name, str(f.field_type), f.required) for f in t.schema().fields]
    check(got_types == TYPES, f"schema {got_types}")
    check([f.field_id for f in t.schema().fields] == list(range(1, 11)), "field ids")
    snaps = md.snapshots
    check(len(snaps) == 15, f"{len(snaps)} snapshots")
    check(all(0 < s.snapshot_id < 2**53 for s in snaps), "snapshot ids")
    check([s.sequence_number for s in snaps] == list(range(1, 16)), "sequence numbers")
    check(md.refs["main"].snapshot_id == md.current_snapshot_id, "refs.main")
    cur = t.current_snapshot().summary
    want = {
        "tidemark.marker.judge/orders/0.next-offset": "30010",
        "tidemark.marker.judge/orders/0.rows": "30008",
        "tidemark.marker.judge/orders/0.dead-letters": "2",
        "tidemark.marker.judge/orders/0.batch-id": "judge-15",
        "tidemark.marker.judge/orders/1.next-offset": "41",
        "tidemark.marker.judge/orders/1.rows": "41",
        "tidemark.marker.judge/orders/2.next-offset": "4",
        "tidemark.marker.judge/orders/2.rows": "0",
        "tidemark.batch-id": "judge-15",
        "total-records": str(len(EXPECTED)),
    }
    for k, v in want.items():
        check(cur.get(k) == v, f"current summary {k}={cur.get(k)!r}, want {v!r}")
    check(cur.operation.value == "append", f"operation {cur.operation}")
    # every snapshot carries every marker known at its time
    for s in snaps[1:]:
        check("tidemark.marker.judge/orders/0.next-offset" in s.summary,
              f"snapshot {s.snapshot_id} lacks partition 0's marker")
    props = md.properties
    for p in range(3):
        check(props.get(f"tidemark.marker.judge/orders/{p}.epoch") == "1",
              f"epoch of partition {p}: {props}")
    first = snaps[0].summary
    dl = first.get("tidemark.dead-letters-file")
    check(dl is not None, "first snapshot names its dead-letter file")
    if dl:
        with open(os.path.join(table, dl)) as fh:
            lines = [json.loads(x) for x in fh]
        check([(x["partition"], x["offset"], x["reason"]) for x in lines]
              == [(0, 8, "parse_error"), (0, 9, "parse_error")], f"dead letters {lines}")
    rows = sorted(t.scan().to_arrow().to_pylist(), key=KEY)
    check(len(rows) == len(EXPECTED), f"pyiceberg scan: {len(rows)} rows")
    bad = [(a, b) for a, b in zip(rows, EXPECTED) if a != b]
    check(not bad, f"pyiceberg scan differs, first: {bad[:1]}")
    # the table directory works too (through version-hint.text)
    t2 = StaticTable.from_metadata(table)
    check(t2.current_snapshot().snapshot_id == md.current_snapshot_id,
          "from the table directory")
    files = [task.file for task in t.scan().plan_files()]
    print(f"pyiceberg: {len(snaps)} snapshots, {len(rows)} rows, "
          f"{len(files)} data files")
    return files


def check_codec(p, codec):
    """Every column chunk of every row group in the file is in CODEC, as
    pyarrow reads the footer."""
    md = pq.ParquetFile(p).metadata
    got = {md.row_group(g).column(c).compression
           for g in range(md.num_row_groups) for c in range(md.num_columns)}
    check(got == {codec}, f"{p}: compression {sorted(got)}, want {codec}")


def judge_files(table, data_files, codec):
    paths = [f.file_path[len("file://"):] for f in data_files]
    check(len(paths) > 15, f"{len(paths)} data files (rolling and one per batch)")
    for f, p in zip(data_files, paths):
        check(f.file_size_in_bytes == os.path.getsize(p), f"{p}: size in manifest")
        check_codec(p, codec)
        tab = pq.read_table(p)
        check(tab.num_rows == f.record_count, f"{p}: record count")
        ids = [int(fl.metadata[b"PARQUET:field_id"]) for fl in tab.schema]
        check(ids == list(range(1, 11)), f"{p}: field ids {ids}")
    con = duckdb.connect()
    n, s = con.execute(
        "select count(*), sum(_tm_offset) from read_parquet(?)", [paths]).fetchone()
    check((n, s) == (len(EXPECTED), sum(r["_tm_offset"] for r in EXPECTED)),
          f"duckdb: {n} rows, offsets sum {s}")
    snap_lists = glob.glob(f"{table}/metadata/snap-*.avro")
    manifests = glob.glob(f"{table}/metadata/*-m0.avro")
    check(len(snap_lists) == 15, f"{len(snap_lists)} manifest lists")
    for m in manifests:
        with open(m, "rb") as fh:
            r = fastavro.reader(fh)
            for k in ("schema", "schema-id", "partition-spec", "partition-spec-id",
                      "format-version", "content"):
                check(k in r.metadata, f"{m}: header key {k}")
            check(r.metadata.get("partition-spec") == "[]", f"{m}: partition-spec")
            json.loads(r.metadata["schema"])
            top = r.writer_schema["fields"]
            check(all("field-id" in f for f in top), f"{m}: field ids")
            df = next(f for f in top if f["name"] == "data_file")
            check(all("field-id" in f for f in df["type"]["fields"]),
                  f"{m}: data_file field ids")
            for rec in r:
                check(rec["data_file"]["file_format"] == "PARQUET", f"{m}: format")
    with open(max(snap_lists, key=os.path.getmtime), "rb") as fh:
        r = fastavro.reader(fh)
        for k in ("snapshot-id", "parent-snapshot-id", "sequence-number", "format-version"):
            check(k in r.metadata, f"manifest list header key {k}")
    t = StaticTable.from_metadata(latest_metadata(table))
    with open(t.current_snapshot().manifest_list[len("file://"):], "rb") as fh:
        n = len(list(fastavro.reader(fh)))
    check(n <= 8, f"current manifest list has {n} manifests (merged past 8)")
    print(f"pyarrow: {len(paths)} files in {codec}; duckdb: {len(paths)} files; fastavro: {len(manifests)} manifests, "
          f"current list holds {n}")


def judge_maintenance(table, tidemark):
    """`tidemark table compact`, then `expire --keep 2` and `vacuum`: the
    same rows for pyiceberg, the markers intact, 2 snapshots left, the
    dead letters still listed."""
    before = StaticTable.from_metadata(latest_metadata(table)).current_snapshot().summary
    markers = {k: before[k] for k in before.additional_properties if k.startswith("tidemark.marker.")}
    check(len(markers) == 3 * 6, f"markers before: {markers}")
    run = lambda *a: subprocess.run([tidemark, "table", *a, table], check=True,
                                    capture_output=True, text=True).stdout
    run("compact", "--target-file-size", str(1 << 24))
    run("expire", "--keep", "2")
    run("vacuum", "--grace-seconds", "0")
    t = StaticTable.from_metadata(latest_metadata(table))
    snaps = t.metadata.snapshots
    check(len(snaps) == 2, f"after expire: {len(snaps)} snapshots")
    cur = t.current_snapshot()
    check(cur.summary.operation.value == "replace", f"operation {cur.summary.operation}")
    got = {k: cur.summary[k] for k in cur.summary.additional_properties
           if k.startswith("tidemark.marker.")}
    check(got == markers, f"markers changed by compact/expire: {got} != {markers}")
    check(cur.parent_snapshot_id == snaps[0].snapshot_id, "the parent is kept")
    rows = sorted(t.scan().to_arrow().to_pylist(), key=KEY)
    check(len(rows) == len(EXPECTED), f"pyiceberg scan after maintenance: {len(rows)} rows")
    bad = [(a, b) for a, b in zip(rows, EXPECTED) if a != b]
    check(not bad, f"pyiceberg scan after maintenance differs, first: {bad[:1]}")
    files = [task.file for task in t.scan().plan_files()]
    check(len(files) == 1, f"{len(files)} data files after compact")
    for f in files:
        p = f.file_path[len("file://"):]
        check(f.file_size_in_bytes == os.path.getsize(p), f"{p}: size in manifest")
        ids = [int(fl.metadata[b"PARQUET:field_id"]) for fl in pq.read_table(p).schema]
        check(ids == list(range(1, 11)), f"{p}: field ids {ids}")
        check_codec(p, "ZSTD")  # compact writes the default codec
    dls = run("dead-letters").splitlines()[1:]
    offs = sorted(int(line.split()[2]) for line in dls)
    check(offs == [8, 9], f"dead letters after expire: {dls}")
    print(f"maintenance: {len(snaps)} snapshots, {len(rows)} rows in "
          f"{len(files)} file, {len(dls)} dead letters")


def main():
    writer, tidemark = sys.argv[1], sys.argv[2]
    # The default codec (zstd), then each other setting. Compact (run on
    # every table) rewrites the files in zstd, over uncompressed and snappy
    # files alike.
    for flags, codec in (([], "ZSTD"), (["--compression", "snappy"], "SNAPPY"),
                         (["--compression", "none"], "UNCOMPRESSED")):
        with tempfile.TemporaryDirectory() as d:
            subprocess.run([writer, d, *flags], check=True)
            table = f"{d}/table"
            files = judge_pyiceberg(table)
            judge_files(table, files, codec)
            judge_maintenance(table, tidemark)
    if failures:
        print(f"judge_table: 0 passed, {len(failures)} failed")
        sys.exit(1)
    print("judge_table: pyiceberg, pyarrow, duckdb and fastavro agree: 1 passed, 0 failed")


if __name__ == "__main__":
    main()
