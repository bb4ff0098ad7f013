#include "runtime/restarts.h"

#include "runtime/connector_state.h"

#define IN_ROW_MS 60000

int tm_restarts_count(tm_restarts *r, int64_t now) {
    r->in_row = r->in_row && now - r->last_ms < IN_ROW_MS ? r->in_row + 1 : 1;
    r->last_ms = now;
    return r->in_row;
}

int tm_restarts_admit(struct tm_connector *c, tm_restarts *r, const char *what,
                      const char *last) {
    int in_row = tm_restarts_count(r, tm_now_ms());
    if (in_row <= TM_RESTARTS_MAX)
        return in_row;
    /* LAST may be c->last_error: tm_conn_error formats before it writes. */
    tm_conn_error(c, 1,
                  "%s failed fatally %d times in a row, each within a minute "
                  "of the last; the last: %s",
                  what, in_row, last);
    return -1;
}
