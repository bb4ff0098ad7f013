/* See fixture.h. */
#define _XOPEN_SOURCE 700 /* nftw */
#include "fixture.h"

#include <ftw.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plugin/loader.h"
#include "services/host_services.h"

const tm_sink_api *fx_api;
char fx_dir[256], fx_db_path[512];

static void say(char *why, size_t size, const char *fmt, ...) TM_PRINTF(3, 4);
static void say(char *why, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, size, fmt, ap);
    va_end(ap);
}

int fx_load_plugin(char *why, size_t size) {
    static tm_plugin plugin;
    if (fx_api)
        return 0;
    if (tm_plugin_load(TM_SQLITE_PLUGIN, NULL, 0, &plugin, why, size) != 0)
        return -1;
    fx_api = plugin.api;
    return 0;
}

int fx_tmpdir(char *why, size_t size) {
    const char *tmp = getenv("TMPDIR");
    snprintf(fx_dir, sizeof fx_dir, "%s/tm-sqlite-fault-XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(fx_dir)) {
        say(why, size, "mkdtemp %s failed", fx_dir);
        return -1;
    }
    snprintf(fx_db_path, sizeof fx_db_path, "%s/sink.db", fx_dir);
    return 0;
}

static int rm_entry(const char *p, const struct stat *sb, int t,
                    struct FTW *f) {
    (void)sb, (void)t, (void)f;
    return remove(p);
}

void fx_rmdir(void) {
    if (fx_dir[0])
        nftw(fx_dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

static const tm_column COLS[] = {
    {sizeof(tm_column), "id", TM_TYPE_INT, 1, 1},
    {sizeof(tm_column), "body", TM_TYPE_TEXT, 0, 0},
};

int fx_conf_init(fx_conf *c, const char *extra, char *why, size_t size) {
    json_error_t je;
    json_t *obj =
        json_pack_ex(&je, 0, "{s:s, s:s}", "path", fx_db_path, "table", "t");
    if (!obj) {
        say(why, size, "json_pack: %s", je.text);
        return -1;
    }
    if (extra) {
        char text[1024];
        snprintf(text, sizeof text, "{%s}", extra);
        json_t *more = json_loads(text, 0, &je);
        if (!more || json_object_update(obj, more) != 0) {
            say(why, size, "bad test JSON %s: %s", text, je.text);
            json_decref(more);
            json_decref(obj);
            return -1;
        }
        json_decref(more);
    }
    c->settings = tm_settings_new(obj, "$.sink.settings");
    json_decref(obj);
    if (!c->settings) {
        say(why, size, "tm_settings_new failed");
        return -1;
    }
    c->config = (tm_sink_config){.struct_size = sizeof(tm_sink_config),
                                 .connector = "unit",
                                 .settings = c->settings,
                                 .columns = COLS,
                                 .ncolumns = 2,
                                 .flags = 0};
    return 0;
}

void fx_conf_done(fx_conf *c) {
    tm_settings_free(c->settings);
    c->settings = NULL;
}

tm_status fx_open(fx_conf *c, void **sink, char *why, size_t size) {
    tm_error err = {sizeof err, ""};
    *sink = NULL;
    tm_status r = fx_api->open(tm_host_services(), &c->config, sink, &err);
    if (r != TM_OK)
        say(why, size, "open: %s: %s", tm_status_name(r), err.message);
    return r;
}

static void markers_init(tm_marker *m, size_t n) {
    for (size_t i = 0; i < n; i++)
        m[i] = (tm_marker){.struct_size = sizeof(tm_marker),
                           .topic = "t",
                           .partition = (int32_t)i,
                           .next_offset = 0};
}

tm_status fx_claim(void *sink, tm_marker *m, size_t n, char *why, size_t size) {
    tm_error err = {sizeof err, ""};
    markers_init(m, n);
    tm_status r = fx_api->claim(sink, m, n, 0, &err);
    if (r != TM_OK)
        say(why, size, "claim: %s: %s", tm_status_name(r), err.message);
    return r;
}

tm_status fx_read(void *sink, tm_marker *m, size_t n, char *why, size_t size) {
    tm_error err = {sizeof err, ""};
    markers_init(m, n);
    tm_status r = fx_api->read_markers(sink, m, n, &err);
    if (r != TM_OK)
        say(why, size, "read_markers: %s: %s", tm_status_name(r), err.message);
    return r;
}

int fx_batch_make(fx_batch *bt, const char *id, size_t nparts, int64_t start,
                  int64_t end, const int64_t *epochs, const char *body) {
    if (nparts == 0 || nparts > FX_MAX_PARTS || end < start ||
        (size_t)(end - start) * nparts > FX_MAX_RECS)
        return -1;
    memset(bt, 0, sizeof *bt);
    snprintf(bt->id, sizeof bt->id, "%s", id);
    size_t k = 0;
    for (size_t p = 0; p < nparts; p++) {
        bt->ranges[p] = (tm_range){.struct_size = sizeof(tm_range),
                                   .topic = "t",
                                   .partition = (int32_t)p,
                                   .start_offset = start,
                                   .end_offset = end,
                                   .epoch = epochs[p]};
        for (int64_t off = start; off < end; off++, k++) {
            bt->values[k][0] = (tm_value){.struct_size = sizeof(tm_value),
                                          .v.i = (int64_t)p * 1000000 + off};
            bt->values[k][1] = (tm_value){.struct_size = sizeof(tm_value)};
            bt->values[k][1].v.s.ptr = body;
            bt->values[k][1].v.s.len = strlen(body);
            bt->records[k] = (tm_record){.struct_size = sizeof(tm_record),
                                         .range = (uint32_t)p,
                                         .offset = off,
                                         .timestamp_ms = 1000 + off,
                                         .value = "{}",
                                         .value_len = 2,
                                         .values = bt->values[k]};
        }
    }
    bt->b = (tm_batch){.struct_size = sizeof(tm_batch),
                       .connector = "unit",
                       .batch_id = bt->id,
                       .deadline_ms = 0,
                       .ranges = bt->ranges,
                       .nranges = nparts,
                       .records = bt->records,
                       .nrecords = k};
    return 0;
}

tm_status fx_commit(void *sink, fx_batch *bt, tm_error *err) {
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    return fx_api->commit(sink, &bt->b, err);
}

typedef struct tally {
    int64_t end;
    unsigned *seen; /* per offset of [0, end) */
    long stray, dead;
    int64_t first_stray;
} tally;

static int count_item(void *user, const tm_scan_item *it) {
    tally *t = user;
    if (it->kind != TM_ITEM_ROW) {
        t->dead++;
    } else if (it->offset < 0 || it->offset >= t->end) {
        if (t->stray++ == 0)
            t->first_stray = it->offset;
    } else {
        t->seen[it->offset]++;
    }
    return 0;
}

int fx_scan_exactly_once(void *sink, int32_t partition, int64_t end, char *why,
                         size_t size) {
    tally t = {.end = end};
    t.seen = calloc(end > 0 ? (size_t)end : 1, sizeof *t.seen);
    if (!t.seen) {
        say(why, size, "out of memory");
        return -1;
    }
    tm_emit_target target = {.fn = count_item, .user = &t};
    tm_error err = {sizeof err, ""};
    tm_status r = fx_api->scan(sink, "t", partition, &target, &err);
    int out = 0;
    if (r != TM_OK) {
        say(why, size, "scan t[%d]: %s: %s", partition, tm_status_name(r),
            err.message);
        out = -1;
    } else if (t.dead || t.stray) {
        say(why, size,
            "scan t[%d]: %ld dead letter(s), %ld row(s) outside [0, %lld) "
            "(first at %lld)",
            partition, t.dead, t.stray, (long long)end,
            (long long)t.first_stray);
        out = -1;
    }
    for (int64_t o = 0; out == 0 && o < end; o++)
        if (t.seen[o] != 1) {
            say(why, size, "scan t[%d]: offset %lld has %u row(s), not 1",
                partition, (long long)o, t.seen[o]);
            out = -1;
        }
    free(t.seen);
    return out;
}

static int sql_one(const char *sql, int64_t *iout, char *tout, size_t tsize,
                   char *why, size_t size) {
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_open_v2(fx_db_path, &db, SQLITE_OPEN_READONLY, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (iout)
            *iout = sqlite3_column_int64(st, 0);
        if (tout) {
            const char *t = (const char *)sqlite3_column_text(st, 0);
            snprintf(tout, tsize, "%s", t ? t : "(null)");
        }
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_NOTFOUND;
    }
    if (rc != SQLITE_OK)
        say(why, size, "%s: %s", sql,
            db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return rc;
}

int fx_sql_int(const char *sql, int64_t *out, char *why, size_t size) {
    return sql_one(sql, out, NULL, 0, why, size);
}

int fx_sql_text(const char *sql, char *out, size_t out_size, char *why,
                size_t size) {
    return sql_one(sql, NULL, out, out_size, why, size);
}

int fx_sql_exactly_once(int32_t partition, int64_t end, char *why,
                        size_t size) {
    char sql[512];
    int64_t n = -1, distinct = -1, lo = -1, hi = -1;
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM t WHERE _tm_topic = 't' AND "
             "_tm_partition = %d",
             partition);
    if (fx_sql_int(sql, &n, why, size) != SQLITE_OK)
        return -1;
    snprintf(sql, sizeof sql,
             "SELECT count(DISTINCT _tm_offset) FROM t WHERE _tm_topic = 't' "
             "AND _tm_partition = %d",
             partition);
    if (fx_sql_int(sql, &distinct, why, size) != SQLITE_OK)
        return -1;
    snprintf(sql, sizeof sql,
             "SELECT coalesce(min(_tm_offset), -1) FROM t WHERE _tm_topic = "
             "'t' AND _tm_partition = %d",
             partition);
    if (fx_sql_int(sql, &lo, why, size) != SQLITE_OK)
        return -1;
    snprintf(sql, sizeof sql,
             "SELECT coalesce(max(_tm_offset), -1) FROM t WHERE _tm_topic = "
             "'t' AND _tm_partition = %d",
             partition);
    if (fx_sql_int(sql, &hi, why, size) != SQLITE_OK)
        return -1;
    /* n rows, n distinct offsets, all within [0, end): every offset once */
    int64_t want_lo = end > 0 ? 0 : -1;
    if (n != end || distinct != end || lo != want_lo || hi != end - 1) {
        say(why, size,
            "table t, t[%d]: %lld row(s), %lld distinct offset(s) in "
            "[%lld, %lld]; want exactly one per offset of [0, %lld)",
            partition, (long long)n, (long long)distinct, (long long)lo,
            (long long)hi, (long long)end);
        return -1;
    }
    return 0;
}
