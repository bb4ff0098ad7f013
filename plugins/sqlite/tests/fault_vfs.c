/* See fault_vfs.h. Every method forwards to the wrapped VFS or file; only
 * xOpen (counting, failing when asked), xWrite and xSync (when armed) and
 * xFileControl (the persist-WAL query, when asked) differ. */
#include "fault_vfs.h"

#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

typedef struct fv_file {
    sqlite3_file base; /* our methods */
    sqlite3_file *real;
    int is_wal, is_main, watched;
} fv_file;

/* The wrapped file lives right after ours, suitably aligned. */
#define FV_HEAD ((sizeof(fv_file) + 15) & ~(size_t)15)

static sqlite3_vfs *orig;
static sqlite3_vfs shim;
static fv_fault armed;
static int persist_wal;
static int fail_opens;
static int write_error = SQLITE_IOERR_WRITE;
static char watch_suffix[256];
static fv_stats stats;

static sqlite3_file *real_of(sqlite3_file *f) {
    return ((fv_file *)f)->real;
}

/* ---- files -------------------------------------------------------------- */

static int fv_close(sqlite3_file *f) {
    sqlite3_file *r = real_of(f);
    return r->pMethods ? r->pMethods->xClose(r) : SQLITE_OK;
}

static int fv_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off) {
    sqlite3_file *r = real_of(f);
    return r->pMethods->xRead(r, buf, n, off);
}

static void fired_on(const char *what) {
    stats.fired++;
    snprintf(stats.fired_on, sizeof stats.fired_on, "%s", what);
    armed = FV_NONE;
}

static int fv_write(sqlite3_file *f, const void *buf, int n,
                    sqlite3_int64 off) {
    fv_file *p = (fv_file *)f;
    if (p->is_wal) {
        stats.wal_writes++;
        if (armed == FV_WAL_WRITE) {
            fired_on("xWrite of a WAL file");
            return write_error;
        }
    }
    if (p->watched && armed == FV_MAIN_WRITE) {
        fired_on("xWrite of the main database file");
        return write_error;
    }
    return p->real->pMethods->xWrite(p->real, buf, n, off);
}

static int fv_truncate(sqlite3_file *f, sqlite3_int64 size) {
    sqlite3_file *r = real_of(f);
    return r->pMethods->xTruncate(r, size);
}

static int fv_sync(sqlite3_file *f, int flags) {
    fv_file *p = (fv_file *)f;
    if (p->is_wal) {
        stats.wal_syncs++;
        if (armed == FV_WAL_SYNC) {
            fired_on("xSync of a WAL file (not done)");
            return SQLITE_IOERR_FSYNC;
        }
        if (armed == FV_WAL_SYNC_LANDED) {
            stats.real_sync_rc = p->real->pMethods->xSync(p->real, flags);
            fired_on("xSync of a WAL file (done, reported failed)");
            return SQLITE_IOERR_FSYNC;
        }
    }
    return p->real->pMethods->xSync(p->real, flags);
}

static int fv_file_size(sqlite3_file *f, sqlite3_int64 *size) {
    sqlite3_file *r = real_of(f);
    return r->pMethods->xFileSize(r, size);
}

static int fv_lock(sqlite3_file *f, int level) {
    sqlite3_file *r = real_of(f);
    return r->pMethods->xLock(r, level);
}

static int fv_unlock(sqlite3_file *f, int level) {
    sqlite3_file *r = real_of(f);
    return r->pMethods->xUnlock(r, level);
}

static int fv_check_reserved(sqlite3_file *f, int *out) {
    sqlite3_file *r = real_of(f);
    return r->pMethods->xCheckReservedLock(r, out);
}

static int fv_file_control(sqlite3_file *f, int op, void *arg) {
    fv_file *p = (fv_file *)f;
    if (op == SQLITE_FCNTL_PERSIST_WAL && persist_wal && p->is_main &&
        *(int *)arg < 0) {
        *(int *)arg = 1;
        return SQLITE_OK;
    }
    return p->real->pMethods->xFileControl(p->real, op, arg);
}

static int fv_sector_size(sqlite3_file *f) {
    sqlite3_file *r = real_of(f);
    return r->pMethods->xSectorSize(r);
}

static int fv_device_characteristics(sqlite3_file *f) {
    sqlite3_file *r = real_of(f);
    return r->pMethods->xDeviceCharacteristics(r);
}

static int fv_shm_map(sqlite3_file *f, int region, int size, int extend,
                      void volatile **out) {
    sqlite3_file *r = real_of(f);
    return r->pMethods->xShmMap(r, region, size, extend, out);
}

static int fv_shm_lock(sqlite3_file *f, int offset, int n, int flags) {
    sqlite3_file *r = real_of(f);
    return r->pMethods->xShmLock(r, offset, n, flags);
}

static void fv_shm_barrier(sqlite3_file *f) {
    sqlite3_file *r = real_of(f);
    r->pMethods->xShmBarrier(r);
}

static int fv_shm_unmap(sqlite3_file *f, int delete_flag) {
    sqlite3_file *r = real_of(f);
    return r->pMethods->xShmUnmap(r, delete_flag);
}

static int fv_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **out) {
    sqlite3_file *r = real_of(f);
    if (r->pMethods->iVersion < 3) {
        *out = NULL;
        return SQLITE_OK;
    }
    return r->pMethods->xFetch(r, off, n, out);
}

static int fv_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p) {
    sqlite3_file *r = real_of(f);
    return r->pMethods->iVersion < 3 ? SQLITE_OK
                                     : r->pMethods->xUnfetch(r, off, p);
}

/* Version 3, as the unix VFS's; version-2 files get xShm* only when the
 * wrapped file has them (see fv_open). */
static const sqlite3_io_methods fv_io = {
    3,
    fv_close,
    fv_read,
    fv_write,
    fv_truncate,
    fv_sync,
    fv_file_size,
    fv_lock,
    fv_unlock,
    fv_check_reserved,
    fv_file_control,
    fv_sector_size,
    fv_device_characteristics,
    fv_shm_map,
    fv_shm_lock,
    fv_shm_barrier,
    fv_shm_unmap,
    fv_fetch,
    fv_unfetch,
};

/* Without shared-memory methods: for wrapped files of version 1. */
static const sqlite3_io_methods fv_io_v1 = {
    1,
    fv_close,
    fv_read,
    fv_write,
    fv_truncate,
    fv_sync,
    fv_file_size,
    fv_lock,
    fv_unlock,
    fv_check_reserved,
    fv_file_control,
    fv_sector_size,
    fv_device_characteristics,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
};

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return k > 0 && n >= k && strcmp(s + n - k, suffix) == 0;
}

static int fv_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f,
                   int flags, int *out_flags) {
    (void)vfs;
    fv_file *p = (fv_file *)f;
    p->real = (sqlite3_file *)(void *)((char *)f + FV_HEAD);
    p->is_wal = (flags & SQLITE_OPEN_WAL) != 0;
    p->is_main = (flags & SQLITE_OPEN_MAIN_DB) != 0;
    int watched = p->watched =
        p->is_main && name && ends_with(name, watch_suffix);
    if (watched && fail_opens > 0) {
        fail_opens--;
        stats.open_failures++;
        p->base.pMethods = NULL;
        return SQLITE_CANTOPEN;
    }
    int rc = orig->xOpen(orig, name, p->real, flags, out_flags);
    if (!p->real->pMethods)
        p->base.pMethods = NULL; /* nothing to close */
    else
        p->base.pMethods =
            p->real->pMethods->iVersion >= 2 ? &fv_io : &fv_io_v1;
    if (rc == SQLITE_OK && watched)
        stats.main_opens++;
    return rc;
}

/* ---- the VFS: everything else forwards ---------------------------------- */

static int fv_delete(sqlite3_vfs *v, const char *name, int sync_dir) {
    (void)v;
    return orig->xDelete(orig, name, sync_dir);
}

static int fv_access(sqlite3_vfs *v, const char *name, int flags, int *out) {
    (void)v;
    return orig->xAccess(orig, name, flags, out);
}

static int fv_full_pathname(sqlite3_vfs *v, const char *name, int n,
                            char *out) {
    (void)v;
    return orig->xFullPathname(orig, name, n, out);
}

static void *fv_dl_open(sqlite3_vfs *v, const char *name) {
    (void)v;
    return orig->xDlOpen(orig, name);
}

static void fv_dl_error(sqlite3_vfs *v, int n, char *msg) {
    (void)v;
    orig->xDlError(orig, n, msg);
}

static void (*fv_dl_sym(sqlite3_vfs *v, void *h, const char *sym))(void) {
    (void)v;
    return orig->xDlSym(orig, h, sym);
}

static void fv_dl_close(sqlite3_vfs *v, void *h) {
    (void)v;
    orig->xDlClose(orig, h);
}

static int fv_randomness(sqlite3_vfs *v, int n, char *out) {
    (void)v;
    return orig->xRandomness(orig, n, out);
}

static int fv_sleep(sqlite3_vfs *v, int us) {
    (void)v;
    return orig->xSleep(orig, us);
}

static int fv_current_time(sqlite3_vfs *v, double *out) {
    (void)v;
    return orig->xCurrentTime(orig, out);
}

static int fv_last_error(sqlite3_vfs *v, int n, char *out) {
    (void)v;
    return orig->xGetLastError ? orig->xGetLastError(orig, n, out) : 0;
}

static int fv_current_time64(sqlite3_vfs *v, sqlite3_int64 *out) {
    (void)v;
    if (orig->iVersion >= 2 && orig->xCurrentTimeInt64)
        return orig->xCurrentTimeInt64(orig, out);
    double d;
    int rc = orig->xCurrentTime(orig, &d);
    *out = (sqlite3_int64)(d * 86400000.0);
    return rc;
}

int fv_install(void) {
    if (orig)
        return SQLITE_OK;
    int rc = sqlite3_initialize();
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_vfs *def = sqlite3_vfs_find(NULL);
    if (!def)
        return SQLITE_ERROR;
    orig = def;
    shim = (sqlite3_vfs){
        .iVersion = 2,
        .szOsFile = (int)(FV_HEAD + (size_t)def->szOsFile),
        .mxPathname = def->mxPathname,
        .zName = "tm-fault",
        .pAppData = NULL,
        .xOpen = fv_open,
        .xDelete = fv_delete,
        .xAccess = fv_access,
        .xFullPathname = fv_full_pathname,
        .xDlOpen = fv_dl_open,
        .xDlError = fv_dl_error,
        .xDlSym = fv_dl_sym,
        .xDlClose = fv_dl_close,
        .xRandomness = fv_randomness,
        .xSleep = fv_sleep,
        .xCurrentTime = fv_current_time,
        .xGetLastError = fv_last_error,
        .xCurrentTimeInt64 = fv_current_time64,
    };
    rc = sqlite3_vfs_register(&shim, 1);
    if (rc != SQLITE_OK)
        orig = NULL;
    return rc;
}

const char *fv_name(void) {
    return shim.zName;
}

void fv_watch(const char *suffix) {
    snprintf(watch_suffix, sizeof watch_suffix, "%s", suffix);
}

void fv_arm(fv_fault fault) {
    stats.wal_writes = stats.wal_syncs = 0;
    stats.real_sync_rc = -1;
    armed = fault;
}

void fv_disarm(void) {
    armed = FV_NONE;
}

void fv_persist_wal(int on) {
    persist_wal = on;
}

void fv_write_error(int rc) {
    write_error = rc;
}

void fv_fail_opens(int n) {
    fail_opens = n;
}

fv_stats fv_get(void) {
    return stats;
}
