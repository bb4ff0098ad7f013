#!/usr/bin/env python3
"""Copies lines of FILE to stdout at RATE lines/s for SECONDS (for kcat -P), flushing
every 100 lines, so that a topic receives records at a fixed rate. Prints the rate it
kept on stderr ("paced_produce: lines=N seconds=S rate=R"): on a busy 2-core machine a
Python loop may fall behind at high rates, and the freshness figure is only read at
the rate really published.

    paced_produce.py RATE SECONDS FILE
"""
import sys
import time


def main():
    rate, seconds, path = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
    start, n = time.time(), 0
    out = sys.stdout
    with open(path) as f:
        for line in f:
            if n >= rate * seconds:
                break
            due = start + n / rate
            now = time.time()
            # Sleep in short steps (never a negative time): records go out at
            # their due moment, not in one burst per second.
            while now < due:
                time.sleep(max(0.0, min(0.001, due - now)))
                now = time.time()
            out.write(line)
            n += 1
            if n % 100 == 0:
                out.flush()
    out.flush()
    took = time.time() - start
    sys.stderr.write(f"paced_produce: lines={n} seconds={took:.2f} "
                     f"rate={n / took if took > 0 else 0:.0f}\n")


if __name__ == "__main__":
    main()
