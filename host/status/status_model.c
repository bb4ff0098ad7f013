#include "status/status_model.h"

#include <string.h>

static const char *const NAMES[] = {"STARTING", "RUNNING", "PAUSED",
                                    "FAILED",   "STOPPED", "DEGRADED"};

const char *tm_conn_state_name(tm_conn_state state) {
    if ((size_t)state < sizeof NAMES / sizeof NAMES[0])
        return NAMES[state];
    return "UNKNOWN";
}

int tm_conn_state_parse(const char *name, tm_conn_state *out) {
    for (size_t i = 0; name && i < sizeof NAMES / sizeof NAMES[0]; i++)
        if (strcmp(name, NAMES[i]) == 0) {
            *out = (tm_conn_state)i;
            return 0;
        }
    return -1;
}

int64_t tm_status_lag(int64_t next_offset, int64_t high_watermark) {
    if (next_offset < 0 || high_watermark < 0)
        return -1;
    /* A marker past the high watermark (topic recreated) is not negative
     * lag; the run loop reports that case as FAILED. */
    return high_watermark > next_offset ? high_watermark - next_offset : 0;
}
