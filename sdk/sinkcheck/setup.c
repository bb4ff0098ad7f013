/* Case set-up shared by the cases: a fresh fixture, an open instance and a
 * claim, and commits that say what was expected when they fail. */
#include <string.h>

#include "kit.h"

int kit_setup(kit_fixture *fx, const kit_run *run, const char *name,
              uint32_t config_flags, const int64_t *start, void **sink,
              tm_marker *m, kit_result *res) {
    static const int64_t zero[KIT_NPARTS];
    tm_error err;
    *sink = NULL;
    if (kit_fixture_init(fx, run, name, config_flags, res) != 0)
        return -1;
    tm_status rc = kit_open(fx, NULL, sink, &err);
    if (rc != TM_OK) {
        kit_fail(res, "open: %s: %s", tm_status_name(rc), err.message);
        kit_fixture_done(fx);
        return -1;
    }
    rc = kit_claim(run, *sink, m, start ? start : zero, 0, &err);
    if (rc != TM_OK) {
        kit_fail(res, "claim: %s: %s", tm_status_name(rc), err.message);
        kit_teardown(fx, *sink);
        *sink = NULL;
        return -1;
    }
    return 0;
}

void kit_teardown(kit_fixture *fx, void *sink) {
    if (sink)
        fx->run->api->close(sink);
    kit_fixture_done(fx);
}

tm_status kit_commit(const kit_run *run, void *sink, const kit_batch *kb,
                     tm_error *err) {
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    return run->api->commit(sink, &kb->b, err);
}

int kit_expect_commit(const kit_run *run, void *sink, const kit_batch *kb,
                      tm_status want, const char *what, kit_result *res) {
    tm_error err;
    tm_status rc = kit_commit(run, sink, kb, &err);
    if (rc == want)
        return 0;
    kit_fail(res, "%s: commit returned %s, expected %s (%s)", what,
             tm_status_name(rc), tm_status_name(want),
             err.message[0] ? err.message : "no message");
    return -1;
}
