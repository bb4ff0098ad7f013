/* $.state_dir: refused at load when run could not use it (a directory it
 * cannot create, such as one under /proc), so that validate refuses what
 * run refuses. Nothing is left behind: the check creates a probe directory
 * in the deepest part of the path that exists and removes it at once. */
#include "config/config_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STATE_EXPECTED "a directory tidemark can create or write"

/* Cuts dir back to its parent ("a/b" -> "a", "/a" -> "/", "a" -> "."). */
static void parent(char *dir) {
    char *slash = strrchr(dir, '/');
    while (slash && slash > dir && slash[1] == '\0') { /* trailing '/' */
        *slash = '\0';
        slash = strrchr(dir, '/');
    }
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
}

void cfg_check_state_dir(loader *L, const json_t *v) {
    const char *path = L->cfg->state_dir;
    size_t len = strlen(path);
    char *dir = malloc(len + 2); /* room for "." */
    if (!dir) {
        cfg_fail(L, "$.state_dir", "out of memory");
        return;
    }
    memcpy(dir, path, len + 1);
    char f[FOUND_MAX_LEN + 64], why[PATH_MAX_LEN + 128];
    struct stat st;
    /* The deepest existing part: run creates the rest under it. */
    while (stat(dir, &st) != 0 && (errno == ENOENT || errno == ENOTDIR) &&
           strcmp(dir, ".") != 0 && strcmp(dir, "/") != 0)
        parent(dir);
    why[0] = '\0';
    if (stat(dir, &st) != 0) {
        snprintf(why, sizeof why, "%s: %s", dir, strerror(errno));
    } else if (!S_ISDIR(st.st_mode)) {
        snprintf(why, sizeof why, "%s is not a directory", dir);
    } else {
        char probe[PATH_MAX_LEN + 64];
        int n = snprintf(probe, sizeof probe, "%s/.tidemark-probe-%ld", dir,
                         (long)getpid());
        if (n < 0 || (size_t)n >= sizeof probe)
            snprintf(why, sizeof why, "the path is too long");
        else if (mkdir(probe, 0700) == 0)
            (void)rmdir(probe);
        else if (errno != EEXIST)
            snprintf(why, sizeof why, "cannot create a directory in %s: %s",
                     dir, strerror(errno));
    }
    if (why[0])
        cfg_fail(L, "$.state_dir", "expected %s, found %s (%s)", STATE_EXPECTED,
                 cfg_found(L, v, f, sizeof f), why);
    free(dir);
}
