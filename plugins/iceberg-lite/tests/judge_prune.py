#!/usr/bin/env python3
"""Row filters on tables of edge values, judged by pyiceberg.

For each partition spec, a table is written through the plugin
(ice_write_rows) from rows of edge values (nulls, NaN, -0.0, the 64-bit
extremes, timestamps before 1970, multibyte and long text, bytes of 0xFF),
a few rows a batch so that files differ. Then for each of many row filters
pyiceberg's scan (which prunes by partition values and column bounds) must
return exactly the rows the same filter keeps from the whole table read
without a filter: a file pruned that holds a matching row is a gap a
reader sees. The rows without a filter must be the rows written.

usage: judge_prune.py ICE_WRITE_ROWS [SPEC ...]
With JUDGE_PRUNE_TIDEMARK=path/to/tidemark in the environment, each table
is compacted (`tidemark table compact --target-file-size 4000`, files of a
partition merged into new ones with fresh metrics) before it is judged.
"""
import json
import math
import os
import random
import subprocess
import sys
import tempfile

import pyarrow as pa
from pyiceberg.expressions import (
    EqualTo, GreaterThan, GreaterThanOrEqual, In, IsNaN, IsNull, LessThan,
    LessThanOrEqual, NotEqualTo, NotIn, NotNaN, NotNull, NotStartsWith,
    StartsWith)
from pyiceberg.expressions.visitors import bind
from pyiceberg.io.pyarrow import expression_to_pyarrow
from pyiceberg.table import StaticTable

I64 = 2**63
TEXTS = [None, "", "a", "A", "a\u0000b", "\u00e9", "\u00e9t\u00e9",
         "\u65e5\u672c\u8a9e\u30c6\u30ad\u30b9\u30c8",
         "\U0001F600smile", "\U0001F600", "z" * 16, "z" * 17,
         "z" * 16 + "\u00e9", "y" * 15 + "\U0010FFFF" + "x",
         "\U0010FFFF" * 17, "\uFFFF" * 17, "\uD7FF" * 17 + "q",
         "abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopZZ", "~~~",
         "\u007f" * 20]
INTS = [0, 1, -1, 2, -2, 3, 7, -7, 2**31 - 1, -2**31, 2**31, -2**31 - 1,
        I64 - 1, -I64, -I64 + 1, I64 - 2, 10**15, -10**15, 99, -100, 100]
FLOATS = [None, 0.0, -0.0, 1.5, -1.5, "nan", "inf", "-inf", 1e308, -1e308,
          5e-324, 2.0, 3.0]
HOUR = 3600 * 10**6
DAY = 24 * HOUR
TIMES = [None, 0, -1, 1, -HOUR, -HOUR - 1, -HOUR + 1, HOUR, DAY - 1, -DAY,
         -DAY - 1, -DAY + 1, -10**15, 10**15, 1700000000000000,
         -62135596800 * 10**6, 253402300799 * 10**6 + 999999, 86400 * 10**6 * 365]
RAWS = [None, "", "00", "ff", "ff" * 17, "00" * 17, "7f80", "80", "ffff",
        "ff" * 16 + "00", "01" * 20]
DOCS = [None, "{}", "{\"a\":1}", "[1,2]", "\"\u00e9\""]


def rows(seed, n):
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        out.append({
            "id": INTS[i % len(INTS)] if i < len(INTS) else rnd.choice(INTS),
            "body": TEXTS[i % len(TEXTS)] if i < len(TEXTS) else rnd.choice(TEXTS),
            "amount": FLOATS[i % len(FLOATS)] if i < len(FLOATS) else rnd.choice(FLOATS),
            "flag": rnd.choice([None, True, False]),
            "at": TIMES[i % len(TIMES)] if i < len(TIMES) else rnd.choice(TIMES),
            "doc": rnd.choice(DOCS),
            "raw": RAWS[i % len(RAWS)] if i < len(RAWS) else rnd.choice(RAWS),
        })
    return out


def batches(rs, seed):
    """Rows grouped so that files hold few, similar values (sorted by one
    column, then cut), making bounds tight enough to prune."""
    rnd = random.Random(seed)
    col = rnd.choice(["id", "body", "at", "raw", "amount"])

    def key(r):
        v = r[col]
        if v is None:
            return (0, "")
        if isinstance(v, str) and col == "amount":
            return (2, v)
        return (1, v) if not isinstance(v, str) else (1, v)

    rs = sorted(rs, key=lambda r: (key(r)[0], str(key(r)[1])))
    out, i = [], 0
    while i < len(rs):
        k = rnd.randint(1, 4)
        out.append(rs[i:i + k])
        i += k
    return out


def filters():
    fs = []
    for v in INTS:
        fs += [EqualTo("id", v), LessThan("id", v), GreaterThan("id", v),
               LessThanOrEqual("id", v), GreaterThanOrEqual("id", v),
               NotEqualTo("id", v)]
    fs += [In("id", INTS[:5]), NotIn("id", INTS[:5])]
    for v in TEXTS:
        if v is None:
            continue
        fs += [EqualTo("body", v), LessThan("body", v), GreaterThan("body", v),
               LessThanOrEqual("body", v), GreaterThanOrEqual("body", v)]
        if v:
            fs += [StartsWith("body", v), NotStartsWith("body", v),
                   StartsWith("body", v[:1]), StartsWith("body", v[:2])]
    fs += [IsNull("body"), NotNull("body"), In("body", ["a", "\u00e9"])]
    for v in [0.0, -0.0, 1.5, -1.5, 2.0, math.inf, -math.inf, 1e308]:
        fs += [EqualTo("amount", v), LessThan("amount", v),
               GreaterThan("amount", v), NotEqualTo("amount", v)]
    fs += [IsNaN("amount"), NotNaN("amount"), IsNull("amount"),
           NotNull("amount")]
    for v in TIMES:
        if v is None:
            continue
        fs += [EqualTo("at", v), LessThan("at", v), GreaterThan("at", v),
               LessThanOrEqual("at", v), GreaterThanOrEqual("at", v)]
    fs += [IsNull("at"), NotNull("at")]
    for v in RAWS:
        if v is None:
            continue
        b = bytes.fromhex(v)
        fs += [EqualTo("raw", b), LessThan("raw", b), GreaterThan("raw", b),
               GreaterThanOrEqual("raw", b)]
    fs += [IsNull("raw"), NotNull("raw"), EqualTo("flag", True),
           EqualTo("flag", False), IsNull("flag"), NotEqualTo("flag", True)]
    return fs


def canon(table):
    t = table.select(["_tm_offset"]).column(0).to_pylist()
    return sorted(t)


def main():
    writer = sys.argv[1]
    specs = sys.argv[2:] or [
        "", "body", "truncate[2](body)", "bucket[3](body)", "id",
        "truncate[10](id)", "bucket[5](id)", "day(at)", "hour(at)",
        "month(at)", "year(at)", "at", "bucket[4](at)", "raw",
        "truncate[1](raw)", "bucket[3](raw)", "amount", "flag", "doc",
        "truncate[1](body), bucket[2](raw), year(at)"]
    failures = 0
    checked = 0
    fs = filters()
    for si, spec in enumerate(specs):
        rs = rows(si, 120)
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "batches.json")
            with open(src, "w") as f:
                json.dump(batches(rs, si), f)
            settings = '"partition": %s' % json.dumps(spec) if spec else ""
            p = subprocess.run([writer, d, settings, src], capture_output=True,
                               text=True)
            if p.returncode != 0:
                print("FAIL: spec %r: writer: %s" % (spec, p.stderr.strip()))
                failures += 1
                continue
            tm = os.environ.get("JUDGE_PRUNE_TIDEMARK")
            if tm:
                c = subprocess.run([tm, "table", "compact",
                                    os.path.join(d, "table"),
                                    "--target-file-size", "4000"],
                                   capture_output=True, text=True)
                print("spec %r: %s" % (spec, (c.stdout + c.stderr).strip()))
            t = StaticTable.from_metadata(os.path.join(d, "table"))
            full = t.scan().to_arrow()
            if full.num_rows != len(rs):
                print("FAIL: spec %r: %d rows read, %d written" %
                      (spec, full.num_rows, len(rs)))
                failures += 1
            nfiles = len(list(t.scan().plan_files()))
            for flt in fs:
                want = canon(full.filter(
                    expression_to_pyarrow(bind(t.schema(), flt, True))))
                try:
                    got = canon(t.scan(row_filter=flt).to_arrow())
                except Exception as e:  # noqa: BLE001 - a reader's failure is a finding
                    print("FAIL: spec %r, filter %r: scan raised %r" %
                          (spec, flt, e))
                    failures += 1
                    continue
                checked += 1
                if got != want:
                    missing = sorted(set(want) - set(got))
                    extra = sorted(set(got) - set(want))
                    print("FAIL: spec %r, filter %r: %d rows, expected %d "
                          "(missing offsets %s, extra %s)" %
                          (spec, flt, len(got), len(want), missing[:10],
                           extra[:10]))
                    for o in missing[:3]:
                        r = full.filter(pa.compute.equal(full["_tm_offset"], o))
                        print("   missing row:", r.to_pylist())
                    failures += 1
            print("spec %r: %d files, %d filters" % (spec, nfiles, len(fs)))
    print("%d checks, %d failures" % (checked, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
