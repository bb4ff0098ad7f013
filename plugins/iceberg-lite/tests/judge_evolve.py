"""Independent judges of schema evolution: ice_write_evolve writes a table
through the plugin with mapping v1 (id, body, amount, flag, at), then
reopens it with mapping v2 (doc and raw added, optional) and writes more.
pyiceberg (StaticTable), pyarrow, DuckDB and fastavro, none of which we
wrote, must see two schemas (the second current, old field ids kept, new
ones past the last), each snapshot and manifest naming the schema it was
written with, and every row as the writer gave it with null in doc and
raw for the rows written under v1 (recomputed here from the offsets). So
must `tidemark table scan`; then again after `tidemark table compact`
(old files rewritten under the current schema), `expire` and `vacuum`.
Unpartitioned, and partitioned by bucket[4](id)."""
import base64
import json
import os
import subprocess
import sys
import tempfile

import duckdb
import fastavro
import pyarrow.parquet as pq
from pyiceberg.table import StaticTable

from judge_table import KEY, latest_metadata, row

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL:", msg)


# What ice_write_evolve wrote: (partition, offset, written under v2).
V1_ROWS = [(0, o) for o in range(20)] + [(1, o) for o in range(6)]
V2_ROWS = [(0, o) for o in range(20, 30)] + [(1, o) for o in range(6, 15)]


def expected_row(p, o, v2):
    r = row(p, o)
    if not v2:
        r["doc"] = None
        r["raw"] = None
    return r


EXPECTED = sorted([expected_row(p, o, False) for p, o in V1_ROWS]
                  + [expected_row(p, o, True) for p, o in V2_ROWS], key=KEY)
V1_FIELDS = [("id", 1), ("body", 2), ("amount", 3), ("flag", 4), ("at", 5),
             ("_tm_topic", 6), ("_tm_partition", 7), ("_tm_offset", 8)]
V2_FIELDS = V1_FIELDS[:5] + [("doc", 9), ("raw", 10)] + V1_FIELDS[5:]


def judge_pyiceberg(table, operations):
    t = StaticTable.from_metadata(latest_metadata(table))
    md = t.metadata
    check(md.current_schema_id == 1, f"current schema id {md.current_schema_id}")
    check(md.last_column_id == 10, f"last-column-id {md.last_column_id}")
    by_id = {s.schema_id: s for s in md.schemas}
    check(sorted(by_id) == [0, 1], f"schema ids {sorted(by_id)}")
    got0 = [(f.name, f.field_id) for f in by_id[0].fields]
    got1 = [(f.name, f.field_id) for f in by_id[1].fields]
    check(got0 == V1_FIELDS, f"schema 0 {got0}")
    check(got1 == V2_FIELDS, f"schema 1 {got1}")
    new = {f.name: f for f in by_id[1].fields if f.field_id > 8}
    check(str(new["doc"].field_type) == "string" and not new["doc"].required,
          f"doc {new['doc']}")
    check(str(new["raw"].field_type) == "binary" and not new["raw"].required,
          f"raw {new['raw']}")
    check([f.name for f in t.schema().fields] == [n for n, _ in V2_FIELDS],
          "the table's schema is schema 1")
    snaps = md.snapshots
    got_ops = [(s.summary.operation.value, s.schema_id) for s in snaps]
    check(got_ops == operations, f"snapshots (operation, schema id) {got_ops}")
    spec = md.spec()
    for f in spec.fields:
        check(t.schema().find_field(f.source_id).name == "id",
              f"partition field {f.name}: source id {f.source_id}")
    rows = sorted(t.scan().to_arrow().to_pylist(), key=KEY)
    check(len(rows) == len(EXPECTED), f"pyiceberg scan: {len(rows)} rows")
    bad = [(a, b) for a, b in zip(rows, EXPECTED) if a != b]
    check(not bad, f"pyiceberg scan differs, first: {bad[:1]}")
    files = [task.file for task in t.scan().plan_files()]
    print(f"pyiceberg: schemas {sorted(by_id)}, {len(snaps)} snapshots, "
          f"{len(rows)} rows, {len(files)} data files")
    return t, files


def judge_files(data_files, compacted):
    """pyarrow: each file's field ids (v1 files lack 9 and 10 unless
    compacted); DuckDB over all of them, columns matched by name."""
    paths = [f.file_path[len("file://"):] for f in data_files]
    kinds, mixed = set(), 0
    for p in paths:
        tab = pq.read_table(p)
        ids = [int(fl.metadata[b"PARQUET:field_id"]) for fl in tab.schema]
        kinds.add(tuple(ids))
        offs = set(zip(tab.column("_tm_partition").to_pylist(),
                       tab.column("_tm_offset").to_pylist()))
        if 9 not in ids:
            check(offs <= set(V1_ROWS), f"{p}: a v1 file with v2 rows")
        elif offs & set(V1_ROWS):
            mixed += 1  # old rows rewritten under schema 1 (compact)
    v1, v2 = (tuple(i for _, i in F) for F in (V1_FIELDS, V2_FIELDS))
    # compact leaves a partition's only file as it is (partitioned)
    want = {v2} if compacted == "all" else {v1, v2}
    check(kinds == want or (compacted == "some" and kinds <= want),
          f"field ids of the data files {kinds}")
    check(bool(mixed) == bool(compacted), f"{mixed} files mix v1 and v2 rows")
    con = duckdb.connect()
    n, doc_null, raw_null, s = con.execute(
        "select count(*), count(*) filter (where doc is null), "
        "count(*) filter (where raw is null), sum(_tm_offset) "
        "from read_parquet(?, union_by_name=true)", [paths]).fetchone()
    want = (len(EXPECTED), sum(r["doc"] is None for r in EXPECTED),
            sum(r["raw"] is None for r in EXPECTED),
            sum(r["_tm_offset"] for r in EXPECTED))
    check((n, doc_null, raw_null, s) == want,
          f"duckdb: {(n, doc_null, raw_null, s)}, want {want}")
    print(f"pyarrow: {len(paths)} files, field ids {sorted(kinds)}; duckdb: "
          f"{n} rows, {doc_null} null doc")


def judge_manifests(t):
    """fastavro: each manifest's header names the schema its files were
    written with; its schema text is that schema."""
    seen = []
    for m in t.current_snapshot().manifests(t.io):
        path = m.manifest_path[len("file://"):]
        with open(path, "rb") as fh:
            meta = fastavro.reader(fh).metadata
        sid = int(meta["schema-id"])
        schema = json.loads(meta["schema"])
        check(schema["schema-id"] == sid, f"{path}: schema text vs schema-id")
        fields = [(f["name"], f["id"]) for f in schema["fields"]]
        check(fields == (V2_FIELDS if sid == 1 else V1_FIELDS),
              f"{path}: schema {sid} fields {fields}")
        seen.append(sid)
    print(f"fastavro: manifests' schema ids {sorted(seen)}")
    return sorted(seen)


def judge_cli(table, tidemark):
    out = subprocess.run([tidemark, "table", "scan", table, "--json"],
                         check=True, capture_output=True, text=True).stdout
    rows = sorted((json.loads(x) for x in out.splitlines()), key=KEY)
    check(len(rows) == len(EXPECTED), f"table scan: {len(rows)} rows")
    for got, want in zip(rows, EXPECTED):
        raw = base64.b64encode(want["raw"]).decode() if want["raw"] else None
        if (got.get("id"), got.get("doc", "absent"), got.get("raw", "absent"),
                got.get("body")) != (want["id"], want["doc"], raw, want["body"]):
            check(False, f"table scan row {got}, want {want}")
            break
    print(f"table scan: {len(rows)} rows")


def judge(writer, tidemark, flags):
    compacted = "some" if flags else "all"
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([writer, d, *flags], check=True)
        table = os.path.join(d, "table")
        ops = [("append", 0), ("append", 0), ("append", 1), ("append", 1)]
        t, files = judge_pyiceberg(table, ops)
        judge_files(files, None)
        check(judge_manifests(t) == [0, 0, 1, 1], "manifest schema ids")
        judge_cli(table, tidemark)
        run = lambda *a: subprocess.run([tidemark, "table", *a], check=True,
                                        capture_output=True)
        run("compact", table)
        ops.append(("replace", 1))
        t, files = judge_pyiceberg(table, ops)
        judge_files(files, compacted)
        check(1 in judge_manifests(t), "compact's manifest under schema 1")
        judge_cli(table, tidemark)
        run("expire", table, "--keep", "2")
        run("vacuum", table, "--grace-seconds", "0")
        t, files = judge_pyiceberg(table, ops[-2:])
        judge_files(files, compacted)
        judge_cli(table, tidemark)


def make_foreign(table):
    """What another engine would have written: the table's id an Iceberg
    int and amount a float, its files' id INT32 and amount FLOAT (each
    data file rewritten by pyarrow, field ids kept; a new metadata
    version with schema 0's types narrowed)."""
    import pyarrow as pa
    t = StaticTable.from_metadata(latest_metadata(table))
    for task in t.scan().plan_files():
        path = task.file.file_path[len("file://"):]
        tab = pq.read_table(path)
        fields = [f.with_type(pa.int32()) if f.name == "id" else
                  f.with_type(pa.float32()) if f.name == "amount" else f
                  for f in tab.schema]
        # plain pages, as the plugin reads them: only the types differ
        pq.write_table(tab.cast(pa.schema(fields)), path, compression="NONE",
                       use_dictionary=False)
        kinds = {f.name: str(f.physical_type)
                 for f in pq.ParquetFile(path).schema}
        check((kinds["id"], kinds["amount"]) == ("INT32", "FLOAT"),
              f"{path}: not rewritten narrow: {kinds}")
    newest = latest_metadata(table)
    n = int(os.path.basename(newest)[1:].split(".")[0])
    with open(newest) as fh:
        md = json.load(fh)
    for f in md["schemas"][0]["fields"]:
        f["type"] = {"id": "int", "amount": "float"}.get(f["name"], f["type"])
    with open(f"{table}/metadata/v{n + 1}.metadata.json", "x") as fh:
        json.dump(md, fh)
    with open(f"{table}/metadata/version-hint.text", "w") as fh:
        fh.write(str(n + 1))


def judge_widen(writer, tidemark):
    """Iceberg int to long and float to double: a table another engine
    made with int and float columns, then written by the sink with the
    mapping's int and float."""
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([writer, d, "--v1-only"], check=True)
        table = os.path.join(d, "table")
        make_foreign(table)
        subprocess.run([writer, d, "--resume-v1"], check=True)
        t = StaticTable.from_metadata(latest_metadata(table))
        md = t.metadata
        by_id = {s.schema_id: s for s in md.schemas}
        types = {i: {f.name: (f.field_id, str(f.field_type))
                     for f in by_id[i].fields if f.name in ("id", "amount")}
                 for i in by_id}
        check(md.current_schema_id == 1 and md.last_column_id == 8,
              f"current schema {md.current_schema_id}, last-column-id "
              f"{md.last_column_id}")
        check(types == {0: {"id": (1, "int"), "amount": (3, "float")},
                        1: {"id": (1, "long"), "amount": (3, "double")}},
              f"widened types {types}")
        cols = ["id", "body", "amount", "flag", "at", "_tm_topic",
                "_tm_partition", "_tm_offset"]
        want = sorted([{k: row(p, o)[k] for k in cols}
                       for p, o in V1_ROWS + V2_ROWS], key=KEY)
        rows = sorted(t.scan().to_arrow().to_pylist(), key=KEY)
        bad = [(a, b) for a, b in zip(rows, want) if a != b]
        check(len(rows) == len(want) and not bad,
              f"pyiceberg widened scan: {len(rows)} rows, first diff {bad[:1]}")
        arrow = t.scan().to_arrow().schema
        check((str(arrow.field("id").type), str(arrow.field("amount").type))
              == ("int64", "double"), f"pyiceberg types {arrow}")
        paths = [x.file.file_path[len("file://"):] for x in t.scan().plan_files()]
        phys = sorted({str(pq.ParquetFile(p).schema.column(0).physical_type)
                       for p in paths})
        check(phys == ["INT32", "INT64"], f"id physical types {phys}")
        con = duckdb.connect()
        got = con.execute(
            "select typeof(any_value(id)), typeof(any_value(amount)), count(*), "
            "sum(id), sum(amount) from read_parquet(?, union_by_name=true)",
            [paths]).fetchone()
        check(got == ("BIGINT", "DOUBLE", len(want), sum(r["id"] for r in want),
                      sum(r["amount"] for r in want)), f"duckdb widened {got}")
        # the plugin's own reader reads only the types it writes: refused
        cli = subprocess.run([tidemark, "table", "scan", table], text=True,
                             capture_output=True)
        check(cli.returncode == 1 and "column id (field id 1) is not of the "
              "physical type" in cli.stderr, f"table scan: {cli.stderr}")
        before = md.current_snapshot_id
        cli = subprocess.run([tidemark, "table", "compact", table], text=True,
                             capture_output=True)
        check(cli.returncode == 1 and "column id (field id 1) is not of the "
              "physical type" in cli.stderr, f"compact: {cli.stderr}")
        after = StaticTable.from_metadata(latest_metadata(table))
        check(after.metadata.current_snapshot_id == before,
              "a refused compact changed the table")
        print(f"widen: pyiceberg {len(rows)} rows (int64, double), id files "
              f"{phys}, duckdb {got[:3]}")


def main():
    writer, tidemark = sys.argv[1], sys.argv[2]
    for flags in ([], ["--partition", "bucket[4](id)"]):
        print(f"-- ice_write_evolve {' '.join(flags)}")
        judge(writer, tidemark, flags)
    print("-- int and float widened")
    judge_widen(writer, tidemark)
    if failures:
        print(f"judge_evolve: {len(failures)} failed")
        sys.exit(1)
    print("judge_evolve: pyiceberg, pyarrow, duckdb and fastavro agree: 1 passed, 0 failed")


if __name__ == "__main__":
    main()
