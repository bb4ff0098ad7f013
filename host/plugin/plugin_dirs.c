/* Where plugins are looked for, and listing every plugin found there. */
#include "plugin/loader.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef TIDEMARK_DEFAULT_PLUGIN_DIR
#error "TIDEMARK_DEFAULT_PLUGIN_DIR must be defined by the build"
#endif
#ifndef TIDEMARK_PLUGIN_DIR_FROM_BIN
#error "TIDEMARK_PLUGIN_DIR_FROM_BIN must be defined by the build"
#endif

/* ---- Search order ------------------------------------------------------- */

/* A copy of one value TIDEMARK_PLUGIN_PATH had, with ':' turned into NUL so
 * that dirs can point into it. Copies are kept for the life of the process
 * (reachable from `interned`, so not a leak) because callers hold pointers
 * into them; a new one is made only when the variable changes. */
typedef struct interned_path {
    struct interned_path *next;
    size_t len;
    char *value; /* as in the environment */
    char *split; /* same length, ':' replaced by NUL */
} interned_path;

static pthread_mutex_t interned_lock = PTHREAD_MUTEX_INITIALIZER;
static interned_path *interned;

static interned_path *intern_new(const char *value, size_t len) {
    interned_path *p = malloc(sizeof *p + 2 * (len + 1));
    if (p == NULL)
        return NULL;
    p->len = len;
    p->value = (char *)(p + 1);
    p->split = p->value + len + 1;
    memcpy(p->value, value, len + 1);
    memcpy(p->split, value, len + 1);
    for (char *c = p->split; *c != '\0'; c++)
        if (*c == ':')
            *c = '\0';
    return p;
}

/* NULL only when out of memory: the caller then searches without the
 * variable's directories rather than fail every command. */
static const interned_path *intern(const char *value) {
    if (pthread_mutex_lock(&interned_lock) != 0)
        return NULL;
    size_t len = strlen(value);
    interned_path *p = interned;
    while (p != NULL && (p->len != len || memcmp(p->value, value, len) != 0))
        p = p->next;
    if (p == NULL) {
        p = intern_new(value, len);
        if (p != NULL) {
            p->next = interned;
            interned = p;
        }
    }
    (void)pthread_mutex_unlock(&interned_lock);
    return p;
}

static size_t add_env_dirs(const char **dirs, size_t n, size_t max) {
    const char *env = getenv("TIDEMARK_PLUGIN_PATH");
    if (env == NULL || env[0] == '\0')
        return n;
    const interned_path *p = intern(env);
    if (p == NULL)
        return n;
    for (size_t off = 0; off < p->len && n < max;) {
        const char *dir = p->split + off;
        size_t dlen = strlen(dir);
        if (dlen > 0) /* "a::b" and a trailing ':' add nothing */
            dirs[n++] = dir;
        off += dlen + 1;
    }
    return n;
}

int tm_plugin_dir_beside(const char *exe, const char *rel, char *out,
                         size_t size) {
    int n;
    if (rel[0] == '/') {
        n = snprintf(out, size, "%s", rel);
        return n < 0 || (size_t)n >= size ? -1 : 0;
    }
    const char *slash = strrchr(exe, '/');
    if (exe[0] != '/' || slash == NULL)
        return -1;
    size_t dir = (size_t)(slash - exe); /* "/opt/tm/bin" of ".../tidemark" */
    while (strncmp(rel, "../", 3) == 0) {
        while (dir > 0 && exe[dir - 1] != '/')
            dir--;
        if (dir > 0)
            dir--; /* the '/' before the component dropped */
        rel += 3;
    }
    n = snprintf(out, size, "%.*s/%s", (int)dir, exe, rel);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

static char default_dir[TM_PLUGIN_PATH_MAX] = TIDEMARK_DEFAULT_PLUGIN_DIR;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

/* The install is relocatable: its plugins are found where they are beside
 * the binary, not where the build's prefix said they would be. */
static void find_default_dir(void) {
    char exe[TM_PLUGIN_PATH_MAX];
    char dir[TM_PLUGIN_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0 || (size_t)n >= sizeof exe - 1)
        return; /* keep the configured absolute directory */
    exe[n] = '\0';
    if (tm_plugin_dir_beside(exe, TIDEMARK_PLUGIN_DIR_FROM_BIN, dir,
                             sizeof dir) == 0)
        memcpy(default_dir, dir, sizeof dir);
}

const char *tm_plugin_default_dir(void) {
    (void)pthread_once(&default_once, find_default_dir);
    return default_dir;
}

size_t tm_plugin_dirs(const char *const *extra, size_t nextra,
                      const char **dirs, size_t max) {
    size_t n = 0;
    for (size_t i = 0; i < nextra && n < max; i++)
        if (extra[i] != NULL && extra[i][0] != '\0')
            dirs[n++] = extra[i];
    /* Leave room for the default: it is the one directory that is always
     * searched, so a long variable must not push it out. */
    if (max > n)
        n = add_env_dirs(dirs, n, max - 1);
    if (n < max)
        dirs[n++] = tm_plugin_default_dir();
    return n;
}

/* ---- Listing ------------------------------------------------------------ */

/* A growable array of file names. */
typedef struct name_list {
    char **names;
    size_t n, cap;
} name_list;

static void names_free(name_list *l) {
    for (size_t i = 0; i < l->n; i++)
        free(l->names[i]);
    free(l->names);
    l->names = NULL;
    l->n = l->cap = 0;
}

static int names_add(name_list *l, const char *name) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **names = realloc(l->names, cap * sizeof *names);
        if (names == NULL)
            return -1;
        l->names = names;
        l->cap = cap;
    }
    char *copy = strdup(name);
    if (copy == NULL)
        return -1;
    l->names[l->n++] = copy;
    return 0;
}

static int names_contain(const name_list *l, const char *name) {
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->names[i], name) == 0)
            return 1;
    return 0;
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_plugin_name(const char *name) {
    size_t len = strlen(name);
    return name[0] != '.' && len > 3 && strcmp(name + len - 3, ".so") == 0;
}

static void dir_error(const char *dir, int err, char *errstr,
                      size_t errstr_size) {
    char msg[128];
    if (strerror_r(err, msg, sizeof msg) != 0)
        snprintf(msg, sizeof msg, "errno %d", err);
    if (errstr != NULL && errstr_size > 0)
        snprintf(errstr, errstr_size, "plugin directory %s: cannot read: %s",
                 dir, msg);
}

/* The sorted "*.so" names of one directory. 1 when it does not exist (not
 * an error: the default directory often does not), 0 read, -1 failed. */
static int read_dir(const char *dir, name_list *out, char *errstr,
                    size_t errstr_size) {
    DIR *d = opendir(dir);
    if (d == NULL) {
        if (errno == ENOENT)
            return 1;
        dir_error(dir, errno, errstr, errstr_size);
        return -1;
    }
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *e = readdir(d);
        if (e == NULL) {
            if (errno != 0) {
                dir_error(dir, errno, errstr, errstr_size);
                rc = -1;
            }
            break;
        }
        if (is_plugin_name(e->d_name) && names_add(out, e->d_name) != 0) {
            dir_error(dir, ENOMEM, errstr, errstr_size);
            rc = -1;
            break;
        }
    }
    if (closedir(d) != 0 && rc == 0) {
        dir_error(dir, errno, errstr, errstr_size);
        rc = -1;
    }
    if (out->n > 1)
        qsort(out->names, out->n, sizeof *out->names, compare_names);
    return rc;
}

/* Loads one file and hands it to fn; fn's answer (non-zero: stop). */
static int list_one(const char *dir, const char *name, int shadowed,
                    tm_plugin_list_fn fn, void *ctx) {
    char path[TM_PLUGIN_PATH_MAX];
    char error[TM_ERROR_MAX] = "";
    tm_plugin plugin;
    tm_plugin_entry entry = {.dir = dir, .path = path, .shadowed = shadowed};
    int n = snprintf(path, sizeof path, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof path) {
        snprintf(error, sizeof error, "plugin %s/%.64s...: path too long", dir,
                 name);
        entry.error = error;
    } else if (tm_plugin_load(path, NULL, 0, &plugin, error, sizeof error) ==
               0) {
        entry.plugin = &plugin;
    } else {
        entry.error = error;
    }
    return fn(&entry, ctx);
}

static int seen_dir(const char *const *dirs, size_t i) {
    for (size_t j = 0; j < i; j++)
        if (strcmp(dirs[j], dirs[i]) == 0)
            return 1;
    return 0;
}

/* Records a failure: errstr keeps the text of the first one. */
static void note_failure(int *failed, const char *msg, char *errstr,
                         size_t errstr_size) {
    if (!*failed && errstr != NULL && errstr_size > 0)
        snprintf(errstr, errstr_size, "%s", msg);
    *failed = 1;
}

/* Lists one dir; `earlier` holds the names of earlier dirs (to mark
 * shadowed files) and gets this dir's names added. 1 when fn said stop. */
static int list_dir(const char *dir, name_list *earlier, tm_plugin_list_fn fn,
                    void *ctx, int *failed, char *errstr, size_t errstr_size) {
    name_list here = {0};
    char msg[TM_ERROR_MAX];
    if (dir[0] != '/') {
        /* It would depend on the working directory, as loading refuses. */
        snprintf(msg, sizeof msg,
                 "plugin directory %s: relative path; expected an absolute "
                 "path",
                 dir);
        note_failure(failed, msg, errstr, errstr_size);
        return 0;
    }
    if (read_dir(dir, &here, msg, sizeof msg) < 0)
        note_failure(failed, msg, errstr, errstr_size);
    int stop = 0;
    for (size_t i = 0; i < here.n && !stop; i++)
        stop = list_one(dir, here.names[i],
                        names_contain(earlier, here.names[i]), fn, ctx) != 0;
    for (size_t i = 0; i < here.n && !stop; i++)
        if (!names_contain(earlier, here.names[i]) &&
            names_add(earlier, here.names[i]) != 0)
            note_failure(failed, "plugin listing: out of memory", errstr,
                         errstr_size);
    names_free(&here);
    return stop;
}

int tm_plugin_list(const char *const *dirs, size_t ndirs, tm_plugin_list_fn fn,
                   void *ctx, char *errstr, size_t errstr_size) {
    name_list earlier = {0};
    int failed = 0;
    for (size_t i = 0; i < ndirs; i++) {
        /* The same directory twice (--plugin-dir and the variable) would
         * list each file twice, the second time as shadowed by itself. */
        if (seen_dir(dirs, i))
            continue;
        if (list_dir(dirs[i], &earlier, fn, ctx, &failed, errstr,
                     errstr_size) != 0)
            break;
    }
    names_free(&earlier);
    return failed ? -1 : 0;
}
