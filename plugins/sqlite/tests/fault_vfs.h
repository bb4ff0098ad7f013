/* A fault-injecting SQLite VFS for the tests: it wraps the default VFS and
 * registers itself as the new default, so every connection of the process
 * opened without a VFS name goes through it, the plugin's included (it is
 * dlopen'ed RTLD_LOCAL, but links the same libsqlite3.so.0, which the
 * dynamic loader maps once). fv_main_opens() lets a test prove that.
 *
 * Armed, it fails exactly one operation, on a write-ahead log file (the
 * "-wal" file, opened with SQLITE_OPEN_WAL) unless said otherwise, and
 * disarms itself:
 *   FV_WAL_SYNC         xSync is not done and fails (SQLITE_IOERR_FSYNC);
 *   FV_WAL_SYNC_LANDED  xSync is done, then reported failed anyway (an
 *                       fsync whose data reached the disk but whose result
 *                       was lost);
 *   FV_WAL_WRITE        xWrite is not done and fails (SQLITE_IOERR_WRITE);
 *   FV_MAIN_WRITE       the same for the watched main database file (in
 *                       WAL mode only a checkpoint writes it).
 * fv_fail_opens(n) makes the next n opens of a watched main database
 * file fail (SQLITE_CANTOPEN), as when the file cannot be reached.
 * fv_persist_wal(1) answers SQLITE_FCNTL_PERSIST_WAL queries with "keep":
 * the last connection to close then leaves the WAL file in place instead
 * of checkpointing it away, as a crash would; the next open recovers from
 * it whatever it holds up to its last valid commit frame.
 *
 * Single-threaded use (the tests drive one instance from one thread). */
#ifndef TM_SQLITE_TEST_FAULT_VFS_H
#define TM_SQLITE_TEST_FAULT_VFS_H

typedef enum fv_fault {
    FV_NONE = 0,
    FV_WAL_SYNC,
    FV_WAL_SYNC_LANDED,
    FV_WAL_WRITE,
    FV_MAIN_WRITE
} fv_fault;

typedef struct fv_stats {
    long main_opens;    /* xOpen of a main database file whose name ends
                           in the suffix given to fv_main_opens() */
    long fired;         /* injected failures */
    long open_failures; /* opens failed by fv_fail_opens() */
    long wal_writes;    /* xWrite calls on WAL files since the last fv_arm() */
    long wal_syncs;     /* xSync calls on WAL files since the last fv_arm() */
    int real_sync_rc;   /* FV_WAL_SYNC_LANDED: the real xSync's result */
    char fired_on[512]; /* the file the failure was injected on */
} fv_stats;

/* Wraps sqlite3_vfs_find(NULL) and registers the wrapper as the default.
 * Returns SQLITE_OK or an SQLite error code. Idempotent. */
int fv_install(void);
/* The name the wrapper is registered under. */
const char *fv_name(void);
/* Main database files are counted when their name ends in SUFFIX. */
void fv_watch(const char *suffix);
void fv_arm(fv_fault fault);
void fv_disarm(void);
void fv_persist_wal(int on);
void fv_fail_opens(int n);
/* What the failed xWrite of FV_WAL_WRITE / FV_MAIN_WRITE returns
 * (SQLITE_IOERR_WRITE unless said otherwise, e.g. SQLITE_FULL). */
void fv_write_error(int rc);
/* A copy of the counters. */
fv_stats fv_get(void);

#endif
