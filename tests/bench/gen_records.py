#!/usr/bin/env python3
"""Benchmark records: one JSON object per line on stdout.

    gen_records.py COUNT [SEED] [--envelope]

COUNT records with "id" 0 .. COUNT-1 (unique, in order), deterministic for a SEED
(default 1): the same COUNT and SEED give the same bytes. Each record is 200-400 bytes
of compact JSON with 10 fields:

    id          int     0 .. COUNT-1
    user_id     int     1 .. 1 000 000
    username    string  6-14 letters
    event_type  string  one of 8 words
    amount      float   0.01 .. 10 000 (two decimals)
    quantity    int     1 .. 500
    is_active   bool
    created_at  string  ISO 8601 UTC timestamp with microseconds, "...Z"
    country     string  two letters
    note        string  variable-length text (pads the record into 200-400 bytes)

--envelope wraps each record in Kafka Connect's JsonConverter schema envelope
({"schema": {...}, "payload": {record}}, the payload unchanged), for the Kafka Connect
peer; created_at is then typed io.debezium.time.ZonedTimestamp (a string holding an
ISO 8601 timestamp) so that a JDBC sink maps it to timestamptz.
"""
import json
import random
import sys
from datetime import datetime, timedelta, timezone

FIELDS = [  # name, Connect schema type, optional, schema name
    ("id", "int64", False, None),
    ("user_id", "int64", True, None),
    ("username", "string", True, None),
    ("event_type", "string", True, None),
    ("amount", "double", True, None),
    ("quantity", "int64", True, None),
    ("is_active", "boolean", True, None),
    ("created_at", "string", True, "io.debezium.time.ZonedTimestamp"),
    ("country", "string", True, None),
    ("note", "string", True, None),
]

EVENTS = ["view", "click", "purchase", "signup", "login", "logout", "refund", "share"]
COUNTRIES = ["DE", "FR", "US", "GB", "JP", "BR", "IN", "NL", "SE", "ES", "IT", "CA"]
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
         "november oscar papa quebec romeo sierra tango uniform victor whiskey xray "
         "yankee zulu").split()
LETTERS = "abcdefghijklmnopqrstuvwxyz"
EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)


def schema():
    fields = []
    for name, typ, optional, sname in FIELDS:
        f = {"type": typ, "optional": optional, "field": name}
        if sname:
            f["name"] = sname
            f["version"] = 1
        fields.append(f)
    return {"type": "struct", "fields": fields, "optional": False, "name": "bench.event"}


def records(count, seed):
    rng = random.Random(seed)
    for i in range(count):
        ts = EPOCH + timedelta(microseconds=i * 1000 + rng.randrange(1000))
        rec = {
            "id": i,
            "user_id": rng.randint(1, 1_000_000),
            "username": "".join(rng.choice(LETTERS) for _ in range(rng.randint(6, 14))),
            "event_type": rng.choice(EVENTS),
            "amount": round(rng.uniform(0.01, 10_000), 2),
            "quantity": rng.randint(1, 500),
            "is_active": rng.random() < 0.5,
            "created_at": ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "country": rng.choice(COUNTRIES),
            "note": "",
        }
        base = len(json.dumps(rec, separators=(",", ":")))
        target = rng.randint(200, 400) - base  # bytes of note text wanted
        words = []
        n = 0
        while n < target:
            w = rng.choice(WORDS)
            words.append(w)
            n += len(w) + (1 if len(words) > 1 else 0)
        rec["note"] = " ".join(words)[:max(target, 0)]
        yield rec


def main(argv):
    args = [a for a in argv if a != "--envelope"]
    envelope = len(args) != len(argv)
    if not 1 <= len(args) <= 2 or not all(a.isdigit() for a in args):
        sys.stderr.write("usage: gen_records.py COUNT [SEED] [--envelope]\n")
        return 2
    count = int(args[0])
    seed = int(args[1]) if len(args) > 1 else 1
    out = sys.stdout
    dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode
    if envelope:
        head = '{"schema":' + dumps(schema()) + ',"payload":'
        for rec in records(count, seed):
            out.write(head + dumps(rec) + "}\n")
    else:
        for rec in records(count, seed):
            out.write(dumps(rec) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:
        sys.exit(1)
