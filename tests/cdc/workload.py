#!/usr/bin/env python3
"""The source workload of the Debezium replication test (tests/cdc/replicate.sh).

    workload.py schema                      the source's DDL (SQL on stdout)
    workload.py tables                      the two tables alone, for a mirror target
    workload.py added                       the columns --alter-at adds to customers
    workload.py seed SEED                   its first rows, one per table (SQL on stdout)
    workload.py run SEED OPS RATE COUNTS [--seeded] [--alter-at N]
                                            the workload's SQL on stdout, paced

`run` writes OPS random changes to the tables `orders` and `customers`, as SQL for psql
(stdin), in transactions of 1 to 8 changes, about RATE changes a second (0: unpaced):
inserts, updates of a random subset of the columns, deletes, primary-key changes
(UPDATE ... SET id) and, now and then, an update of many rows at once. It is the tables'
only writer, so it knows which keys are live and every statement succeeds (psql runs with
ON_ERROR_STOP). At the end it writes to the file COUNTS the number of change events
Debezium emits per table, tombstones included ("orders N" / "customers N"): a create or an
update 1, a delete 2 (the delete and its tombstone), a primary-key change 3 (the delete of
the old key, its tombstone, the create of the new key). The test waits for the topics to
hold that many records.

`seed` writes the first insert of each table: a connector taking its columns from the
events' schemas makes its table at its first event, so the test seeds, lets the tables be
made and installs its write log on them before the workload proper. The seed's rows are
never changed after (nor taken as a new key): each ends as a row last written before
--alter-at. `run --seeded` continues from the seeded state (its COUNTS include the seed's
events); without it, the stream is the same as it always was (tests/bench/debezium_peer.sh's
figures).

With --alter-at N, after N changes `run` adds three optional columns to `customers`
(SCHEMA_CHANGE: text and integer without a default, text with one) in a transaction of
its own, and later inserts and updates fill them. In that transaction it also writes the
version the sequence stands at to the table `schema_change` (not captured): a row last
written at or below it holds the DEFAULT in the source, which PostgreSQL fills in without
writing a row, so Debezium emits no event for it (tests/cdc/compare.py).

The values cover what tidemark converts from Debezium's JSON (docs/configuration.md,
"Change data capture"): bigint and integer keys, text with quotes, backslashes, control
characters and non-ASCII, numeric(p,s) (Connect Decimal), timestamptz (ZonedTimestamp),
timestamp (MicroTimestamp), date (Date), boolean, double precision, jsonb (Json), and NULL
in every nullable column; and a version column a trigger sets from one sequence on every
insert and update (tests/bench/debezium_peer.sh counts re-applied changes by it). Text stays short: a TOASTed value an update does not change
would reach Debezium as its placeholder under REPLICA IDENTITY DEFAULT (orders' identity);
customers has REPLICA IDENTITY FULL, so its deletes carry the whole before image.
"""
import json
import random
import sys
import time

TABLES_DDL = """
CREATE TABLE orders (
    id bigint PRIMARY KEY,
    customer_id integer,
    note text,
    amount numeric(12,2),
    placed_at timestamptz,
    ship_date date,
    paid boolean NOT NULL,
    weight double precision,
    attrs jsonb,
    version bigint NOT NULL
);
CREATE TABLE customers (
    id integer PRIMARY KEY,
    name text NOT NULL,
    balance numeric(14,4),
    created_local timestamp(6),
    birthday date,
    active boolean,
    score double precision,
    version bigint NOT NULL
);
"""
# the source only: the replica identity and the versions
SOURCE_DDL = """
ALTER TABLE customers REPLICA IDENTITY FULL;
-- every row state gets a version no other state has, rising: a target that shows a key
-- with a version not above one it showed before has re-applied an older change
CREATE SEQUENCE change_version;
CREATE FUNCTION stamp_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.version := nextval('change_version');
    RETURN NEW;
END $$;
CREATE TRIGGER orders_version BEFORE INSERT OR UPDATE ON orders
    FOR EACH ROW EXECUTE FUNCTION stamp_version();
CREATE TRIGGER customers_version BEFORE INSERT OR UPDATE ON customers
    FOR EACH ROW EXECUTE FUNCTION stamp_version();
"""

WORDS = ["ann", "bob", "O'Brien", 'say "hi"', "back\\slash", "tab\there",
         "new\nline", "Zoë", "日本語", "emoji 🚀", "", "  spaced  ", "semi;colon",
         "percent % sign", "comma, here", "{\"not\": \"json\"}"]


def q(s):
    """A SQL literal of a Python str (standard_conforming_strings is on)."""
    return "'" + s.replace("'", "''") + "'"


def maybe(rng, value, p_null=0.1):
    return "NULL" if rng.random() < p_null else value


def text(rng):
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))


def numeric(rng, int_digits, scale):
    unscaled = rng.randint(-(10 ** (int_digits + scale)) + 1,
                           10 ** (int_digits + scale) - 1)
    if rng.random() < 0.1:
        unscaled = rng.choice([0, 1, -1, 10 ** scale])
    sign = "-" if unscaled < 0 else ""
    digits = str(abs(unscaled)).rjust(scale + 1, "0")
    return sign + digits[:-scale] + "." + digits[-scale:]


def timestamptz(rng):
    # microsecond precision, sometimes a whole second (Debezium then writes no fraction)
    secs = rng.randint(0, 4102444800)  # 1970 .. 2100
    micros = 0 if rng.random() < 0.2 else rng.randint(0, 999999)
    return "to_timestamp(%d) + interval '%d microseconds'" % (secs, micros)


def timestamp(rng):
    secs = rng.randint(-2208988800, 4102444800)  # 1900 .. 2100, before 1970 too
    micros = 0 if rng.random() < 0.2 else rng.randint(0, 999999)
    return ("(timestamp '1970-01-01' + interval '%d seconds' + interval '%d microseconds')"
            % (secs, micros))


def date(rng):
    return "(date '1970-01-01' + %d)" % rng.randint(-25000, 50000)


def double(rng):
    kind = rng.random()
    if kind < 0.1:
        v = rng.choice([0.0, 1.0, -1.5, 1e300, -2.5e-300, 0.1])
    elif kind < 0.3:
        v = float(rng.randint(-1000, 1000))
    else:
        v = rng.uniform(-1e6, 1e6)
    return repr(v) + "::float8"


def jsonb(rng):
    doc = {"k": rng.randint(0, 99), "tags": [rng.choice(WORDS) for _ in range(rng.randint(0, 3))],
           "nested": {"ok": rng.random() < 0.5, "x": rng.choice([None, 1.5, "s"])}}
    return q(json.dumps(doc, ensure_ascii=rng.random() < 0.5)) + "::jsonb"


def boolean(rng):
    return rng.choice(["true", "false"])


COLUMNS = {
    "orders": {
        "customer_id": lambda r: maybe(r, str(r.randint(-2**31, 2**31 - 1))),
        "note": lambda r: maybe(r, q(text(r))),
        "amount": lambda r: maybe(r, numeric(r, 10, 2)),
        "placed_at": lambda r: maybe(r, timestamptz(r)),
        "ship_date": lambda r: maybe(r, date(r)),
        "paid": boolean,
        "weight": lambda r: maybe(r, double(r)),
        "attrs": lambda r: maybe(r, jsonb(r)),
    },
    "customers": {
        "name": lambda r: q(text(r)),
        "balance": lambda r: maybe(r, numeric(r, 10, 4)),
        "created_local": lambda r: maybe(r, timestamp(r)),
        "birthday": lambda r: maybe(r, date(r)),
        "active": lambda r: maybe(r, boolean(r)),
        "score": lambda r: maybe(r, double(r)),
    },
}
# --alter-at: the columns added to customers, their DDL and their values
SCHEMA_CHANGE = {
    "nickname": ("text", lambda r: maybe(r, q(text(r)), 0.2)),
    "visits": ("integer", lambda r: maybe(r, str(r.randint(-2**31, 2**31 - 1)), 0.2)),
    "tier": ("text DEFAULT 'basic'", lambda r: maybe(r, q(r.choice(WORDS)), 0.2)),
}
# orders' keys are bigints beyond 32 bits; customers' are integers
KEY_BASE = {"orders": 5_000_000_000, "customers": 1}


class Workload:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.live = {t: [] for t in COLUMNS}     # live keys, a list for random choice
        self.index = {t: {} for t in COLUMNS}    # key -> position in live
        self.next_key = dict(KEY_BASE)
        self.events = {t: 0 for t in COLUMNS}
        self.columns = {t: dict(cols) for t, cols in COLUMNS.items()}  # grows at --alter-at
        self.frozen = {t: [] for t in COLUMNS}   # the seed's keys, never changed

    def _add(self, t, k):
        self.index[t][k] = len(self.live[t])
        self.live[t].append(k)

    def _remove(self, t, k):
        i = self.index[t].pop(k)
        last = self.live[t].pop()
        if last != k:
            self.live[t][i] = last
            self.index[t][last] = i

    def _new_key(self, t):
        # mostly fresh keys, sometimes a key deleted earlier comes back
        k = self.next_key[t]
        self.next_key[t] += self.rng.randint(1, 3)
        if self.rng.random() < 0.1 and k - KEY_BASE[t] > 10:
            old = self.rng.randint(KEY_BASE[t], k - 1)
            if old not in self.index[t] and old not in self.frozen[t]:
                return old
        return k

    def insert(self, t):
        k = self._new_key(t)
        cols = self.columns[t]
        names = ["id"] + list(cols)
        values = [str(k)] + [gen(self.rng) for gen in cols.values()]
        self._add(t, k)
        self.events[t] += 1
        return "INSERT INTO %s (%s) VALUES (%s);" % (t, ", ".join(names), ", ".join(values))

    def update(self, t):
        k = self.rng.choice(self.live[t])
        cols = self.columns[t]
        chosen = self.rng.sample(list(cols), self.rng.randint(1, len(cols)))
        sets = ", ".join("%s = %s" % (c, cols[c](self.rng)) for c in chosen)
        self.events[t] += 1
        return "UPDATE %s SET %s WHERE id = %d;" % (t, sets, k)

    def delete(self, t):
        k = self.rng.choice(self.live[t])
        self._remove(t, k)
        self.events[t] += 2
        return "DELETE FROM %s WHERE id = %d;" % (t, k)

    def change_key(self, t):
        k = self.rng.choice(self.live[t])
        n = self._new_key(t)
        self._remove(t, k)
        self._add(t, n)
        extra = ""
        if self.rng.random() < 0.5:  # the key and other columns in one statement
            c = self.rng.choice(list(self.columns[t]))
            extra = ", %s = %s" % (c, self.columns[t][c](self.rng))
        self.events[t] += 3
        return "UPDATE %s SET id = %d%s WHERE id = %d;" % (t, n, extra, k)

    def bulk(self, t):
        # every live key with id % m == r: one statement, many events in one transaction
        m = self.rng.randint(20, 60)
        r = self.rng.randrange(m)
        hit = sum(1 for k in self.live[t] if k % m == r)
        self.events[t] += hit
        where = "id %% %d = %d%s" % (m, r, "".join(" AND id <> %d" % k for k in self.frozen[t]))
        if t == "orders":
            return "UPDATE orders SET paid = NOT paid WHERE %s;" % where
        return "UPDATE customers SET score = coalesce(score, 0) + 1 WHERE %s;" % where

    def seed(self):
        """The first row of each table, frozen: the statements of `workload.py seed`."""
        stmts = []
        for t in COLUMNS:
            stmts.append(self.insert(t))
            k = self.live[t][-1]
            self._remove(t, k)
            self.frozen[t].append(k)
        return stmts

    def alter(self):
        """The schema change of ALTER_AT (no change event: Debezium reports it with the
        next row it writes)."""
        adds = ", ".join("ADD COLUMN %s %s" % (c, ddl) for c, (ddl, _) in SCHEMA_CHANGE.items())
        for c, (_, gen) in SCHEMA_CHANGE.items():
            self.columns["customers"][c] = gen
        return ("ALTER TABLE customers %s;\n"
                "CREATE TABLE schema_change AS SELECT last_value AS version FROM change_version;"
                % adds)

    def change(self):
        t = self.rng.choice(list(COLUMNS))
        n = len(self.live[t])
        x = self.rng.random()
        if n < 50 or x < 0.35:
            return self.insert(t)
        if x < 0.70:
            return self.update(t)
        if x < 0.85:
            return self.delete(t)
        if x < 0.99:
            return self.change_key(t)
        return self.bulk(t)


def run(seed, ops, rate, counts_path, seeded, alter_at):
    w = Workload(seed)
    if seeded:
        w.seed()  # written by `workload.py seed` before: only its state and its counts
    out = sys.stdout
    out.write("\\set ON_ERROR_STOP on\nSET client_min_messages = warning;\n")
    start = time.monotonic()
    done = 0
    while done < ops:
        if alter_at is not None and done >= alter_at:
            out.write("BEGIN;\n%s\nCOMMIT;\n" % w.alter())
            alter_at = None
        size = min(w.rng.randint(1, 8), ops - done)
        stmts = [w.change() for _ in range(size)]
        out.write("BEGIN;\n" + "\n".join(stmts) + "\nCOMMIT;\n")
        done += size
        if rate > 0:
            out.flush()
            ahead = done / rate - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
    out.flush()
    with open(counts_path, "w", encoding="ascii") as f:
        for t in COLUMNS:
            f.write("%s %d\n" % (t, w.events[t]))


def main(argv):
    if len(argv) == 2 and argv[1] == "schema":
        sys.stdout.write(TABLES_DDL + SOURCE_DDL)
        return 0
    if len(argv) == 2 and argv[1] == "tables":
        sys.stdout.write(TABLES_DDL)
        return 0
    if len(argv) == 2 and argv[1] == "added":
        sys.stdout.write(" ".join(SCHEMA_CHANGE) + "\n")
        return 0
    if len(argv) == 3 and argv[1] == "seed":
        sys.stdout.write("BEGIN;\n%s\nCOMMIT;\n" % "\n".join(Workload(int(argv[2])).seed()))
        return 0
    if len(argv) >= 6 and argv[1] == "run":
        opts, alter_at = argv[6:], None
        seeded = "--seeded" in opts
        if seeded:
            opts.remove("--seeded")
        if len(opts) == 2 and opts[0] == "--alter-at":
            alter_at = int(opts[1])
        elif opts:
            sys.stderr.write(__doc__)
            return 2
        run(int(argv[2]), int(argv[3]), float(argv[4]), argv[5], seeded, alter_at)
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
