/* validate(): settings, the database and the table's shape, checked
 * without changing anything (the database is opened read-only; a missing
 * one is fine when the sink may create it). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sqlite_sink.h"

/* The directory part of PATH ("." when none), a new string of its full
 * length (a cut copy would name, and check, another directory, and show
 * a cut value no redaction recognizes); NULL when memory ran out. */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* validate answers OK, INVALID or RETRY: a file that open would refuse
 * for good (not a database, corrupt) is a setting to fix. */
static tm_status permanent_is_invalid(tm_status r) {
    return r == TM_FATAL ? TM_INVALID : r;
}

/* The file and its directory as open needs them: TM_OK when open can go
 * on (a missing file the sink may create: nothing to open yet). */
static tm_status check_path(const tm_host_api *host, const sq_sink *s,
                            const char *dir, tm_error *err) {
    const char *path = s->set.path;
    if (access(path, F_OK) != 0) {
        if (!s->set.create) {
            host->set_error(err,
                            "setting \"path\": %s does not exist and "
                            "\"create\" is false",
                            path);
            return TM_INVALID;
        }
        if (access(dir, W_OK) != 0) {
            host->set_error(err, "setting \"path\": cannot create %s: %s: %s",
                            path, dir, strerror(errno));
            return TM_INVALID;
        }
        return TM_OK; /* open() creates database and tables */
    }
    /* open writes (WAL: the -wal and -shm files beside it too); a
     * read-only file or directory would only make it retry. */
    const char *ro = access(path, W_OK) != 0  ? path
                     : access(dir, W_OK) != 0 ? dir
                                              : NULL;
    if (ro) {
        host->set_error(err,
                        "setting \"path\": %s is read-only for this process "
                        "(%s: %s); the sink writes the database and its -wal "
                        "and -shm files beside it",
                        path, ro, strerror(errno));
        return TM_INVALID;
    }
    return TM_OK;
}

tm_status sq_validate(const tm_host_api *host, const tm_sink_config *config,
                      tm_error *err) {
    sq_sink s = {.host = host, .config = config};
    tm_status r = sq_settings_load(host, config, &s.set, err);
    if (r != TM_OK)
        return r;
    char *dir = dir_of(s.set.path);
    if (!dir) {
        host->set_error(err, "out of memory");
        return TM_RETRY;
    }
    r = check_path(host, &s, dir, err);
    free(dir);
    if (r != TM_OK || access(s.set.path, F_OK) != 0)
        return r;
    if ((r = sq_db_open(&s, 1, err)) != TM_OK)
        return permanent_is_invalid(r);
    int exists = 0;
    if ((r = sq_table_exists(&s, &exists, err)) != TM_OK)
        ; /* err says why */
    else if (exists && !(config->flags & TM_CONFIG_SCHEMA_COLUMNS))
        r = sq_shape_check(&s, err); /* else: checked at each batch */
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
