#include "metrics/metrics_persist.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "status/state_dir.h"
#include "status/status_file.h"
#include "status/status_lock.h"

/* Bumped when a field changes meaning; a reader refuses other versions. */
#define FORMAT 1

static json_t *to_json(const tm_metrics_values *v) {
    json_t *buckets = json_array();
    for (int b = 0; buckets && b <= TM_METRICS_COMMIT_BUCKETS; b++)
        if (json_array_append_new(
                buckets, json_integer((json_int_t)v->commit_buckets[b])))
            break;
    if (!buckets || json_array_size(buckets) != TM_METRICS_COMMIT_BUCKETS + 1) {
        json_decref(buckets);
        return NULL;
    }
    return json_pack("{si, s{so, sI, sI}, s{sI, sI}, sI, s{sI, sI}}", "format",
                     FORMAT, "commit_duration", "buckets", buckets, "count",
                     (json_int_t)v->commit_count, "sum_ns",
                     (json_int_t)v->commit_ns, "conversion", "count",
                     (json_int_t)v->convert_count, "sum_ns",
                     (json_int_t)v->convert_ns, "errors", (json_int_t)v->errors,
                     "fetch_queue", "bytes", (json_int_t)v->fetchq_bytes,
                     "messages", (json_int_t)v->fetchq_messages);
}

static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int tm_metrics_save(const tm_metrics_conn *m, struct tm_status_writer *w,
                    char *errstr, size_t errsize) {
    if (!m || !w)
        return 0;
    const char *dir;
    int dfd = tm_status_writer_dir_fd(w, &dir);
    return tm_metrics_save_at(m, dfd, dir, errstr, errsize);
}

int tm_metrics_save_at(const tm_metrics_conn *m, int dfd, const char *dir,
                       char *errstr, size_t errsize) {
    if (!m)
        return 0;
    tm_metrics_values v;
    tm_metrics_snapshot(m, &v);
    json_t *doc = to_json(&v);
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (!text) {
        snprintf(errstr, errsize, "metrics: out of memory");
        return -1;
    }
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, TM_METRICS_FILE);
    int fd = tm_state_file_openat(dfd, TM_METRICS_FILE ".tmp", tmp,
                                  O_WRONLY | O_CREAT | O_TRUNC, "create",
                                  errstr, errsize);
    int rc = -1;
    if (fd < 0) {
        /* errstr says why */
    } else if (write_all(fd, text, strlen(text)) != 0) {
        snprintf(errstr, errsize, "cannot write %s: %s", tmp, strerror(errno));
        close(fd);
    } else if (close(fd) != 0) {
        snprintf(errstr, errsize, "cannot write %s: %s", tmp, strerror(errno));
    } else if (renameat(dfd, TM_METRICS_FILE ".tmp", dfd, TM_METRICS_FILE) !=
               0) {
        snprintf(errstr, errsize, "cannot rename %s: %s", tmp, strerror(errno));
    } else {
        rc = 0;
    }
    if (rc != 0)
        unlinkat(dfd, TM_METRICS_FILE ".tmp", 0);
    free(text);
    return rc;
}

int tm_metrics_load(const char *state_dir, const char *connector,
                    tm_metrics_values *out, char *errstr, size_t errsize) {
    char path[PATH_MAX];
    if (tm_status_path(path, sizeof path, state_dir, connector, TM_METRICS_FILE,
                       errstr, errsize) != 0)
        return -1;
    int fd = tm_state_file_open(path, O_RDONLY, "open", errstr, errsize);
    if (fd < 0)
        return errno == ENOENT ? 1 : -1;
    FILE *f = fdopen(fd, "r");
    if (!f) {
        snprintf(errstr, errsize, "cannot read %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    json_error_t e;
    json_t *doc = json_loadf(f, JSON_REJECT_DUPLICATES, &e);
    fclose(f);
    if (!doc) {
        snprintf(errstr, errsize, "%s: %s", path, e.text);
        return -1;
    }
    int format = 0;
    json_t *buckets = NULL;
    json_int_t count, sum, ccount, csum, errors, qbytes, qmsgs;
    int rc = json_unpack_ex(
        doc, &e, JSON_STRICT, "{si, s{so, sI, sI}, s{sI, sI}, sI, s{sI, sI}}",
        "format", &format, "commit_duration", "buckets", &buckets, "count",
        &count, "sum_ns", &sum, "conversion", "count", &ccount, "sum_ns", &csum,
        "errors", &errors, "fetch_queue", "bytes", &qbytes, "messages", &qmsgs);
    if (rc == 0 && format != FORMAT) {
        snprintf(errstr, errsize, "%s: format %d, expected %d", path, format,
                 FORMAT);
        rc = -1;
    } else if (rc != 0) {
        snprintf(errstr, errsize, "%s: %s", path, e.text);
    } else if (!json_is_array(buckets) ||
               json_array_size(buckets) != TM_METRICS_COMMIT_BUCKETS + 1) {
        snprintf(errstr, errsize,
                 "%s: commit_duration.buckets: expected %d "
                 "numbers",
                 path, TM_METRICS_COMMIT_BUCKETS + 1);
        rc = -1;
    } else {
        memset(out, 0, sizeof *out);
        for (int b = 0; b <= TM_METRICS_COMMIT_BUCKETS; b++)
            out->commit_buckets[b] = (uint64_t)json_integer_value(
                json_array_get(buckets, (size_t)b));
        out->commit_count = (uint64_t)count;
        out->commit_ns = (uint64_t)sum;
        out->convert_count = (uint64_t)ccount;
        out->convert_ns = (uint64_t)csum;
        out->errors = (uint64_t)errors;
        out->fetchq_bytes = qbytes;
        out->fetchq_messages = qmsgs;
    }
    json_decref(doc);
    return rc == 0 ? 0 : -1;
}
