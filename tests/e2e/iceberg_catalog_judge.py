"""The independent readers of an iceberg-lite table in an Iceberg SQL catalog
(tests/e2e/iceberg_catalog_e2e.c): pyiceberg's SqlCatalog loads the table by
namespace and name from the catalog's row, and DuckDB reads the Parquet files
of that snapshot (read_parquet over pyiceberg's plan: DuckDB's iceberg
extension is downloaded at first use, which the tests do not do). Neither is
our code.

usage: iceberg_catalog_judge.py --count URI CATALOG NS.TABLE
           prints the rows both readers see (they must agree, each record
           once)
       iceberg_catalog_judge.py --watch URI CATALOG NS.TABLE N
           reads again and again until the table holds N rows (150 s at
           most): every read as --count, never fewer rows than the one
           before; prints "read <rows>" after each (the test waits for the
           first), then how many reads saw fewer than N
       iceberg_catalog_judge.py URI CATALOG NS.TABLE EXPECTED_JSON
           both must read exactly the records the test published
EXPECTED_JSON: [[partition, offset, id], ...] as the test produced them."""
import json
import sys
import time

import duckdb
from pyiceberg.catalog.sql import SqlCatalog


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def read(uri, catalog, ident):
    """(pyiceberg's rows, DuckDB's rows, the table) of the row's snapshot."""
    table = SqlCatalog(catalog, uri=uri).load_table(ident)
    scan = table.scan(selected_fields=("_tm_partition", "_tm_offset", "id"))
    arrow = scan.to_arrow()
    ours = sorted(
        zip(arrow.column("_tm_partition").to_pylist(),
            arrow.column("_tm_offset").to_pylist(),
            arrow.column("id").to_pylist()))
    files = [t.file.file_path.removeprefix("file://") for t in scan.plan_files()]
    duck = []
    if files:
        duck = sorted(
            duckdb.connect().execute(
                "SELECT _tm_partition, _tm_offset, id FROM read_parquet(?)",
                [files]).fetchall())
    if ours != duck:
        fail(f"pyiceberg read {len(ours)} rows, DuckDB {len(duck)} from the "
             f"same snapshot's {len(files)} files")
    doubled = len(ours) - len(set(ours))
    if doubled:
        fail(f"{doubled} records read twice")
    return ours, table


def watch(uri, catalog, ident, total):
    last, reads, partial, start = 0, 0, 0, time.monotonic()
    while True:
        n = len(read(uri, catalog, ident)[0])
        reads += 1
        print(f"read {n}", flush=True)
        if n < last or n > total:
            fail(f"read {reads} saw {n} rows after {last} (of {total})")
        last = n
        if n == total:
            print(f"{reads} reads, {partial} of them while rows were missing")
            return 0
        partial += 1
        if time.monotonic() - start > 150:
            fail(f"still {n} of {total} rows after 150 s")


def main():
    if sys.argv[1] == "--watch":
        return watch(*sys.argv[2:5], int(sys.argv[5]))
    if sys.argv[1] == "--count":
        rows, _ = read(*sys.argv[2:5])
        print(len(rows))
        return 0
    uri, catalog, ident, expected_path = sys.argv[1:5]
    with open(expected_path) as f:
        expected = sorted(tuple(x) for x in json.load(f))
    got, table = read(uri, catalog, ident)
    if got != expected:
        missing = sorted(set(expected) - set(got))[:5]
        extra = sorted(set(got) - set(expected))[:5]
        fail(f"the readers read {len(got)} rows, expected {len(expected)}; "
             f"missing {missing}, unexpected {extra}")
    snap = table.current_snapshot()
    keys = [k for k in snap.summary.additional_properties if k.startswith("tidemark.")]
    if not keys:
        fail("the current snapshot's summary carries no tidemark.* markers")
    print(f"pyiceberg (SqlCatalog, {ident}) and DuckDB: {len(got)} rows, "
          f"exactly the published records; {table.metadata_location.rsplit('/', 1)[1]}, "
          f"snapshot {snap.snapshot_id} with {len(keys)} tidemark.* summary keys")
    return 0


if __name__ == "__main__":
    sys.exit(main())
