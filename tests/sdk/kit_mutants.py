#!/usr/bin/env python3
"""The conformance kit against broken variants of the example sink.

A kit that always passes proves nothing. Each mutant below is the example
(sdk/examples/file_sink.c, with its copy of the store helpers sdk/store/*.c)
with one fault put in by text replacement; built as a plugin, it must FAIL
the kit, and the FAIL line must name the fault (a regular expression per
mutant). The unbroken copy, built the same way, must pass the same cases
first (else the build, not the fault, would fail them). A replacement that
no longer matches the source is reported: the mutant must be updated, and
the test fails until it is. Every mutant gets one run of the kit (five
of concurrent_owners, RUNS), and each run must catch it: a case that
catches its fault only in some runs is a defect of the kit (as
concurrent_owners was, before its staged rounds: it let a sink without a
lock pass in 37 of 40 runs; and while a timer, not the second owner's
state, let its held owner go: a lock given up before the marker passed in
3 of 30 runs).

usage: kit_mutants.py SOURCE_DIR KIT [CC]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

SRC, KIT = sys.argv[1], sys.argv[2]
CC = sys.argv[3] if len(sys.argv) > 3 else "cc"
SEED = "7"
# concurrent_owners orders two processes: the control passes it, and each
# mutant it must catch fails it, in every one of this many runs (a schedule
# left to the machine shows here, not in one CI run of many).
RUNS = {"concurrent_owners": 5}

LAZY = r'''
static tms_markers lazy; /* MUTANT: the last commit's markers wait here */
static int lazy_n;
static tm_status lazy_load(ex_sink *s, tms_markers *ms, tm_error *err) {
    if (!lazy_n)
        return tms_load(s->host, s->markers, ms, err);
    *ms = lazy;
    ms->v = malloc(lazy.cap * sizeof *ms->v);
    memcpy(ms->v, lazy.v, lazy.n * sizeof *ms->v);
    for (size_t i = 0; i < ms->n; i++)
        ms->v[i].m.topic = ms->v[i].topic;
    return TM_OK;
}

/* commit: the protocol's steps'''

# Two owners without a lock between them: the kit says so, or finds what
# they did to each other (a commit answering FATAL, or a marker file two
# writers damaged).
NO_LOCK_CAUGHT = (r"FAIL concurrent_owners: .*(not serialised|fencing does "
                  r"not hold|acknowledged commit was lost|got (ALREADY|"
                  r"FENCED|CONFLICT|FATAL)|is damaged)")

# name: (cases, FAIL regex, [(file, old, new), ...])
MUTANTS = {
    "no_lock": (["concurrent_owners"], NO_LOCK_CAUGHT,
                [("store/util.c",
                  "while ((rc = fcntl(fd, F_SETLKW, &fl)) != 0 && errno == "
                  "EINTR)\n            ;",
                  "rc = 0; /* MUTANT: no lock */")]),
    # A lock that does not cover everything: claim without it, or a commit
    # giving it up between its effects and its marker.
    "claim_without_lock": (["concurrent_owners"], NO_LOCK_CAUGHT,
                           [("file_sink.c",
                             "    int lock = tms_lock(s->host, s->lock, "
                             "err); /* one owner at a time */",
                             "    int lock = dup(2); /* MUTANT: claim takes "
                             "no lock */")]),
    "lock_released_before_the_marker": (
        ["concurrent_owners"], NO_LOCK_CAUGHT,
        [("file_sink.c",
          "        s->host->fault(TM_FAULT_AFTER_EFFECTS);\n",
          "        s->host->fault(TM_FAULT_AFTER_EFFECTS);\n"
          "        close(lock); /* MUTANT: the marker written unlocked */\n"
          "        lock = dup(2);\n")]),
    "no_fsync": (["power_loss"],
                 r"FAIL power_loss: .*were dropped",
                 [("store/journal.c", "if (fdatasync(j->fd) == 0)",
                   "if (1) /* MUTANT: no fdatasync */"),
                  ("store/marker_file.c", "&& fsync(fd) == 0;",
                   "; /* MUTANT: no fsync */")]),
    "no_directory_fsync": (["power_loss"],
                           r"FAIL power_loss: .*were dropped",
                           [("store/util.c",
                             "int tms_sync_dir_of(const char *path) {",
                             "int tms_sync_dir_of(const char *path) {\n"
                             "    if (path)\n"
                             "        return 0; /* MUTANT: no dir fsync */")]),
    "no_torn_tail_cut": (["crash_points"],
                         r"FAIL crash_points: after_effects: .*(killed "
                         r"before the commit, yet|duplicate or extra row)",
                         [("store/journal.c",
                           "int ok = (uint64_t)st.st_size == committed ||",
                           "int ok = 1 || /* MUTANT: no cut */"),
                          ("store/journal.c", "j->len = committed;",
                           "j->len = (uint64_t)st.st_size;")]),
    "scan_past_the_marker": (["crash_points"],
                             r"FAIL crash_points: after_effects: killed "
                             r"before the commit, yet",
                             [("file_sink.c",
                               "rc = tms_journal_read(s->host, s->log, "
                               "ms.committed, &text, &len, err);",
                               "rc = tms_journal_read(s->host, s->log, "
                               "(uint64_t)lseek(open(s->log, O_RDONLY), 0, "
                               "SEEK_END), &text, &len, err); /* MUTANT */"),
                              ("file_sink.c", "#include <unistd.h>",
                               "#include <unistd.h>\n#include <fcntl.h>")]),
    "claim_keeps_the_epoch": (["claim"],
                              r"FAIL claim: second claim gave .* epoch",
                              [("store/markers.c",
                                "m->epoch++; /* fences every older owner */",
                                "if (m->epoch == TM_NO_EPOCH) /* MUTANT */\n"
                                "            m->epoch++;")]),
    "already_for_a_partial_overlap": (
        ["gap_overlap_fenced"],
        r"FAIL gap_overlap_fenced: .*commit returned ALREADY, expected "
        r"CONFLICT",
        [("file_sink.c",
          "        rc = s->host->marker_check(b, stored, err);\n",
          "        rc = s->host->marker_check(b, stored, err);\n"
          "    if (rc == TM_CONFLICT && stored[0].next_offset >\n"
          "        TM_CELEM(tm_range, b->ranges, 0)->start_offset)\n"
          "        rc = TM_ALREADY; /* MUTANT */\n")]),
    "ok_without_storing_anything": (
        ["random_kills"],
        r"FAIL random_kills: .*an acknowledged commit was lost",
        [("file_sink.c",
          "    s->host->fault(TM_FAULT_BEFORE_BEGIN);\n",
          "    s->host->fault(TM_FAULT_BEFORE_BEGIN);\n"
          "    s->host->fault(TM_FAULT_AFTER_EFFECTS); /* MUTANT */\n"
          "    s->host->fault(TM_FAULT_AFTER_MARKER);\n"
          "    s->host->fault(TM_FAULT_AFTER_COMMIT);\n"
          "    if (sink)\n"
          "        return TM_OK;\n")]),
    "wrong_values_stored": (["values"],
                            r"FAIL values: .*scan gave back .*the kit sent",
                            [("store/values.c",
                              'fprintf(f, " %" PRId64, v->v.i);',
                              'fprintf(f, " %" PRId64, v->v.i + 1); '
                              '/* MUTANT */')]),
    "last_acknowledged_commit_lost": (
        ["random_kills"],
        r"FAIL random_kills: .*an acknowledged commit was lost",
        [("file_sink.c", "\n/* commit: the protocol's steps", LAZY),
         ("file_sink.c",
          "    tm_status rc = tms_load(s->host, s->markers, &ms, err);\n"
          "    if (rc == TM_OK)\n"
          "        rc = tms_stored(",
          "    tm_status rc = lazy_load(s, &ms, err);\n"
          "    if (rc == TM_OK)\n"
          "        rc = tms_stored("),
         ("file_sink.c",
          "        rc = tms_save(s->host, s->markers, &ms, 1, err);\n",
          "        if (lazy_n++)\n"
          "            rc = tms_save(s->host, s->markers, &lazy, 1, err);\n"
          "        tms_markers_free(&lazy);\n"
          "        lazy = ms;\n"
          "        memset(&ms, 0, sizeof ms);\n")]),
    "declared_settings_unused": (
        ["bad_settings"],
        r"FAIL bad_settings: declared setting \"path\" given an array: "
        r"open gave OK",
        [("file_sink.c",
          "    if (host->settings_fill(config->settings, EX_SETTINGS, &set, "
          "sizeof set,\n                            err) != 0)\n"
          "        return TM_INVALID;\n",
          "    /* MUTANT: the table declared, the settings read by hand, a\n"
          "     * value of the wrong type taken for a default */\n"
          "    static const char *const known[] = {\"path\"};\n"
          "    int got = host->setting_string(config->settings, \"path\",\n"
          "                                   &set.path, err);\n"
          "    if (host->settings_check_keys(config->settings, known, 1, "
          "err))\n"
          "        return TM_INVALID;\n"
          "    if (got == 0) {\n"
          "        host->set_error(err, \"setting \\\"path\\\": required\");\n"
          "        return TM_INVALID;\n"
          "    }\n"
          "    if (got < 0)\n"
          "        set.path = \"/tmp\";\n")]),
}


def build(work, name, edits):
    """Copies the example and the helpers into WORK/NAME, applies EDITS,
    builds NAME.so; returns its path, or raises with what went wrong."""
    d = os.path.join(work, name)
    os.makedirs(os.path.join(d, "store"))
    shutil.copy(os.path.join(SRC, "sdk/examples/file_sink.c"), d)
    for f in os.listdir(os.path.join(SRC, "sdk/store")):
        shutil.copy(os.path.join(SRC, "sdk/store", f), os.path.join(d, "store"))
    for rel, old, new in edits:
        p = os.path.join(d, rel)
        text = open(p).read()
        if text.count(old) != 1:
            raise RuntimeError("%s: the text to replace in %s is found %d "
                               "times, expected once: update the mutant"
                               % (name, rel, text.count(old)))
        open(p, "w").write(text.replace(old, new))
    so = os.path.join(d, name + ".so")
    srcs = [os.path.join(d, "file_sink.c")] + sorted(
        os.path.join(d, "store", f) for f in os.listdir(os.path.join(d, "store"))
        if f.endswith(".c"))
    cmd = [CC, "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-shared", "-fPIC",
           "-fvisibility=hidden", "-I", os.path.join(SRC, "sdk/include"),
           "-I", os.path.join(d, "store"), "-o", so] + srcs
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s: does not build:\n%s" % (name, r.stderr))
    os.chmod(d, 0o755)
    os.chmod(so, 0o755)
    return so


def kit(so, cases):
    args = [KIT, so, "--seed", SEED]
    for c in cases:
        args += ["--case", c]
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    return r.returncode, r.stdout


def main():
    work = tempfile.mkdtemp(prefix="tm-kit-mutants-")
    os.chmod(work, 0o755)
    bad = 0
    try:
        every = sorted({c for cases, _, _ in MUTANTS.values() for c in cases})
        control = build(work, "control", [])
        rc, out = kit(control, every)
        if rc != 0:
            print("the unbroken example, built as the mutants are, fails:\n"
                  + out)
            return 1
        for case, runs in RUNS.items():
            for i in range(1, runs):
                rc, out = kit(control, [case])
                if rc != 0:
                    print("the unbroken example fails %s in run %d of %d:\n"
                          % (case, i + 1, runs) + out)
                    return 1
        print("control: the unbroken example passes " + ", ".join(every)
              + "".join(" (%s: %d runs)" % r for r in RUNS.items()))
        for name, (cases, want, edits) in MUTANTS.items():
            try:
                so = build(work, name, edits)
            except RuntimeError as e:
                print("FAIL %s" % e)
                bad += 1
                continue
            runs = max(RUNS.get(c, 1) for c in cases)
            for i in range(runs):
                rc, out = kit(so, cases)
                hit = [line for line in out.splitlines()
                       if line.startswith("FAIL ") and re.search(want, line)]
                if rc == 0 or not hit:
                    break
            if rc != 0 and hit:
                print("caught %s%s: %s" % (name, "" if runs == 1 else
                                           " (%d runs)" % runs, hit[0]))
            else:
                print("FAIL %s: not caught as /%s/ in run %d of %d (exit "
                      "%d):\n%s" % (name, want, i + 1, runs, rc, out))
                bad += 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("%d mutants, %d not caught" % (len(MUTANTS), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
