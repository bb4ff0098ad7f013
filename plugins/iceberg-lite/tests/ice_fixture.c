/* The iceberg-lite test fixture (see ice_fixture.h). */
#define _XOPEN_SOURCE 700 /* nftw, mkdtemp */

#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ice_fixture.h"
#include "plugin/loader.h"
#include "services/host_services.h"

const tm_sink_api *ice_api;

/* Every type of the SDK: the judges check each one's Iceberg type. */
static const tm_column COLS[] = {
    {sizeof(tm_column), "id", TM_TYPE_INT, 1, 0},
    {sizeof(tm_column), "body", TM_TYPE_TEXT, 0, 0},
    {sizeof(tm_column), "amount", TM_TYPE_FLOAT, 0, 0},
    {sizeof(tm_column), "flag", TM_TYPE_BOOL, 0, 0},
    {sizeof(tm_column), "at", TM_TYPE_TIMESTAMP, 0, 0},
    {sizeof(tm_column), "doc", TM_TYPE_JSON, 0, 0},
    {sizeof(tm_column), "raw", TM_TYPE_BYTES, 0, 0},
};
#define NCOLS (sizeof COLS / sizeof COLS[0])

static int load(void) {
    static tm_plugin plugin;
    char errstr[512];
    if (ice_api)
        return 0;
    if (tm_plugin_load(TM_ICE_PLUGIN, NULL, 0, &plugin, errstr,
                       sizeof errstr) != 0) {
        fprintf(stderr, "%s\n", errstr);
        return -1;
    }
    ice_api = plugin.api;
    return 0;
}

int ice_fx_settings(ice_fx *fx, const char *json_text) {
    char text[2048];
    const char *at = strstr(json_text, "$T");
    if (at)
        snprintf(text, sizeof text, "%.*s%s%s", (int)(at - json_text),
                 json_text, fx->table, at + 2);
    else
        snprintf(text, sizeof text, "%s", json_text);
    json_error_t je;
    json_t *obj = json_loads(text, 0, &je);
    if (!obj) {
        fprintf(stderr, "bad test JSON: %s\n", je.text);
        return -1;
    }
    tm_settings_free(fx->settings);
    fx->settings = tm_settings_new(obj, "$.sink.settings");
    json_decref(obj);
    fx->config.settings = fx->settings;
    return fx->settings ? 0 : -1;
}

int ice_fx_init(ice_fx *fx, const char *extra) {
    memset(fx, 0, sizeof *fx);
    if (load() != 0)
        return -1;
    snprintf(fx->dir, sizeof fx->dir, "%s/tm-ice-test-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(fx->dir)) {
        perror("mkdtemp");
        return -1;
    }
    snprintf(fx->table, sizeof fx->table, "%s/table", fx->dir);
    fx->config = (tm_sink_config){.struct_size = sizeof(tm_sink_config),
                                  .connector = "unit",
                                  .columns = COLS,
                                  .ncolumns = NCOLS};
    char text[512];
    snprintf(text, sizeof text, "{\"path\": \"$T\"%s%s}", *extra ? ", " : "",
             extra);
    return ice_fx_settings(fx, text);
}

static int rm_entry(const char *p, const struct stat *sb, int t,
                    struct FTW *f) {
    (void)sb, (void)t, (void)f;
    return remove(p);
}

void ice_fx_done(ice_fx *fx, int keep) {
    tm_settings_free(fx->settings);
    fx->settings = NULL;
    if (!keep && fx->dir[0])
        nftw(fx->dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

tm_status ice_fx_open(ice_fx *fx, void **sink, tm_error *err) {
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    *sink = NULL;
    return ice_api->open(tm_host_services(), &fx->config, sink, err);
}

void ice_fx_batch_init(ice_fx_batch *kb, const char *batch_id) {
    memset(kb, 0, sizeof *kb);
    snprintf(kb->id, sizeof kb->id, "%s", batch_id);
    kb->b.struct_size = sizeof(tm_batch);
    kb->b.connector = "unit";
    kb->b.batch_id = kb->id;
    kb->b.deadline_ms = 0;
}

uint32_t ice_fx_range(ice_fx_batch *kb, int32_t partition, int64_t start,
                      int64_t end, int64_t epoch) {
    uint32_t i = (uint32_t)kb->b.nranges++;
    kb->ranges[i] = (tm_range){.struct_size = sizeof(tm_range),
                               .topic = "orders",
                               .partition = partition,
                               .start_offset = start,
                               .end_offset = end,
                               .epoch = epoch};
    return i;
}

static void grow(ice_fx_batch *kb) {
    size_t cap = kb->cap ? 2 * kb->cap : 64;
    kb->recs = realloc(kb->recs, cap * sizeof *kb->recs);
    kb->vals = realloc(kb->vals, cap * NCOLS * sizeof *kb->vals);
    kb->text = realloc(kb->text, cap * 3 * sizeof *kb->text);
    if (!kb->recs || !kb->vals || !kb->text) {
        fprintf(stderr, "out of memory\n");
        exit(1); /* a test helper, not plugin code */
    }
    kb->cap = cap;
}

/* The rule: id = offset; body "body-<p>-<o>" (null when o % 5 == 4);
 * amount o / 4; flag o odd; at 1700000000000000 + o us; doc
 * {"o":<o>}; raw bytes "r<p>:<o>" (null when o % 7 == 6). */
void ice_fx_record(ice_fx_batch *kb, uint32_t range, int64_t offset) {
    if (kb->b.nrecords == kb->cap)
        grow(kb);
    size_t j = kb->b.nrecords++;
    int32_t p = kb->ranges[range].partition;
    char(*t)[64] = &kb->text[3 * j];
    tm_value *v = &kb->vals[j * NCOLS];
    int n0 = snprintf(t[0], 64, "body-%d-%" PRId64, p, offset);
    int n1 = snprintf(t[1], 64, "{\"o\":%" PRId64 "}", offset);
    int n2 = snprintf(t[2], 64, "r%d:%" PRId64, p, offset);
    for (size_t k = 0; k < NCOLS; k++)
        v[k] = (tm_value){.struct_size = sizeof(tm_value)};
    v[0].v.i = offset;
    v[1].is_null = offset % 5 == 4;
    v[1].v.s.ptr = t[0];
    v[1].v.s.len = (size_t)n0;
    v[2].v.f = (double)offset / 4;
    v[3].v.i = offset % 2;
    v[4].v.i = INT64_C(1700000000000000) + offset;
    v[5].v.s.ptr = t[1];
    v[5].v.s.len = (size_t)n1;
    v[6].is_null = offset % 7 == 6;
    v[6].v.s.ptr = t[2];
    v[6].v.s.len = (size_t)n2;
    kb->recs[j] = (tm_record){.struct_size = sizeof(tm_record),
                              .range = range,
                              .offset = offset,
                              .timestamp_ms = -1};
}

void ice_fx_dead_letter(ice_fx_batch *kb, uint32_t range, int64_t offset) {
    if (kb->b.ndead_letters == kb->dcap) {
        kb->dcap = kb->dcap ? 2 * kb->dcap : 16;
        kb->dls = realloc(kb->dls, kb->dcap * sizeof *kb->dls);
        if (!kb->dls) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
    }
    kb->dls[kb->b.ndead_letters++] =
        (tm_dead_letter){.struct_size = sizeof(tm_dead_letter),
                         .range = range,
                         .offset = offset,
                         .timestamp_ms = 1234,
                         .reason = TM_DL_PARSE_ERROR,
                         .detail = "not JSON\nat all",
                         .value = "{oops",
                         .value_len = 5};
}

void ice_fx_seal(ice_fx_batch *kb) {
    /* The arrays may have moved while growing: point at them now. */
    for (size_t j = 0; j < kb->b.nrecords; j++) {
        tm_value *v = &kb->vals[j * NCOLS];
        v[1].v.s.ptr = kb->text[3 * j];
        v[5].v.s.ptr = kb->text[3 * j + 1];
        v[6].v.s.ptr = kb->text[3 * j + 2];
        kb->recs[j].values = v;
    }
    kb->b.ranges = kb->ranges;
    kb->b.records = kb->recs;
    kb->b.dead_letters = kb->dls;
}

void ice_fx_batch_free(ice_fx_batch *kb) {
    free(kb->recs);
    free(kb->vals);
    free(kb->text);
    free(kb->dls);
    memset(kb, 0, sizeof *kb);
}

tm_status ice_fx_claim(void *sink, tm_marker *m, size_t n, tm_error *err) {
    for (size_t i = 0; i < n; i++)
        m[i] = (tm_marker){.struct_size = sizeof(tm_marker),
                           .topic = "orders",
                           .partition = (int32_t)i,
                           .next_offset = 0};
    err->struct_size = sizeof *err;
    return ice_api->claim(sink, m, n, 0, err);
}

typedef struct counts {
    size_t rows, dls;
    int64_t max;
} counts;

static int count_item(void *user, const tm_scan_item *it) {
    counts *c = user;
    if (it->kind == TM_ITEM_ROW)
        c->rows++;
    else
        c->dls++;
    if (it->offset > c->max)
        c->max = it->offset;
    return 0;
}

int ice_fx_scan_count(void *sink, int32_t partition, size_t *rows, size_t *dls,
                      int64_t *max_offset) {
    counts c = {0, 0, -1};
    tm_emit_target target = {.fn = count_item, .user = &c};
    tm_error err = {sizeof err, ""};
    tm_status rc = ice_api->scan(sink, "orders", partition, &target, &err);
    if (rc != TM_OK) {
        fprintf(stderr, "scan: %s: %s\n", tm_status_name(rc), err.message);
        return -1;
    }
    *rows = c.rows;
    *dls = c.dls;
    if (max_offset)
        *max_offset = c.max;
    return 0;
}
