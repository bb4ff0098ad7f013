#!/usr/bin/env python3
"""The arithmetic of tests/bench/e2e_bench.sh, on the files its runs leave.

    bench_analyze.py clock SAMPLES [--total N]
        From marker_sampler's output (WALL_MS PARTITION NEXT_OFFSET EPOCH, changes
        only, every partition on the first line group): prints
        start_ms=  the first read (the markers as they were before the run)
        start_sum= the sum of the next offsets at that first read
        claim_ms=  when every partition's epoch had risen past its first read (-1: never)
        first_ms=  the first read with any next_offset past its first read (-1: never)
        first_sum= the sum of the next offsets at first_ms
        done_ms=   the first read whose sum reached N (-1: never, or no --total)
        done_sum=  the sum of the next offsets at the last read
    bench_analyze.py fresh TIMESTAMPS SAMPLES
        TIMESTAMPS: "PARTITION OFFSET TIMESTAMP_MS" per record (kcat -f '%p %o %T').
        A record is in the sink at the first read whose marker for its partition is
        past its offset; prints "n=N p50=.. p95=.. p99=.. max=.. missing=M" in ms of
        (that read's time - the record's timestamp).
    bench_analyze.py arrive ARRIVALS
        ARRIVALS: "ARRIVAL_MS PARTITION OFFSET TIMESTAMP_MS" per record, as stamped by
        stamp_lines below on a bare consumer's output: the same quantiles of
        (arrival - timestamp), the freshness floor of a consumer doing nothing.
    bench_analyze.py stamp
        Copies stdin to stdout, each line prefixed by the wall clock in ms when it was
        read (a bare consumer's arrival times).
    bench_analyze.py report RESULTS_TSV
        The results table (markdown) of one invocation.
"""
import bisect
import collections
import sys
import time


def read_samples(path):
    """[(ms, partition, next_offset, epoch)] in file order."""
    out = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 4:
                out.append(tuple(int(x) for x in parts))
    return out


def clock(path, total):
    rows = read_samples(path)
    if not rows:
        print("start_ms=-1 start_sum=0 claim_ms=-1 first_ms=-1 first_sum=0 done_ms=-1 "
              "done_sum=0")
        return
    start_ms = rows[0][0]
    base_next, base_epoch, nxt, ep = {}, {}, {}, {}
    claim_ms = first_ms = done_ms = -1
    first_sum = start_sum = 0
    # Group the lines by read: the sampler prints a read's changes with one timestamp.
    by_time = collections.OrderedDict()
    for t, p, n, e in rows:
        by_time.setdefault(t, []).append((p, n, e))
    for i, (t, changes) in enumerate(by_time.items()):
        for p, n, e in changes:
            if i == 0:
                base_next[p], base_epoch[p] = n, e
            nxt[p], ep[p] = n, e
        if i == 0:
            start_sum = sum(max(n, 0) for n in nxt.values())
            continue
        s = sum(max(n, 0) for n in nxt.values())
        if claim_ms < 0 and all(ep[p] > base_epoch[p] for p in base_epoch):
            claim_ms = t
        if first_ms < 0 and any(nxt[p] > base_next[p] for p in base_next):
            first_ms, first_sum = t, s
        if done_ms < 0 and total and s >= total:
            done_ms = t
    done_sum = sum(max(n, 0) for n in nxt.values())
    print(f"start_ms={start_ms} start_sum={start_sum} claim_ms={claim_ms} first_ms={first_ms} "
          f"first_sum={first_sum} done_ms={done_ms} done_sum={done_sum}")


def quantiles(lat):
    lat.sort()
    q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))]
    return f"p50={q(0.5)} p95={q(0.95)} p99={q(0.99)} max={lat[-1]}"


def fresh(ts_path, samples_path):
    seen = collections.defaultdict(list)  # partition -> [(ms, next_offset)]
    for t, p, n, _ in read_samples(samples_path):
        seen[p].append((t, n))
    lat, missing = [], 0
    with open(ts_path) as f:
        for line in f:
            p, o, t = map(int, line.split())
            s = seen.get(p, [])
            offs = [n for _, n in s]
            i = bisect.bisect_right(offs, o)  # first read with next_offset > o
            if i < len(s):
                lat.append(s[i][0] - t)
            else:
                missing += 1
    if not lat:
        print(f"n=0 missing={missing}")
        return 1
    print(f"n={len(lat)} {quantiles(lat)} missing={missing}")
    return 0


def arrive(path):
    lat = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 4:
                lat.append(int(parts[0]) - int(parts[3]))
    if not lat:
        print("n=0")
        return 1
    print(f"n={len(lat)} {quantiles(lat)}")
    return 0


def stamp():
    for line in sys.stdin:
        sys.stdout.write(f"{int(time.time() * 1000)} {line}")
    sys.stdout.flush()


def report(path):
    print("| part | figure | value | baseline (same invocation) | ratio |")
    print("|---|---|---:|---|---:|")
    with open(path) as f:
        for line in f:
            part, label, value, unit, base_label, base_value, ratio = (
                line.rstrip("\n").split("\t"))
            base = f"{base_label}: {base_value}" if base_label else ""
            print(f"| {part} | {label} | {value} {unit} | {base} | {ratio} |")


def main(argv):
    if len(argv) >= 2 and argv[1] == "clock":
        total = int(argv[4]) if len(argv) == 5 and argv[3] == "--total" else 0
        clock(argv[2], total)
        return 0
    if len(argv) == 4 and argv[1] == "fresh":
        return fresh(argv[2], argv[3])
    if len(argv) == 3 and argv[1] == "arrive":
        return arrive(argv[2])
    if len(argv) == 2 and argv[1] == "stamp":
        stamp()
        return 0
    if len(argv) == 3 and argv[1] == "report":
        report(argv[2])
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
