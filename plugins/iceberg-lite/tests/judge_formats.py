"""Independent judge of the encoders: runs the C sample writer, then reads
its Parquet files with pyarrow and DuckDB and its Avro file with fastavro,
none of which we wrote. Values are recomputed here from the row index, the
same rule as ice_samples.c."""
import datetime
import os
import subprocess
import sys
import tempfile

import duckdb
import fastavro
import pyarrow as pa
import pyarrow.parquet as pq


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def expect_parquet(path, nrows, codec):
    pf = pq.ParquetFile(path)
    got = {pf.metadata.row_group(g).column(c).compression
           for g in range(pf.metadata.num_row_groups)
           for c in range(pf.metadata.num_columns)}
    if got != {codec}:
        fail(f"{path}: compression {sorted(got)}, want {codec}")
    schema = pf.schema_arrow
    want = {
        "id": (pa.int64(), False, 1),
        "body": (pa.string(), True, 2),
        "amount": (pa.float64(), True, 3),
        "flag": (pa.bool_(), True, 4),
        "at": (pa.timestamp("us", tz="UTC"), False, 5),
        "raw": (pa.binary(), True, 6),
    }
    if schema.names != list(want):
        fail(f"{path}: columns {schema.names}")
    for f in schema:
        typ, nullable, fid = want[f.name]
        if f.type != typ or f.nullable != nullable:
            fail(f"{path}: {f.name} is {f.type} nullable={f.nullable}")
        got = int(f.metadata[b"PARQUET:field_id"])
        if got != fid:
            fail(f"{path}: {f.name} field_id {got}, want {fid}")
    if pf.metadata.num_rows != nrows:
        fail(f"{path}: {pf.metadata.num_rows} rows")
    if pf.metadata.metadata.get(b"tidemark.sample") != b"yes":
        fail(f"{path}: key/value metadata {pf.metadata.metadata}")
    t = pq.read_table(path).to_pydict()
    base = datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=datetime.timezone.utc)
    for i in range(nrows):
        row = {k: t[k][i] for k in want}
        exp = {
            "id": i,
            "body": None if i % 7 == 0 else f"body-{i}-\u00e9",
            "amount": None if i % 5 == 0 else i * 0.5,
            "flag": None if i % 3 == 0 else bool(i % 2),
            "at": base + datetime.timedelta(microseconds=i),
            "raw": None if i % 11 == 0 else bytes([i & 0xFF, 0, (i >> 8) & 0xFF]),
        }
        if row != exp:
            fail(f"{path}: row {i}: {row} != {exp}")
    return pf


def main():
    writer = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([writer, d], check=True)
        sizes = {}
        for suffix, codec in (("", "UNCOMPRESSED"), ("-zstd", "ZSTD"),
                              ("-snappy", "SNAPPY")):
            one, groups = f"{d}/sample{suffix}.parquet", f"{d}/sample_groups{suffix}.parquet"
            pf = expect_parquet(one, 200000, codec)
            rg = pf.metadata.row_group(0)
            body = rg.column(1)
            if body.total_uncompressed_size < 2 << 20:
                fail(f"{one}: body chunk too small to need page splits")
            pg = expect_parquet(groups, 50000, codec)
            if pg.metadata.num_row_groups < 2:
                fail(f"{groups}: expected several row groups")
            con = duckdb.connect()
            n, s, nulls = con.execute(
                "select count(*), sum(id), count(*) - count(body) "
                f"from read_parquet('{one}')"
            ).fetchone()
            if (n, s, nulls) != (200000, 200000 * 199999 // 2, (199999 // 7) + 1):
                fail(f"duckdb {one}: {n} {s} {nulls}")
            n = con.execute(
                f"select count(*) from read_parquet('{groups}') "
                "where \"at\" >= TIMESTAMPTZ '2023-11-14 22:13:20+00'"
            ).fetchone()[0]
            if n != 50000:
                fail(f"duckdb timestamps {groups}: {n}")
            sizes[codec] = os.path.getsize(one)
        # Compression that compresses: these samples are repetitive.
        if not sizes["ZSTD"] < sizes["SNAPPY"] < sizes["UNCOMPRESSED"]:
            fail(f"sizes by codec: {sizes}")
        with open(f"{d}/sample.avro", "rb") as fh:
            r = fastavro.reader(fh)
            meta = r.metadata
            for k, v in {"schema-id": "0", "format-version": "2", "content": "data"}.items():
                if meta.get(k) != v:
                    fail(f"avro header {k}={meta.get(k)!r}")
            fields = r.writer_schema["fields"]
            if [f.get("field-id") for f in fields] != [1, 2, 3, 4, 5]:
                fail(f"avro field ids: {fields}")
            recs = list(r)
        if len(recs) != 5000:
            fail(f"avro: {len(recs)} records")
        for i, rec in enumerate(recs):
            exp = {"n": i * 1000003 - 5000000, "s": f"rec-{i}",
                   "o": None if i % 2 else i, "b": i % 3 == 0, "d": i / 4}
            if rec != exp:
                fail(f"avro record {i}: {rec} != {exp}")
    print("judge_formats: pyarrow, duckdb and fastavro agree: 1 passed, 0 failed")


if __name__ == "__main__":
    main()
