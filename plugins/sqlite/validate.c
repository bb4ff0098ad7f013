/* validate(): settings, the database and the table's shape, checked
 * without changing anything (the database is opened read-only; a missing
 * one is fine when the sink may create it). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sqlite_sink.h"

/* The directory part of PATH into buf ("." when none). */
static void dir_of(const char *path, char *buf, size_t size) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(buf, size, ".");
    else if (slash == path)
        snprintf(buf, size, "/");
    else
        snprintf(buf, size, "%.*s", (int)(slash - path), path);
}

/* validate answers OK, INVALID or RETRY: a file that open would refuse
 * for good (not a database, corrupt) is a setting to fix. */
static tm_status permanent_is_invalid(tm_status r) {
    return r == TM_FATAL ? TM_INVALID : r;
}

tm_status sq_validate(const tm_host_api *host, const tm_sink_config *config,
                      tm_error *err) {
    sq_sink s = {.host = host, .config = config};
    tm_status r = sq_settings_load(host, config, &s.set, err);
    if (r != TM_OK)
        return r;
    char dir[1024];
    dir_of(s.set.path, dir, sizeof dir);
    if (access(s.set.path, F_OK) != 0) {
        if (!s.set.create) {
            host->set_error(err,
                            "setting \"path\": %s does not exist and "
                            "\"create\" is false",
                            s.set.path);
            return TM_INVALID;
        }
        if (access(dir, W_OK) != 0) {
            host->set_error(err, "setting \"path\": cannot create %s: %s: %s",
                            s.set.path, dir, strerror(errno));
            return TM_INVALID;
        }
        return TM_OK; /* open() creates database and tables */
    }
    /* open writes (WAL: the -wal and -shm files beside it too); a
     * read-only file or directory would only make it retry. */
    const char *ro = access(s.set.path, W_OK) != 0 ? s.set.path
                     : access(dir, W_OK) != 0      ? dir
                                                   : NULL;
    if (ro) {
        host->set_error(err,
                        "setting \"path\": %s is read-only for this process "
                        "(%s: %s); the sink writes the database and its -wal "
                        "and -shm files beside it",
                        s.set.path, ro, strerror(errno));
        return TM_INVALID;
    }
    if ((r = sq_db_open(&s, 1, err)) != TM_OK)
        return permanent_is_invalid(r);
    int exists = 0;
    if ((r = sq_table_exists(&s, &exists, err)) != TM_OK)
        ; /* err says why */
    else if (exists)
        r = sq_shape_check(&s, err);
    else if (!s.set.create) {
        host->set_error(err,
                        "setting \"table\": no table \"%s\" in %s and "
                        "\"create\" is false",
                        s.set.table, s.set.path);
        r = TM_INVALID;
    }
    sq_db_close(&s);
    return permanent_is_invalid(r);
}
