/* How `tidemark status` shows connectors: an aligned text block per
 * connector with its partition table, or one JSON document for all. */
#ifndef TM_STATUS_PRINT_H
#define TM_STATUS_PRINT_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "status/status_read.h"

/* One connector to show. */
typedef struct tm_status_view {
    tm_status_report r; /* owned; r.snap.partitions is what is shown */
    int running;        /* 0: no status file and no live host ("not running");
                           only --config shows such a connector */
    int from_sink;      /* partitions read from the sink and the broker now,
                           not from the status file */
    char error[2048];   /* non-empty: this connector's status could not be
                           read (r.snap.connector names it, nothing else is
                           set); shown as an error line in its place */
} tm_status_view;

void tm_status_view_free(tm_status_view *v);

void tm_status_print_text(FILE *out, const tm_status_view *views, size_t n,
                          int64_t now_ms);

/* {"state_dir": ..., "connectors": [...]}; NULL when memory ran out. */
json_t *tm_status_views_json(const char *state_dir, const tm_status_view *views,
                             size_t n, int64_t now_ms);

/* A live host rewrites its status file at least every second; one whose
 * file is older than this is hung (stopped, deadlocked, swapped out) or
 * cannot write its state directory (a full disk): whatever the file says,
 * nobody knows what the connector does now. */
#define TM_STATUS_STALE_MS 10000

/* How old V's status file is at NOW_MS (wall clock) when it is stale: a live
 * host's file (not STOPPED, not FAILED) last written more than
 * TM_STATUS_STALE_MS ago; else 0. A file written "in the future" (the wall
 * clock stepped back since) is not stale. */
int64_t tm_status_stale_ms(const tm_status_view *v, int64_t now_ms);

/* How long V's wait is past its end at NOW_MS (wall clock) when that is
 * more than TM_STATUS_STALE_MS: a live host (not STOPPED, not FAILED)
 * whose file says its connector waits on a step of the commit
 * (waiting_on) that should have ended at waiting_until_ms. The pulse keeps
 * such a host's file fresh, so only this tells a call that never returns
 * from a slow one. Else (no wait, no known end, within it) 0. */
int64_t tm_status_overdue_ms(const tm_status_view *v, int64_t now_ms);

/* The health, which is `tidemark status`'s exit status
 * (docs/operations.md): OK when every connector is STARTING, RUNNING or
 * PAUSED; ERROR when any could not be read (an error view); else DOWN when
 * any is FAILED, STOPPED or not running; else DEGRADED when any is, or when
 * any live host's status file is stale (tm_status_stale_ms at NOW_MS) or
 * its wait overdue (tm_status_overdue_ms). */
enum {
    TM_HEALTH_OK = 0,
    TM_HEALTH_ERROR = 1,
    TM_HEALTH_DOWN = 2,
    TM_HEALTH_DEGRADED = 3
};
int tm_status_health(const tm_status_view *views, size_t n, int64_t now_ms);

/* TEXT made safe for a terminal into out (size bytes, always terminated):
 * control characters as \xNN (C1 ones, UTF-8 U+0080..U+009F, as \u00NN)
 * and the backslash as \\, so that a name or an error can never move the
 * cursor, clear the screen or retitle the window. Returns out. */
const char *tm_status_text(const char *text, char *out, size_t size);

/* "2026-12-02T14:55:13Z" (UTC, second precision); "-" for 0. */
void tm_status_format_time(int64_t ms, char *out, size_t size);

/* "1h02m03s", "3d04h05m", "45s". */
void tm_status_format_duration(int64_t ms, char *out, size_t size);

#endif
