/* Case 10: bad settings. Each settings key dropped in turn (at least one
 * drop must give INVALID naming that key: the required one), an unknown
 * key (INVALID naming it), and for a plugin that declares its settings
 * each declared key with a value of the wrong type (INVALID naming its
 * path). The case runs in its own process, so a crash in
 * open() is a FAIL, not the end of the run. */
#include <stdio.h>
#include <string.h>

#include "cases.h"
#include "config/json_path.h"
#include "kit.h"

#define UNKNOWN_KEY "sinkcheck_no_such_setting"

/* Opens with SETTINGS; the status, with the message in err. */
static tm_status try_open(const kit_run *run, json_t *settings, tm_error *err,
                          kit_result *res) {
    kit_fixture fx;
    void *sink;
    if (kit_fixture_init_settings(&fx, run, "bad_settings", settings, 0, res) !=
        0)
        return TM_FATAL;
    tm_status rc = kit_open(&fx, NULL, &sink, err);
    if (rc == TM_OK)
        run->api->close(sink);
    kit_fixture_done(&fx);
    return rc;
}

/* A plugin that declares its settings (ABI 1.3) must have the host check
 * them with that table: each declared key given a value of no setting's
 * type (an array) is INVALID naming its JSON path; a table declared but
 * not used, or used for some keys only, fails here. */
static void check_declared(const kit_run *run, kit_result *res) {
    if (!TM_SINK_API_HAS_SETTINGS(run->api) || !run->api->settings)
        return;
    const tm_setting *t = run->api->settings;
    for (size_t i = 0; !KIT_FAILED(res) && TM_CELEM(tm_setting, t, i)->name;
         i++) {
        const char *key = TM_CELEM(tm_setting, t, i)->name;
        json_t *bad = json_deep_copy(run->settings);
        if (!bad || json_object_set_new(bad, key, json_array())) {
            json_decref(bad);
            kit_fail(res, "out of memory");
            return;
        }
        tm_error err;
        tm_status rc = try_open(run, bad, &err, res);
        json_decref(bad);
        char want[320];
        tm_json_path_key(want, sizeof want - 16, KIT_SETTINGS_PATH, key);
        strcat(want, ": expected ");
        if (!KIT_FAILED(res) &&
            (rc != TM_INVALID || !strstr(err.message, want)))
            kit_fail(res,
                     "declared setting \"%s\" given an array: open gave %s "
                     "(%s), expected INVALID with \"%s...\" (does open pass "
                     "its declared table to host->settings_fill?)",
                     key, tm_status_name(rc),
                     err.message[0] ? err.message : "no message", want);
    }
}

void kit_case_bad_settings(const kit_run *run, kit_result *res) {
    tm_error err;
    const char *key;
    json_t *val;
    int named = 0, dropped = 0;
    json_object_foreach(run->settings, key, val) {
        json_t *copy = json_deep_copy(run->settings);
        if (!copy || json_object_del(copy, key) != 0) {
            json_decref(copy);
            kit_fail(res, "out of memory");
            return;
        }
        tm_status rc = try_open(run, copy, &err, res);
        json_decref(copy);
        dropped++;
        if (KIT_FAILED(res))
            return;
        if (rc == TM_INVALID && strstr(err.message, key))
            named++;
        else if (rc == TM_INVALID)
            kit_fail(res,
                     "without \"%s\": INVALID, but the message does not "
                     "name the key: %s",
                     key, err.message);
        (void)val;
    }
    if (!KIT_FAILED(res) && dropped > 0 && named == 0)
        kit_fail(res,
                 "no dropped setting gave INVALID naming it (%d tried): "
                 "a required setting must be refused when missing",
                 dropped);
    json_t *extra = json_deep_copy(run->settings);
    if (!extra || json_object_set_new(extra, UNKNOWN_KEY, json_string("x"))) {
        json_decref(extra);
        kit_fail(res, "out of memory");
        return;
    }
    tm_status rc = try_open(run, extra, &err, res);
    json_decref(extra);
    if (!KIT_FAILED(res))
        check_declared(run, res);
    if (!KIT_FAILED(res) &&
        (rc != TM_INVALID || !strstr(err.message, UNKNOWN_KEY)))
        kit_fail(res,
                 "unknown key \"%s\": open gave %s (%s), expected INVALID "
                 "naming the key",
                 UNKNOWN_KEY, tm_status_name(rc),
                 err.message[0] ? err.message : "no message");
}
