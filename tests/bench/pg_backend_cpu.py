#!/usr/bin/env python3
"""The PostgreSQL server's CPU for a benchmark's sink, a figure that a
loaded machine disturbs far less than wall time: runs COMMAND and, while it
runs, samples the user+system CPU (/proc/<pid>/stat) of every backend whose
application_name is APP (the sink's is its connector: "bench" for
dedup_bench) and that started after COMMAND did; prints COMMAND's output,
then the sum over those backends and how many there were (more than the
benchmark opened: another client connected under that name meanwhile, and
the figure is not the benchmark's alone).
The server must run on this machine, readable by this user; psql and
TIDEMARK_PG_CONNINFO (scripts/env.sh) reach it. Sampled every 50 ms: a
backend's last few milliseconds before it exits are not counted.

    pg_backend_cpu.py APP COMMAND...
"""
import os
import subprocess
import sys
import time


def backends(conninfo, app, since):
    out = subprocess.run(
        ["psql", conninfo, "-Atc",
         "SELECT pid FROM pg_stat_activity WHERE application_name = '"
         + app.replace("'", "''") + "' AND backend_start >= "
         f"to_timestamp({since})"],
        capture_output=True, text=True, check=False).stdout
    return out.split()


def cpu_ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime, stime
    except (OSError, IndexError, ValueError):
        return None


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    app, cmd = sys.argv[1], sys.argv[2:]
    conninfo = os.environ.get("TIDEMARK_PG_CONNINFO")
    if not conninfo:
        sys.exit("pg_backend_cpu.py: TIDEMARK_PG_CONNINFO is not set "
                 "(source scripts/env.sh)")
    seen = {}
    since = time.time() - 1  # the server's clock: the same machine's
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    while proc.poll() is None:
        for pid in backends(conninfo, app, since):
            t = cpu_ticks(pid)
            if t is not None:
                seen[pid] = t
        time.sleep(0.05)
    sys.stdout.write(proc.stdout.read())
    hz = os.sysconf("SC_CLK_TCK")
    print(f"backend_cpu_s {sum(seen.values()) / hz:.2f} backends {len(seen)}")
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
