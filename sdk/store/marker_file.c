/* The marker file: encoding with a checksum, and its atomic replacement. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define MAGIC "tidemark-markers 1"

/* %-escapes what would break a space-separated line; "" is "-". */
static void put_word(FILE *f, const char *s) {
    if (!*s)
        fputc('-', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p <= ' ' || *p >= 0x7f || *p == '%' ||
            (*p == '-' && !p[1] && p == (const unsigned char *)s))
            fprintf(f, "%%%02X", *p);
        else
            fputc(*p, f);
}

/* Two hex digits as a byte, or -1. */
static int hex2(const char *h) {
    int v = 0;
    for (int i = 0; i < 2; i++) {
        char c = h[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                       : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* The inverse of put_word into out[size]; -1 when it does not fit or a
 * %-escape is malformed. */
static int get_word(const char *w, char *out, size_t size) {
    size_t n = 0;
    if (strcmp(w, "-") == 0) {
        out[0] = '\0';
        return 0;
    }
    for (; *w; w++) {
        int v;
        if (n + 1 >= size)
            return -1;
        if (*w != '%') {
            out[n++] = *w;
        } else if ((v = hex2(w + 1)) > 0) {
            out[n++] = (char)v;
            w += 2;
        } else {
            return -1;
        }
    }
    out[n] = '\0';
    return 0;
}

int tms_encode(const tms_markers *ms, char **out, size_t *len) {
    FILE *f = open_memstream(out, len);
    if (!f)
        return -1;
    fprintf(f, MAGIC " %" PRIu64 "\n", ms->committed);
    for (size_t i = 0; i < ms->n; i++) {
        const tm_marker *m = &ms->v[i].m;
        fputs("m ", f);
        put_word(f, ms->v[i].topic);
        fprintf(f, " %" PRId32 " %" PRId64 " %" PRId64 " ", m->partition,
                m->next_offset, m->epoch);
        put_word(f, m->last_batch_id);
        fprintf(f,
                " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRId64
                " %" PRId64 " ",
                m->rows, m->dead_letters, m->filtered, m->duplicates,
                m->last_offset, m->last_timestamp_ms);
        put_word(f, m->last_record_hash);
        fputc('\n', f);
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        free(*out);
        *out = NULL;
        return -1;
    }
    char sum[32]; /* the checksum line covers every byte before it */
    int k = snprintf(sum, sizeof sum, "crc32 %08" PRIx32 "\n",
                     tms_crc32(*out, *len));
    char *grown = realloc(*out, *len + (size_t)k + 1);
    if (!grown) {
        free(*out);
        *out = NULL;
        return -1;
    }
    memcpy(grown + *len, sum, (size_t)k + 1);
    *out = grown;
    *len += (size_t)k;
    return 0;
}

static int parse_line(const char *line, tms_markers *ms, char *why,
                      size_t why_size) {
    char topic_w[3 * TMS_TOPIC_MAX], batch_w[3 * TM_BATCH_ID_MAX],
        hash_w[3 * TM_RECORD_HASH_MAX], topic[TMS_TOPIC_MAX];
    tm_marker m = {0};
    int end = 0;
    int got = sscanf(line,
                     "m %767s %" SCNd32 " %" SCNd64 " %" SCNd64
                     " %191s %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
                     " %" SCNd64 " %" SCNd64 " %194s%n",
                     topic_w, &m.partition, &m.next_offset, &m.epoch, batch_w,
                     &m.rows, &m.dead_letters, &m.filtered, &m.duplicates,
                     &m.last_offset, &m.last_timestamp_ms, hash_w, &end);
    tm_marker *e = NULL;
    if (got != 12 || line[end] != '\0' ||
        get_word(topic_w, topic, sizeof topic) != 0 ||
        get_word(batch_w, m.last_batch_id, sizeof m.last_batch_id) != 0 ||
        get_word(hash_w, m.last_record_hash, sizeof m.last_record_hash) != 0 ||
        tms_find(ms, topic, m.partition) ||
        !(e = tms_add_marker(ms, topic, m.partition))) {
        snprintf(why, why_size, "bad marker line: %.80s", line);
        return -1;
    }
    m.struct_size = sizeof m;
    m.topic = e->topic;
    *e = m;
    return 0;
}

int tms_decode(const char *buf, size_t len, tms_markers *ms, char *why,
               size_t why_size) {
    size_t last = len; /* start of the checksum line */
    if (len && buf[len - 1] == '\n')
        for (last = len - 1; last > 0 && buf[last - 1] != '\n'; last--)
            ;
    uint32_t want;
    int end = 0;
    char tail[32];
    if (last >= len || len - last >= sizeof tail) {
        snprintf(why, why_size, "no checksum line at the end (torn write?)");
        return -1;
    }
    memcpy(tail, buf + last, len - last);
    tail[len - last] = '\0';
    if (sscanf(tail, "crc32 %8" SCNx32 "\n%n", &want, &end) != 1 ||
        tail[end] != '\0') {
        snprintf(why, why_size, "no checksum line at the end (torn write?)");
        return -1;
    }
    uint32_t got = tms_crc32(buf, last);
    if (got != want) {
        snprintf(why, why_size,
                 "checksum mismatch: stored %08" PRIx32 ", computed %08" PRIx32,
                 want, got);
        return -1;
    }
    char *text = strndup(buf, last);
    if (!text) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    int rc = 0, first = 1;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line && !rc;
         line = strtok_r(NULL, "\n", &save), first = 0) {
        if (first) {
            if (sscanf(line, MAGIC " %" SCNu64 "%n", &ms->committed, &end) !=
                    1 ||
                line[end] != '\0') {
                snprintf(why, why_size, "not a marker file: %.40s", line);
                rc = -1;
            }
        } else {
            rc = parse_line(line, ms, why, why_size);
        }
    }
    if (first && !rc) {
        snprintf(why, why_size, "not a marker file: empty");
        rc = -1;
    }
    free(text);
    return rc;
}

tm_status tms_load(const tm_host_api *host, const char *path, tms_markers *ms,
                   tm_error *err) {
    memset(ms, 0, sizeof *ms);
    FILE *f = fopen(path, "re");
    if (!f)
        return errno == ENOENT ? TM_OK : tms_io_error(host, "open", path, err);
    char *buf = NULL, why[160];
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    char chunk[4096];
    size_t r;
    while (mem && (r = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, r, mem);
    int bad_read = ferror(f);
    fclose(f);
    if (!mem || fclose(mem) != 0) {
        free(buf);
        host->set_error(err, "read %s: out of memory", path);
        return TM_FATAL;
    }
    if (bad_read) {
        free(buf);
        return tms_io_error(host, "read", path, err);
    }
    int rc = tms_decode(buf, len, ms, why, sizeof why);
    free(buf);
    if (rc != 0) {
        tms_markers_free(ms);
        host->set_error(err, "marker file %s is damaged: %s", path, why);
        return TM_FATAL;
    }
    return TM_OK;
}

static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

tm_status tms_save(const tm_host_api *host, const char *path,
                   const tms_markers *ms, int faults, tm_error *err) {
    char tmp[4096], *buf;
    size_t len;
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        host->set_error(err, "marker file path too long: %s", path);
        return TM_FATAL;
    }
    if (tms_encode(ms, &buf, &len) != 0) {
        host->set_error(err, "marker file %s: out of memory", path);
        return TM_FATAL;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int ok = fd >= 0 && write_all(fd, buf, len) == 0 && fsync(fd) == 0;
    int saved = errno;
    free(buf);
    if (fd >= 0 && close(fd) != 0 && ok)
        ok = 0, saved = errno;
    errno = saved;
    if (!ok)
        return tms_io_error(host, "write", tmp, err);
    if (faults)
        host->fault(TM_FAULT_AFTER_MARKER);
    if (rename(tmp, path) != 0)
        return tms_io_error(host, "rename", tmp, err);
    if (tms_sync_dir_of(path) != 0) /* renamed, maybe not durable: unknown */
        return tms_io_error(host, "fsync the directory of", path, err);
    return TM_OK;
}
