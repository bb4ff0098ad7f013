#include "runtime/restarts.h"

#define IN_ROW_MS 60000

int tm_restarts_count(tm_restarts *r, int64_t now) {
    r->in_row = r->in_row && now - r->last_ms < IN_ROW_MS ? r->in_row + 1 : 1;
    r->last_ms = now;
    return r->in_row;
}
