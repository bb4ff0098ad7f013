#!/usr/bin/env python3
"""What the connector-wide lock of PostgreSQL's business keys held in memory
costs (docs/sinks/postgres.md, "Business keys held in memory"), measured on
the server with the sink's statements modelled, before the sink is built:

- commits: HOSTS processes, each committing BATCHES batches of BATCH rows of
  dedup_bench's shape to a partition of its own of one connector, one
  transaction a batch: the partition's marker row FOR UPDATE, the rows by
  COPY, then per VARIANT
    append      nothing more (no keys);
    nolock      one row of 24-byte key digests a batch, no connector lock
                (what a host would do if the keys needed no serialising);
    lock_first  the connector's tidemark_keysets row FOR UPDATE right after
                the marker, the key row, the generation moved (the design);
    lock_last   the same, but the connector's row locked only after the
                rows' COPY, just before the key row (the lock held for the
                transaction's tail only);
  then the marker UPDATE and COMMIT. Prints commits/s over all hosts, the
  mean and worst time a host waited in the connector row's SELECT ... FOR
  UPDATE, and how often a sampler saw a lock wait in pg_locks (every 5 ms).
- claim: KEYS keys in rows of 10 000 (240 kB each), then the time to read
  them all back in binary (what a claim reads before it fills its set).

The server must run on this machine; needs psycopg2. TIDEMARK_PG_CONNINFO
(scripts/env.sh) reaches it.

    pg_keyset_lock.py commits [--hosts 2] [--batch 1000] [--batches 200]
                              [--variants append,nolock,lock_first,lock_last]
    pg_keyset_lock.py claim [--keys 1000000] [--reps 3]
"""
import argparse
import io
import multiprocessing
import os
import statistics
import struct
import sys
import threading
import time

import psycopg2

CONNECTOR = "bench"
HEADER = b"PGCOPY\n\xff\r\n\0" + struct.pack(">ii", 0, 0)
TRAILER = struct.pack(">h", -1)


def conninfo():
    c = os.environ.get("TIDEMARK_PG_CONNINFO")
    if not c:
        sys.exit("pg_keyset_lock.py: TIDEMARK_PG_CONNINFO is not set "
                 "(source scripts/env.sh)")
    return c


def setup(cur, schema, hosts):
    cur.execute(f"""
        CREATE SCHEMA {schema}; SET search_path = {schema};
        CREATE TABLE markers (connector text, part int, next bigint,
            PRIMARY KEY (connector, part));
        CREATE TABLE rows_t (id bigint, name text, amount float8);
        CREATE TABLE keysets (connector text PRIMARY KEY, seed bytea NOT NULL,
            generation bigint NOT NULL, pruned_generation bigint NOT NULL);
        CREATE TABLE key_batches (connector text NOT NULL,
            generation bigint NOT NULL, applied_at bigint NOT NULL,
            keys bytea NOT NULL, PRIMARY KEY (connector, generation));
        ALTER TABLE key_batches ALTER keys SET STORAGE EXTERNAL;
        INSERT INTO keysets VALUES ('{CONNECTOR}', '\\x00', 0, 0);""")
    for p in range(hosts):
        cur.execute("INSERT INTO markers VALUES (%s, %s, 0)", (CONNECTOR, p))


def rows_text(lo, n):
    return io.StringIO("".join(f"{i}\tname-{i}\t{i * 0.5}\n"
                               for i in range(lo, lo + n)))


def host(schema, variant, part, batch, batches, out):
    conn = psycopg2.connect(conninfo())
    cur = conn.cursor()
    cur.execute(f"SET search_path = {schema}")
    conn.commit()
    waits = []
    keys_of = os.urandom(24 * batch)  # digests: random, incompressible
    t0 = time.monotonic()
    for i in range(batches):
        cur.execute("SELECT next FROM markers WHERE connector = %s AND "
                    "part = %s FOR UPDATE", (CONNECTOR, part))
        cur.fetchone()

        def lock():
            w = time.monotonic()
            cur.execute("SELECT generation FROM keysets WHERE connector = %s "
                        "FOR UPDATE", (CONNECTOR,))
            g = cur.fetchone()[0]
            waits.append(time.monotonic() - w)
            return g

        gen = None
        if variant == "lock_first":
            gen = lock()
        cur.copy_expert("COPY rows_t FROM STDIN",
                        rows_text(part * 10**9 + i * batch, batch))
        if variant == "lock_last":
            gen = lock()
        if variant != "append":
            if gen is None:  # nolock: a generation of its own, unlocked
                gen = part * 10**9 + i + 1
            else:
                gen += 1
            cur.execute("INSERT INTO key_batches VALUES (%s, %s, %s, %s)",
                        (CONNECTOR, gen, i, psycopg2.Binary(keys_of)))
            if variant != "nolock":
                cur.execute("UPDATE keysets SET generation = %s WHERE "
                            "connector = %s", (gen, CONNECTOR))
        cur.execute("UPDATE markers SET next = next + %s WHERE connector = %s "
                    "AND part = %s", (batch, CONNECTOR, part))
        conn.commit()
    out.put((time.monotonic() - t0, waits))
    conn.close()


def sampler(schema, stop, seen):
    conn = psycopg2.connect(conninfo())
    conn.autocommit = True
    cur = conn.cursor()
    n = w = 0
    while not stop.is_set():
        cur.execute("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a "
                    "USING (pid) WHERE NOT l.granted AND a.query LIKE "
                    "'%%keysets%%'")
        n += 1
        w += cur.fetchone()[0] > 0
        time.sleep(0.005)
    seen.extend([n, w])
    conn.close()


def commits(a):
    for v in a.variants.split(","):
        schema = f"tm_keyset_lock_{os.getpid()}"
        conn = psycopg2.connect(conninfo())
        cur = conn.cursor()
        setup(cur, schema, a.hosts)
        conn.commit()
        out = multiprocessing.Queue()
        stop, seen = threading.Event(), []
        th = threading.Thread(target=sampler, args=(schema, stop, seen))
        th.start()
        t0 = time.monotonic()
        ps = [multiprocessing.Process(target=host, args=(
            schema, v, p, a.batch, a.batches, out)) for p in range(a.hosts)]
        for p in ps:
            p.start()
        res = [out.get() for _ in ps]
        for p in ps:
            p.join()
        wall = time.monotonic() - t0
        stop.set()
        th.join()
        waits = [w for _, ws in res for w in ws]
        total = a.hosts * a.batches
        print(f"{v:10s} hosts {a.hosts} batch {a.batch}: "
              f"{total / wall:7.1f} commits/s, {total * a.batch / wall:9.0f} "
              f"rows/s; connector lock wait mean "
              f"{(statistics.mean(waits) if waits else 0) * 1000:6.2f} ms, "
              f"max {(max(waits) if waits else 0) * 1000:6.1f} ms; "
              f"pg_locks waiting in {seen[1]}/{seen[0]} samples", flush=True)
        cur.execute(f"DROP SCHEMA {schema} CASCADE")
        conn.commit()
        conn.close()


def claim(a):
    schema = f"tm_keyset_claim_{os.getpid()}"
    conn = psycopg2.connect(conninfo())
    cur = conn.cursor()
    setup(cur, schema, 1)
    per = 10000
    for g in range(0, (a.keys + per - 1) // per):
        cur.execute("INSERT INTO key_batches VALUES (%s, %s, 0, %s)",
                    (CONNECTOR, g + 1, psycopg2.Binary(os.urandom(24 * per))))
    conn.commit()
    try:
        for _ in range(a.reps):
            buf = io.BytesIO()
            t0 = time.monotonic()
            cur.copy_expert(
                f"COPY (SELECT keys FROM key_batches WHERE connector = "
                f"'{CONNECTOR}' ORDER BY generation) TO STDOUT (FORMAT binary)",
                buf)
            t = time.monotonic() - t0
            conn.commit()
            print(f"claim read of {a.keys} keys: {t:.3f} s, "
                  f"{buf.tell() / 1e6:.1f} MB", flush=True)
    finally:
        cur.execute(f"DROP SCHEMA {schema} CASCADE")
        conn.commit()
        conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    c = sub.add_parser("commits")
    c.add_argument("--hosts", type=int, default=2)
    c.add_argument("--batch", type=int, default=1000)
    c.add_argument("--batches", type=int, default=200)
    c.add_argument("--variants", default="append,nolock,lock_first,lock_last")
    k = sub.add_parser("claim")
    k.add_argument("--keys", type=int, default=1000000)
    k.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    commits(a) if a.what == "commits" else claim(a)


if __name__ == "__main__":
    main()
