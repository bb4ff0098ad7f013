/*
 * jsonl_sink.c - the example sink of docs/writing-a-sink.md: copy it.
 *
 * State is ONE file, <path>/<connector>.jsonl, one JSON array per line:
 *   ["m", topic, partition, next_offset, epoch, last_batch_id,
 *         rows, dead_letters, filtered, duplicates]          a marker
 *   ["r", topic, partition, offset, identity, hash, value]   a row
 *   ["d", topic, partition, offset, reason, detail]          a dead letter
 * Every claim and commit rewrites the whole file: write a temp file, fsync
 * it, rename it over the old one, fsync the directory. rename() is atomic,
 * so rows, dead letters and markers change together or not at all: that
 * is the whole contract. (A real sink uses its database's transaction.)
 * It needs nothing but the SDK header and libc.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* strdup, fsync, fileno: POSIX, not C11 */
#endif
#include <tidemark/sink.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct jl_sink {
    const tm_host_api *host; /* every call into the host goes through it */
    char *dir, *file, *tmp, *lock;
} jl_sink;

/* One stored line. Strings point into the loaded file buffer or into the
 * host's batch, both alive for the one call that uses them. */
typedef struct jl_line {
    char kind; /* 'm', 'r', 'd' */
    const char *topic, *identity, *hash, *value, *detail;
    size_t value_len; /* record values are not NUL-terminated */
    int64_t partition, offset, reason;
    tm_marker m; /* markers only */
} jl_line;

typedef struct jl_state {
    char *buf;
    jl_line *lines;
    size_t n, cap;
} jl_state;

/* ---- the line format: JSON arrays of strings and integers ------------- */

static void put_mem(FILE *f, const char *s, size_t len) {
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void put_str(FILE *f, const char *s) {
    put_mem(f, s, s ? strlen(s) : 0);
}

/* Parses one line in place into up to max fields: strings are unescaped
 * into the buffer itself (escapes only shrink). Returns the count or -1. */
static int parse_line(char *p, const char **str, int64_t *num, int max) {
    int n = 0;
    if (*p++ != '[')
        return -1;
    while (n < max && *p && *p != ']') {
        if (*p == '"') {
            char *out = ++p;
            str[n] = out;
            while (*p && *p != '"') {
                if (*p == '\\' && p[1] == 'u') {
                    if (strspn(p + 2, "0123456789abcdefABCDEF") < 4)
                        return -1;
                    char hex[5] = {p[2], p[3], p[4], p[5], 0};
                    *out++ = (char)strtol(hex, NULL, 16);
                    p += 6;
                } else {
                    if (*p == '\\' && !*++p)
                        return -1;
                    *out++ = *p++;
                }
            }
            if (*p != '"')
                return -1;
            *out = '\0';
            p++;
        } else {
            char *end;
            str[n] = NULL;
            num[n] = strtoll(p, &end, 10);
            if (end == p)
                return -1;
            p = end;
        }
        n++;
        if (*p == ',')
            p++;
    }
    return *p == ']' ? n : -1;
}

static jl_line *add_line(jl_state *st, char kind) {
    if (st->n == st->cap) {
        size_t cap = st->cap ? 2 * st->cap : 64;
        jl_line *l = realloc(st->lines, cap * sizeof *l);
        if (!l)
            return NULL;
        st->lines = l, st->cap = cap;
    }
    jl_line *l = &st->lines[st->n++];
    memset(l, 0, sizeof *l);
    l->kind = kind;
    return l;
}

static void free_state(jl_state *st) {
    free(st->buf);
    free(st->lines);
    memset(st, 0, sizeof *st);
}

/* Reads the whole file; a missing file is an empty sink. */
static tm_status load(jl_sink *s, jl_state *st, tm_error *err) {
    memset(st, 0, sizeof *st);
    FILE *f = fopen(s->file, "r");
    if (!f && errno == ENOENT)
        return TM_OK;
    size_t len = 0, cap = 0;
    char *line = NULL;
    if (!f)
        goto io_error;
    /* Keep every line: fields point into them. One buffer, lines joined. */
    for (int c; (c = fgetc(f)) != EOF;) {
        if (len + 2 > cap) {
            char *b = realloc(st->buf, cap = cap ? 2 * cap : 4096);
            if (!b)
                goto io_error;
            st->buf = b;
        }
        st->buf[len++] = (char)(c == '\n' ? '\0' : c);
    }
    if (ferror(f))
        goto io_error;
    if (st->buf)
        st->buf[len] = '\0'; /* a last line without newline */
    fclose(f);
    f = NULL;
    for (size_t at = 0, next; at < len; at = next) {
        const char *str[10];
        int64_t num[10];
        line = st->buf + at;
        next = at + strlen(line) + 1; /* before parsing writes NULs into it */
        int n = parse_line(line, str, num, 10);
        jl_line *l =
            (n >= 6 && str[0] && str[1]) ? add_line(st, str[0][0]) : NULL;
        if (!l)
            goto corrupt;
        l->topic = str[1], l->partition = num[2], l->offset = num[3];
        if (l->kind == 'm' && n == 10 && str[5]) {
            l->m = (tm_marker){.struct_size = sizeof(tm_marker),
                               .next_offset = num[3],
                               .epoch = num[4],
                               .rows = (uint64_t)num[6],
                               .dead_letters = (uint64_t)num[7],
                               .filtered = (uint64_t)num[8],
                               .duplicates = (uint64_t)num[9]};
            snprintf(l->m.last_batch_id, TM_BATCH_ID_MAX, "%s", str[5]);
        } else if (l->kind == 'r' && n == 7 && str[4] && str[5] && str[6]) {
            l->identity = str[4], l->hash = str[5], l->value = str[6];
            l->value_len = strlen(str[6]);
        } else if (l->kind == 'd' && n == 6 && str[5]) {
            l->reason = num[4], l->detail = str[5];
        } else
            goto corrupt;
    }
    return TM_OK;
corrupt:
    s->host->set_error(err, "%s: corrupt line \"%.60s\"", s->file, line);
    free_state(st);
    return TM_FATAL;
io_error:
    s->host->set_error(err, "%s: %s", s->file, strerror(errno));
    if (f)
        fclose(f);
    free_state(st);
    return TM_RETRY;
}

static void put_lines(FILE *f, const jl_state *st, char kind) {
    for (size_t i = 0; i < st->n; i++) {
        const jl_line *l = &st->lines[i];
        if (l->kind != kind)
            continue;
        fprintf(f, "[\"%c\",", kind);
        put_str(f, l->topic);
        if (kind == 'm') {
            fprintf(f, ",%" PRId64 ",%" PRId64 ",%" PRId64 ",", l->partition,
                    l->m.next_offset, l->m.epoch);
            put_str(f, l->m.last_batch_id);
            fprintf(f, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]\n",
                    l->m.rows, l->m.dead_letters, l->m.filtered,
                    l->m.duplicates);
            continue;
        }
        fprintf(f, ",%" PRId64 ",%" PRId64 ",", l->partition, l->offset);
        if (kind == 'r') {
            put_str(f, l->identity), fputc(',', f), put_str(f, l->hash);
        } else {
            fprintf(f, "%" PRId64, l->reason);
        }
        fputc(',', f);
        if (kind == 'r')
            put_mem(f, l->value, l->value_len);
        else
            put_str(f, l->detail);
        fputs("]\n", f);
    }
}

/* The atomic step: effects, then markers, into a temp file; fsync; rename;
 * fsync the directory so the rename itself survives a power cut. The host's
 * fault hook marks each crash window (faults: only for commits). */
static tm_status save(jl_sink *s, const jl_state *st, int faults,
                      tm_error *err) {
    FILE *f = fopen(s->tmp, "w");
    if (!f)
        goto io_error;
    put_lines(f, st, 'r');
    put_lines(f, st, 'd');
    if (faults && fflush(f) == 0)
        s->host->fault(TM_FAULT_AFTER_EFFECTS);
    put_lines(f, st, 'm');
    if (faults && fflush(f) == 0)
        s->host->fault(TM_FAULT_AFTER_MARKER);
    if (fflush(f) != 0 || fsync(fileno(f)) != 0) {
        fclose(f);
        goto io_error;
    }
    if (fclose(f) != 0 || rename(s->tmp, s->file) != 0)
        goto io_error;
    int dfd = open(s->dir, O_RDONLY);
    if (dfd < 0 || fsync(dfd) != 0) {
        if (dfd >= 0)
            close(dfd);
        /* Renamed but maybe not durable: the outcome is unknown, and the
         * marker check turns a retry of an applied batch into ALREADY. */
        goto io_error;
    }
    close(dfd);
    if (faults)
        s->host->fault(TM_FAULT_AFTER_COMMIT);
    return TM_OK;
io_error:
    s->host->set_error(err, "%s: %s", s->tmp, strerror(errno));
    return TM_RETRY;
}

/* Claim and commit hold an fcntl lock on <connector>.lock, so two hosts
 * sharing the directory take turns ("lock the markers"). Released by close
 * or by the process dying. */
static int lock_sink(jl_sink *s, tm_error *err) {
    int fd = open(s->lock, O_RDWR | O_CREAT, 0644);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fd >= 0 && fcntl(fd, F_SETLKW, &fl) == 0)
        return fd;
    s->host->set_error(err, "%s: %s", s->lock, strerror(errno));
    if (fd >= 0)
        close(fd);
    return -1;
}

static jl_line *find_marker(jl_state *st, const char *topic,
                            int64_t partition) {
    for (size_t i = 0; i < st->n; i++)
        if (st->lines[i].kind == 'm' && st->lines[i].partition == partition &&
            strcmp(st->lines[i].topic, topic) == 0)
            return &st->lines[i];
    return NULL;
}

/* Copies a stored marker into the host's array (topic/partition are the
 * host's and stay as they are). */
static void fill_marker(tm_marker *out, const jl_line *l) {
    out->next_offset = l ? l->m.next_offset : TM_NO_OFFSET;
    out->epoch = l ? l->m.epoch : TM_NO_EPOCH;
    snprintf(out->last_batch_id, TM_BATCH_ID_MAX, "%s",
             l ? l->m.last_batch_id : "");
    out->rows = l ? l->m.rows : 0;
    out->dead_letters = l ? l->m.dead_letters : 0;
    out->filtered = l ? l->m.filtered : 0;
    out->duplicates = l ? l->m.duplicates : 0;
}

/* ---- the callbacks ------------------------------------------------------ */

static void jl_close(void *h) {
    jl_sink *s = h;
    if (!s)
        return;
    free(s->dir), free(s->file), free(s->tmp), free(s->lock);
    free(s);
}

static char *path_of(const char *dir, const char *connector,
                     const char *suffix) {
    size_t len = strlen(dir) + strlen(connector) + strlen(suffix) + 2;
    char *p = malloc(len);
    if (p)
        snprintf(p, len, "%s/%s%s", dir, connector, suffix);
    return p;
}

static tm_status jl_open(const tm_host_api *host, const tm_sink_config *config,
                         void **sink, tm_error *err) {
    static const char *const known[] = {"path"};
    const char *dir = NULL;
    struct stat sb;
    /* The host checks types and names the JSON path; we name the key. */
    if (host->settings_check_keys(config->settings, known, 1, err) != 0)
        return TM_INVALID;
    int found = host->setting_string(config->settings, "path", &dir, err);
    if (found < 0)
        return TM_INVALID;
    if (found == 0) {
        host->set_error(err, "setting \"path\" is required: the directory "
                             "that holds <connector>.jsonl");
        return TM_INVALID;
    }
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        host->set_error(err, "setting \"path\": %s is not a directory", dir);
        return TM_INVALID;
    }
    if (!config->connector || !*config->connector ||
        strchr(config->connector, '/')) {
        host->set_error(err, "connector name must be a plain file name");
        return TM_INVALID;
    }
    jl_sink *s = calloc(1, sizeof *s);
    if (s) {
        s->host = host;
        s->dir = strdup(dir);
        s->file = path_of(dir, config->connector, ".jsonl");
        s->tmp = path_of(dir, config->connector, ".jsonl.tmp");
        s->lock = path_of(dir, config->connector, ".lock");
    }
    if (!s || !s->dir || !s->file || !s->tmp || !s->lock) {
        jl_close(s);
        host->set_error(err, "out of memory");
        return TM_FATAL;
    }
    *sink = s;
    return TM_OK;
}

static tm_status jl_claim(void *h, tm_marker *markers, size_t n, uint32_t flags,
                          tm_error *err) {
    jl_sink *s = h;
    jl_state st;
    int lock = lock_sink(s, err);
    if (lock < 0)
        return TM_RETRY;
    tm_status rc = load(s, &st, err);
    for (size_t i = 0; rc == TM_OK && i < n; i++) {
        tm_marker *want = TM_ELEM(tm_marker, markers, i);
        jl_line *l = find_marker(&st, want->topic, want->partition);
        if (!l && (l = add_line(&st, 'm')) != NULL) {
            l->topic = want->topic, l->partition = want->partition;
            l->m = (tm_marker){.struct_size = sizeof(tm_marker),
                               .next_offset = want->next_offset};
        } else if (l && (flags & TM_CLAIM_RESET)) {
            l->m.next_offset = want->next_offset;
        }
        if (!l) {
            s->host->set_error(err, "out of memory");
            rc = TM_FATAL;
        } else {
            l->m.epoch++; /* fences every older owner */
        }
    }
    if (rc == TM_OK)
        rc = save(s, &st, 0, err);
    /* Fill only after the save: what we return is what is stored. */
    for (size_t i = 0; rc == TM_OK && i < n; i++) {
        tm_marker *m = TM_ELEM(tm_marker, markers, i);
        fill_marker(m, find_marker(&st, m->topic, m->partition));
    }
    free_state(&st);
    close(lock);
    return rc;
}

static tm_status jl_read_markers(void *h, tm_marker *markers, size_t n,
                                 tm_error *err) {
    jl_sink *s = h;
    jl_state st;
    tm_status rc = load(s, &st, err); /* read only: no lock, no epoch */
    if (rc != TM_OK)
        return rc;
    for (size_t i = 0; i < n; i++) {
        tm_marker *m = TM_ELEM(tm_marker, markers, i);
        fill_marker(m, find_marker(&st, m->topic, m->partition));
    }
    free_state(&st);
    return TM_OK;
}

/* Business-key dedup: the stored row with this identity, if any. A linear
 * search keeps the example short; a real sink keeps an index. */
static const jl_line *find_identity(const jl_state *st, const char *identity) {
    for (size_t i = 0; i < st->n; i++)
        if (st->lines[i].kind == 'r' &&
            strcmp(st->lines[i].identity, identity) == 0)
            return &st->lines[i];
    return NULL;
}

/* Applies the records and dead letters of a checked batch to the state,
 * counting per range what marker_advance() needs. */
static int apply(jl_state *st, const tm_batch *b, uint64_t (*count)[3]) {
    for (size_t i = 0; i < b->nrecords; i++) {
        const tm_record *r = TM_CELEM(tm_record, b->records, i);
        const tm_range *g = TM_CELEM(tm_range, b->ranges, r->range);
        const jl_line *seen =
            r->identity ? find_identity(st, r->identity) : NULL;
        jl_line *l;
        if (seen &&
            strcmp(seen->hash, r->identity_hash ? r->identity_hash : "") == 0) {
            count[r->range][2]++; /* same key, same payload: a duplicate */
            continue;
        }
        if (!(l = add_line(st, seen ? 'd' : 'r')))
            return -1;
        l->topic = g->topic, l->partition = g->partition, l->offset = r->offset;
        if (seen) { /* same key, other payload: never silently dropped */
            l->reason = TM_DL_IDENTITY_CONFLICT;
            l->detail = "business key applied before with another payload";
            count[r->range][1]++;
            continue;
        }
        l->identity = r->identity ? r->identity : "";
        l->hash = r->identity_hash ? r->identity_hash : "";
        l->value = r->value, l->value_len = r->value ? r->value_len : 0;
        count[r->range][0]++;
    }
    for (size_t i = 0; i < b->ndead_letters; i++) {
        const tm_dead_letter *d = TM_CELEM(tm_dead_letter, b->dead_letters, i);
        const tm_range *g = TM_CELEM(tm_range, b->ranges, d->range);
        jl_line *l = add_line(st, 'd');
        if (!l)
            return -1;
        l->topic = g->topic, l->partition = g->partition, l->offset = d->offset;
        l->reason = d->reason, l->detail = d->detail ? d->detail : "";
        count[d->range][1]++;
    }
    return 0;
}

static tm_status jl_commit(void *h, const tm_batch *b, tm_error *err) {
    jl_sink *s = h;
    jl_state st;
    s->host->fault(TM_FAULT_BEFORE_BEGIN);
    int lock = lock_sink(s, err); /* 1. lock the markers */
    if (lock < 0)
        return TM_RETRY;
    tm_status rc = load(s, &st, err);
    /* +1: calloc(0) may return NULL */
    tm_marker *stored = calloc(b->nranges + 1, sizeof *stored);
    uint64_t(*count)[3] = calloc(b->nranges + 1, sizeof *count);
    if (rc == TM_OK && (!stored || !count)) {
        s->host->set_error(err, "out of memory");
        rc = TM_FATAL;
    }
    /* 2. the stored marker of every range, absent ones as TM_NO_EPOCH */
    for (size_t i = 0; rc == TM_OK && i < b->nranges; i++) {
        const tm_range *g = TM_CELEM(tm_range, b->ranges, i);
        stored[i].struct_size = sizeof(tm_marker);
        fill_marker(&stored[i], find_marker(&st, g->topic, g->partition));
    }
    /* 3. the host's check decides; ALREADY/FENCED/CONFLICT write nothing */
    if (rc == TM_OK)
        rc = s->host->marker_check(b, stored, err);
    /* 4. effects, then advanced markers, then the one atomic rename */
    if (rc == TM_OK && apply(&st, b, count) != 0) {
        s->host->set_error(err, "out of memory");
        rc = TM_FATAL;
    }
    for (size_t i = 0; rc == TM_OK && i < b->nranges; i++) {
        const tm_range *g = TM_CELEM(tm_range, b->ranges, i);
        jl_line *l = find_marker(&st, g->topic, g->partition);
        s->host->marker_advance(&stored[i], b, i, count[i][0], count[i][1],
                                count[i][2]);
        l->m = stored[i]; /* l exists: the check passed */
    }
    if (rc == TM_OK)
        rc = save(s, &st, 1, err);
    free(stored);
    free(count);
    free_state(&st);
    close(lock);
    return rc;
}

static int by_offset(const void *a, const void *b) {
    int64_t x = (*(const jl_line *const *)a)->offset;
    int64_t y = (*(const jl_line *const *)b)->offset;
    return (x > y) - (x < y);
}

static tm_status jl_scan(void *h, const char *topic, int32_t partition,
                         void *emit_ctx, tm_error *err) {
    jl_sink *s = h;
    jl_state st;
    tm_status rc = load(s, &st, err);
    if (rc != TM_OK)
        return rc;
    const jl_line **pick = calloc(st.n + 1, sizeof *pick);
    size_t n = 0;
    for (size_t i = 0; pick && i < st.n; i++)
        if (st.lines[i].kind != 'm' && st.lines[i].partition == partition &&
            strcmp(st.lines[i].topic, topic) == 0)
            pick[n++] = &st.lines[i];
    if (!pick) {
        s->host->set_error(err, "out of memory");
        rc = TM_FATAL;
    } else {
        qsort(pick, n, sizeof *pick, by_offset);
    }
    for (size_t i = 0; rc == TM_OK && i < n; i++) {
        const jl_line *l = pick[i];
        tm_scan_item it = {
            .struct_size = sizeof it,
            .topic = topic,
            .partition = partition,
            .offset = l->offset,
            .kind = l->kind == 'r' ? TM_ITEM_ROW : TM_ITEM_DEAD_LETTER,
            .identity = l->identity && *l->identity ? l->identity : NULL,
            .reason = (tm_dl_reason)l->reason,
            .detail = l->detail};
        if (s->host->emit(emit_ctx, &it) != 0)
            break; /* the reader stops */
    }
    free(pick);
    free_state(&st);
    return rc;
}

TM_SINK_DEFINE(.name = "example_jsonl", .version = "1.0.0",
               .capabilities = TM_CAP_DEDUP | TM_CAP_DEAD_LETTERS,
               .open = jl_open, .claim = jl_claim,
               .read_markers = jl_read_markers, .commit = jl_commit,
               .close = jl_close, .scan = jl_scan)
