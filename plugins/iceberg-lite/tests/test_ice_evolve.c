/* Schema evolution through the plugin API: a mapping that adds optional
 * columns (or widens int to long, float to double) makes a new schema in
 * the same metadata commit as its first batch; old files read null for
 * the new columns; a drop, a rename, a changed type, a new required
 * column or a changed "required" is refused by open and validate with the
 * mapping's JSON path and the reason; a crash before the link leaves the
 * old schema. What other readers see is judged by pyiceberg, pyarrow and
 * DuckDB in judge_evolve.py. */
#define _POSIX_C_SOURCE 200809L /* setenv, fork */

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "ice_fixture.h"
#include "maint.h"
#include "services/host_services.h"
#include "snapshot_files.h"

static ice_fx fx;

/* The fixture's columns are id, body, amount, flag, at, doc, raw: the
 * first V1 of them are mapping v1, all of them v2 (doc and raw added,
 * both optional). */
#define V1 5
#define V2 7

static void setup(void) {
    ck_assert_int_eq(ice_fx_init(&fx, "\"fsync\": false"), 0);
    fx.config.ncolumns = V1;
}

static void teardown(void) {
    ice_fx_done(&fx, 0);
}

/* The newest metadata version (its number into *version). */
static json_t *newest(int64_t *version) {
    ice_table t;
    char why[512];
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 0, why, sizeof why), 0);
    ck_assert_msg(ice_table_refresh(&t, why, sizeof why) == 0, "%s", why);
    json_t *m = json_incref(t.meta);
    if (version)
        *version = t.version;
    ice_table_free(&t);
    return m;
}

static json_t *version_file(int64_t v) {
    char path[600];
    snprintf(path, sizeof path, "%s/metadata/v%lld.metadata.json", fx.table,
             (long long)v);
    json_t *m = json_load_file(path, 0, NULL);
    ck_assert_ptr_nonnull(m);
    return m;
}

static void *open_ok(void) {
    void *sink;
    tm_error err;
    tm_status rc = ice_fx_open(&fx, &sink, &err);
    ck_assert_msg(rc == TM_OK, "open: %s: %s", tm_status_name(rc), err.message);
    return sink;
}

/* Claims partition 0 and commits rows [start, end) there. */
static tm_status claim_commit(void *sink, int64_t start, int64_t end,
                              tm_error *err) {
    tm_marker m[1];
    ck_assert_int_eq(ice_fx_claim(sink, m, 1, err), TM_OK);
    ice_fx_batch kb;
    char id[32];
    snprintf(id, sizeof id, "evolve-%lld", (long long)start);
    ice_fx_batch_init(&kb, id);
    uint32_t r = ice_fx_range(&kb, 0, start, end, m[0].epoch);
    for (int64_t o = start; o < end; o++)
        ice_fx_record(&kb, r, o);
    ice_fx_seal(&kb);
    err->struct_size = sizeof *err;
    tm_status rc = ice_api->commit(sink, &kb.b, err);
    ice_fx_batch_free(&kb);
    return rc;
}

static void write_v1_table(int64_t rows) {
    void *sink = open_ok();
    tm_error err;
    tm_status rc = claim_commit(sink, 0, rows, &err);
    ck_assert_msg(rc == TM_OK, "%s: %s", tm_status_name(rc), err.message);
    ice_api->close(sink);
}

static json_t *schema_by_id(json_t *meta, int64_t id) {
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(meta, "schemas"), i, s) {
        if (ice_json_int(s, "schema-id", -1) == id)
            return s;
    }
    return NULL;
}

/* Field NAME of schema SCHEMA: its id, type into *type. -1 when none. */
static int64_t field(json_t *schema, const char *name, const char **type) {
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(schema, "fields"), i, f) {
        if (strcmp(json_string_value(json_object_get(f, "name")), name) == 0) {
            if (type)
                *type = json_string_value(json_object_get(f, "type"));
            return ice_json_int(f, "id", -1);
        }
    }
    return -1;
}

/* Rows scan gives back for partition 0, with values. */
typedef struct seen {
    size_t rows, with_values, doc_null, doc_ok, raw_null;
    int64_t first_new; /* rows at or past it were written under v2 */
    int bad;
} seen;

static int on_item(void *user, const tm_scan_item *it) {
    seen *s = user;
    if (it->kind != TM_ITEM_ROW)
        return 0;
    s->rows++;
    if (!TM_SCAN_ITEM_HAS_VALUES(it) || it->nvalues != V2)
        return 0;
    s->with_values++;
    const tm_value *doc = TM_CELEM(tm_value, it->values, 5);
    const tm_value *raw = TM_CELEM(tm_value, it->values, 6);
    const tm_value *id = TM_CELEM(tm_value, it->values, 0);
    char want[32];
    int n = snprintf(want, sizeof want, "{\"o\":%lld}", (long long)it->offset);
    if (id->is_null || id->v.i != it->offset)
        s->bad = 1;
    if (it->offset < s->first_new) {
        /* an old file: no doc or raw column, null */
        s->doc_null += doc->is_null;
        s->raw_null += raw->is_null;
    } else if (!doc->is_null && doc->v.s.len == (size_t)n &&
               memcmp(doc->v.s.ptr, want, (size_t)n) == 0 &&
               raw->is_null == (it->offset % 7 == 6)) {
        s->doc_ok++;
    }
    return 0;
}

static seen scan_v2(void *sink, int64_t first_new) {
    seen s = {.first_new = first_new};
    tm_emit_target target = {.fn = on_item, .user = &s};
    tm_error err = {sizeof err, ""};
    tm_status rc = ice_api->scan(sink, "orders", 0, &target, &err);
    ck_assert_msg(rc == TM_OK, "scan: %s", err.message);
    return s;
}

START_TEST(added_optional_columns_make_a_new_schema_with_the_batch) {
    write_v1_table(10);
    int64_t v_before;
    json_t *m = newest(&v_before);
    ck_assert_int_eq(ice_json_int(m, "current-schema-id", -1), 0);
    ck_assert_int_eq(json_array_size(json_object_get(m, "schemas")), 1);
    ck_assert_int_eq(ice_json_int(m, "last-column-id", -1), 8);
    json_decref(m);

    fx.config.ncolumns = V2;
    tm_error err;
    ck_assert_msg(ice_api->validate(tm_host_services(), &fx.config, &err) ==
                      TM_OK,
                  "validate: %s", err.message);
    void *sink = open_ok();
    /* open and validate change nothing: the schema comes with a batch */
    int64_t v;
    m = newest(&v);
    ck_assert_int_eq(v, v_before);
    ck_assert_int_eq(ice_json_int(m, "current-schema-id", -1), 0);
    json_decref(m);
    tm_status rc = claim_commit(sink, 10, 20, &err);
    ck_assert_msg(rc == TM_OK, "%s: %s", tm_status_name(rc), err.message);

    m = newest(&v);
    ck_assert_int_eq(ice_json_int(m, "current-schema-id", -1), 1);
    ck_assert_int_eq(json_array_size(json_object_get(m, "schemas")), 2);
    ck_assert_int_eq(ice_json_int(m, "last-column-id", -1), 10);
    json_t *s0 = schema_by_id(m, 0), *s1 = schema_by_id(m, 1);
    ck_assert_ptr_nonnull(s0);
    ck_assert_ptr_nonnull(s1);
    ck_assert_int_eq(json_array_size(json_object_get(s0, "fields")), 8);
    ck_assert_int_eq(json_array_size(json_object_get(s1, "fields")), 10);
    /* old columns keep their ids; new ones past the last (never reused) */
    static const struct {
        const char *name;
        int64_t id;
        const char *type;
    } WANT[] = {{"id", 1, "long"},
                {"body", 2, "string"},
                {"amount", 3, "double"},
                {"flag", 4, "boolean"},
                {"at", 5, "timestamptz"},
                {"doc", 9, "string"},
                {"raw", 10, "binary"},
                {"_tm_topic", 6, "string"},
                {"_tm_partition", 7, "long"},
                {"_tm_offset", 8, "long"}};
    for (size_t i = 0; i < sizeof WANT / sizeof WANT[0]; i++) {
        const char *type = NULL;
        ck_assert_msg(field(s1, WANT[i].name, &type) == WANT[i].id, "%s",
                      WANT[i].name);
        ck_assert_str_eq(type, WANT[i].type);
        json_t *f = json_array_get(json_object_get(s1, "fields"), i);
        ck_assert_str_eq(json_string_value(json_object_get(f, "name")),
                         WANT[i].name);
    }
    ck_assert(!json_is_true(json_object_get(
        json_array_get(json_object_get(s1, "fields"), 5), "required")));
    ck_assert_int_eq(field(s0, "doc", NULL), -1);
    /* the snapshot written under it names it; the one before, schema 0 */
    json_t *cur = ice_meta_current_snapshot(m);
    ck_assert_int_eq(ice_json_int(cur, "schema-id", -1), 1);
    json_t *parent =
        ice_meta_snapshot(m, ice_json_int(cur, "parent-snapshot-id", -1));
    ck_assert_int_eq(ice_json_int(parent, "schema-id", -1), 0);
    /* the same version: the one before it has the old schema only */
    json_t *prev = version_file(v - 1);
    ck_assert_int_eq(ice_json_int(prev, "current-schema-id", -1), 0);
    ck_assert_int_eq(json_array_size(json_object_get(prev, "schemas")), 1);
    json_decref(prev);

    /* scan: old rows have null in the new columns, new rows their values */
    seen s = scan_v2(sink, 10);
    ck_assert_int_eq(s.rows, 20);
    ck_assert_int_eq(s.with_values, 20);
    ck_assert_int_eq(s.doc_null, 10);
    ck_assert_int_eq(s.raw_null, 10);
    ck_assert_int_eq(s.doc_ok, 10);
    ck_assert(!s.bad);
    ice_api->close(sink);
    json_decref(m);

    /* mapping v1 now drops doc and raw: refused */
    fx.config.ncolumns = V1;
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_INVALID);
    ck_assert_msg(strstr(err.message, "column \"doc\" (string, field id 9)") &&
                      strstr(err.message, "dropping a column is not"),
                  "%s", err.message);
}
END_TEST

/* Compact rewrites the old files under the current schema: their rows
 * get null in the new columns, the new file every field id. */
typedef struct rows_seen {
    size_t rows, doc_null_old, doc_set_new, ncols;
} rows_seen;

static int on_row(void *ctx, const pq_cell *cells, size_t n) {
    rows_seen *r = ctx;
    r->rows++;
    r->ncols = n;
    int64_t offset = cells[9].i; /* _tm_offset, the schema's 10th field */
    if (offset < 10)
        r->doc_null_old += cells[5].is_null;
    else
        r->doc_set_new += !cells[5].is_null;
    return 0;
}

START_TEST(compact_rewrites_old_files_under_the_current_schema) {
    write_v1_table(10);
    fx.config.ncolumns = V2;
    void *sink = open_ok();
    tm_error err;
    ck_assert_int_eq(claim_commit(sink, 10, 20, &err), TM_OK);
    ice_api->close(sink);

    ice_table t;
    char why[512];
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 0, why, sizeof why), 0);
    ck_assert_int_eq(ice_table_refresh(&t, why, sizeof why), 0);
    ice_compact_result res;
    ck_assert_msg(ice_compact(&t, INT64_C(1) << 27, &res, why, sizeof why) == 0,
                  "%s", why);
    ck_assert_int_eq(ice_table_refresh(&t, why, sizeof why), 0);
    json_t *cur = ice_meta_current_snapshot(t.meta);
    ck_assert_int_eq(ice_json_int(cur, "schema-id", -1), 1);
    ice_datafile *files;
    size_t n;
    ck_assert_int_eq(
        ice_snapshot_datafiles(&t, cur, &files, &n, why, sizeof why), 0);
    ck_assert_int_eq(n, 1);
    pq_column_def *cols;
    size_t ncols;
    ck_assert_int_eq(ice_schema_columns(t.meta, &cols, &ncols, why, sizeof why),
                     0);
    /* the plain reader: the file's own columns are the schema's ten */
    rows_seen own = {0};
    ck_assert_msg(ice_file_rows(files[0].path, on_row, &own, why, sizeof why) ==
                      0,
                  "%s", why);
    ck_assert_int_eq(own.ncols, 10);
    ck_assert_int_eq(own.rows, 20);
    ck_assert_int_eq(own.doc_null_old, 10);
    ck_assert_int_eq(own.doc_set_new, 10);
    ice_datafiles_free(files, n);
    free(cols);
    ice_table_free(&t);
    /* scan through the plugin still reads every row */
    sink = open_ok();
    seen s = scan_v2(sink, 10);
    ck_assert_int_eq(s.rows, 20);
    ck_assert_int_eq(s.doc_null, 10);
    ck_assert_int_eq(s.doc_ok, 10);
    ice_api->close(sink);
}
END_TEST

/* open and validate both refuse the mapping, naming PATH and WHY; the
 * table is left as it was. */
static void refused(const tm_column *cols, size_t n, const char *path,
                    const char *why) {
    int64_t v0, v1;
    json_decref(newest(&v0));
    const tm_column *keep = fx.config.columns;
    size_t keep_n = fx.config.ncolumns;
    fx.config.columns = cols;
    fx.config.ncolumns = n;
    void *sink;
    tm_error err;
    ck_assert_int_eq(ice_fx_open(&fx, &sink, &err), TM_INVALID);
    ck_assert_msg(strstr(err.message, path) && strstr(err.message, why),
                  "open: %s", err.message);
    ck_assert_int_eq(ice_api->validate(tm_host_services(), &fx.config, &err),
                     TM_INVALID);
    ck_assert_msg(strstr(err.message, path) && strstr(err.message, why),
                  "validate: %s", err.message);
    fx.config.columns = keep;
    fx.config.ncolumns = keep_n;
    json_t *m = newest(&v1);
    ck_assert_int_eq(v1, v0);
    ck_assert_int_eq(ice_json_int(m, "current-schema-id", -1), 0);
    json_decref(m);
}

#define COL(name, type, req)                                                   \
    { sizeof(tm_column), name, type, req, 0 }

START_TEST(incompatible_mappings_refused) {
    write_v1_table(3);
    const tm_column *base = fx.config.columns;
    /* dropping: "at" is gone */
    refused(base, 4, "$.mapping.columns",
            "has column \"at\" (timestamptz, field id 5), the mapping does "
            "not: dropping a column is not supported");
    /* renaming "amount" to "amt": a drop and an add, the drop refused */
    tm_column renamed[] = {
        COL("id", TM_TYPE_INT, 1),       COL("body", TM_TYPE_TEXT, 0),
        COL("amt", TM_TYPE_FLOAT, 0),    COL("flag", TM_TYPE_BOOL, 0),
        COL("at", TM_TYPE_TIMESTAMP, 0),
    };
    refused(renamed, V1, "$.mapping.columns",
            "column \"amount\" (double, field id 3), the mapping does not: "
            "dropping a column is not supported");
    refused(renamed, V1, "$.mapping.columns",
            "$.mapping.columns[2] \"amt\" is new: a rename is a drop and an "
            "add");
    /* another type: double to text, timestamp to int */
    tm_column retyped[] = {
        COL("id", TM_TYPE_INT, 1),       COL("body", TM_TYPE_TEXT, 0),
        COL("amount", TM_TYPE_TEXT, 0),  COL("flag", TM_TYPE_BOOL, 0),
        COL("at", TM_TYPE_TIMESTAMP, 0),
    };
    refused(retyped, V1, "$.mapping.columns[2]: column \"amount\" is double",
            "the mapping makes it string: only int to long and float to "
            "double widen");
    retyped[2].type = TM_TYPE_FLOAT;
    retyped[4].type = TM_TYPE_INT;
    refused(retyped, V1, "$.mapping.columns[4]: column \"at\" is timestamptz",
            "the mapping makes it long: only int to long");
    /* a new column that is required */
    tm_column required_new[] = {
        COL("id", TM_TYPE_INT, 1),       COL("body", TM_TYPE_TEXT, 0),
        COL("amount", TM_TYPE_FLOAT, 0), COL("flag", TM_TYPE_BOOL, 0),
        COL("at", TM_TYPE_TIMESTAMP, 0), COL("doc", TM_TYPE_JSON, 1),
    };
    refused(required_new, 6, "$.mapping.columns[5]: column \"doc\" is new",
            "a new column must be optional");
    /* "required" changed, either way */
    tm_column req[] = {
        COL("id", TM_TYPE_INT, 0),       COL("body", TM_TYPE_TEXT, 0),
        COL("amount", TM_TYPE_FLOAT, 0), COL("flag", TM_TYPE_BOOL, 0),
        COL("at", TM_TYPE_TIMESTAMP, 0),
    };
    refused(req, V1, "$.mapping.columns[0]: column \"id\" is required",
            "changing whether a column is required is not supported");
    req[0].required = 1;
    req[1].required = 1;
    refused(req, V1, "$.mapping.columns[1]: column \"body\" is optional",
            "changing whether a column is required is not supported");
}
END_TEST

START_TEST(partition_source_column_cannot_be_dropped) {
    ck_assert_int_eq(ice_fx_settings(&fx,
                                     "{\"path\": \"$T\", \"fsync\": false, "
                                     "\"partition\": \"truncate[3](body)\"}"),
                     0);
    write_v1_table(6);
    /* body gone from the mapping (and from the setting) */
    tm_column nobody[] = {
        COL("id", TM_TYPE_INT, 1),
        COL("amount", TM_TYPE_FLOAT, 0),
        COL("flag", TM_TYPE_BOOL, 0),
        COL("at", TM_TYPE_TIMESTAMP, 0),
    };
    ck_assert_int_eq(ice_fx_settings(&fx, "{\"path\": \"$T\", \"fsync\": "
                                          "false, \"partition\": \"\"}"),
                     0);
    refused(nobody, 4, "column \"body\" (string, field id 2)",
            "it is the source of partition field body_trunc");
    /* with the setting unchanged, the setting itself names the column */
    ck_assert_int_eq(ice_fx_settings(&fx,
                                     "{\"path\": \"$T\", \"fsync\": false, "
                                     "\"partition\": \"truncate[3](body)\"}"),
                     0);
    refused(nobody, 4, "$.sink.settings.partition", "body");
    /* adding a column keeps the spec and its source id */
    fx.config.ncolumns = V2;
    void *sink = open_ok();
    tm_error err;
    tm_status rc = claim_commit(sink, 6, 12, &err);
    ck_assert_msg(rc == TM_OK, "%s: %s", tm_status_name(rc), err.message);
    seen s = scan_v2(sink, 6);
    ck_assert_int_eq(s.rows, 12);
    ck_assert_int_eq(s.doc_null, 6);
    ck_assert_int_eq(s.doc_ok, 6);
    ice_api->close(sink);
    json_t *m = newest(NULL);
    ck_assert_int_eq(ice_json_int(m, "current-schema-id", -1), 1);
    json_t *spec = json_array_get(json_object_get(m, "partition-specs"), 0);
    json_t *pf = json_array_get(json_object_get(spec, "fields"), 0);
    ck_assert_int_eq(ice_json_int(pf, "source-id", -1), 2);
    ck_assert_int_eq(json_array_size(json_object_get(m, "partition-specs")), 1);
    json_decref(m);
}
END_TEST

/* A table whose "id" is Iceberg int and "amount" float (as another engine
 * makes them; this sink writes long and double): the mapping's int and
 * float widen them. */
START_TEST(int_and_float_widen_to_long_and_double) {
    void *sink = open_ok(); /* creates the table, no snapshot */
    ice_api->close(sink);
    ice_table t;
    char why[512], tmp[4096];
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 0, why, sizeof why), 0);
    ck_assert_int_eq(ice_table_refresh(&t, why, sizeof why), 0);
    json_t *next = ice_meta_next(&t);
    json_t *fields = json_object_get(
        json_array_get(json_object_get(next, "schemas"), 0), "fields");
    json_object_set_new(json_array_get(fields, 0), "type", json_string("int"));
    json_object_set_new(json_array_get(fields, 2), "type",
                        json_string("float"));
    ck_assert_int_eq(ice_meta_stage(&t, next, tmp, why, sizeof why), 0);
    ck_assert_int_eq(ice_meta_link(&t, next, tmp, why, sizeof why), 0);
    json_decref(next);
    ice_table_free(&t);

    tm_error err;
    ck_assert_msg(ice_api->validate(tm_host_services(), &fx.config, &err) ==
                      TM_OK,
                  "validate: %s", err.message);
    sink = open_ok();
    tm_status rc = claim_commit(sink, 0, 4, &err);
    ck_assert_msg(rc == TM_OK, "%s: %s", tm_status_name(rc), err.message);
    size_t rows, dls;
    ck_assert_int_eq(ice_fx_scan_count(sink, 0, &rows, &dls, NULL), 0);
    ck_assert_int_eq(rows, 4);
    ice_api->close(sink);
    json_t *m = newest(NULL);
    ck_assert_int_eq(ice_json_int(m, "current-schema-id", -1), 1);
    ck_assert_int_eq(ice_json_int(m, "last-column-id", -1), 8);
    const char *type;
    ck_assert_int_eq(field(schema_by_id(m, 1), "id", &type), 1);
    ck_assert_str_eq(type, "long");
    ck_assert_int_eq(field(schema_by_id(m, 1), "amount", &type), 3);
    ck_assert_str_eq(type, "double");
    ck_assert_int_eq(field(schema_by_id(m, 0), "amount", &type), 3);
    ck_assert_str_eq(type, "float");
    json_decref(m);
}
END_TEST

/* Killed at after_marker (the next metadata staged and synced, not
 * linked): the table keeps the old schema and reads as before; the
 * resend lands the new schema with the batch. */
START_TEST(crash_before_the_link_keeps_the_old_schema) {
    write_v1_table(10);
    fx.config.ncolumns = V2;
    int64_t v0;
    json_decref(newest(&v0));
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char fd[16];
        snprintf(fd, sizeof fd, "%d", fds[1]);
        setenv("TIDEMARK_FAULT", TM_FAULT_AFTER_MARKER, 1);
        setenv("TIDEMARK_FAULT_FD", fd, 1);
        void *sink;
        tm_error err;
        if (ice_fx_open(&fx, &sink, &err) == TM_OK)
            claim_commit(sink, 10, 20, &err);
        _exit(0); /* not killed: the parent calls it inconclusive */
    }
    close(fds[1]);
    char point[64] = "";
    ssize_t got = read(fds[0], point, sizeof point - 1);
    close(fds[0]);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(got > 0 && strstr(point, TM_FAULT_AFTER_MARKER) &&
                      WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "inconclusive: the child was not killed at %s",
                  TM_FAULT_AFTER_MARKER);
    /* the claim landed (one version), the batch and its schema did not */
    int64_t v;
    json_t *m = newest(&v);
    ck_assert_int_eq(v, v0 + 1);
    ck_assert_int_eq(ice_json_int(m, "current-schema-id", -1), 0);
    ck_assert_int_eq(json_array_size(json_object_get(m, "schemas")), 1);
    json_decref(m);
    /* readable: by mapping v1 and by v2 */
    fx.config.ncolumns = V1;
    void *sink = open_ok();
    size_t rows, dls;
    ck_assert_int_eq(ice_fx_scan_count(sink, 0, &rows, &dls, NULL), 0);
    ck_assert_int_eq(rows, 10);
    ice_api->close(sink);
    fx.config.ncolumns = V2;
    sink = open_ok();
    tm_error err;
    tm_status rc = claim_commit(sink, 10, 20, &err);
    ck_assert_msg(rc == TM_OK, "%s: %s", tm_status_name(rc), err.message);
    seen s = scan_v2(sink, 10);
    ck_assert_int_eq(s.rows, 20);
    ck_assert_int_eq(s.doc_null, 10);
    ck_assert_int_eq(s.doc_ok, 10);
    ice_api->close(sink);
    m = newest(NULL);
    ck_assert_int_eq(ice_json_int(m, "current-schema-id", -1), 1);
    ck_assert_int_eq(json_array_size(json_object_get(m, "schemas")), 2);
    json_decref(m);
}
END_TEST

/* The reader of `table scan` and compact on a file another engine wrote
 * (pyarrow: "id" INT32, "body" a string, no field ids): columns without
 * ids are matched by name, a column the file lacks is null, and one of
 * another physical type (an Iceberg int the table widened to long) is
 * refused naming it, never misread. */
typedef struct foreign_rows {
    size_t rows, doc_null;
    char body[8];
} foreign_rows;

static int on_foreign(void *ctx, const pq_cell *cells, size_t n) {
    foreign_rows *f = ctx;
    ck_assert_int_eq(n, 2);
    if (!cells[0].is_null && cells[0].n == 1)
        f->body[f->rows] = (char)cells[0].p[0];
    f->doc_null += cells[1].is_null;
    f->rows++;
    return 0;
}

START_TEST(foreign_file_read_by_name_and_int32_refused) {
    const char *path = getenv("TM_ICE_INT32_FILE");
    ck_assert_msg(path && *path, "TM_ICE_INT32_FILE is not set: inconclusive");
    pq_column_def some[] = {{"body", PQ_STRING, 0, 2},
                            {"doc", PQ_STRING, 0, 9}};
    foreign_rows f = {0};
    char why[512];
    ck_assert_msg(
        ice_file_rows_as(path, some, 2, on_foreign, &f, why, sizeof why) == 0,
        "%s", why);
    ck_assert_int_eq(f.rows, 5);
    ck_assert_str_eq(f.body, "abcde");
    ck_assert_int_eq(f.doc_null, 5);
    pq_column_def widened[] = {{"id", PQ_INT64, 1, 1},
                               {"body", PQ_STRING, 0, 2}};
    ck_assert_int_eq(
        ice_file_rows_as(path, widened, 2, on_foreign, &f, why, sizeof why),
        -1);
    ck_assert_msg(strstr(why, "column id (field id 1) is not of the physical "
                              "type"),
                  "%s", why);
    ck_assert_int_eq(f.rows, 5); /* no row handed out */
}
END_TEST

/* Two connectors' mappings add columns to one table at once: a adds doc,
 * b adds raw and doc (raw first, so on the old table b would give raw id
 * 9 and doc 10). a commits between b's files and b's link: b's files
 * carry ids the table no longer has, so b answers RETRY and its resend
 * writes them again under doc 9, raw 10. */
static const tm_column COLS_A[] = {
    COL("id", TM_TYPE_INT, 1),       COL("body", TM_TYPE_TEXT, 0),
    COL("amount", TM_TYPE_FLOAT, 0), COL("flag", TM_TYPE_BOOL, 0),
    COL("at", TM_TYPE_TIMESTAMP, 0), COL("doc", TM_TYPE_JSON, 0),
};
/* The fixture's values 5 and 6 ({"o":N} and "rP:N") land in raw and doc. */
static const tm_column COLS_B[] = {
    COL("id", TM_TYPE_INT, 1),       COL("body", TM_TYPE_TEXT, 0),
    COL("amount", TM_TYPE_FLOAT, 0), COL("flag", TM_TYPE_BOOL, 0),
    COL("at", TM_TYPE_TIMESTAMP, 0), COL("raw", TM_TYPE_BYTES, 0),
    COL("doc", TM_TYPE_JSON, 0),
};
static tm_sink_config cfg_a, cfg_b;
static int raced;

static void a_commits_at_b_link(const char *point) {
    if (raced || strcmp(point, TM_FAULT_AFTER_MARKER) != 0)
        return;
    raced = 1;
    void *a;
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(ice_api->open(tm_host_services(), &cfg_a, &a, &err),
                     TM_OK);
    tm_status rc = claim_commit(a, 10, 13, &err);
    ck_assert_msg(rc == TM_OK, "a: %s: %s", tm_status_name(rc), err.message);
    ice_api->close(a);
}

typedef struct by_name {
    const pq_column_def *cols;
    size_t ncols, p1_rows, p1_ok, p0_new;
} by_name;

static const pq_cell *cell_of(by_name *b, const pq_cell *cells,
                              const char *name) {
    for (size_t k = 0; k < b->ncols; k++)
        if (strcmp(b->cols[k].name, name) == 0)
            return &cells[k];
    ck_abort_msg("no column %s", name);
    return NULL;
}

static int on_raced_row(void *ctx, const pq_cell *cells, size_t n) {
    by_name *b = ctx;
    ck_assert_int_eq(n, b->ncols);
    int64_t p = cell_of(b, cells, "_tm_partition")->i;
    int64_t o = cell_of(b, cells, "_tm_offset")->i;
    const pq_cell *doc = cell_of(b, cells, "doc"),
                  *raw = cell_of(b, cells, "raw");
    char text[32], bytes[32];
    int nt = snprintf(text, sizeof text, "{\"o\":%lld}", (long long)o);
    int nb =
        snprintf(bytes, sizeof bytes, "r%lld:%lld", (long long)p, (long long)o);
    if (p == 1) {
        /* b's values: {"o":N} in raw (field 10), rP:N in doc (field 9) */
        b->p1_rows++;
        b->p1_ok += !raw->is_null && raw->n == (size_t)nt &&
                    memcmp(raw->p, text, raw->n) == 0 &&
                    (o % 7 == 6 ? doc->is_null
                                : !doc->is_null && doc->n == (size_t)nb &&
                                      memcmp(doc->p, bytes, doc->n) == 0);
    } else if (o >= 10) {
        b->p0_new += !doc->is_null && doc->n == (size_t)nt &&
                     memcmp(doc->p, text, doc->n) == 0 && raw->is_null;
    }
    return 0;
}

START_TEST(ids_taken_meanwhile_make_the_batch_written_again) {
    write_v1_table(10);
    cfg_a = fx.config;
    cfg_a.columns = COLS_A;
    cfg_a.ncolumns = 6;
    cfg_b = fx.config;
    cfg_b.columns = COLS_B;
    cfg_b.ncolumns = 7;
    tm_host_api host = *tm_host_services();
    host.fault = a_commits_at_b_link;
    void *b;
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(ice_api->open(&host, &cfg_b, &b, &err), TM_OK);
    tm_marker m = {.struct_size = sizeof m, .topic = "orders", .partition = 1};
    ck_assert_int_eq(ice_api->claim(b, &m, 1, 0, &err), TM_OK);
    ice_fx_batch kb;
    ice_fx_batch_init(&kb, "b-1");
    uint32_t r = ice_fx_range(&kb, 1, 0, 8, m.epoch);
    for (int64_t o = 0; o < 8; o++)
        ice_fx_record(&kb, r, o);
    ice_fx_seal(&kb);
    raced = 0;
    tm_status rc = ice_api->commit(b, &kb.b, &err);
    ck_assert_msg(raced, "inconclusive: a did not commit at b's link");
    ck_assert_msg(rc == TM_RETRY && strstr(err.message, "changed the schema"),
                  "%s: %s", tm_status_name(rc), err.message);
    rc = ice_api->commit(b, &kb.b, &err); /* the host's resend */
    ck_assert_msg(rc == TM_OK, "resend: %s: %s", tm_status_name(rc),
                  err.message);
    ice_fx_batch_free(&kb);
    ice_api->close(b);

    json_t *meta = newest(NULL);
    ck_assert_int_eq(ice_json_int(meta, "current-schema-id", -1), 2);
    ck_assert_int_eq(ice_json_int(meta, "last-column-id", -1), 10);
    ck_assert_int_eq(field(schema_by_id(meta, 1), "doc", NULL), 9);
    ck_assert_int_eq(field(schema_by_id(meta, 2), "doc", NULL), 9);
    ck_assert_int_eq(field(schema_by_id(meta, 2), "raw", NULL), 10);
    json_decref(meta);
    ice_table t;
    char why[512];
    ck_assert_int_eq(ice_table_init(&t, fx.table, 0, 0, why, sizeof why), 0);
    ck_assert_int_eq(ice_table_refresh(&t, why, sizeof why), 0);
    ice_datafile *files;
    size_t n;
    pq_column_def *cols;
    size_t ncols;
    ck_assert_int_eq(ice_snapshot_datafiles(&t,
                                            ice_meta_current_snapshot(t.meta),
                                            &files, &n, why, sizeof why),
                     0);
    ck_assert_int_eq(ice_schema_columns(t.meta, &cols, &ncols, why, sizeof why),
                     0);
    by_name got = {.cols = cols, .ncols = ncols};
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(ice_file_rows_as(files[i].path, cols, ncols, on_raced_row,
                                       &got, why, sizeof why) == 0,
                      "%s", why);
    ck_assert_int_eq(got.p1_rows, 8);
    ck_assert_int_eq(got.p1_ok, 8);
    ck_assert_int_eq(got.p0_new, 3);
    ice_datafiles_free(files, n);
    free(cols);
    ice_table_free(&t);
}
END_TEST

/* A connector still on the old mapping, open while another one added
 * columns: its next commit finds its mapping dropping them (FATAL, the
 * drop's message), nothing written. */
START_TEST(a_column_added_meanwhile_is_fatal_for_the_older_mapping) {
    write_v1_table(10);
    cfg_a = fx.config; /* mapping v1 */
    cfg_b = fx.config;
    cfg_b.ncolumns = V2;
    void *a, *b;
    tm_error err = {sizeof err, ""};
    ck_assert_int_eq(ice_api->open(tm_host_services(), &cfg_a, &a, &err),
                     TM_OK);
    ck_assert_int_eq(ice_api->open(tm_host_services(), &cfg_b, &b, &err),
                     TM_OK);
    tm_status rc = claim_commit(b, 10, 20, &err);
    ck_assert_msg(rc == TM_OK, "b: %s: %s", tm_status_name(rc), err.message);
    ice_api->close(b);
    int64_t v0, v1;
    json_decref(newest(&v0));
    tm_marker m = {.struct_size = sizeof m, .topic = "orders", .partition = 1};
    ck_assert_int_eq(ice_api->claim(a, &m, 1, 0, &err), TM_OK);
    json_decref(newest(&v0));
    ice_fx_batch kb;
    ice_fx_batch_init(&kb, "a-1");
    uint32_t r = ice_fx_range(&kb, 1, 0, 3, m.epoch);
    for (int64_t o = 0; o < 3; o++)
        ice_fx_record(&kb, r, o);
    ice_fx_seal(&kb);
    rc = ice_api->commit(a, &kb.b, &err);
    ice_fx_batch_free(&kb);
    ck_assert_msg(rc == TM_FATAL &&
                      strstr(err.message, "column \"doc\" (string, field "
                                          "id 9), the mapping does not"),
                  "%s: %s", tm_status_name(rc), err.message);
    ice_api->close(a);
    json_t *meta = newest(&v1);
    ck_assert_int_eq(v1, v0);
    ck_assert_int_eq(ice_json_int(meta, "current-schema-id", -1), 1);
    json_decref(meta);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("iceberg_lite.evolve");
    TCase *tc = tcase_create("evolve");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, added_optional_columns_make_a_new_schema_with_the_batch);
    tcase_add_test(tc, compact_rewrites_old_files_under_the_current_schema);
    tcase_add_test(tc, incompatible_mappings_refused);
    tcase_add_test(tc, partition_source_column_cannot_be_dropped);
    tcase_add_test(tc, int_and_float_widen_to_long_and_double);
    tcase_add_test(tc, crash_before_the_link_keeps_the_old_schema);
    tcase_add_test(tc, foreign_file_read_by_name_and_int32_refused);
    tcase_add_test(tc, ids_taken_meanwhile_make_the_batch_written_again);
    tcase_add_test(tc, a_column_added_meanwhile_is_fatal_for_the_older_mapping);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
