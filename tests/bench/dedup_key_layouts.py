#!/usr/bin/env python3
"""What a business key's layout costs SQLite, outside the sink: a model of
the sink's statements (WAL, synchronous FULL, one transaction per batch)
committing N records of the dedup bench's shape (identity "order-<n>",
three mapped columns and the hidden ones) as rows only ("append"), and as
rows plus one key each in a keys table of a given layout. Prints rows/s
and the file's pages per layout; docs/benchmarks.md (business keys).

    dedup_key_layouts.py [--rows N] [--batch N] [--reps N] [--dir DIR]
"""
import argparse
import hashlib
import os
import sqlite3
import time

ROWS = ("CREATE TABLE t (id INTEGER, name TEXT, amount REAL, _tm_topic TEXT "
        "NOT NULL, _tm_partition INTEGER NOT NULL, _tm_offset INTEGER NOT "
        "NULL, _tm_identity TEXT)")
KEY_COLS = ("connector TEXT NOT NULL, identity TEXT NOT NULL, payload_hash "
            "TEXT, first_topic TEXT NOT NULL, first_partition INTEGER NOT "
            "NULL, first_offset INTEGER NOT NULL, applied_at INTEGER NOT "
            "NULL, applied_wall INTEGER NOT NULL")


def digest(identity):
    """A 64-bit signed digest of (connector, identity)."""
    d = hashlib.blake2b(b"bench\0" + identity.encode(), digest_size=8)
    return int.from_bytes(d.digest(), "big", signed=True)


def full(i):
    return ("bench", f"order-{i}", f"{i:030x}", "bench.dedup", 0, i,
            1700000000000 + i, 1700000000000)


# name: (DDL of the keys table, its INSERT, one key's values)
LAYOUTS = {
    "append": (None, None, None),
    # the sink's table (plugins/sqlite/schema.c)
    "text key": (f"CREATE TABLE k ({KEY_COLS}, PRIMARY KEY (connector, "
                 "identity)) WITHOUT ROWID",
                 "INSERT OR IGNORE INTO k VALUES (?,?,?,?,?,?,?,?)", full),
    # a 64-bit digest as the rowid, identity kept to tell collisions apart
    "digest rowid": (f"CREATE TABLE k (digest INTEGER PRIMARY KEY, "
                     f"{KEY_COLS})",
                     "INSERT OR IGNORE INTO k VALUES (?,?,?,?,?,?,?,?,?)",
                     lambda i: (digest(f"order-{i}"),) + full(i)),
    # the digest first in a WITHOUT ROWID key
    "digest key": (f"CREATE TABLE k (digest INTEGER NOT NULL, {KEY_COLS}, "
                   "PRIMARY KEY (digest, connector, identity)) WITHOUT ROWID",
                   "INSERT OR IGNORE INTO k VALUES (?,?,?,?,?,?,?,?,?)",
                   lambda i: (digest(f"order-{i}"),) + full(i)),
    # the smallest row a key can be: its identity alone
    "identity only": ("CREATE TABLE k (identity TEXT PRIMARY KEY) WITHOUT "
                      "ROWID", "INSERT OR IGNORE INTO k VALUES (?)",
                      lambda i: (f"order-{i}",)),
}


def run(path, layout, nrows, batch):
    for suffix in ("", "-wal", "-shm"):
        try:
            os.unlink(path + suffix)
        except FileNotFoundError:
            pass
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA synchronous=FULL")
    c.execute(ROWS)
    ddl, insert, key = LAYOUTS[layout]
    if ddl:
        c.execute(ddl)
    t0 = time.perf_counter()
    for b in range(0, nrows, batch):
        c.execute("BEGIN IMMEDIATE")
        c.executemany("INSERT INTO t VALUES (?,?,?,?,?,?,?)",
                      [(i, f"customer-{i % 977}", i / 100, "bench.dedup", 0,
                        i, f"order-{i}") for i in range(b, b + batch)])
        if insert:
            c.executemany(insert, [key(i) for i in range(b, b + batch)])
        c.execute("COMMIT")
    rate = nrows / (time.perf_counter() - t0)
    pages = c.execute("PRAGMA page_count").fetchone()[0]
    c.close()
    for suffix in ("", "-wal", "-shm"):
        try:
            os.unlink(path + suffix)
        except FileNotFoundError:
            pass
    return rate, pages


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--dir", default=".")
    a = ap.parse_args()
    path = os.path.join(a.dir, f"dedup-key-layouts-{os.getpid()}.db")
    print(f"# {a.rows} records, batches of {a.batch}; layouts alternated")
    for rep in range(a.reps):
        for layout in LAYOUTS:
            rate, pages = run(path, layout, a.rows, a.batch)
            print(f"{layout:14s} {rate:10.0f} rows/s {pages:6d} pages")


if __name__ == "__main__":
    main()
