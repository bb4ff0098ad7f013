#!/usr/bin/env python3
"""Candidate shapes of PostgreSQL's business-keys table, measured against
append's COPY of the same batch: the server backend's CPU (the first field
of /proc/<pid>/schedstat, nanoseconds on a CPU: a loaded machine disturbs
it far less than wall time) and the WAL bytes of storing BATCH new keys of
dedup_bench's shape (identities "order-<n>", a 30-character payload hash,
one topic and partition) into a table already holding PREFILL keys, one
transaction a batch, committed. Shapes run in turn, batch after batch, each
in a table of its own in a schema of its own (dropped at the end), so that
a spell of load or a checkpoint falls on all of them.

The server must run on this machine, its /proc readable by this user;
needs psycopg2. TIDEMARK_PG_CONNINFO (scripts/env.sh) reaches it.

    pg_key_shapes.py [--batch 10000] [--prefill 100000] [--runs 7]
                     [--shapes rows,text_pk,...]
"""
import argparse
import hashlib
import io
import os
import statistics
import struct
import sys

import psycopg2

CONNECTOR = "bench"
TOPIC = "dedup-bench"


def identity(n):
    return f"order-{n}"


def payload_hash(n):
    return f"{(n * 2654435761) & (2**64 - 1):016x}{n % 10**14:014x}"[:30]


def digest64(n):
    """64 bits of a hash of (connector, identity), signed for int8."""
    d = hashlib.blake2b(f"{CONNECTOR}\0{identity(n)}".encode(),
                        digest_size=8).digest()
    return struct.unpack(">q", d)[0]


def digest128(n):
    return hashlib.blake2b(f"{CONNECTOR}\0{identity(n)}".encode(),
                           digest_size=16).digest()


# ---- COPY's binary format ---------------------------------------------------

HEADER = b"PGCOPY\n\xff\r\n\0" + struct.pack(">ii", 0, 0)
TRAILER = struct.pack(">h", -1)


def b_text(s):
    e = s.encode()
    return struct.pack(">i", len(e)) + e


def b_bytes(e):
    return struct.pack(">i", len(e)) + e


def b_int4(v):
    return struct.pack(">ii", 4, v)


def b_int8(v):
    return struct.pack(">iq", 8, v)


def key_fields(n):
    """The sink's eight key columns' values, binary."""
    return [b_text(CONNECTOR), b_text(identity(n)), b_text(payload_hash(n)),
            b_text(TOPIC), b_int4(0), b_int8(n), b_int8(1700000000000 + n),
            b_int8(1700000000000)]


def bincopy(rows):
    out = [HEADER]
    for fields in rows:
        out.append(struct.pack(">h", len(fields)))
        out.extend(fields)
    out.append(TRAILER)
    return io.BytesIO(b"".join(out))


KEY_COLS = ("connector text NOT NULL, identity text NOT NULL, payload_hash "
            "text, first_topic text NOT NULL, first_partition integer NOT "
            "NULL, first_offset bigint NOT NULL, applied_at bigint NOT NULL, "
            "applied_wall bigint NOT NULL")
KEY_NAMES = ("connector, identity, payload_hash, first_topic, "
             "first_partition, first_offset, applied_at, applied_wall")


# ---- shapes: DDL, and the statements storing keys LO..HI ---------------------
# Each: (create, store(cur, lo, hi)). Tables are named after the shape.


def rows_store(cur, t, lo, hi):
    """append's COPY (text format) of the same records as data rows."""
    buf = io.StringIO()
    for n in range(lo, hi):
        buf.write(f"{n}\tname-{n}\t{n * 0.5}\t{TOPIC}\t0\t{n}\t"
                  f"{identity(n)}\n")
    buf.seek(0)
    cur.copy_expert(f"COPY {t} (id, name, amount, _tm_topic, _tm_partition, "
                    "_tm_offset, _tm_identity) FROM STDIN", buf)


def text_store(cur, t, lo, hi):
    """this build with nothing resent: one binary COPY of the keys."""
    cur.copy_expert(f"COPY {t} ({KEY_NAMES}) FROM STDIN (FORMAT binary)",
                    bincopy(key_fields(n) for n in range(lo, hi)))


def probe_then_copy(cur, t, lo, hi):
    """this build after a resent batch: the probe, then the COPY (the
    identities as a text literal here: the sink sends them binary)."""
    ids = "{" + ",".join(identity(n) for n in range(lo, hi)) + "}"
    cur.execute(f"EXECUTE {t}_probe (%s, %s)", (CONNECTOR, ids))
    cur.fetchall()
    text_store(cur, t, lo, hi)


def digest_store(sort):
    def store(cur, t, lo, hi):
        ns = sorted(range(lo, hi), key=digest64) if sort else range(lo, hi)
        cur.copy_expert(
            f"COPY {t} (digest, {KEY_NAMES}) FROM STDIN (FORMAT binary)",
            bincopy([b_int8(digest64(n))] + key_fields(n) for n in ns))
    return store


def digest16_store(cur, t, lo, hi):
    cur.copy_expert(
        f"COPY {t} (digest, {KEY_NAMES}) FROM STDIN (FORMAT binary)",
        bincopy([b_bytes(digest128(n))] + key_fields(n)
                for n in range(lo, hi)))


def stage_merge(conflict):
    """COPY into a session's temporary stage, then one INSERT ... SELECT
    of the keys not stored (the identity compared after the digest)."""
    def store(cur, t, lo, hi):
        cur.copy_expert(
            f"COPY {t}_stage (digest, {KEY_NAMES}) FROM STDIN "
            "(FORMAT binary)",
            bincopy([b_int8(digest64(n))] + key_fields(n)
                    for n in sorted(range(lo, hi), key=digest64)))
        cur.execute(f"EXECUTE {t}_merge")
        cur.fetchall()
    return store


def packed_store(cur, t, lo, hi):
    """one row a batch: its keys' digests, sorted, as one bytea, and the
    identities and hashes as one text each (the sink would hold the set)."""
    ns = sorted(range(lo, hi), key=digest64)
    cur.copy_expert(
        f"COPY {t} (connector, batch, digests, identities, hashes) FROM STDIN "
        "(FORMAT binary)",
        bincopy([[b_text(CONNECTOR), b_int8(lo),
                  b_bytes(b"".join(struct.pack(">q", digest64(n))
                                   for n in ns)),
                  b_text("\n".join(identity(n) for n in ns)),
                  b_text("\n".join(payload_hash(n) for n in ns))]]))


def packed_min_store(cur, t, lo, hi):
    """one row a batch of 16 bytes a key: the sorted digests of the keys
    and of their payload hashes, uncompressed (STORAGE EXTERNAL)."""
    ns = sorted(range(lo, hi), key=digest64)
    cur.copy_expert(
        f"COPY {t} (connector, batch, digests) FROM STDIN (FORMAT binary)",
        bincopy([[b_text(CONNECTOR), b_int8(lo),
                  b_bytes(b"".join(struct.pack(">qq", digest64(n), n)
                                   for n in ns))]]))


def keyset24_store(cur, t, lo, hi):
    """the keys held in memory (docs/sinks/postgres.md): the connector's
    tidemark_keysets row locked FOR UPDATE, the batch's new keys as one row
    of 24 bytes a key (128-bit identity digest, 64-bit payload digest, in
    batch order: STORAGE EXTERNAL, they do not compress), the generation
    moved in the connector's row."""
    cur.execute(f"SELECT generation FROM {t}_sets WHERE connector = %s "
                "FOR UPDATE", (CONNECTOR,))
    row = cur.fetchone()
    gen = row[0] + 1 if row else 1
    if not row:
        cur.execute(f"INSERT INTO {t}_sets VALUES (%s, %s, 0, 0)",
                    (CONNECTOR, psycopg2.Binary(bytes(16))))
    cur.copy_expert(
        f"COPY {t} (connector, generation, applied_at, keys) FROM STDIN "
        "(FORMAT binary)",
        bincopy([[b_text(CONNECTOR), b_int8(gen), b_int8(lo),
                  b_bytes(b"".join(digest128(n) + struct.pack(
                      ">q", n * 2654435761 & (2**63 - 1))
                      for n in range(lo, hi)))]]))
    cur.execute(f"UPDATE {t}_sets SET generation = %s WHERE connector = %s",
                (gen, CONNECTOR))


def compact_store(digest):
    """a small key row: the identity (after its digest, if DIGEST), the
    payload hash as a 64-bit digest, the first occurrence's offset."""
    def store(cur, t, lo, hi):
        ns = sorted(range(lo, hi), key=digest64) if digest else range(lo, hi)
        cols = "digest, " if digest else ""
        cur.copy_expert(
            f"COPY {t} ({cols}connector, identity, hash, first_offset) FROM "
            "STDIN (FORMAT binary)",
            bincopy(([b_int8(digest64(n))] if digest else [])
                    + [b_text(CONNECTOR), b_text(identity(n)),
                       b_int8(n * 2654435761), b_int8(n)] for n in ns))
    return store


COMPACT_COLS = ("connector text NOT NULL, identity text NOT NULL, hash "
                "bigint, first_offset bigint NOT NULL")


def digest_probe_then_copy(cur, t, lo, hi):
    """the digest key after a resent batch: a probe by digest (the
    identity compared after a match), then the COPY."""
    ds = "{" + ",".join(str(digest64(n)) for n in range(lo, hi)) + "}"
    cur.execute(f"EXECUTE {t}_probe (%s)", (ds,))
    cur.fetchall()
    digest_store(True)(cur, t, lo, hi)


DIGEST_TABLE = f"(digest bigint NOT NULL, {KEY_COLS}"

SHAPES = {
    "rows": (
        "CREATE TABLE {t} (id bigint, name text, amount double precision, "
        "_tm_topic text NOT NULL, _tm_partition integer NOT NULL, "
        "_tm_offset bigint NOT NULL, _tm_identity text)", rows_store),
    "heap_only": (f"CREATE TABLE {{t}} ({KEY_COLS})", text_store),
    "text_pk": (f"CREATE TABLE {{t}} ({KEY_COLS}, PRIMARY KEY "
                "(connector, identity))", text_store),
    "text_pk_probe": (
        f"CREATE TABLE {{t}} ({KEY_COLS}, PRIMARY KEY (connector, identity));"
        " PREPARE {t}_probe (text, text[]) AS SELECT u.ord, k.payload_hash, "
        "k.first_topic, k.first_partition, k.first_offset FROM "
        "unnest($2) WITH ORDINALITY AS u(identity, ord) CROSS JOIN LATERAL "
        "(SELECT payload_hash, first_topic, first_partition, first_offset "
        "FROM {t} WHERE connector = $1 AND identity = u.identity LIMIT 1) k",
        probe_then_copy),
    "text_pk_c": (f"CREATE TABLE {{t}} ({KEY_COLS}); CREATE UNIQUE INDEX ON "
                  "{t} (connector COLLATE \"C\", identity COLLATE \"C\")",
                  text_store),
    "int8_pk": (f"CREATE TABLE {{t}} {DIGEST_TABLE}, PRIMARY KEY (digest))",
                digest_store(False)),
    "int8_pk_sorted": (
        f"CREATE TABLE {{t}} {DIGEST_TABLE}, PRIMARY KEY (digest))",
        digest_store(True)),
    "int8_pk_probe": (
        f"CREATE TABLE {{t}} {DIGEST_TABLE}, PRIMARY KEY (digest)); "
        "PREPARE {t}_probe (bigint[]) AS SELECT u.ord, k.identity, "
        "k.payload_hash, k.first_topic, k.first_partition, k.first_offset "
        "FROM unnest($1) WITH ORDINALITY AS u(digest, ord) CROSS JOIN "
        "LATERAL (SELECT identity, payload_hash, first_topic, "
        "first_partition, first_offset FROM {t} WHERE digest = u.digest "
        "LIMIT 1) k", digest_probe_then_copy),
    "text_pk_compact": (f"CREATE TABLE {{t}} ({COMPACT_COLS}, PRIMARY KEY "
                        "(connector, identity))", compact_store(False)),
    "int8_pk_compact": (f"CREATE TABLE {{t}} (digest bigint NOT NULL, "
                        f"{COMPACT_COLS}, PRIMARY KEY (digest))",
                        compact_store(True)),
    "int8_pk_ff70": (
        f"CREATE TABLE {{t}} {DIGEST_TABLE}, PRIMARY KEY (digest) WITH "
        "(fillfactor = 70))", digest_store(True)),
    "int8_ident_pk": (
        f"CREATE TABLE {{t}} {DIGEST_TABLE}, PRIMARY KEY (digest, identity))",
        digest_store(True)),
    "bytea16_pk": (
        f"CREATE TABLE {{t}} (digest bytea NOT NULL, {KEY_COLS}, PRIMARY KEY "
        "(digest))", digest16_store),
    "int8_hash": (f"CREATE TABLE {{t}} {DIGEST_TABLE}); CREATE INDEX ON {{t}} "
                  "USING hash (digest)", digest_store(False)),
    "stage_merge_pk": (
        f"CREATE TABLE {{t}} {DIGEST_TABLE}, PRIMARY KEY (digest)); "
        f"CREATE TEMPORARY TABLE {{t}}_stage {DIGEST_TABLE}) ON COMMIT "
        f"DELETE ROWS; PREPARE {{t}}_merge AS INSERT INTO {{t}} SELECT * FROM "
        "{t}_stage s ON CONFLICT (digest) DO NOTHING RETURNING digest",
        stage_merge(True)),
    "stage_merge_hash": (
        f"CREATE TABLE {{t}} {DIGEST_TABLE}); CREATE INDEX ON {{t}} USING "
        f"hash (digest); CREATE TEMPORARY TABLE {{t}}_stage {DIGEST_TABLE}) "
        f"ON COMMIT DELETE ROWS; PREPARE {{t}}_merge AS INSERT INTO {{t}} "
        "SELECT * FROM {t}_stage s WHERE NOT EXISTS (SELECT 1 FROM {t} k "
        "WHERE k.digest = s.digest AND k.connector = s.connector AND "
        "k.identity = s.identity) RETURNING digest",
        stage_merge(False)),
    "packed": ("CREATE TABLE {t} (connector text NOT NULL, batch bigint NOT "
               "NULL, digests bytea NOT NULL, identities text NOT NULL, "
               "hashes text NOT NULL, PRIMARY KEY (connector, batch))",
               packed_store),
    "packed_min": ("CREATE TABLE {t} (connector text NOT NULL, batch bigint "
                   "NOT NULL, digests bytea NOT NULL, PRIMARY KEY (connector, "
                   "batch)); ALTER TABLE {t} ALTER digests SET STORAGE "
                   "EXTERNAL", packed_min_store),
    "keyset24": ("CREATE TABLE {t}_sets (connector text PRIMARY KEY, seed "
                 "bytea NOT NULL, generation bigint NOT NULL, "
                 "pruned_generation bigint NOT NULL); CREATE TABLE {t} "
                 "(connector text NOT NULL, generation bigint NOT NULL, "
                 "applied_at bigint NOT NULL, keys bytea NOT NULL, PRIMARY "
                 "KEY (connector, generation)); ALTER TABLE {t} ALTER keys "
                 "SET STORAGE EXTERNAL", keyset24_store),
}


def backend_ns(pid):
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def lsn(cur):
    cur.execute("SELECT pg_current_wal_insert_lsn()")
    hi, lo = cur.fetchone()[0].split("/")
    return (int(hi, 16) << 32) + int(lo, 16)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=10000)
    ap.add_argument("--prefill", type=int, default=100000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    a = ap.parse_args()
    shapes = a.shapes.split(",")
    for s in shapes:
        if s not in SHAPES:
            sys.exit(f"pg_key_shapes.py: no shape {s!r} (one of "
                     f"{', '.join(SHAPES)})")
    conninfo = os.environ.get("TIDEMARK_PG_CONNINFO")
    if not conninfo:
        sys.exit("pg_key_shapes.py: TIDEMARK_PG_CONNINFO is not set "
                 "(source scripts/env.sh)")
    schema = f"tm_key_shapes_{os.getpid()}"
    conn = psycopg2.connect(conninfo)
    cur = conn.cursor()
    cur.execute(f"CREATE SCHEMA {schema}; SET search_path = {schema}; "
                "SET plan_cache_mode = force_generic_plan")
    conn.commit()
    try:
        cur.execute("SELECT pg_backend_pid()")
        pid = cur.fetchone()[0]
        for s in shapes:
            create, store = SHAPES[s]
            cur.execute(create.format(t=s))
            for lo in range(0, a.prefill, a.batch):
                store(cur, s, lo, min(lo + a.batch, a.prefill))
                conn.commit()
        cpu = {s: [] for s in shapes}
        wal = {s: [] for s in shapes}
        nxt = a.prefill
        for _ in range(a.runs):
            for s in shapes:
                store = SHAPES[s][1]
                w0 = lsn(cur)
                c0 = backend_ns(pid)
                store(cur, s, nxt, nxt + a.batch)
                conn.commit()
                c1 = backend_ns(pid)
                w1 = lsn(cur)
                conn.commit()
                cpu[s].append((c1 - c0) / 1e6)
                wal[s].append(w1 - w0)
            nxt += a.batch
        base = statistics.median(cpu["rows"]) if "rows" in cpu else None
        print(f"# {a.batch} keys a batch into {a.prefill}+ stored, "
              f"{a.runs} runs; backend CPU ms (median, min), WAL kB median")
        for s in shapes:
            med = statistics.median(cpu[s])
            rel = f"  {med / base:5.2f} x rows" if base else ""
            print(f"{s:18s} cpu {med:7.1f} {min(cpu[s]):7.1f}  wal "
                  f"{statistics.median(wal[s]) / 1024:8.0f}{rel}  runs "
                  + " ".join(f"{c:.0f}" for c in cpu[s]))
    finally:
        conn.rollback()
        cur.execute(f"DROP SCHEMA {schema} CASCADE")
        conn.commit()
        conn.close()


if __name__ == "__main__":
    main()
