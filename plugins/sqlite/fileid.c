/* The files the connection opened, the database and its -wal and -shm, and
 * the check before every COMMIT that the path still names them. SQLite in
 * WAL mode goes on committing into files that were moved away or removed,
 * and whatever lands there is found by no one later. A file moved away
 * can come back (RETRY until it does); one removed (its inode has no name
 * left) never can: FATAL, after copying what the open connection still
 * sees into a new file beside the path (VACUUM INTO), so that the batches
 * committed before the removal are not lost with the process. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sqlite_sink.h"

static const char *const SUFFIX[SQ_NFILES] = {"", "-wal", "-shm"};

/* PATH with SUFFIX[i] into OUT. 0, or -1 if it does not fit. */
static int file_path(const sq_sink *s, int i, char *out, size_t size) {
    int n = snprintf(out, size, "%s%s", s->set.path, SUFFIX[i]);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

tm_status sq_fileid_record(sq_sink *s, tm_error *err) {
    /* A read transaction opens (and creates) the -wal and -shm files; the
     * connection keeps them open until it closes. */
    int rc = sq_exec(s, "SELECT count(*) FROM sqlite_schema");
    if (rc != SQLITE_OK)
        return sq_fail(s, rc, "reading the schema", err);
    for (int i = 0; i < SQ_NFILES; i++) {
        char p[SQ_PATH_MAX];
        struct stat st;
        if (file_path(s, i, p, sizeof p) != 0 || stat(p, &st) != 0) {
            s->host->set_error(err,
                               "setting \"path\": %s%s vanished while "
                               "opened: %s",
                               s->set.path, SUFFIX[i], strerror(errno));
            return TM_RETRY;
        }
        s->file_dev[i] = st.st_dev;
        s->file_ino[i] = st.st_ino;
    }
    return TM_OK;
}

/* Through this process's open files (Linux /proc/self/fd): 1 when the
 * file (DEV, INO) still has a name somewhere, 0 when it has none (removed:
 * *fd is the descriptor that holds it), -1 when that cannot be told. */
static int still_linked(dev_t dev, ino_t ino, int *fd) {
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int out = -1;
    struct dirent *e;
    while (out < 0 && (e = readdir(d)) != NULL) {
        char *end;
        long n = strtol(e->d_name, &end, 10);
        struct stat st;
        if (*end || end == e->d_name || n == dirfd(d) || fstat((int)n, &st))
            continue;
        if (S_ISREG(st.st_mode) && st.st_dev == dev && st.st_ino == ino) {
            out = st.st_nlink > 0;
            *fd = (int)n;
        }
    }
    closedir(d);
    return out;
}

/* VACUUM INTO a new file beside the path: a consistent copy of what the
 * connection sees (the database and its WAL, open even when removed).
 * Outside any transaction. 0 with OUT named, or -1 with WHY. */
static int rescue(sq_sink *s, char *out, size_t size, char *why,
                  size_t why_size) {
    int n = snprintf(out, size, "%s.rescued-%lld", s->set.path,
                     (long long)sq_wall_ms());
    if (n < 0 || (size_t)n >= size) {
        snprintf(why, why_size, "the path is too long");
        return -1;
    }
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db, "VACUUM INTO ?1", -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 1, out, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    if (rc != SQLITE_DONE)
        snprintf(why, why_size, "%s", sqlite3_errmsg(s->db));
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

/* FATAL for a file of the database removed while running (SUFFIX: which
 * one; FD: the descriptor of this process that still holds it). */
static tm_status removed(sq_sink *s, const char *suffix, int fd,
                         tm_error *err) {
    /* VACUUM INTO runs outside a transaction: the batch is given up. Not
     * for the batch's deadline either (interrupt() still stops it). */
    sq_rollback(s);
    s->deadline_ms = 0;
    char out[SQ_PATH_MAX + 32], why[256] = "";
    int saved = 0;
    if (s->removed) /* rescued (or tried) at the first refusal */
        snprintf(why, sizeof why, "see the first error of this connector");
    else
        saved = rescue(s, out, sizeof out, why, sizeof why) == 0;
    s->removed = 1;
    int pid = (int)getpid();
    if (saved)
        s->host->set_error(
            err,
            "setting \"path\": %s%s was removed while running (the open "
            "file has no name left, so it can never be committed into "
            "again); what the connection still held is rescued into \"%s\": "
            "stop the connector, check it and move it to %s (docs/sinks/"
            "sqlite.md, Durability)",
            s->set.path, suffix, out, s->set.path);
    else
        s->host->set_error(
            err,
            "setting \"path\": %s%s was removed while running (the open "
            "file has no name left, so it can never be committed into "
            "again); rescuing it into a new file failed (%s): while this "
            "process (pid %d) runs, copy /proc/%d/fd/%d and the database's "
            "other open files under /proc/%d/fd (its .db and -wal) "
            "elsewhere before stopping it (docs/sinks/sqlite.md, "
            "Durability)",
            s->set.path, suffix, why, pid, pid, fd, pid);
    return TM_FATAL;
}

tm_status sq_db_same_file(sq_sink *s, tm_error *err) {
    for (int i = 0; i < SQ_NFILES; i++) {
        char p[SQ_PATH_MAX];
        struct stat st;
        int named = file_path(s, i, p, sizeof p) == 0;
        int rc = named ? stat(p, &st) : -1;
        int e = rc == 0 ? 0 : named ? errno : ENAMETOOLONG;
        if (rc == 0 && st.st_dev == s->file_dev[i] &&
            st.st_ino == s->file_ino[i])
            continue;
        int fd = -1;
        if (still_linked(s->file_dev[i], s->file_ino[i], &fd) == 0)
            return removed(s, SUFFIX[i], fd, err);
        const char *why = rc == 0       ? "replaced by another file"
                          : e == ENOENT ? "moved away"
                                        : strerror(e);
        /* RETRY, not FATAL: the open file still has a name elsewhere, so
         * it can be moved back (then commits go on); a new file at the
         * path is another database. */
        s->host->set_error(err,
                           "setting \"path\": %s%s no longer names the open "
                           "database's file (%s while running); nothing is "
                           "committed until it does again (move it back, or "
                           "stop the connector)",
                           s->set.path, SUFFIX[i], why);
        return TM_RETRY;
    }
    return TM_OK;
}
