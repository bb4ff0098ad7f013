/* tidemark-sinkcheck PLUGIN [--plugin-dir DIR]... [--config FILE]
 *                    [--seed N] [--kills N] [--case NAME]... [--list]
 *
 * The conformance kit: loads a sink plugin the way the host does and runs
 * the cases of the commit protocol against it, each from fresh sink state
 * and each in its own process (a crash is that case's FAIL). Output: one
 * line per case, PASS / FAIL / SKIP, then "N passed, N failed[, N skipped]".
 * Exit status 0 only when nothing failed. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kit.h"
#include "kit_config.h"
#include "plugin/loader.h"

#define MAX_SELECTED    32
#define MAX_PLUGIN_DIRS 8
/* Fewer kills than this cannot reach every crash window reliably. */
#define MIN_KILLS 50
#define MAX_KILLS 99999

static void usage(FILE *f) {
    fprintf(f,
            "usage: tidemark-sinkcheck PLUGIN [--plugin-dir DIR]... "
            "[--config FILE] [--seed N] [--kills N] [--case NAME]... "
            "[--expect-skip NAME]... [--list]\n"
            "  --expect-skip NAME  case NAME is expected to SKIP (a "
            "capability the sink does not have); any other SKIP fails, "
            "and so does NAME when it runs\n"
            "  --kills N  random kills of case random_kills (default "
            "and minimum 50, at most 99999)\n"
            "  --plugin-dir DIR  search DIR for PLUGIN first (repeatable)\n"
            "  PLUGIN   a path to a .so, or a plugin name looked up in each "
            "--plugin-dir, then\n"
            "           TIDEMARK_PLUGIN_PATH, then %s\n",
            tm_plugin_default_dir());
}

static int parse_u64(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || !*s || *end || *s == '-')
        return -1;
    *out = v;
    return 0;
}

/* 0 when every name is a case; else says which is not, and -1. */
static int find_case(const char *const *names, size_t n, const char *opt) {
    for (size_t s = 0; s < n; s++) {
        size_t k = 0;
        while (k < kit_ncases && strcmp(kit_cases[k].name, names[s]) != 0)
            k++;
        if (k == kit_ncases) {
            fprintf(stderr,
                    "tidemark-sinkcheck: %s '%s': no such case (--list "
                    "shows them)\n",
                    opt, names[s]);
            return -1;
        }
    }
    return 0;
}

static int listed(const char *const *names, size_t n, const char *name) {
    for (size_t s = 0; s < n; s++)
        if (strcmp(names[s], name) == 0)
            return 1;
    return 0;
}

/* A SKIP counts only when the caller expected it: a sink lacking what a
 * case needs is a decision its author states, not a silent pass. An
 * expected skip that did not happen fails too (the expectation is stale). */
static void judge_skip(kit_result *res, int expected, const char *name) {
    char why[sizeof res->reason];
    if (res->verdict == KIT_SKIP && !expected) {
        snprintf(why, sizeof why,
                 "skipped, not expected (pass --expect-skip %s if the sink "
                 "does without it): %.700s",
                 name, res->reason);
        res->verdict = KIT_FAIL;
        memcpy(res->reason, why, sizeof why);
    } else if (res->verdict != KIT_SKIP && expected) {
        snprintf(
            why, sizeof why,
            "expected to be skipped (--expect-skip %s), but it ran%s%.700s",
            name, res->verdict == KIT_FAIL ? " and failed: " : "",
            res->verdict == KIT_FAIL ? res->reason : "");
        res->verdict = KIT_FAIL;
        memcpy(res->reason, why, sizeof why);
    }
}

/* Runs one case in a child process; the verdict comes back on a shared
 * page. A child that dies, or exits non-zero (e.g. LeakSanitizer), fails. */
static void run_case(const kit_run *run, const kit_case *c, kit_result *out) {
    kit_result *shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset(out, 0, sizeof *out);
    if (shared == MAP_FAILED) {
        kit_fail(out, "mmap: %s", strerror(errno));
        return;
    }
    memset(shared, 0, sizeof *shared);
    kit_fail(shared, "the case ended without a verdict");
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        kit_fail(out, "fork: %s", strerror(errno));
        munmap(shared, sizeof *shared);
        return;
    }
    if (pid == 0) {
        kit_result res = {.verdict = KIT_PASS};
        c->fn(run, &res);
        *shared = res;
        fflush(NULL);
        exit(0); /* exit, not _exit: sanitizers check for leaks here */
    }
    int status;
    pid_t w;
    while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
        ;
    if (w != pid)
        kit_fail(out, "waitpid: %s", strerror(errno));
    else if (WIFSIGNALED(status))
        kit_fail(out, "the case's process crashed (signal %d)",
                 WTERMSIG(status));
    else if (WEXITSTATUS(status) != 0)
        kit_fail(out,
                 "the case's process exited %d (sanitizer report on "
                 "stderr?)%s%s",
                 WEXITSTATUS(status), shared->verdict != KIT_PASS ? ": " : "",
                 shared->verdict != KIT_PASS ? shared->reason : "");
    else
        *out = *shared;
    munmap(shared, sizeof *shared);
}

int main(int argc, char **argv) {
    kit_run run = {.kills = 50};
    const char *plugin = NULL, *config = NULL;
    const char *selected[MAX_SELECTED], *expect_skip[MAX_SELECTED];
    size_t nselected = 0, nexpect_skip = 0;
    const char *extra[MAX_PLUGIN_DIRS];
    size_t nextra = 0;
    int have_seed = 0, list = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        uint64_t v;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--list") == 0) {
            list = 1;
        } else if (strcmp(a, "--config") == 0 && i + 1 < argc) {
            config = argv[++i];
        } else if (strcmp(a, "--seed") == 0 && i + 1 < argc &&
                   parse_u64(argv[i + 1], &v) == 0) {
            run.seed = v, have_seed = 1, i++;
        } else if (strcmp(a, "--kills") == 0 && i + 1 < argc) {
            if (parse_u64(argv[i + 1], &v) != 0 || v < MIN_KILLS ||
                v > MAX_KILLS) {
                fprintf(stderr,
                        "tidemark-sinkcheck: --kills '%s': expected a whole "
                        "number from %d to %d (fewer kills cannot reach "
                        "every crash window)\n",
                        argv[i + 1], MIN_KILLS, MAX_KILLS);
                return 2;
            }
            run.kills = (int)v, i++;
        } else if (strcmp(a, "--plugin-dir") == 0 && i + 1 < argc &&
                   nextra < MAX_PLUGIN_DIRS) {
            extra[nextra++] = argv[++i];
        } else if (strcmp(a, "--case") == 0 && i + 1 < argc &&
                   nselected < MAX_SELECTED) {
            selected[nselected++] = argv[++i];
        } else if (strcmp(a, "--expect-skip") == 0 && i + 1 < argc &&
                   nexpect_skip < MAX_SELECTED) {
            expect_skip[nexpect_skip++] = argv[++i];
        } else if (a[0] != '-' && !plugin) {
            plugin = a;
        } else {
            fprintf(stderr, "tidemark-sinkcheck: bad argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (list) {
        for (size_t k = 0; k < kit_ncases; k++)
            printf("%-24s %s\n", kit_cases[k].name, kit_cases[k].proves);
        return 0;
    }
    if (!plugin) {
        usage(stderr);
        return 2;
    }
    if (find_case(selected, nselected, "--case") != 0 ||
        find_case(expect_skip, nexpect_skip, "--expect-skip") != 0)
        return 2;
    if (!have_seed)
        run.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);

    /* The loader refuses relative paths (they depend on the working
     * directory of a long-running host); here the file was named on the
     * command line, relative to where its author stands. */
    char *real = NULL;
    if (strchr(plugin, '/') && plugin[0] != '/') {
        if (!(real = realpath(plugin, NULL))) {
            fprintf(stderr, "tidemark-sinkcheck: plugin %s: %s\n", plugin,
                    strerror(errno));
            return 2;
        }
        plugin = real;
    }
    /* The loader takes absolute directories only: each --plugin-dir is
     * resolved against the working directory here, as the plugin's path. */
    char *extra_real[MAX_PLUGIN_DIRS];
    for (size_t d = 0; d < nextra; d++) {
        if (!(extra_real[d] = realpath(extra[d], NULL))) {
            fprintf(stderr, "tidemark-sinkcheck: --plugin-dir %s: %s\n",
                    extra[d], strerror(errno));
            while (d > 0)
                free(extra_real[--d]);
            free(real);
            return 2;
        }
    }
    const char *dirs[16];
    size_t ndirs =
        tm_plugin_dirs((const char *const *)extra_real, nextra, dirs, 16);
    tm_plugin loaded;
    char errstr[1024];
    int refused =
        tm_plugin_load(plugin, dirs, ndirs, &loaded, errstr, sizeof errstr);
    free(real); /* loaded.path is a copy */
    for (size_t d = 0; d < nextra; d++)
        free(extra_real[d]);
    if (refused) {
        fprintf(stderr, "tidemark-sinkcheck: %s\n", errstr);
        return 2;
    }
    run.api = loaded.api;
    run.plugin_path = loaded.path;
    if (kit_config_load(&run, config, errstr, sizeof errstr) != 0) {
        fprintf(stderr, "tidemark-sinkcheck: %s\n", errstr);
        kit_config_free(&run);
        return 2;
    }
    printf("# tidemark-sinkcheck: %s %s (%s), seed %" PRIu64 ", kills %d\n",
           run.api->name ? run.api->name : "?",
           run.api->version ? run.api->version : "?", run.plugin_path, run.seed,
           run.kills);
    fflush(stdout);

    int passed = 0, failed = 0, skipped = 0;
    for (size_t k = 0; k < kit_ncases; k++) {
        int want = nselected == 0;
        for (size_t s = 0; s < nselected; s++)
            want |= strcmp(kit_cases[k].name, selected[s]) == 0;
        if (!want)
            continue;
        kit_result res;
        run_case(&run, &kit_cases[k], &res);
        judge_skip(&res, listed(expect_skip, nexpect_skip, kit_cases[k].name),
                   kit_cases[k].name);
        switch (res.verdict) {
        case KIT_PASS:
            printf("PASS %s\n", kit_cases[k].name);
            passed++;
            break;
        case KIT_FAIL:
            printf("FAIL %s: %s\n", kit_cases[k].name, res.reason);
            failed++;
            break;
        case KIT_SKIP:
            printf("SKIP %s: %s\n", kit_cases[k].name, res.reason);
            skipped++;
            break;
        }
        fflush(stdout);
    }
    if (skipped)
        printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    else
        printf("%d passed, %d failed\n", passed, failed);
    kit_config_free(&run);
    return failed ? 1 : 0;
}
