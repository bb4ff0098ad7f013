/* Loading one sink plugin: the only file of the project that includes
 * <dlfcn.h>. Every refusal is one line naming the file, the field and both
 * values, because the person reading it is usually holding a .so built
 * against some other version of sink.h and needs to know which.
 *
 * Plugins are never dlclose()d. A plugin's code may still be referenced
 * after its instance is closed: threads its client library started (libpq,
 * librdkafka-style background threads), atexit() and pthread_key
 * destructors, TLS destructors, function pointers it registered with other
 * libraries. Unmapping that code turns a clean shutdown into a crash in a
 * random place, and the memory saved is a few pages per plugin type.
 *
 * RTLD_NOW: an unresolved symbol is reported here, at load, with the
 * file's name, instead of killing a connector thread at its first call.
 * RTLD_LOCAL: each plugin's dependencies stay private to it, so the postgres
 * plugin's libpq and the sqlite plugin's libsqlite3 (or two plugins linked
 * against different versions of one library) never resolve each other's
 * symbols. */
#define _XOPEN_SOURCE 700 /* realpath() is XSI, not in _POSIX_C_SOURCE */
#include "plugin/loader.h"

#include "config/settings_table.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* dlerror() reports the last error of the calling thread on glibc but of
 * the process on other libcs, and its buffer is reused by the next dl*
 * call: every dl* call plus the read of its error happens under this lock. */
static pthread_mutex_t dl_lock = PTHREAD_MUTEX_INITIALIZER;

/* Writes one line into errstr: any newline (from dlerror text) becomes a
 * space so that logs and the table of `tidemark plugins` stay one line per
 * plugin. */
static void refuse(char *errstr, size_t errstr_size, const char *fmt, ...)
    TM_PRINTF(3, 4);
static void refuse(char *errstr, size_t errstr_size, const char *fmt, ...) {
    if (errstr == NULL || errstr_size == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(errstr, errstr_size, fmt, ap);
    va_end(ap);
    if (n < 0) {
        snprintf(errstr, errstr_size, "plugin: cannot format error");
        return;
    }
    for (char *p = errstr; *p != '\0'; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
}

static const char *file_type_name(mode_t mode) {
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISSOCK(mode))
        return "a socket";
    return "not a regular file";
}

/* The owner a plugin file or directory may have: root (who could replace
 * it anyway) or the user the host runs as. */
static int trusted_owner(uid_t uid) {
    return uid == 0 || uid == geteuid();
}

static void refuse_errno(const char *path, const char *what, int err,
                         char *errstr, size_t errstr_size) {
    char msg[128];
    if (strerror_r(err, msg, sizeof msg) != 0)
        snprintf(msg, sizeof msg, "errno %d", err);
    refuse(errstr, errstr_size, "plugin %s: %s: %s", path, what, msg);
}

/* Refuses DIR, one directory on the way to a plugin, when someone other
 * than its owner (root or the running user) could change what it holds.
 * An ancestor may be sticky and world-writable (/tmp) when the entry below
 * it belongs to root or the running user: nobody else can rename that
 * entry away. The directory the plugin (or a link to it) is in gets no
 * such exception: in a sticky directory anyone may still add a name. */
static int check_one_dir(const char *path, const char *dir,
                         const struct stat *st, int last, uid_t child_uid,
                         char *errstr, size_t errstr_size) {
    if (!S_ISDIR(st->st_mode)) {
        refuse(errstr, errstr_size,
               "plugin %s: directory %s changed while being checked", path,
               dir);
        return -1;
    }
    if (!trusted_owner(st->st_uid)) {
        refuse(errstr, errstr_size,
               "plugin %s: directory %s: owner is uid %ld; expected root or "
               "the running user (uid %ld)",
               path, dir, (long)st->st_uid, (long)geteuid());
        return -1;
    }
    int sticky_ok =
        !last && (st->st_mode & S_ISVTX) != 0 && trusted_owner(child_uid);
    if ((st->st_mode & (S_IWGRP | S_IWOTH)) != 0 && !sticky_ok) {
        refuse(errstr, errstr_size,
               "plugin %s: directory %s is writable by group or others "
               "(mode %04o); expected no group/other write (chmod go-w %s)",
               path, dir, (unsigned)(st->st_mode & 07777), dir);
        return -1;
    }
    return 0;
}

/* Every directory from / down to REAL (absolute, links resolved): whoever
 * may write to any of them may replace what is below it. Each one is
 * judged once the owner of the entry below it is known. */
static int check_chain(const char *path, const char *real, char *errstr,
                       size_t errstr_size) {
    char dir[TM_PLUGIN_PATH_MAX], below[TM_PLUGIN_PATH_MAX];
    size_t len = strlen(real);
    if (len >= sizeof dir) {
        refuse(errstr, errstr_size, "plugin %s: directory path too long", path);
        return -1;
    }
    struct stat st, st_below;
    memcpy(dir, "/", 2);
    if (lstat(dir, &st) != 0) {
        refuse_errno(path, "cannot stat /", errno, errstr, errstr_size);
        return -1;
    }
    for (size_t i = 1; i < len; i++) {
        /* below = REAL up to the end of the next component. */
        if (real[i] == '/' || (i + 1 < len && real[i + 1] != '/'))
            continue;
        memcpy(below, real, i + 1);
        below[i + 1] = '\0';
        if (lstat(below, &st_below) != 0) {
            refuse_errno(path, "cannot stat a directory above it", errno,
                         errstr, errstr_size);
            return -1;
        }
        if (check_one_dir(path, dir, &st, 0, st_below.st_uid, errstr,
                          errstr_size) != 0)
            return -1;
        memcpy(dir, below, i + 2);
        st = st_below;
    }
    return check_one_dir(path, dir, &st, 1, 0, errstr, errstr_size);
}

/* The resolved directory part of P ("/" for a file in /): heap, or NULL
 * with errno set. */
static char *real_dir_of(const char *p) {
    size_t n = strlen(p);
    char *copy = malloc(n + 1);
    if (copy == NULL)
        return NULL;
    memcpy(copy, p, n + 1);
    char *slash = strrchr(copy, '/');
    if (slash == copy)
        slash[1] = '\0';
    else
        *slash = '\0';
    char *real = realpath(copy, NULL);
    int e = errno;
    free(copy);
    errno = e;
    return real;
}

/* Every symbolic link on PATH as given (a directory or the file): the
 * directory it sits in must pass check_chain, or whoever planted it chose
 * what is loaded. realpath() alone would check only where links lead. */
static int check_links(const char *path, char *errstr, size_t errstr_size) {
    char prefix[TM_PLUGIN_PATH_MAX];
    size_t len = strlen(path);
    for (size_t i = 1; i <= len; i++) {
        if (i < len && path[i] != '/')
            continue;
        if (path[i - 1] == '/')
            continue; /* "//" */
        memcpy(prefix, path, i);
        prefix[i] = '\0';
        struct stat st;
        if (lstat(prefix, &st) != 0 || !S_ISLNK(st.st_mode))
            continue; /* a missing piece is reported by the open */
        char *dir = real_dir_of(prefix);
        if (dir == NULL) {
            refuse_errno(path, "cannot resolve the directory of a link on it",
                         errno, errstr, errstr_size);
            return -1;
        }
        int rc = check_chain(path, dir, errstr, errstr_size);
        free(dir);
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* The checks run before dlopen(), which already runs the file's
 * constructors, and they run on what will be loaded: the directory the
 * path names (where a link may have been planted), the directory of every
 * link on the path, the directory the file really is in, every directory
 * above each of them, then the file itself
 * through the descriptor that dlopen() is given. Nothing is looked up by
 * name between the checks and the load. A relative path would depend on the
 * working directory: refused. The fd (O_CLOEXEC), or -1. */
static int open_checked(const char *path, char *errstr, size_t errstr_size) {
    if (path[0] != '/') {
        refuse(errstr, errstr_size,
               "plugin %s: path is relative; expected an absolute path, or a "
               "plain name to look up in the plugin directories",
               path);
        return -1;
    }
    char *searched = real_dir_of(path);
    if (searched == NULL) {
        refuse_errno(path, "cannot resolve its directory", errno, errstr,
                     errstr_size);
        return -1;
    }
    int rc = check_chain(path, searched, errstr, errstr_size);
    if (rc == 0)
        rc = check_links(path, errstr, errstr_size);
    char *real = NULL, *real_dir = NULL;
    if (rc == 0 && (real = realpath(path, NULL)) == NULL) {
        refuse_errno(path, "cannot open", errno, errstr, errstr_size);
        rc = -1;
    }
    if (rc == 0 && (real_dir = real_dir_of(real)) == NULL) {
        refuse_errno(path, "cannot resolve its directory", errno, errstr,
                     errstr_size);
        rc = -1;
    }
    if (rc == 0 && strcmp(real_dir, searched) != 0)
        rc = check_chain(path, real_dir, errstr, errstr_size);
    int fd = -1;
    if (rc == 0) {
        /* REAL has no links left and every directory above it is
         * trusted: O_NOFOLLOW only catches a swap the checks missed.
         * O_NONBLOCK: a FIFO must not hang the open. */
        fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0)
            refuse_errno(path, "cannot open", errno, errstr, errstr_size);
    }
    free(searched);
    free(real);
    free(real_dir);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        refuse_errno(path, "cannot stat", errno, errstr, errstr_size);
    } else if (!S_ISREG(st.st_mode)) {
        refuse(errstr, errstr_size,
               "plugin %s: file type is %s, expected a regular file", path,
               file_type_name(st.st_mode));
    } else if (!trusted_owner(st.st_uid)) {
        refuse(errstr, errstr_size,
               "plugin %s: owner is uid %ld; expected root or the running "
               "user (uid %ld)",
               path, (long)st.st_uid, (long)geteuid());
    } else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        refuse(errstr, errstr_size,
               "plugin %s: mode is %04o, writable by group or others; "
               "expected no group/other write (chmod go-w)",
               path, (unsigned)(st.st_mode & 07777));
    } else {
        return fd;
    }
    (void)close(fd);
    return -1;
}

/* glibc's dlopen() errors start with the file name; ours already does. */
static const char *strip_path_prefix(const char *msg, const char *path) {
    size_t n = strlen(path);
    if (strncmp(msg, path, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
        return msg + n + 2;
    return msg;
}

/* The files this loader has mapped, by identity, under dl_lock. glibc
 * remembers a library by every name it was dlopen()ed under and answers a
 * later dlopen() of such a name with it, without looking at the file: a
 * "/proc/self/fd/N" name must never be given to dlopen() twice. So the
 * descriptor a library was mapped through stays open for the life of the
 * process (plugins are never unloaded either: the number is never reused),
 * and a file already mapped is answered from this table instead. */
typedef struct mapped_file {
    dev_t dev;
    ino_t ino;
    void *handle;
} mapped_file;
static mapped_file *mapped;
static size_t nmapped, mapped_cap;

static void *find_mapped(const struct stat *st) {
    for (size_t i = 0; i < nmapped; i++)
        if (mapped[i].dev == st->st_dev && mapped[i].ino == st->st_ino)
            return mapped[i].handle;
    return NULL;
}

/* 0, or -1 when out of memory (the caller then must not close the fd). */
static int remember_mapped(const struct stat *st, void *handle) {
    if (nmapped == mapped_cap) {
        size_t cap = mapped_cap != 0 ? mapped_cap * 2 : 8;
        mapped_file *grown = realloc(mapped, cap * sizeof *grown);
        if (grown == NULL)
            return -1;
        mapped = grown;
        mapped_cap = cap;
    }
    mapped[nmapped++] = (mapped_file){st->st_dev, st->st_ino, handle};
    return 0;
}

/* dlopen() of the checked descriptor through /proc/self/fd: the file
 * checked is the file mapped. Takes FD: it is closed, or kept open for
 * good when the library was mapped through it (see mapped_file). */
static void *open_library(const char *path, int fd, char *errstr,
                          size_t errstr_size) {
    char fd_path[64];
    snprintf(fd_path, sizeof fd_path, "/proc/self/fd/%d", fd);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        refuse_errno(path, "cannot stat", errno, errstr, errstr_size);
        (void)close(fd);
        return NULL;
    }
    if (pthread_mutex_lock(&dl_lock) != 0) {
        refuse(errstr, errstr_size, "plugin %s: cannot lock the loader", path);
        (void)close(fd);
        return NULL;
    }
    void *handle = find_mapped(&st);
    int keep = 0;
    if (handle == NULL) {
        (void)dlerror(); /* drop an error left by someone else's dl* call */
        handle = dlopen(fd_path, RTLD_NOW | RTLD_LOCAL);
        if (handle == NULL) {
            const char *msg = dlerror();
            refuse(errstr, errstr_size, "plugin %s: cannot load: %s", path,
                   msg != NULL ? strip_path_prefix(msg, fd_path)
                               : "unknown error");
        } else {
            keep = 1;
            (void)remember_mapped(&st, handle); /* else: a later load of
                                                   it maps it again */
        }
    }
    (void)pthread_mutex_unlock(&dl_lock);
    if (!keep)
        (void)close(fd);
    return handle;
}

static tm_sink_entry_fn find_entry(void *handle, const char *path, char *errstr,
                                   size_t errstr_size) {
    if (pthread_mutex_lock(&dl_lock) != 0) {
        refuse(errstr, errstr_size, "plugin %s: cannot lock the loader", path);
        return NULL;
    }
    (void)dlerror();
    void *sym = dlsym(handle, TM_SINK_ENTRY_SYMBOL);
    /* A symbol may legitimately have the value NULL; dlerror() is the one
     * way to tell. Either way there is nothing to call. */
    const char *msg = dlerror();
    (void)pthread_mutex_unlock(&dl_lock);
    if (sym == NULL || msg != NULL) {
        refuse(errstr, errstr_size,
               "plugin %s: entry symbol '%s' is missing (not a tidemark sink "
               "plugin, or built without TM_SINK_DEFINE)",
               path, TM_SINK_ENTRY_SYMBOL);
        return NULL;
    }
    /* POSIX guarantees that a dlsym() result for a function converts to a
     * function pointer; ISO C alone does not. */
    return (tm_sink_entry_fn)sym;
}

/* The version fields, in the order that makes each later read meaningful:
 * without the magic nothing else is ours to interpret; without the right
 * major the layout is unknown; the size says which fields exist. */
static int check_version(const tm_sink_api *api, const char *path, char *errstr,
                         size_t errstr_size) {
    if (api->magic != TM_SINK_MAGIC) {
        refuse(errstr, errstr_size,
               "plugin %s: magic is 0x%08lx, expected 0x%08lx (\"TMSK\")", path,
               (unsigned long)api->magic, (unsigned long)TM_SINK_MAGIC);
        return -1;
    }
    if (api->abi_major != TM_SINK_ABI_MAJOR) {
        refuse(errstr, errstr_size,
               "plugin %s: abi_major is %u, this host speaks %u", path,
               (unsigned)api->abi_major, (unsigned)TM_SINK_ABI_MAJOR);
        return -1;
    }
    if (api->abi_minor > TM_SINK_ABI_MINOR) {
        refuse(errstr, errstr_size,
               "plugin %s: abi_minor is %u, newer than this host's %u "
               "(host speaks ABI %u.%u)",
               path, (unsigned)api->abi_minor, (unsigned)TM_SINK_ABI_MINOR,
               (unsigned)TM_SINK_ABI_MAJOR, (unsigned)TM_SINK_ABI_MINOR);
        return -1;
    }
    if (api->struct_size < TM_SINK_API_SIZE_1_0) {
        refuse(errstr, errstr_size,
               "plugin %s: struct_size is %lu, expected at least %lu "
               "(tm_sink_api of ABI 1.0)",
               path, (unsigned long)api->struct_size,
               (unsigned long)TM_SINK_API_SIZE_1_0);
        return -1;
    }
    return 0;
}

/* Only called once struct_size says every 1.0 field is there. */
static int check_callbacks(const tm_sink_api *api, const char *path,
                           char *errstr, size_t errstr_size) {
    const struct {
        const char *name;
        int present;
    } required[] = {
        {"open", api->open != NULL},
        {"claim", api->claim != NULL},
        {"read_markers", api->read_markers != NULL},
        {"commit", api->commit != NULL},
        {"close", api->close != NULL},
    };
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        if (!required[i].present) {
            refuse(errstr, errstr_size,
                   "plugin %s: required callback '%s' is NULL", path,
                   required[i].name);
            return -1;
        }
    }
    if (api->name == NULL) {
        refuse(errstr, errstr_size, "plugin %s: name is NULL", path);
        return -1;
    }
    return 0;
}

/* The declared settings (ABI 1.3), read only when struct_size says the
 * field is there: a plugin of an older minor has whatever follows its
 * table in memory at that place. A wrong table is refused at load, where
 * its author sees it, not at the first connector that uses it. */
static int check_settings(const tm_sink_api *api, const char *path,
                          char *errstr, size_t errstr_size) {
    if (!TM_SINK_API_HAS_SETTINGS(api) || api->settings == NULL)
        return 0;
    char why[512];
    if (tm_setting_table_check(api->settings, 0, why, sizeof why) != 0) {
        refuse(errstr, errstr_size, "plugin %s: settings table: %s", path, why);
        return -1;
    }
    return 0;
}

/* WANT_NAME: the name asked for when loaded by name, else NULL. */
static int load_path(const char *path, const char *want_name, tm_plugin *out,
                     char *errstr, size_t errstr_size) {
    if (strlen(path) >= sizeof out->path) {
        refuse(errstr, errstr_size, "plugin %.64s...: path longer than %zu",
               path, sizeof out->path - 1);
        return -1;
    }
    int fd = open_checked(path, errstr, errstr_size);
    if (fd < 0)
        return -1;
    /* From here on a failure leaves the library mapped: see the top of the
     * file for why nothing is ever unloaded. */
    void *handle = open_library(path, fd, errstr, errstr_size);
    if (handle == NULL)
        return -1;
    tm_sink_entry_fn entry = find_entry(handle, path, errstr, errstr_size);
    if (entry == NULL)
        return -1;
    const tm_sink_api *api = entry();
    if (api == NULL) {
        refuse(errstr, errstr_size, "plugin %s: %s() returned NULL", path,
               TM_SINK_ENTRY_SYMBOL);
        return -1;
    }
    if (check_version(api, path, errstr, errstr_size) != 0 ||
        check_callbacks(api, path, errstr, errstr_size) != 0 ||
        check_settings(api, path, errstr, errstr_size) != 0)
        return -1;
    if (want_name != NULL && strcmp(api->name, want_name) != 0) {
        refuse(errstr, errstr_size,
               "plugin %s: name is '%s', expected '%s' (the name it was "
               "loaded by)",
               path, api->name, want_name);
        return -1;
    }
    /* The table is static in the plugin and the plugin is never unloaded:
     * keeping the pointer is safe, and a copy would hide fields appended by
     * a newer minor version that a later host could read. */
    out->api = api;
    memcpy(out->path, path, strlen(path) + 1);
    return 0;
}

/* "<dir>/<name>.so" of the first dir that has it; -1 when none has, -2
 * (errstr set) when a relative directory comes first: it would depend on
 * the working directory. */
static int find_by_name(const char *name, const char *const *dirs, size_t ndirs,
                        char *path, size_t path_size, char *errstr,
                        size_t errstr_size) {
    for (size_t i = 0; i < ndirs; i++) {
        if (dirs[i][0] != '/') {
            refuse(errstr, errstr_size,
                   "plugin '%s': plugin directory %s is relative; expected "
                   "an absolute path (see --plugin-dir, TIDEMARK_PLUGIN_PATH)",
                   name, dirs[i]);
            return -2;
        }
        int n = snprintf(path, path_size, "%s/%s.so", dirs[i], name);
        if (n < 0 || (size_t)n >= path_size)
            continue; /* cannot exist: longer than any path we load */
        struct stat st;
        /* Anything but "not there" (the file, a dangling link, or the
         * directory itself) means something is there: load_path then names
         * what is wrong. */
        if (lstat(path, &st) == 0 || (errno != ENOENT && errno != ENOTDIR))
            return 0;
    }
    return -1;
}

static void refuse_not_found(const char *name, const char *const *dirs,
                             size_t ndirs, char *errstr, size_t errstr_size) {
    char list[1024] = "";
    size_t used = 0;
    for (size_t i = 0; i < ndirs && used < sizeof list; i++) {
        int n = snprintf(list + used, sizeof list - used, "%s%s",
                         i > 0 ? ":" : "", dirs[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    if (ndirs == 0)
        refuse(errstr, errstr_size,
               "plugin '%s': no plugin directory to search", name);
    else
        refuse(errstr, errstr_size,
               "plugin '%s': no %s.so in the plugin path %s "
               "(see --plugin-dir, TIDEMARK_PLUGIN_PATH)",
               name, name, list);
}

int tm_plugin_load(const char *name_or_path, const char *const *dirs,
                   size_t ndirs, tm_plugin *out, char *errstr,
                   size_t errstr_size) {
    if (name_or_path == NULL || name_or_path[0] == '\0') {
        refuse(errstr, errstr_size, "plugin: empty name");
        return -1;
    }
    if (strchr(name_or_path, '/') != NULL)
        return load_path(name_or_path, NULL, out, errstr, errstr_size);
    char path[TM_PLUGIN_PATH_MAX];
    int found = find_by_name(name_or_path, dirs, ndirs, path, sizeof path,
                             errstr, errstr_size);
    if (found != 0) {
        if (found == -1)
            refuse_not_found(name_or_path, dirs, ndirs, errstr, errstr_size);
        return -1;
    }
    return load_path(path, name_or_path, out, errstr, errstr_size);
}
