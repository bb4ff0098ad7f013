#!/usr/bin/env python3
"""`tidemark status --format prometheus` and the textfile of `tidemark run
--metrics-file` judged by prometheus_client's own text parser, over a
hand-written state directory: a live connector (this script holds its host
lock) and a stopped one, with names and topics holding the characters the
exposition format escapes. Expected values come from the status files
written here, never from tidemark's output.
usage: metrics_parse.py TIDEMARK METRICS_EMIT WORK_DIR"""
import fcntl
import json
import os
import shutil
import subprocess
import sys

from prometheus_client.parser import text_string_to_metric_families

tidemark, emit, work = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
sd = os.path.join(work, "state")
os.makedirs(sd, mode=0o700)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


LIVE = 'we"ird\\name\nx'  # a quote, a backslash, a newline
STOPPED = "plain"
TOPIC = 'or"ders\\{a=b,c}\nτ'


def status(name, state, totals, parts):
    return {"format": 1, "connector": name, "state": state,
            "plugin": "sqlite", "plugin_version": "1.0.0",
            "instance_id": "a1", "pid": os.getpid(),
            "started_ms": 1764680000000, "updated_ms": 1764680042500,
            "last_batch": {"id": "b-1", "ms": 1764680041000, "records": 3},
            "totals": totals,
            "last_error": {"message": "x", "ms": 1764680040000},
            "reason": {"message": "RETRY: locked", "since_ms": 1764680040000},
            "partitions": parts}


def part(topic, p, nxt, epoch, hwm, paused):
    return {"topic": topic, "partition": p, "next_offset": nxt,
            "epoch": epoch, "high_watermark": hwm, "rows": 1,
            "dead_letters": 0, "filtered": 0, "duplicates": 0,
            "paused": paused}


files = {
    LIVE: status(LIVE, "DEGRADED",
                 {"rows": 1200, "dead_letters": 3, "filtered": 10,
                  "duplicates": 2, "batches": 42, "fenced": 1,
                  "conflicts": 4, "retries": 7},
                 [part(TOPIC, 0, 1215, 3, 1300, False),
                  part(TOPIC, 1, 40, 2, -1, True)]),
    STOPPED: status(STOPPED, "RUNNING",
                    {"rows": 5, "dead_letters": 0, "filtered": 0,
                     "duplicates": 0, "batches": 1, "fenced": 0,
                     "conflicts": 0, "retries": 0},
                    [part("t", 0, -1, 0, 9, False)]),
}
for name, doc in files.items():
    d = os.path.join(sd, name)
    os.makedirs(d, mode=0o700)
    with open(os.path.join(d, "status.json"), "w") as f:
        json.dump(doc, f)
# The live one: this process holds its host lock, as a running host does.
lock = open(os.path.join(sd, LIVE, "host.lock"), "w")
lock.write("%d\n" % os.getpid())
lock.flush()
fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)


def samples(text):
    """{(sample name, frozenset(labels)): value} and the family types."""
    out, types = {}, {}
    for fam in text_string_to_metric_families(text):
        types[fam.name] = fam.type
        for s in fam.samples:
            key = (s.name, frozenset(s.labels.items()))
            check(key not in out, "sample given twice: %r" % (key,))
            out[key] = s.value
    return out, types


def get(sm, name, **labels):
    return sm.get((name, frozenset(labels.items())))


r = subprocess.run([tidemark, "status", "--format", "prometheus",
                    "--state-dir", sd], capture_output=True, text=True)
# DEGRADED and STOPPED: the health check's exit status is 2 (STOPPED).
check(r.returncode == 2, "status exit %d, expected 2: %s" % (r.returncode,
                                                              r.stderr))
sm, types = samples(r.stdout)

for st in ("STARTING", "RUNNING", "DEGRADED", "PAUSED", "FAILED", "STOPPED"):
    check(get(sm, "tidemark_connector_state", connector=LIVE, state=st)
          == (1.0 if st == "DEGRADED" else 0.0), "live state %s" % st)
    check(get(sm, "tidemark_connector_state", connector=STOPPED, state=st)
          == (1.0 if st == "STOPPED" else 0.0), "stopped state %s" % st)
check(types.get("tidemark_connector_state") == "gauge", "state is a gauge")
check(types.get("tidemark_records") == "counter", "records is a counter")

for name, doc in files.items():
    t = doc["totals"]
    for outcome, key in (("row", "rows"), ("dead_letter", "dead_letters"),
                         ("filtered", "filtered"),
                         ("duplicate", "duplicates")):
        check(get(sm, "tidemark_records_total", connector=name,
                  outcome=outcome) == t[key], "records %s %r" % (outcome, name))
    for answer, key in (("OK", "batches"), ("FENCED", "fenced"),
                        ("CONFLICT", "conflicts"), ("RETRY", "retries")):
        check(get(sm, "tidemark_batches_total", connector=name,
                  answer=answer) == t[key], "batches %s %r" % (answer, name))
    check(get(sm, "tidemark_connector_start_time_seconds", connector=name)
          == doc["started_ms"] / 1000, "start time %r" % name)
    check(get(sm, "tidemark_status_updated_timestamp_seconds", connector=name)
          == doc["updated_ms"] / 1000, "updated %r" % name)
    check(get(sm, "tidemark_connector_status_error", connector=name) == 0,
          "status error %r" % name)

lab = dict(connector=LIVE, topic=TOPIC)
check(get(sm, "tidemark_partition_next_offset", partition="0", **lab) == 1215,
      "next offset p0")
check(get(sm, "tidemark_partition_epoch", partition="0", **lab) == 3, "epoch")
check(get(sm, "tidemark_partition_high_watermark", partition="0", **lab)
      == 1300, "hwm p0")
check(get(sm, "tidemark_partition_lag", partition="0", **lab) == 85, "lag p0")
check(get(sm, "tidemark_partition_paused", partition="1", **lab) == 1,
      "paused p1")
# Unknown figures have no sample: no high watermark, so no lag, for p1;
# no marker for the stopped one's partition.
check(get(sm, "tidemark_partition_lag", partition="1", **lab) is None,
      "no lag without a high watermark")
check(get(sm, "tidemark_partition_next_offset", connector=STOPPED, topic="t",
          partition="0") is None, "no marker, no next offset")
rss = get(sm, "tidemark_process_resident_memory_bytes", pid=str(os.getpid()))
with open("/proc/self/statm") as f:
    mine = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
check(rss is not None and 0.5 * mine < rss < 2 * mine,
      "rss %r, /proc says %d" % (rss, mine))
check(len([k for k in sm if k[0] == "tidemark_process_resident_memory_bytes"])
      == 1, "one RSS sample: only the live host")

# The textfile, through the exporter tidemark run uses, after the figures
# only a process knows were saved next to the status files.
prom = os.path.join(work, "out.prom")
r2 = subprocess.run([emit, prom, sd, LIVE, STOPPED], capture_output=True,
                    text=True)
check(r2.returncode == 0, "metrics_emit: %s" % r2.stderr)
check(not os.path.exists(prom + ".tmp"), "temporary file left behind")
with open(prom) as f:
    fm, ftypes = samples(f.read())
status_keys = {k for k in sm if k[0] != "tidemark_process_resident_memory_bytes"}
for k in status_keys:
    check(fm.get(k) == sm[k], "textfile differs from status at %r" % (k,))
# With the figures saved, status prints them too: the same as the file.
r3 = subprocess.run([tidemark, "status", "--format", "prometheus",
                     "--state-dir", sd], capture_output=True, text=True)
sm3, _ = samples(r3.stdout)
rss_name = "tidemark_process_resident_memory_bytes"
check({k: v for k, v in sm3.items() if k[0] != rss_name}
      == {k: v for k, v in fm.items() if k[0] != rss_name},
      "status and the textfile differ once the figures are saved")
check(not any(k[0].startswith("tidemark_commit_duration") for k in sm),
      "inconclusive: figures before any was saved")
check(ftypes.get("tidemark_commit_duration_seconds") == "histogram",
      "histogram type")
for name in (LIVE, STOPPED):
    h = lambda le: get(fm, "tidemark_commit_duration_seconds_bucket",
                       connector=name, le=le)
    check(h("0.001") is None and h("0.005") == 1 and h("0.025") == 1
          and h("0.05") == 2 and h("+Inf") == 2, "buckets %r" % name)
    check(abs(get(fm, "tidemark_commit_duration_seconds_sum", connector=name)
              - 0.032) < 1e-9, "commit sum %r" % name)
    check(get(fm, "tidemark_record_conversion_seconds_count", connector=name)
          == 3, "conversions %r" % name)
    check(abs(get(fm, "tidemark_record_conversion_seconds_sum", connector=name)
              - 3e-6) < 1e-12, "conversion sum %r" % name)
    check(get(fm, "tidemark_errors_total", connector=name) == 1,
          "errors %r" % name)

for f in failures:
    print("FAIL:", f)
if failures:
    print(r.stdout)
    sys.exit(1)
print("metrics_parse: %d status samples and the textfile judged" % len(sm))
