/* Manifests and manifest lists (see manifest.h). The Avro schemas are the
 * spec's v2 schemas less the optional fields we never fill (column sizes,
 * NaN counts, the manifest list's partition summaries, key metadata):
 * readers resolve by field id and read an absent optional field as null. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "avro_reader.h"
#include "avro_writer.h"
#include "fsio.h"
#include "manifest.h"

/* The spec's field names and ids; one field per line. data_file.partition
 * is the spec's record (pspec.h), between MANIFEST_HEAD and MANIFEST_TAIL;
 * the metrics maps (metrics.h) come last, in this order. */
static const char MANIFEST_HEAD[] =
    "{\"type\":\"record\",\"name\":\"manifest_entry\",\"fields\":["
    "{\"name\":\"status\",\"type\":\"int\",\"field-id\":0},"
    "{\"name\":\"snapshot_id\",\"type\":[\"null\",\"long\"],\"default\":null,"
    "\"field-id\":1},"
    "{\"name\":\"sequence_number\",\"type\":[\"null\",\"long\"],\"default\":"
    "null,\"field-id\":3},"
    "{\"name\":\"file_sequence_number\",\"type\":[\"null\",\"long\"],"
    "\"default\":null,\"field-id\":4},"
    "{\"name\":\"data_file\",\"type\":{\"type\":\"record\",\"name\":\"r2\","
    "\"fields\":["
    "{\"name\":\"content\",\"type\":\"int\",\"field-id\":134},"
    "{\"name\":\"file_path\",\"type\":\"string\",\"field-id\":100},"
    "{\"name\":\"file_format\",\"type\":\"string\",\"field-id\":101},"
    "{\"name\":\"partition\",\"type\":";
#define COUNTS(name, id, k, v)                                                 \
    "{\"name\":\"" name "\",\"type\":[\"null\",{\"type\":\"array\","           \
    "\"items\":{\"type\":\"record\",\"name\":\"k" #k "_v" #v "\",\"fields\":[" \
    "{\"name\":\"key\",\"type\":\"int\",\"field-id\":" #k "},"                 \
    "{\"name\":\"value\",\"type\":\"long\",\"field-id\":" #v "}]},"            \
    "\"logicalType\":\"map\"}],\"default\":null,\"field-id\":" #id "}"
#define BOUNDS(name, id, k, v)                                                 \
    "{\"name\":\"" name "\",\"type\":[\"null\",{\"type\":\"array\","           \
    "\"items\":{\"type\":\"record\",\"name\":\"k" #k "_v" #v "\",\"fields\":[" \
    "{\"name\":\"key\",\"type\":\"int\",\"field-id\":" #k "},"                 \
    "{\"name\":\"value\",\"type\":\"bytes\",\"field-id\":" #v "}]},"           \
    "\"logicalType\":\"map\"}],\"default\":null,\"field-id\":" #id "}"
static const char MANIFEST_TAIL[] =
    ",\"field-id\":102},"
    "{\"name\":\"record_count\",\"type\":\"long\",\"field-id\":103},"
    "{\"name\":\"file_size_in_bytes\",\"type\":\"long\",\"field-id\":104}"
    "," COUNTS("value_counts", 109, 119, 120) "," COUNTS(
        "null_value_counts", 110, 121,
        122) "," BOUNDS("lower_bounds", 125, 126,
                        127) "," BOUNDS("upper_bounds", 128, 129,
                                        130) "]},\"field-id\":2}]}";
/* The metrics fields, in the order they follow file_size_in_bytes. */
static const char *const METRICS[] = {"value_counts", "null_value_counts",
                                      "lower_bounds", "upper_bounds"};
#define NMETRICS (sizeof METRICS / sizeof METRICS[0])

static const char MANIFEST_LIST_SCHEMA[] =
    "{\"type\":\"record\",\"name\":\"manifest_file\",\"fields\":["
    "{\"name\":\"manifest_path\",\"type\":\"string\",\"field-id\":500},"
    "{\"name\":\"manifest_length\",\"type\":\"long\",\"field-id\":501},"
    "{\"name\":\"partition_spec_id\",\"type\":\"int\",\"field-id\":502},"
    "{\"name\":\"content\",\"type\":\"int\",\"field-id\":517},"
    "{\"name\":\"sequence_number\",\"type\":\"long\",\"field-id\":515},"
    "{\"name\":\"min_sequence_number\",\"type\":\"long\",\"field-id\":516},"
    "{\"name\":\"added_snapshot_id\",\"type\":\"long\",\"field-id\":503},"
    "{\"name\":\"added_files_count\",\"type\":\"int\",\"field-id\":504},"
    "{\"name\":\"existing_files_count\",\"type\":\"int\",\"field-id\":505},"
    "{\"name\":\"deleted_files_count\",\"type\":\"int\",\"field-id\":506},"
    "{\"name\":\"added_rows_count\",\"type\":\"long\",\"field-id\":512},"
    "{\"name\":\"existing_rows_count\",\"type\":\"long\",\"field-id\":513},"
    "{\"name\":\"deleted_rows_count\",\"type\":\"long\",\"field-id\":514}]}";

static int random_sync(uint8_t sync[AV_SYNC_SIZE]) {
    return fs_random(sync, AV_SYNC_SIZE);
}

/* The "schema-id" of the schema JSON text: the header names the schema
 * the manifest's files were written with (format/spec.md "Manifests"). */
static int schema_id_text(const char *table_schema, char *out, size_t size) {
    json_t *s = json_loads(table_schema, 0, NULL);
    json_t *id = json_object_get(s, "schema-id");
    int rc = json_is_integer(id) ? 0 : -1;
    if (rc == 0)
        snprintf(out, size, "%lld", (long long)json_integer_value(id));
    json_decref(s);
    return rc;
}

int ice_manifest_encode(const ice_datafile *files, size_t n,
                        int64_t snapshot_id, const char *table_schema,
                        const ice_pspec *spec, ib_buf *out) {
    uint8_t sync[AV_SYNC_SIZE];
    char schema_id[24];
    if (random_sync(sync) != 0 ||
        schema_id_text(table_schema, schema_id, sizeof schema_id) != 0)
        return -1;
    ib_buf schema = {0};
    ib_buf_str(&schema, MANIFEST_HEAD);
    ib_buf_str(&schema, spec->avro);
    ib_buf_str(&schema, MANIFEST_TAIL);
    ib_buf_byte(&schema, 0);
    if (!ib_buf_ok(&schema)) {
        ib_buf_free(&schema);
        return -1;
    }
    const char *meta[] = {"schema",
                          table_schema,
                          "schema-id",
                          schema_id,
                          "partition-spec",
                          spec->spec_json,
                          "partition-spec-id",
                          "0",
                          "format-version",
                          "2",
                          "content",
                          "data"};
    av_writer w;
    av_begin(&w, (const char *)schema.p, meta, 6, sync);
    ib_buf_free(&schema);
    for (size_t i = 0; i < n; i++) {
        const ice_datafile *f = &files[i];
        ib_buf *b = av_record(&w);
        int added = f->snapshot_id == snapshot_id;
        av_put_long(b, added ? ICE_ADDED : ICE_EXISTING);
        av_put_branch(b, 1);
        av_put_long(b, f->snapshot_id);
        if (added) {
            av_put_branch(b, 0); /* inherited from the manifest list */
            av_put_branch(b, 0);
        } else {
            av_put_branch(b, 1);
            av_put_long(b, f->seq);
            av_put_branch(b, 1);
            av_put_long(b, f->file_seq);
        }
        av_put_long(b, 0); /* content: data */
        av_put_string(b, f->path);
        av_put_string(b, "PARQUET");
        if (f->part_len)
            ib_buf_add(b, f->part, f->part_len);
        else
            for (size_t k = 0; k < spec->n; k++)
                av_put_branch(b, 0); /* no tuple recorded: nulls */
        av_put_long(b, f->records);
        av_put_long(b, f->size);
        if (f->metrics_len)
            ib_buf_add(b, f->metrics, f->metrics_len);
        else
            for (size_t k = 0; k < NMETRICS; k++)
                av_put_branch(b, 0); /* none recorded */
    }
    int rc = av_finish(&w);
    if (rc == 0)
        ib_buf_add(out, w.file.p, w.file.len);
    av_free(&w);
    return rc == 0 && ib_buf_ok(out) ? 0 : -1;
}

int ice_manifest_list_encode(const ice_mfile *m, size_t n, int64_t snapshot_id,
                             int64_t parent_id, int64_t seq, ib_buf *out) {
    uint8_t sync[AV_SYNC_SIZE];
    char sid[24], pid[24], sq[24];
    if (random_sync(sync) != 0)
        return -1;
    snprintf(sid, sizeof sid, "%lld", (long long)snapshot_id);
    if (parent_id >= 0)
        snprintf(pid, sizeof pid, "%lld", (long long)parent_id);
    else
        snprintf(pid, sizeof pid, "null");
    snprintf(sq, sizeof sq, "%lld", (long long)seq);
    const char *meta[] = {"snapshot-id",     sid, "parent-snapshot-id", pid,
                          "sequence-number", sq,  "format-version",     "2"};
    av_writer w;
    av_begin(&w, MANIFEST_LIST_SCHEMA, meta, 4, sync);
    for (size_t i = 0; i < n; i++) {
        ib_buf *b = av_record(&w);
        av_put_string(b, m[i].path);
        av_put_long(b, m[i].length);
        av_put_long(b, 0); /* partition_spec_id */
        av_put_long(b, 0); /* content: data */
        av_put_long(b, m[i].seq);
        av_put_long(b, m[i].min_seq);
        av_put_long(b, m[i].added_snapshot_id);
        av_put_long(b, m[i].added_files);
        av_put_long(b, m[i].existing_files);
        av_put_long(b, m[i].deleted_files);
        av_put_long(b, m[i].added_rows);
        av_put_long(b, m[i].existing_rows);
        av_put_long(b, m[i].deleted_rows);
    }
    int rc = av_finish(&w);
    if (rc == 0)
        ib_buf_add(out, w.file.p, w.file.len);
    av_free(&w);
    return rc == 0 && ib_buf_ok(out) ? 0 : -1;
}

static char *dup_bytes(const uint8_t *p, size_t n) {
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = '\0';
    }
    return s;
}

int ice_manifest_list_decode(const uint8_t *data, size_t len, ice_mfile **out,
                             size_t *n) {
    av_reader r;
    ice_mfile *m = NULL;
    size_t cnt = 0, cap = 0;
    *out = NULL;
    *n = 0;
    if (av_read_open(&r, data, len) != 0)
        return -1;
    int rc;
    while ((rc = av_read_next(&r)) == 1) {
        if (cnt == cap) {
            size_t nc = cap ? 2 * cap : 8;
            ice_mfile *g = realloc(m, nc * sizeof *g);
            if (!g)
                break;
            m = g;
            cap = nc;
        }
        ice_mfile *e = &m[cnt];
        const uint8_t *p;
        size_t pn;
        av_get_bytes(&r, &p, &pn);
        e->length = av_get_long(&r);
        (void)av_get_long(&r); /* partition_spec_id */
        (void)av_get_long(&r); /* content */
        e->seq = av_get_long(&r);
        e->min_seq = av_get_long(&r);
        e->added_snapshot_id = av_get_long(&r);
        e->added_files = (int32_t)av_get_long(&r);
        e->existing_files = (int32_t)av_get_long(&r);
        e->deleted_files = (int32_t)av_get_long(&r);
        e->added_rows = av_get_long(&r);
        e->existing_rows = av_get_long(&r);
        e->deleted_rows = av_get_long(&r);
        if (r.err || !(e->path = dup_bytes(p, pn))) {
            rc = -1;
            break;
        }
        cnt++;
    }
    if (rc != 0) {
        ice_mfiles_free(m, cnt);
        return -1;
    }
    *out = m;
    *n = cnt;
    return 0;
}

/* An optional long: the union branch, then the value or nothing. */
static int64_t opt_long(av_reader *r, int64_t absent) {
    int64_t branch = av_get_long(r);
    if (branch == 0)
        return absent;
    if (branch != 1)
        r->err = 1;
    return av_get_long(r);
}

/* How the decoder treats each field of a manifest's data_file record, from
 * the schema in its header: manifests written before partitions and
 * metrics have an empty partition record and no metrics fields. */
enum {
    F_SKIP,
    F_CONTENT,
    F_PATH,
    F_FORMAT,
    F_PART,
    F_RECORDS,
    F_SIZE,
    F_METRICS_FIRST,
    F_METRICS_IN,
    F_METRICS_LAST
};
typedef struct df_layout {
    json_t *root;   /* the parsed schema */
    json_t *fields; /* data_file's fields */
    unsigned char *how;
} df_layout;

static int field_is(json_t *f, const char *name) {
    const char *n = json_string_value(json_object_get(f, "name"));
    return n && strcmp(n, name) == 0;
}

static int layout_read(const av_reader *r, df_layout *l) {
    const uint8_t *p;
    size_t len;
    memset(l, 0, sizeof *l);
    if (av_read_meta(r, "avro.schema", &p, &len) != 0 ||
        !(l->root = json_loadb((const char *)p, len, 0, NULL)))
        return -1;
    json_t *top = json_object_get(l->root, "fields");
    json_t *df = json_array_get(top, 4);
    l->fields = json_object_get(json_object_get(df, "type"), "fields");
    size_t n = json_array_size(l->fields);
    if (!field_is(df, "data_file") || n == 0 || !(l->how = calloc(n, 1))) {
        json_decref(l->root);
        return -1;
    }
    static const char *const KNOWN[] = {"content",      "file_path",
                                        "file_format",  "partition",
                                        "record_count", "file_size_in_bytes"};
    for (size_t i = 0; i < n; i++) {
        json_t *f = json_array_get(l->fields, i);
        for (size_t k = 0; k < sizeof KNOWN / sizeof KNOWN[0]; k++)
            if (field_is(f, KNOWN[k]))
                l->how[i] = (unsigned char)(F_CONTENT + k);
    }
    /* The metrics are carried as one span: only as manifest.c writes
     * them (all four, in its order, one after the other). */
    for (size_t i = 0; i + NMETRICS <= n; i++) {
        size_t k = 0;
        while (k < NMETRICS &&
               field_is(json_array_get(l->fields, i + k), METRICS[k]))
            k++;
        if (k == NMETRICS) {
            l->how[i] = F_METRICS_FIRST;
            for (k = 1; k + 1 < NMETRICS; k++)
                l->how[i + k] = F_METRICS_IN;
            l->how[i + NMETRICS - 1] = F_METRICS_LAST;
            break;
        }
    }
    return 0;
}

static void layout_free(df_layout *l) {
    json_decref(l->root);
    free(l->how);
}

/* Whether the metrics fields [p, end) are all null (an entry carried from
 * a manifest written before metrics): then there are none to carry. */
static int all_null(const uint8_t *p, const uint8_t *end) {
    if (end - p != (ptrdiff_t)NMETRICS)
        return 0;
    while (p < end)
        if (*p++ != 0)
            return 0;
    return 1;
}

/* One data_file record into f (path, partition and metrics copied). */
static int read_data_file(av_reader *r, const df_layout *l, ice_datafile *f) {
    const uint8_t *path = NULL, *m0 = NULL, *p;
    size_t pn = 0, n;
    for (size_t i = 0; !r->err && i < json_array_size(l->fields); i++) {
        json_t *type = json_object_get(json_array_get(l->fields, i), "type");
        const uint8_t *at = r->p;
        switch (l->how[i]) {
        case F_CONTENT: (void)av_get_long(r); break;
        case F_PATH: av_get_bytes(r, &path, &pn); break;
        case F_FORMAT: av_get_bytes(r, &p, &n); break;
        case F_RECORDS: f->records = av_get_long(r); break;
        case F_SIZE: f->size = av_get_long(r); break;
        case F_PART:
            av_skip(r, type, 0);
            if (!r->err &&
                ice_bytes_dup(&f->part, &f->part_len, at, (size_t)(r->p - at)))
                return -1;
            break;
        case F_METRICS_FIRST: m0 = at; /* fall through */
        case F_METRICS_IN: av_skip(r, type, 0); break;
        case F_METRICS_LAST:
            av_skip(r, type, 0);
            if (!r->err && m0 && !all_null(m0, r->p) &&
                ice_bytes_dup(&f->metrics, &f->metrics_len, m0,
                              (size_t)(r->p - m0)))
                return -1;
            break;
        default: av_skip(r, type, 0); break;
        }
    }
    if (r->err || !path || !(f->path = dup_bytes(path, pn)))
        return -1;
    return 0;
}

int ice_manifest_decode(const uint8_t *data, size_t len, const ice_mfile *mf,
                        ice_datafile **files, size_t *n, size_t *cap) {
    av_reader r;
    df_layout l;
    if (av_read_open(&r, data, len) != 0 || layout_read(&r, &l) != 0)
        return -1;
    int rc;
    while ((rc = av_read_next(&r)) == 1) {
        ice_datafile f = {0};
        int64_t status = av_get_long(&r);
        /* Inheritance (spec, "Sequence Number Inheritance"): a null is
         * the manifest list entry's value, for ADDED entries. */
        f.snapshot_id = opt_long(&r, mf->added_snapshot_id);
        f.seq = opt_long(&r, mf->seq);
        f.file_seq = opt_long(&r, mf->seq);
        if (read_data_file(&r, &l, &f) != 0) {
            ice_datafile_clear(&f);
            rc = -1;
            break;
        }
        if (status == ICE_DELETED) {
            ice_datafile_clear(&f);
            continue;
        }
        if (*n == *cap) {
            size_t nc = *cap ? 2 * *cap : 16;
            ice_datafile *g = realloc(*files, nc * sizeof *g);
            if (!g) {
                ice_datafile_clear(&f);
                rc = -1;
                break;
            }
            *files = g;
            *cap = nc;
        }
        (*files)[(*n)++] = f;
    }
    layout_free(&l);
    return rc == 0 ? 0 : -1;
}

int ice_bytes_dup(uint8_t **dst, size_t *dst_len, const uint8_t *p, size_t n) {
    *dst = NULL;
    *dst_len = 0;
    if (n == 0)
        return 0;
    if (!(*dst = malloc(n)))
        return -1;
    memcpy(*dst, p, n);
    *dst_len = n;
    return 0;
}

void ice_datafile_clear(ice_datafile *f) {
    free(f->path);
    free(f->part);
    free(f->metrics);
    f->path = NULL;
    f->part = f->metrics = NULL;
    f->part_len = f->metrics_len = 0;
}

void ice_mfiles_free(ice_mfile *m, size_t n) {
    for (size_t i = 0; m && i < n; i++)
        free(m[i].path);
    free(m);
}

void ice_datafiles_free(ice_datafile *f, size_t n) {
    for (size_t i = 0; f && i < n; i++)
        ice_datafile_clear(&f[i]);
    free(f);
}
