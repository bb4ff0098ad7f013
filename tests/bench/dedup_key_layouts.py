#!/usr/bin/env python3
"""What a business key's layout costs SQLite, outside the sink: a model of
the sink's statements (WAL, synchronous FULL, one transaction per batch)
committing N records of the dedup bench's shape (identity "order-<n>",
three mapped columns and the hidden ones) as rows only ("append"), and as
rows plus one key each in a keys table of a given layout. Prints rows/s
and the file's pages per layout; docs/benchmarks.md (business keys).

    dedup_key_layouts.py [--rows N] [--batch N] [--reps N] [--dir DIR]
                         [--layouts append,text key,...]
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
    # the digest rowid, the batch's keys inserted in digest order
    "digest sorted": (f"CREATE TABLE k (digest INTEGER PRIMARY KEY, "
                      f"{KEY_COLS})",
                      "INSERT OR IGNORE INTO k VALUES (?,?,?,?,?,?,?,?,?)",
                      lambda i: (digest(f"order-{i}"),) + full(i)),
    # the smallest row a key can be: its identity alone
    "identity only": ("CREATE TABLE k (identity TEXT PRIMARY KEY) WITHOUT "
                      "ROWID", "INSERT OR IGNORE INTO k VALUES (?)",
                      lambda i: (f"order-{i}",)),
    # the text key with a small row: the payload hash as a 64-bit digest,
    # the first occurrence as its offset alone (no topic, times)
    "compact key": ("CREATE TABLE k (connector TEXT NOT NULL, identity TEXT "
                    "NOT NULL, hash INTEGER, first_offset INTEGER NOT NULL, "
                    "PRIMARY KEY (connector, identity)) WITHOUT ROWID",
                    "INSERT OR IGNORE INTO k VALUES (?,?,?,?)",
                    lambda i: ("bench", f"order-{i}", digest(f"{i:030x}"), i)),
    # one row a batch: its keys packed (sorted digests as one blob, the
    # identities and hashes as one text each), the set held by the sink
    "packed": ("CREATE TABLE k (connector TEXT NOT NULL, batch INTEGER NOT "
               "NULL, digests BLOB NOT NULL, identities TEXT NOT NULL, "
               "hashes TEXT NOT NULL, PRIMARY KEY (connector, batch)) "
               "WITHOUT ROWID", "INSERT INTO k VALUES (?,?,?,?,?)", None),
}


def packed(lo, hi):
    ids = sorted(range(lo, hi), key=lambda i: digest(f"order-{i}"))
    return [("bench", lo,
             b"".join(digest(f"order-{i}").to_bytes(8, "big", signed=True)
                      for i in ids),
             "\n".join(f"order-{i}" for i in ids),
             "\n".join(f"{i:030x}" for i in ids))]


def keys_of(layout, key, lo, hi):
    """The rows LAYOUT stores for the keys of records LO..HI."""
    if layout == "packed":
        return packed(lo, hi)
    if layout == "digest sorted":
        return sorted((key(i) for i in range(lo, hi)), key=lambda r: r[0])
    return [key(i) for i in range(lo, hi)]


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
            c.executemany(insert, keys_of(layout, key, b, b + batch))
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
    ap.add_argument("--layouts", default=",".join(LAYOUTS),
                    help="a subset, comma-separated (one alone to count its "
                    "system calls with strace -c)")
    a = ap.parse_args()
    layouts = a.layouts.split(",")
    for layout in layouts:
        if layout not in LAYOUTS:
            ap.error(f"no layout {layout!r} (one of {', '.join(LAYOUTS)})")
    path = os.path.join(a.dir, f"dedup-key-layouts-{os.getpid()}.db")
    print(f"# {a.rows} records, batches of {a.batch}; layouts alternated")
    for rep in range(a.reps):
        for layout in layouts:
            rate, pages = run(path, layout, a.rows, a.batch)
            print(f"{layout:14s} {rate:10.0f} rows/s {pages:6d} pages")


if __name__ == "__main__":
    main()
