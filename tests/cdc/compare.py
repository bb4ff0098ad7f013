#!/usr/bin/env python3
"""Row-for-row comparison of the Debezium replication test (tests/cdc/replicate.sh):
the source tables, queried in PostgreSQL, against a target, queried in its own database.

    compare.py TABLE SOURCE_CONNINFO pg TARGET_CONNINFO TARGET_SCHEMA TARGET_TABLE
    compare.py TABLE SOURCE_CONNINFO mirror TARGET_CONNINFO TARGET_SCHEMA TARGET_TABLE
    compare.py TABLE SOURCE_CONNINFO sqlite DB_FILE TARGET_TABLE
    (any of them with --schema-change last: the columns workload.py --alter-at added too)

Each side is read by a query of its own (psql, or Python's sqlite3), nothing from
tidemark's counters. Values are normalised to one form per column before they are compared:
numeric as a Decimal (the target holds Debezium's Decimal as its decimal text),
timestamptz, timestamp and date as microseconds since 1970 UTC (the target holds them as
tidemark timestamps), double precision as a float compared exactly, jsonb as the parsed
JSON document (the target holds Debezium's Json string as text). A "mirror" target has
the source's column types (the Debezium JDBC sink's, tests/bench/debezium_peer.sh) and is
read by the source's query. A column added with a DEFAULT (`tier`) holds the default in the
source's rows last written before the ALTER TABLE, which PostgreSQL fills in without
writing them, so no change event carried it: for such a row (its version at most the one
the workload wrote to `schema_change`) the target must hold null. Prints
    compare: TABLE TARGET source_rows=N target_rows=M missing=A extra=B different=C
and the first differences; exit 0 when the tables are equal, 1 otherwise.
"""
import json
import sqlite3
import subprocess
import sys
from decimal import Decimal

# column -> kind, the key first
TABLES = {
    "orders": [("id", "int"), ("customer_id", "int"), ("note", "text"),
               ("amount", "numeric"), ("placed_at", "time"), ("ship_date", "date"),
               ("paid", "bool"), ("weight", "double"), ("attrs", "jsonb"),
               ("version", "int")],
    "customers": [("id", "int"), ("name", "text"), ("balance", "numeric"),
                  ("created_local", "time"), ("birthday", "date"), ("active", "bool"),
                  ("score", "double"), ("version", "int")],
}

# --schema-change: the columns workload.py's --alter-at adds to customers; "default": text
# with a DEFAULT (above)
ADDED = {"customers": [("nickname", "text"), ("visits", "int"), ("tier", "default")]}


def ident(name):
    return '"' + name.replace('"', '""') + '"'


def source_expr(col, kind):
    c = ident(col)
    if kind == "numeric":
        return "%s::text" % c
    if kind == "time":
        return "(extract(epoch FROM %s) * 1000000)::bigint" % c
    if kind == "date":
        return "(extract(epoch FROM %s::timestamp) * 1000000)::bigint" % c
    if kind == "jsonb":
        return "%s::text" % c
    if kind == "default":
        return "CASE WHEN version > (SELECT version FROM public.schema_change) THEN %s END" % c
    return c


def target_pg_expr(col, kind):
    c = ident(col)
    if kind in ("time", "date"):  # tidemark's timestamp column: timestamptz
        return "(extract(epoch FROM %s) * 1000000)::bigint" % c
    return c  # numeric and jsonb are text columns already


def psql_rows(conninfo, exprs, relation):
    sql = ("SELECT coalesce(json_agg(json_build_array(%s)), '[]') FROM %s"
           % (", ".join(exprs), relation))
    out = subprocess.run(["psql", conninfo, "-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1",
                          "-c", sql], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def norm(kind, v):
    if v is None:
        return None
    if kind == "int":
        return int(v)
    if kind == "numeric":
        return Decimal(v)
    if kind in ("time", "date"):
        return int(v)
    if kind == "bool":
        return bool(v)
    if kind == "double":
        return float(v)
    if kind == "jsonb":
        return json.loads(v)
    return v


def keyed(rows, cols):
    out = {}
    for r in rows:
        row = tuple(norm(kind, v) for (_, kind), v in zip(cols, r))
        if row[0] in out:
            raise SystemExit("compare: key %r twice in one side" % (row[0],))
        out[row[0]] = row
    return out


def main(argv):
    added = argv[-1] == "--schema-change"
    if added:
        argv = argv[:-1]
    if len(argv) < 5 or argv[1] not in TABLES or (added and argv[1] not in ADDED):
        sys.stderr.write(__doc__)
        return 2
    table, src, kind = argv[1], argv[2], argv[3]
    cols = TABLES[table] + (ADDED[table] if added else [])
    source = keyed(psql_rows(src, [source_expr(c, k) for c, k in cols],
                             "public." + ident(table)), cols)
    if kind in ("pg", "mirror") and len(argv) == 7:
        target_name = "%s:%s.%s" % (kind, argv[5], argv[6])
        expr = target_pg_expr if kind == "pg" else source_expr
        rows = psql_rows(argv[4], [expr(c, k) for c, k in cols],
                         ident(argv[5]) + "." + ident(argv[6]))
    elif kind == "sqlite" and len(argv) == 6:
        target_name = "sqlite:" + argv[5]
        con = sqlite3.connect("file:%s?mode=ro" % argv[4], uri=True)
        try:
            rows = con.execute("SELECT %s FROM %s" % (", ".join(ident(c) for c, _ in cols),
                                                      ident(argv[5]))).fetchall()
        finally:
            con.close()
    else:
        sys.stderr.write(__doc__)
        return 2
    target = keyed(rows, cols)
    missing = sorted(k for k in source if k not in target)
    extra = sorted(k for k in target if k not in source)
    different = sorted(k for k in source if k in target and source[k] != target[k])
    print("compare: %s %s source_rows=%d target_rows=%d missing=%d extra=%d different=%d"
          % (table, target_name, len(source), len(target), len(missing), len(extra),
             len(different)))
    for k in missing[:5]:
        print("  missing in the target: %r" % (source[k],))
    for k in extra[:5]:
        print("  extra in the target: %r" % (target[k],))
    for k in different[:5]:
        diffs = ["%s: source %r, target %r" % (c, a, b)
                 for (c, _), a, b in zip(cols, source[k], target[k]) if a != b]
        print("  key %r differs: %s" % (k, "; ".join(diffs)))
    return 0 if not (missing or extra or different) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
