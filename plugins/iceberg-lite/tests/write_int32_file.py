"""Writes a Parquet data file as another engine would: the column "id"
(an int in the mapping, INT64 where the sink writes it) as INT32, and
"body" as a string, 5 rows, uncompressed, plain encoded. Used by iceberg_lite.scan_int32.

usage: write_int32_file.py OUT.parquet"""
import sys

import pyarrow as pa
import pyarrow.parquet as pq

table = pa.table({
    "id": pa.array([0, 1, 2, 3, 4], type=pa.int32()),
    "body": pa.array(["a", "b", "c", "d", "e"], type=pa.string()),
})
pq.write_table(table, sys.argv[1], compression="NONE", use_dictionary=False)
