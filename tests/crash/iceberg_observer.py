"""The crash suite's observer of iceberg-lite tables: it answers the judge's
SQL the way sqlite3 and libpq answer it for the other sinks, from the tables
themselves, read by readers that are not ours (pyiceberg for the rows, DuckDB
for the SQL).

usage: iceberg_observer.py LAKE_DIR [--catalog]
  (one table directory per target table; --catalog: each table is the row
  crash.<folder> of the Iceberg SQL catalog "crash" in LAKE_DIR/catalog.db:
  its version read from the row with sqlite3, its rows scanned from the
  table pyiceberg's SqlCatalog loads; FORGET is not supported)

Requests on stdin, one a line; answers on stdout:
  SQL <query>            -> "ROW <int>|ROW NULL" per row (first column), then
                            "OK 0", or "ERR <message>"
  TOTAL <table>          -> "ROW <n>": the current snapshot's total-records,
                            Iceberg's own count in the metadata (quick: for
                            the loops that wait for progress, never a verdict)
  FORGET <connector>...  -> deletes those connectors' markers (the boundary
                            scenario: the markers lost, the rows kept) by
                            publishing the next metadata version without
                            them; "OK <markers deleted>" or "ERR <message>"

The SQL sees, as the other sinks' tables:
  <table>                 every table directory named in the query: the
                          current snapshot's rows, scanned by pyiceberg
  tidemark_markers        connector, topic, partition, next_offset, epoch,
                          rows, dead_letters, filtered, duplicates: read from
                          the metadata as docs/iceberg-lite.md describes it
                          (summary of the current snapshot; epochs and claim
                          records in the table properties)
  tidemark_dead_letters   connector, topic, partition, offset, reason: the
                          files named by the current snapshot and its
                          ancestors, and by the dead-letter index
"""
import json
import os
import re
import sqlite3
import sys
import time

import duckdb
import pyarrow as pa
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.table import StaticTable

PREFIX = "tidemark.marker."
LAKE = sys.argv[1]
CATALOG = len(sys.argv) > 2 and sys.argv[2] == "--catalog"
_catalog = None


def catalog_version(table_dir):
    """The table's current metadata as its catalog row names it, read with
    sqlite3 (quick: the loops that wait for progress ask it often)."""
    db = os.path.join(LAKE, "catalog.db")
    if not os.path.exists(db):
        raise RuntimeError(f"{table_dir}: no catalog yet")
    # Read-write: after a SIGKILL mid-swap the first reader rolls SQLite's
    # hot journal back, which a read-only connection cannot do.
    con = sqlite3.connect(db, timeout=30)
    try:
        row = con.execute(
            "SELECT metadata_location FROM iceberg_tables WHERE catalog_name = "
            "'crash' AND table_namespace = 'crash' AND table_name = ?",
            (os.path.basename(table_dir),)).fetchone()
    except sqlite3.OperationalError as exc:  # the tables not made yet
        raise RuntimeError(f"{table_dir}: {exc}")
    finally:
        con.close()
    if row is None:
        raise RuntimeError(f"{table_dir}: not in the catalog yet")
    return row[0], row[0].removeprefix("file://")


def catalog_table(name):
    """The table as pyiceberg's SqlCatalog loads it by name."""
    global _catalog
    if _catalog is None:
        from pyiceberg.catalog.sql import SqlCatalog
        _catalog = SqlCatalog("crash", uri=f"sqlite:///{os.path.join(LAKE, 'catalog.db')}",
                              init_catalog_tables="false")
    return _catalog.load_table(("crash", name))


def latest_version(table_dir):
    """The newest metadata version: the hint, then probing past it (the hint
    is only a hint: a host killed between the link and the hint update
    leaves it stale). In a catalog: the row's metadata_location (as both
    the version and the path)."""
    if CATALOG:
        return catalog_version(table_dir)
    meta = os.path.join(table_dir, "metadata")
    try:
        with open(os.path.join(meta, "version-hint.text")) as f:
            v = int(f.read().strip() or 0)
    except (OSError, ValueError):
        v = 0
    while v > 0 and not os.path.exists(os.path.join(meta, f"v{v}.metadata.json")):
        v -= 1  # a hint ahead of the files cannot happen, but never trust it
    while os.path.exists(os.path.join(meta, f"v{v + 1}.metadata.json")):
        v += 1
    if v == 0:
        raise RuntimeError(f"{table_dir}: no metadata yet")
    return v, os.path.join(meta, f"v{v}.metadata.json")


def load_meta(table_dir):
    v, path = latest_version(table_dir)
    with open(path) as f:
        return v, path, json.load(f)


def current_snapshot(meta):
    sid = meta.get("current-snapshot-id")
    for s in meta.get("snapshots", []):
        if s["snapshot-id"] == sid:
            return s
    return None


def split_prefix(key):
    """'tidemark.marker.<connector>/<topic>/<partition>.<field>' ->
    (connector, topic, partition, field); topics cannot contain '/'."""
    rest = key[len(PREFIX):]
    conn_topic_part, _, field = rest.rpartition(".")
    # the partition is digits, so the last '.' before the field ends it
    conn, topic, part = conn_topic_part.split("/")
    return conn, topic, int(part), field


def markers_of(meta):
    """read_markers of every partition in the metadata: the current
    snapshot's summary unless a claim record of the same or a later sequence
    number holds (docs/iceberg-lite.md, 'Where the markers live')."""
    props = meta.get("properties", {})
    snap = current_snapshot(meta)
    summary = snap.get("summary", {}) if snap else {}
    snap_seq = snap.get("sequence-number", 0) if snap else 0
    found = {}
    for src in (props, summary):
        for k in src:
            if k.startswith(PREFIX):
                c, t, p, _ = split_prefix(k)
                found[(c, t, p)] = k[: len(k) - len(k.rpartition(".")[2])]
    out = []
    for (c, t, p), pre in sorted(found.items()):
        m = dict(next_offset=None, rows=0, dead_letters=0, filtered=0, duplicates=0)
        claimed = props.get(pre + "claimed")
        claim_seq = -1
        if claimed is not None:
            f = claimed.split(",")
            claim_seq = int(f[0])
            m.update(next_offset=int(f[1]), rows=int(f[2]), dead_letters=int(f[3]),
                     filtered=int(f[4]), duplicates=int(f[5]))
        if pre + "next-offset" in summary and (claimed is None or snap_seq > claim_seq):
            m.update(next_offset=int(summary[pre + "next-offset"]),
                     rows=int(summary[pre + "rows"]),
                     dead_letters=int(summary[pre + "dead-letters"]),
                     filtered=int(summary[pre + "filtered"]),
                     duplicates=int(summary[pre + "duplicates"]))
        if m["next_offset"] is None:
            continue
        epoch = props.get(pre + "epoch")
        out.append(dict(connector=c, topic=t, partition=p,
                        epoch=int(epoch) if epoch is not None else None, **m))
    return out


def dead_letter_files(table_dir, meta):
    files = []
    # The index's segments, oldest first: "PATH:BYTES" (a bare PATH is
    # the single index file of a table written before segments).
    index = meta.get("properties", {}).get("tidemark.dead-letters-index") or ""
    for item in index.split():
        path, colon, size = item.rpartition(":")
        if not (colon and size.isdigit()):
            path = item
        with open(os.path.join(table_dir, path)) as f:
            files += [line.strip() for line in f if line.strip()]
    by_id = {s["snapshot-id"]: s for s in meta.get("snapshots", [])}
    snap = current_snapshot(meta)
    chain = []
    while snap is not None:
        name = snap.get("summary", {}).get("tidemark.dead-letters-file")
        if name:
            chain.append(name)
        snap = by_id.get(snap.get("parent-snapshot-id"))
    return files + list(reversed(chain))


def table_dirs():
    if not os.path.isdir(LAKE):
        return []
    return sorted(d for d in os.listdir(LAKE) if os.path.isdir(os.path.join(LAKE, d)))


def tables_with_metadata():
    """(folder, version, metadata) of every table that has a first version
    (a table is made by its connector's first open)."""
    for name in table_dirs():
        d = os.path.join(LAKE, name)
        try:
            v, _, meta = load_meta(d)
        except RuntimeError:
            continue
        yield d, v, meta


_rows_cache = {}  # table name -> (version, rows)
_file_cache = {}  # data file path -> its rows (data files never change)


def table_rows(name):
    """The table's rows at its newest version: pyiceberg plans the scan
    (the live data files of the current snapshot) and reads each file;
    a file read once is kept, so that polling a growing table reads only
    the files new since the last look."""
    d = os.path.join(LAKE, name)
    v, path = latest_version(d)
    hit = _rows_cache.get(name)
    if hit and hit[0] == v:
        return hit[1]
    table = catalog_table(name) if CATALOG else StaticTable.from_metadata(path)
    if CATALOG:
        v = table.metadata_location  # the version scanned (the row may move)
    scan = table.scan()
    parts = []
    for task in scan.plan_files():
        key = task.file.file_path
        if key not in _file_cache:
            _file_cache[key] = ArrowScan(table.metadata, table.io, scan.projection(),
                                         AlwaysTrue()).to_table([task])
        parts.append(_file_cache[key])
    rows = (pa.concat_tables(parts) if parts
            else scan.projection().as_arrow().empty_table())
    _rows_cache[name] = (v, rows)
    return rows


def markers_table():
    rows = []
    for _, _, meta in tables_with_metadata():
        rows += markers_of(meta)
    cols = ["connector", "topic", "partition", "next_offset", "epoch", "rows",
            "dead_letters", "filtered", "duplicates"]
    types = [pa.string(), pa.string(), pa.int64(), pa.int64(), pa.int64(),
             pa.int64(), pa.int64(), pa.int64(), pa.int64()]
    return pa.table({c: pa.array([r[c] for r in rows], type=t) for c, t in zip(cols, types)})


def dead_letters_table():
    rows = []
    for d, _, meta in tables_with_metadata():
        conns = {m["connector"] for m in markers_of(meta)}
        conn = conns.pop() if len(conns) == 1 else None
        for rel in dead_letter_files(d, meta):
            with open(os.path.join(d, rel)) as f:
                for line in f:
                    if line.strip():
                        dl = json.loads(line)
                        rows.append((conn, dl["topic"], dl["partition"], dl["offset"],
                                     dl["reason"]))
    return pa.table({
        "connector": pa.array([r[0] for r in rows], type=pa.string()),
        "topic": pa.array([r[1] for r in rows], type=pa.string()),
        "partition": pa.array([r[2] for r in rows], type=pa.int64()),
        "offset": pa.array([r[3] for r in rows], type=pa.int64()),
        "reason": pa.array([r[4] for r in rows], type=pa.string()),
    })


def mentions(sql, name):
    return re.search(r"\b" + re.escape(name) + r"\b", sql) is not None


def run_sql(sql):
    con = duckdb.connect()
    try:
        if mentions(sql, "tidemark_markers"):
            con.register("tidemark_markers", markers_table())
        if mentions(sql, "tidemark_dead_letters"):
            con.register("tidemark_dead_letters", dead_letters_table())
        for name in table_dirs():
            if mentions(sql, name):
                con.register(name, table_rows(name))
        return [r[0] for r in con.execute(sql).fetchall()]
    finally:
        con.close()


def forget(connectors):
    """Publishes the next version of each table without these connectors'
    marker keys (summary and properties), as a commit does: a temp file,
    fsynced, linked to the next version name (never overwritten)."""
    if CATALOG:
        raise RuntimeError("FORGET: not supported for tables in a catalog")
    gone = 0
    for d, v, meta in tables_with_metadata():
        keys = set()
        for m in markers_of(meta):
            if m["connector"] in connectors:
                keys.add(f"{PREFIX}{m['connector']}/{m['topic']}/{m['partition']}.")
        if not keys:
            continue
        gone += len(keys)
        drop = lambda obj: {k: x for k, x in obj.items()
                            if not any(k.startswith(p) for p in keys)}
        meta["properties"] = drop(meta.get("properties", {}))
        for s in meta.get("snapshots", []):
            s["summary"] = drop(s.get("summary", {}))
        meta["last-updated-ms"] = int(time.time() * 1000)
        mdir = os.path.join(d, "metadata")
        tmp = os.path.join(mdir, f"observer-{os.getpid()}.tmp")
        with open(tmp, "w") as f:
            json.dump(meta, f)
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, os.path.join(mdir, f"v{v + 1}.metadata.json"))
        os.unlink(tmp)
        with open(os.path.join(mdir, "version-hint.text"), "w") as f:
            f.write(f"{v + 1}\n")
    return gone


def main():
    for line in sys.stdin:
        line = line.rstrip("\n")
        op, _, arg = line.partition(" ")
        try:
            if op == "SQL":
                for v in run_sql(arg):
                    print("ROW NULL" if v is None else f"ROW {int(v)}")
                print("OK 0")
            elif op == "TOTAL":
                _, _, meta = load_meta(os.path.join(LAKE, arg))
                snap = current_snapshot(meta)
                print(f"ROW {int(snap['summary'].get('total-records', 0)) if snap else 0}")
                print("OK 0")
            elif op == "FORGET":
                print(f"OK {forget(set(arg.split()))}")
            else:
                print(f"ERR unknown request {op!r}")
        except Exception as exc:  # the judge reports it; the observer goes on
            print("ERR " + " ".join(f"{type(exc).__name__}: {exc}".split()))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
