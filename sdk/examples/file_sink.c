/*
 * file_sink.c - the example sink of docs/writing-a-sink.md: copy it.
 *
 * State is ONE text file, <path>/<connector>.state, one item per line:
 *   r <topic> <partition> <offset> <value as hex>      a row
 *   d <topic> <partition> <offset> <reason>            a dead letter
 *   m <topic> <partition> <next_offset> <epoch> <last_batch_id>
 *     <rows> <dead_letters> <filtered> <duplicates>
 *     <last_offset> <last_timestamp_ms> <last_record_hash>   a marker
 * (the last three, the marker's lineage, are absent in older files).
 * Every claim and commit rewrites the whole file: write a temp file, fsync
 * it, rename it over the old one, fsync the directory. rename() is atomic,
 * so rows, dead letters and markers change together or not at all: that is
 * the whole contract. (A real sink uses its database's transaction.)
 * It needs nothing but the SDK header and POSIX.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* getline, open_memstream, fsync */
#endif
#include <tidemark/sink.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct ex_sink {
    const tm_host_api *host; /* every call into the host goes through it */
    char dir[1024], file[1280], tmp[1280], lock[1280];
} ex_sink;

/* What one call holds in memory: the markers, parsed, and the rows and dead
 * letters as the file's lines, verbatim (a stream, so commits append). */
typedef struct ex_marker {
    char topic[256]; /* Kafka topic names are at most 249 bytes */
    tm_marker m;
} ex_marker;
typedef struct ex_state {
    ex_marker *markers;
    size_t n;
    char *items;
    size_t items_len;
    FILE *out; /* open_memstream over items */
} ex_state;

static tm_status fail(ex_sink *s, tm_status rc, const char *what,
                      tm_error *err) {
    s->host->set_error(err, "%s: %s", what, strerror(errno));
    return rc;
}

static ex_marker *find(ex_state *st, const char *topic, int32_t partition) {
    for (size_t i = 0; i < st->n; i++)
        if (st->markers[i].m.partition == partition &&
            strcmp(st->markers[i].topic, topic) == 0)
            return &st->markers[i];
    return NULL;
}

static ex_marker *add_marker(ex_state *st, const char *topic, int32_t p) {
    ex_marker *m = realloc(st->markers, (st->n + 1) * sizeof *m);
    if (!m)
        return NULL;
    st->markers = m;
    m = &m[st->n++];
    memset(m, 0, sizeof *m);
    snprintf(m->topic, sizeof m->topic, "%s", topic);
    m->m.struct_size = sizeof m->m;
    m->m.partition = p;
    m->m.last_offset = TM_NO_OFFSET; /* no record applied yet */
    m->m.last_timestamp_ms = -1;
    return m;
}

static void unload(ex_state *st) {
    if (st->out)
        fclose(st->out);
    free(st->items);
    free(st->markers);
}

/* Reads the file; a missing file is an empty sink. */
static tm_status load(ex_sink *s, ex_state *st, tm_error *err) {
    memset(st, 0, sizeof *st);
    if (!(st->out = open_memstream(&st->items, &st->items_len)))
        return fail(s, TM_FATAL, "open_memstream", err);
    FILE *f = fopen(s->file, "r");
    if (!f && errno != ENOENT)
        return fail(s, TM_RETRY, s->file, err);
    char *line = NULL, topic[256], batch[TM_BATCH_ID_MAX];
    char hash[TM_RECORD_HASH_MAX];
    size_t cap = 0;
    tm_marker m = {0};
    while (f && getline(&line, &cap, f) > 0) {
        if (line[0] != 'm') { /* rows and dead letters: kept as they are */
            fputs(line, st->out);
            continue;
        }
        ex_marker *em = NULL;
        m.last_offset = TM_NO_OFFSET;
        m.last_timestamp_ms = -1;
        strcpy(hash, "-");
        int got = sscanf(line,
                         "m %255s %" SCNd32 " %" SCNd64 " %" SCNd64
                         " %63s %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
                         " %" SCNd64 " %" SCNd64 " %64s",
                         topic, &m.partition, &m.next_offset, &m.epoch, batch,
                         &m.rows, &m.dead_letters, &m.filtered, &m.duplicates,
                         &m.last_offset, &m.last_timestamp_ms, hash);
        if ((got != 9 && got != 12) ||
            !(em = add_marker(st, topic, m.partition))) {
            s->host->set_error(err, "%s: bad marker line: %.80s", s->file,
                               line);
            free(line);
            fclose(f);
            return TM_FATAL;
        }
        em->m = m;
        em->m.struct_size = sizeof em->m;
        snprintf(em->m.last_batch_id, TM_BATCH_ID_MAX, "%s",
                 strcmp(batch, "-") ? batch : "");
        snprintf(em->m.last_record_hash, TM_RECORD_HASH_MAX, "%s",
                 strcmp(hash, "-") ? hash : "");
    }
    free(line);
    if (f)
        fclose(f);
    return TM_OK;
}

/* The atomic step. The host's fault hook marks each crash window (only for
 * commits: faults == 1). */
static tm_status save(ex_sink *s, ex_state *st, int faults, tm_error *err) {
    if (fflush(st->out) != 0 || ferror(st->out))
        return fail(s, TM_FATAL, "state in memory", err);
    FILE *f = fopen(s->tmp, "w");
    if (!f)
        return fail(s, TM_RETRY, s->tmp, err);
    fwrite(st->items, 1, st->items_len, f); /* effects first; ferror below */
    if (faults && fflush(f) == 0)
        s->host->fault(TM_FAULT_AFTER_EFFECTS);
    for (size_t i = 0; i < st->n; i++) {
        const tm_marker *m = &st->markers[i].m;
        fprintf(f,
                "m %s %" PRId32 " %" PRId64 " %" PRId64 " %s %" PRIu64
                " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRId64 " %" PRId64
                " %s\n",
                st->markers[i].topic, m->partition, m->next_offset, m->epoch,
                m->last_batch_id[0] ? m->last_batch_id : "-", m->rows,
                m->dead_letters, m->filtered, m->duplicates, m->last_offset,
                m->last_timestamp_ms,
                m->last_record_hash[0] ? m->last_record_hash : "-");
    }
    if (faults && fflush(f) == 0)
        s->host->fault(TM_FAULT_AFTER_MARKER);
    int ok = !ferror(f) && fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (fclose(f) != 0 || !ok || rename(s->tmp, s->file) != 0)
        return fail(s, TM_RETRY, s->tmp, err);
    int dfd = open(s->dir, O_RDONLY);
    ok = dfd >= 0 && fsync(dfd) == 0;
    if (dfd >= 0)
        close(dfd);
    if (!ok) /* renamed, maybe not durable: outcome unknown, so RETRY; the */
        return fail(s, TM_RETRY, s->dir, err); /* check settles it */
    if (faults)
        s->host->fault(TM_FAULT_AFTER_COMMIT);
    return TM_OK;
}

/* "Lock the markers": an fcntl lock on <connector>.lock, so two hosts
 * sharing the directory take turns. Released by close() or by death. */
static int lock_sink(ex_sink *s, tm_error *err) {
    int fd = open(s->lock, O_RDWR | O_CREAT, 0644);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fd >= 0 && fcntl(fd, F_SETLKW, &fl) == 0)
        return fd;
    fail(s, TM_RETRY, s->lock, err);
    if (fd >= 0)
        close(fd);
    return -1;
}

/* Copies a stored marker (or "absent") into the host's array; topic and
 * partition are the host's and stay as they are. */
static void fill(tm_marker *out, const ex_marker *em) {
    const char *topic = out->topic;
    int32_t partition = out->partition;
    uint32_t size = out->struct_size;
    if (em) {
        memcpy(out, &em->m, sizeof *out < size ? sizeof *out : size);
    } else {
        memset(out, 0, sizeof *out);
        out->next_offset = TM_NO_OFFSET;
        out->epoch = TM_NO_EPOCH;
    }
    out->struct_size = size;
    out->topic = topic;
    out->partition = partition;
}

static tm_status ex_open(const tm_host_api *host, const tm_sink_config *config,
                         void **sink, tm_error *err) {
    static const char *const known[] = {"path"};
    const char *dir = NULL;
    /* The host checks names and types, and names the JSON path. */
    if (host->settings_check_keys(config->settings, known, 1, err) != 0 ||
        host->setting_string(config->settings, "path", &dir, err) < 0)
        return TM_INVALID;
    if (!dir || access(dir, W_OK) != 0) {
        host->set_error(err, "setting \"path\": %s",
                        dir ? strerror(errno)
                            : "required: the directory that holds the state");
        return TM_INVALID;
    }
    const char *name = config->connector;
    if (strchr(name, '/') || strlen(dir) >= 1024 || strlen(name) > 200) {
        host->set_error(err, "path or connector name too long, or the name "
                             "is not a plain file name");
        return TM_INVALID;
    }
    ex_sink *s = calloc(1, sizeof *s);
    if (!s) {
        host->set_error(err, "out of memory");
        return TM_FATAL;
    }
    s->host = host;
    snprintf(s->dir, sizeof s->dir, "%s", dir); /* lengths checked above */
    snprintf(s->file, sizeof s->file, "%s/%s.state", dir, name);
    snprintf(s->tmp, sizeof s->tmp, "%s/%s.tmp", dir, name);
    snprintf(s->lock, sizeof s->lock, "%s/%s.lock", dir, name);
    *sink = s;
    return TM_OK;
}

static void ex_close(void *sink) {
    free(sink);
}

static tm_status ex_claim(void *sink, tm_marker *markers, size_t n,
                          uint32_t flags, tm_error *err) {
    ex_sink *s = sink;
    ex_state st;
    int lock = lock_sink(s, err);
    if (lock < 0)
        return TM_RETRY;
    tm_status rc = load(s, &st, err);
    for (size_t i = 0; rc == TM_OK && i < n; i++) {
        tm_marker *want = TM_ELEM(tm_marker, markers, i);
        ex_marker *em = find(&st, want->topic, want->partition);
        if (!em && (em = add_marker(&st, want->topic, want->partition)))
            em->m.next_offset = want->next_offset; /* created at the start */
        else if (em && (flags & TM_CLAIM_RESET)) {
            em->m.next_offset = want->next_offset;
            em->m.last_offset = TM_NO_OFFSET; /* no record known there */
            em->m.last_record_hash[0] = '\0';
        }
        if (!em) {
            s->host->set_error(err, "out of memory");
            rc = TM_FATAL;
        } else {
            em->m.epoch++; /* fences every older owner */
        }
    }
    if (rc == TM_OK)
        rc = save(s, &st, 0, err);
    for (size_t i = 0; rc == TM_OK && i < n; i++) { /* what is now stored */
        tm_marker *m = TM_ELEM(tm_marker, markers, i);
        fill(m, find(&st, m->topic, m->partition));
    }
    unload(&st);
    close(lock);
    return rc;
}

static tm_status ex_read_markers(void *sink, tm_marker *markers, size_t n,
                                 tm_error *err) {
    ex_state st;
    tm_status rc = load(sink, &st, err); /* read only: no lock, no epoch */
    for (size_t i = 0; rc == TM_OK && i < n; i++) {
        tm_marker *m = TM_ELEM(tm_marker, markers, i);
        fill(m, find(&st, m->topic, m->partition));
    }
    unload(&st);
    return rc;
}

/* Appends the batch's rows and dead letters to the state and advances the
 * markers. Runs only after the marker check said TM_OK. */
static void apply(ex_sink *s, ex_state *st, const tm_batch *b,
                  tm_marker *stored) {
    for (size_t i = 0; i < b->nranges; i++) {
        const tm_range *g = TM_CELEM(tm_range, b->ranges, i);
        uint64_t rows = 0, dead = 0;
        for (size_t j = 0; j < b->nrecords; j++) {
            const tm_record *r = TM_CELEM(tm_record, b->records, j);
            if (r->range != i)
                continue;
            fprintf(st->out, "r %s %" PRId32 " %" PRId64 " ", g->topic,
                    g->partition, r->offset);
            for (size_t k = 0; k < r->value_len; k++)
                fprintf(st->out, "%02x", ((const unsigned char *)r->value)[k]);
            fputs(r->value_len ? "\n" : "-\n", st->out);
            rows++;
        }
        for (size_t j = 0; j < b->ndead_letters; j++) {
            const tm_dead_letter *d =
                TM_CELEM(tm_dead_letter, b->dead_letters, j);
            if (d->range == i) {
                fprintf(st->out, "d %s %" PRId32 " %" PRId64 " %d\n", g->topic,
                        g->partition, d->offset, (int)d->reason);
                dead++;
            }
        }
        s->host->marker_advance(&stored[i], b, i, rows, dead, 0);
        find(st, g->topic, g->partition)->m = stored[i];
    }
}

static tm_status ex_commit(void *sink, const tm_batch *b, tm_error *err) {
    ex_sink *s = sink;
    ex_state st;
    s->host->fault(TM_FAULT_BEFORE_BEGIN);
    int lock = lock_sink(s, err); /* 1. lock the markers */
    if (lock < 0)
        return TM_RETRY;
    tm_status rc = load(s, &st, err);
    tm_marker *stored = calloc(b->nranges + 1, sizeof *stored);
    if (rc == TM_OK && !stored) {
        s->host->set_error(err, "out of memory");
        rc = TM_FATAL;
    }
    for (size_t i = 0; rc == TM_OK && i < b->nranges; i++) {
        const tm_range *g = TM_CELEM(tm_range, b->ranges, i);
        stored[i].struct_size = sizeof stored[i];
        stored[i].topic = g->topic;
        stored[i].partition = g->partition;
        fill(&stored[i], find(&st, g->topic, g->partition));
    }
    /* 2. the host's check decides; ALREADY/FENCED/CONFLICT write nothing */
    if (rc == TM_OK)
        rc = s->host->marker_check(b, stored, err);
    /* 3. effects and advanced markers, then the one atomic rename */
    if (rc == TM_OK) {
        apply(s, &st, b, stored);
        rc = save(s, &st, 1, err);
    }
    free(stored);
    unload(&st);
    close(lock);
    return rc;
}

/* Read-back for the kit and `tidemark verify`: the partition's rows and dead
 * letters in offset order (each batch appends rows, then dead letters, so
 * two passes over the file would not do: pick, then sort). */
typedef struct ex_item {
    int64_t offset;
    char kind;
    int reason;
} ex_item;

static int by_offset(const void *a, const void *b) {
    int64_t x = ((const ex_item *)a)->offset, y = ((const ex_item *)b)->offset;
    return (x > y) - (x < y);
}

static tm_status ex_scan(void *sink, const char *topic, int32_t partition,
                         void *emit_ctx, tm_error *err) {
    ex_sink *s = sink;
    ex_state st;
    tm_status rc = load(s, &st, err);
    ex_item *items = NULL;
    size_t n = 0, lines = 0;
    if (rc == TM_OK && fflush(st.out) != 0)
        rc = fail(s, TM_FATAL, "state in memory", err);
    for (size_t i = 0; rc == TM_OK && i < st.items_len; i++)
        lines += st.items[i] == '\n';
    if (rc == TM_OK && !(items = calloc(lines + 1, sizeof *items)))
        rc = fail(s, TM_FATAL, "scan", err);
    for (char *p = items ? st.items : NULL, *line; p && *p; p = line) {
        char t[256], kind, *nl = strchr(p, '\n');
        int32_t part;
        int64_t off;
        int reason = 0;
        line = nl ? nl + 1 : p + strlen(p);
        if (sscanf(p, "%c %255s %" SCNd32 " %" SCNd64 " %d", &kind, t, &part,
                   &off, &reason) >= 4 &&
            part == partition && strcmp(t, topic) == 0)
            items[n++] = (ex_item){off, kind, kind == 'd' ? reason : 0};
    }
    qsort(items, n, sizeof *items, by_offset);
    for (size_t i = 0; i < n; i++) {
        tm_scan_item it = {.struct_size = sizeof it,
                           .kind = items[i].kind == 'r' ? TM_ITEM_ROW
                                                        : TM_ITEM_DEAD_LETTER,
                           .topic = topic,
                           .partition = partition,
                           .offset = items[i].offset,
                           .reason = (tm_dl_reason)items[i].reason};
        if (s->host->emit(emit_ctx, &it) != 0)
            break; /* the reader has seen enough */
    }
    free(items);
    unload(&st);
    return rc;
}

TM_SINK_DEFINE(.name = "example_file", .version = "1.0.0",
               .capabilities = TM_CAP_DEAD_LETTERS, .open = ex_open,
               .claim = ex_claim, .read_markers = ex_read_markers,
               .commit = ex_commit, .close = ex_close, .scan = ex_scan)
