/* Manifests and manifest lists (see manifest.h). The Avro schemas are the
 * spec's v2 schemas less the optional fields we never fill (metrics maps,
 * partitions summaries, key metadata): readers resolve by field id and
 * read an absent optional field as null. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "avro_reader.h"
#include "avro_writer.h"
#include "fsio.h"
#include "manifest.h"

/* The spec's field names and ids; one field per line. */
static const char MANIFEST_SCHEMA[] =
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
    "{\"name\":\"partition\",\"type\":{\"type\":\"record\",\"name\":\"r102\","
    "\"fields\":[]},"
    "\"field-id\":102},"
    "{\"name\":\"record_count\",\"type\":\"long\",\"field-id\":103},"
    "{\"name\":\"file_size_in_bytes\",\"type\":\"long\",\"field-id\":104}"
    "]},\"field-id\":2}]}";

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

int ice_manifest_encode(const ice_datafile *files, size_t n,
                        int64_t snapshot_id, const char *table_schema,
                        ib_buf *out) {
    uint8_t sync[AV_SYNC_SIZE];
    if (random_sync(sync) != 0)
        return -1;
    const char *meta[] = {
        "schema",         table_schema, "schema-id",         "0",
        "partition-spec", "[]",         "partition-spec-id", "0",
        "format-version", "2",          "content",           "data"};
    av_writer w;
    av_begin(&w, MANIFEST_SCHEMA, meta, 6, sync);
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
        /* partition: an empty record encodes as nothing */
        av_put_long(b, f->records);
        av_put_long(b, f->size);
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

int ice_manifest_decode(const uint8_t *data, size_t len, const ice_mfile *mf,
                        ice_datafile **files, size_t *n, size_t *cap) {
    av_reader r;
    if (av_read_open(&r, data, len) != 0)
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
        (void)av_get_long(&r); /* content */
        const uint8_t *p, *fmt;
        size_t pn, fn;
        av_get_bytes(&r, &p, &pn);
        av_get_bytes(&r, &fmt, &fn);
        f.records = av_get_long(&r);
        f.size = av_get_long(&r);
        if (r.err) {
            rc = -1;
            break;
        }
        if (status == ICE_DELETED)
            continue;
        if (*n == *cap) {
            size_t nc = *cap ? 2 * *cap : 16;
            ice_datafile *g = realloc(*files, nc * sizeof *g);
            if (!g) {
                rc = -1;
                break;
            }
            *files = g;
            *cap = nc;
        }
        if (!(f.path = dup_bytes(p, pn))) {
            rc = -1;
            break;
        }
        (*files)[(*n)++] = f;
    }
    return rc == 0 ? 0 : -1;
}

void ice_mfiles_free(ice_mfile *m, size_t n) {
    for (size_t i = 0; m && i < n; i++)
        free(m[i].path);
    free(m);
}

void ice_datafiles_free(ice_datafile *f, size_t n) {
    for (size_t i = 0; f && i < n; i++)
        free(f[i].path);
    free(f);
}
