#include "cli/run_configs.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli_sink.h"

void tm_run_files_free(char **files, size_t n) {
    for (size_t i = 0; files && i < n; i++)
        free(files[i]);
    free(files);
}

typedef struct file_list {
    char **v;
    size_t n, cap;
    int oom;
} file_list;

static void push(file_list *l, char *s) {
    if (!s) {
        l->oom = 1;
        return;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            free(s);
            l->oom = 1;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = s;
}

static int is_json_name(const char *name) {
    size_t len = strlen(name);
    return name[0] != '.' && len > 5 && strcmp(name + len - 5, ".json") == 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A config must be a regular file (or a link to one): opening a FIFO or
 * a device named *.json would wait, or read, forever. 0, or -1 printed. */
static int regular_or_refuse(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode))
        return 0; /* a missing one: its load says so */
    fprintf(stderr, "%s: not a regular file (%s): refused as a config\n", path,
            S_ISFIFO(st.st_mode)   ? "a FIFO"
            : S_ISSOCK(st.st_mode) ? "a socket"
            : S_ISDIR(st.st_mode)  ? "a directory"
                                   : "a device");
    return -1;
}

/* The *.json files of DIR, in name order. 0, or -1 printed. */
static int expand_dir(const char *dir, file_list *l) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "%s: cannot read the directory: %s\n", dir,
                strerror(errno));
        return -1;
    }
    size_t first = l->n;
    int bad = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!is_json_name(e->d_name))
            continue;
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        char *path = malloc(len);
        if (path)
            snprintf(path, len, "%s/%s", dir, e->d_name);
        if (path && regular_or_refuse(path) != 0) {
            free(path);
            bad = 1;
            continue;
        }
        push(l, path);
    }
    closedir(d);
    if (l->oom || bad)
        return -1;
    if (l->n == first) {
        fprintf(stderr, "%s: the directory holds no *.json config\n", dir);
        return -1;
    }
    qsort(&l->v[first], l->n - first, sizeof *l->v, by_name);
    return 0;
}

/* Drops every file that is one already listed (same device and inode: the
 * same path twice, a directory and a file in it, a symlink to another
 * config), with a note: loaded twice, it would be refused as a second
 * connector of its own name. A file stat() cannot see stays, for its load
 * to say what is wrong. */
static void drop_repeats(file_list *l) {
    struct stat *seen = malloc((l->n ? l->n : 1) * sizeof *seen);
    int *ok = malloc((l->n ? l->n : 1) * sizeof *ok);
    if (!seen || !ok) {
        free(seen);
        free(ok);
        l->oom = 1;
        return;
    }
    size_t kept = 0;
    for (size_t i = 0; i < l->n; i++) {
        struct stat st;
        memset(&st, 0, sizeof st);
        int have = stat(l->v[i], &st) == 0;
        size_t k = 0;
        while (have && k < kept &&
               !(ok[k] && seen[k].st_dev == st.st_dev &&
                 seen[k].st_ino == st.st_ino))
            k++;
        if (have && k < kept) {
            fprintf(stderr,
                    "%s: the same file as %s (given twice): read once\n",
                    l->v[i], l->v[k]);
            free(l->v[i]);
            continue;
        }
        seen[kept] = st;
        ok[kept] = have;
        l->v[kept++] = l->v[i];
    }
    l->n = kept;
    free(seen);
    free(ok);
}

int tm_run_config_files(const char *const *args, size_t nargs, char ***files,
                        size_t *nfiles) {
    file_list l = {0};
    int bad = 0;
    for (size_t i = 0; i < nargs; i++) {
        struct stat st;
        if (stat(args[i], &st) == 0 && S_ISDIR(st.st_mode))
            bad |= expand_dir(args[i], &l) != 0;
        else if (regular_or_refuse(args[i]) != 0)
            bad = 1;
        else
            push(&l, strdup(args[i])); /* its load says what is wrong */
    }
    if (!bad && !l.oom)
        drop_repeats(&l);
    if (l.oom)
        fprintf(stderr, "tidemark: out of memory\n");
    if (bad || l.oom) {
        tm_run_files_free(l.v, l.n);
        return -1;
    }
    *files = l.v;
    *nfiles = l.n;
    return 0;
}

int tm_run_configs_load(char *const *files, size_t n, const char *const *dirs,
                        size_t ndirs, tm_run_unchanged_fn unchanged, void *ctx,
                        tm_connector_config **cfgs) {
    const char **names = calloc(n ? n : 1, sizeof *names);
    if (!names) {
        fprintf(stderr, "tidemark run: out of memory\n");
        return -1;
    }
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        tm_cli_sink s;
        cfgs[i] = NULL;
        if (tm_cli_sink_load(&s, files[i], dirs, ndirs) != 0) {
            bad = 1;
            continue;
        }
        names[i] = s.cfg->name; /* cfgs[i] keeps it alive */
        if (tm_cli_name_clash((const char *const *)files, names, i))
            bad = 1;
        if (!(unchanged && unchanged(ctx, s.cfg)) &&
            tm_cli_sink_validate(&s) != 0)
            bad = 1;
        cfgs[i] = s.cfg;
        s.cfg = NULL; /* the connector loads its own instance */
        tm_cli_sink_free(&s);
    }
    free(names);
    /* Then the configs together, as validate checks them (the same
     * code): a dead letter going round them, a group shared. */
    if (tm_cli_cross_check(cfgs, n, NULL) != 0)
        bad = 1;
    return bad ? -1 : 0;
}
