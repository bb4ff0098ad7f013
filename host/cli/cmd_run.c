/* tidemark run [--plugin-dir DIR]... [--state-dir DIR]
 *              [--metrics-file PATH.prom [--metrics-interval-s N]]
 *              [--metrics-listen 127.0.0.1:PORT] CONFIG...
 *
 * Runs each connector config on its own thread, with its own consumer and
 * sink instance, until SIGTERM or SIGINT. Every config is loaded and
 * checked as `tidemark validate` checks it (the plugin's own validate
 * included) before anything starts: one bad file starts nothing. */
#include "cli/commands.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli_args.h"
#include "cli/cli_sink.h"
#include "config/connector_config.h"
#include "metrics/metrics_process.h"
#include "plugin/loader.h"
#include "runtime/connector.h"
#include "runtime/signals.h"
#include "services/log.h"
#include "status/status_file.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: tidemark run [--plugin-dir DIR]... [--state-dir DIR]\n"
            "                    [--metrics-file PATH.prom] "
            "[--metrics-interval-s N]\n"
            "                    [--metrics-listen ADDR:PORT] CONFIG...\n"
            "\n"
            "Runs the connectors until SIGTERM or SIGINT (the first signal\n"
            "finishes or abandons each batch in flight and closes the\n"
            "consumer; a second exits at once). Status: `tidemark status`.\n"
            "Exit status: 0 stopped by a signal, 1 a connector FAILED or\n"
            "could not start (at once when every connector did), 2 usage\n"
            "error or invalid config.\n"
            "\n"
            "  --plugin-dir DIR  search DIR for plugins first (repeatable);\n"
            "                    then TIDEMARK_PLUGIN_PATH, then %s\n"
            "  --state-dir DIR   status files and locks (default: the\n"
            "                    config's state_dir, else "
            "$TIDEMARK_STATE_DIR,\n"
            "                    else $XDG_STATE_HOME/tidemark, else\n"
            "                    ~/.local/state/tidemark)\n"
            "  --metrics-file PATH.prom\n"
            "                    write the metrics in Prometheus text format\n"
            "                    to PATH.prom (atomically) every interval\n"
            "  --metrics-interval-s N\n"
            "                    seconds between writes, 1..3600 (default "
            "10)\n"
            "  --metrics-listen 127.0.0.1:PORT|[::1]:PORT\n"
            "                    also serve GET /metrics there (loopback "
            "only)\n",
            tm_plugin_default_dir());
}

typedef struct job {
    const tm_connector_config *cfg;
    const tm_run_options *opt;
    const atomic_int *stop;
    tm_run_result result;
    pthread_t thread;
    int started;
    atomic_int failed; /* FAILED, waiting for the stop */
    atomic_int done;   /* tm_connector_run returned */
} job;

static void *job_main(void *arg) {
    job *j = arg;
    j->result = tm_connector_run(j->cfg, j->opt, j->stop, &j->failed);
    atomic_store(&j->done, 1);
    return NULL;
}

/* Waits for a signal, or until no connector runs any more (each FAILED or
 * returned): a process that does nothing must not look alive to a service
 * manager. Then every FAILED connector is told to stop: exit status 1. */
static void wait_until_down(job *jobs, size_t n, atomic_int *stop) {
    while (!atomic_load(stop)) {
        size_t down = 0, failed = 0;
        for (size_t i = 0; i < n; i++) {
            int f = atomic_load(&jobs[i].failed);
            failed += f != 0;
            down += !jobs[i].started || f || atomic_load(&jobs[i].done);
        }
        if (down == n) {
            if (failed)
                tm_log(TM_LOG_ERROR, NULL,
                       "every connector is FAILED or could not start: "
                       "exiting with status 1");
            atomic_store(stop, 1);
            return;
        }
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* Loads every config and checks it as `tidemark validate` does, in the
 * same order and with the same lines: the config, the name clash, then the
 * plugin (its loading and its own validate callback), so that what
 * validate refuses, run refuses before it starts anything. cfgs[i] keeps
 * each config that loaded. 0, or -1 with every problem printed. */
/* How long a stop may take (docs/operations.md, Signals): the batch in
 * flight gets TM_STOP_GRACE_MS, then the sink's interrupt(), then the
 * consumer's close its own 5 s watchdog. A sink that does not return even
 * when interrupted (seen: the PostgreSQL sink waiting for a server that
 * went silent, its cancel request lost on the same dead route) must not
 * keep the process alive past it. 10 s from the signal: a second less
 * from when wait_until_down sees it (it looks every 100 ms), for the exit
 * itself on a loaded machine. */
#define STOP_LIMIT_MS 9000

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* After the stop: waits for every connector thread until STOP_LIMIT_MS
 * from now. When some connector is still inside its sink then, the
 * process exits without it (_exit: its thread still uses the sink and the
 * consumer, nothing may be torn down under it). That is as safe as a
 * second signal: every sink commit is atomic and the markers say where to
 * go on; the host lock goes with the process, so `tidemark status` says
 * STOPPED; the group times the member out. Exit status 0, or 1 when a
 * connector FAILED. Returns only when every thread finished. */
static void stop_within_limit(const job *jobs, size_t n, int failed_before) {
    long waited = 0;
    for (;;) {
        size_t stuck = 0;
        for (size_t i = 0; i < n; i++)
            stuck += jobs[i].started && !atomic_load(&jobs[i].done);
        if (stuck == 0)
            return;
        if (waited >= STOP_LIMIT_MS)
            break;
        sleep_ms(50);
        waited += 50;
    }
    int rc = failed_before;
    for (size_t i = 0; i < n; i++) {
        if (!jobs[i].started)
            continue;
        if (atomic_load(&jobs[i].done)) {
            rc |= jobs[i].result != TM_RUN_STOPPED;
            continue;
        }
        rc |= atomic_load(&jobs[i].failed) != 0;
        tm_log(TM_LOG_ERROR, jobs[i].cfg->name,
               "did not stop within 10 s: its sink does not return from a "
               "call even when interrupted; exiting without it (its batch in "
               "flight is abandoned: safe, the markers did not move)");
    }
    fflush(stdout);
    fflush(stderr);
    _exit(rc ? 1 : 0);
}

/* Where each connector's status files are (runtime/connector.c's order:
 * --state-dir, the config's, the default), for the metrics to read them;
 * dirs holds n paths. */
static void status_dirs(const char *state_dir, tm_connector_config **cfgs,
                        size_t n, char (*dirs)[PATH_MAX], const char **ptrs,
                        const char **names) {
    for (size_t i = 0; i < n; i++) {
        if (state_dir)
            snprintf(dirs[i], PATH_MAX, "%s", state_dir);
        else if (cfgs[i]->state_dir)
            snprintf(dirs[i], PATH_MAX, "%s", cfgs[i]->state_dir);
        else
            tm_status_default_dir(dirs[i], PATH_MAX);
        ptrs[i] = dirs[i];
        names[i] = cfgs[i]->name;
    }
}

static int load_all(const char **files, size_t n, const char *const *dirs,
                    size_t ndirs, tm_connector_config **cfgs) {
    const char **names = calloc(n, sizeof *names);
    if (!names) {
        fprintf(stderr, "tidemark run: out of memory\n");
        return -1;
    }
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        tm_cli_sink s;
        if (tm_cli_sink_load(&s, files[i], dirs, ndirs) != 0) {
            bad = 1;
            continue;
        }
        names[i] = s.cfg->name; /* cfgs[i] keeps it alive */
        if (tm_cli_name_clash(files, names, i))
            bad = 1;
        if (tm_cli_sink_validate(&s) != 0)
            bad = 1;
        cfgs[i] = s.cfg;
        s.cfg = NULL; /* the connector loads its own instance */
        tm_cli_sink_free(&s);
    }
    free(names);
    return bad ? -1 : 0;
}

int tm_cmd_run(int argc, char **argv) {
    size_t cap = (size_t)(argc > 0 ? argc : 1);
    const char **extra = calloc(cap, sizeof *extra);
    const char **files = calloc(cap, sizeof *files);
    size_t nextra = 0, nfiles = 0;
    const char *state_dir = NULL;
    tm_metrics_options mo = {0};
    tm_metrics_process *metrics = NULL;
    int rc = 0;
    tm_connector_config **cfgs = NULL;
    const char **dirs = NULL;
    job *jobs = NULL;
    if (!extra || !files) {
        fprintf(stderr, "tidemark run: out of memory\n");
        rc = 1;
        goto out;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m;
        if ((m = tm_cli_opt("run", "--plugin-dir", argc, argv, &i,
                            &extra[nextra])) != 0 ||
            (m = tm_cli_opt("run", "--state-dir", argc, argv, &i,
                            &state_dir)) != 0 ||
            (m = tm_cli_opt("run", "--metrics-file", argc, argv, &i,
                            &mo.file)) != 0 ||
            (m = tm_cli_opt("run", "--metrics-interval-s", argc, argv, &i,
                            &mo.interval)) != 0 ||
            (m = tm_cli_opt("run", "--metrics-listen", argc, argv, &i,
                            &mo.listen)) != 0) {
            if (m < 0) {
                rc = 2;
                goto out;
            }
            if (extra[nextra])
                nextra++;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            goto out;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "tidemark run: unknown option '%s'\n", a);
            usage(stderr);
            rc = 2;
            goto out;
        } else {
            files[nfiles++] = a;
        }
    }
    if (tm_metrics_options_check(&mo) != 0) {
        rc = 2;
        goto out;
    }
    if (nfiles == 0) {
        fprintf(stderr, "tidemark run: no CONFIG given\n");
        usage(stderr);
        rc = 2;
        goto out;
    }
    cfgs = calloc(nfiles, sizeof *cfgs);
    jobs = calloc(nfiles, sizeof *jobs);
    size_t ndirs = 0;
    dirs = tm_cli_plugin_dirs(extra, nextra, &ndirs);
    if (!cfgs || !jobs || !dirs) {
        fprintf(stderr, "tidemark run: out of memory\n");
        rc = 1;
        goto out;
    }
    if (load_all(files, nfiles, dirs, ndirs, cfgs) != 0) {
        rc = TM_EXIT_INVALID_CONFIG;
        goto out;
    }
    tm_run_options opt = {
        .plugin_dirs = dirs, .nplugin_dirs = ndirs, .state_dir = state_dir};
    static atomic_int stop;
    atomic_store(&stop, 0);
    if (tm_signals_start(&stop) != 0) {
        fprintf(stderr, "tidemark run: cannot set up signal handling\n");
        rc = 1;
        goto out;
    }
    /* After the signal thread: it inherits the blocked signals. */
    char(*dirs_of)[PATH_MAX] = calloc(nfiles, sizeof *dirs_of);
    const char **dir_ptrs = calloc(nfiles, sizeof *dir_ptrs);
    const char **names = calloc(nfiles, sizeof *names);
    if (dirs_of && dir_ptrs && names) {
        status_dirs(state_dir, cfgs, nfiles, dirs_of, dir_ptrs, names);
        metrics = tm_metrics_process_start(&mo, names, dir_ptrs, nfiles);
    } else {
        fprintf(stderr, "tidemark run: out of memory\n");
    }
    free(dirs_of);
    free(dir_ptrs);
    free(names);
    if (!metrics) {
        rc = 1;
        goto out;
    }
    for (size_t i = 0; i < nfiles; i++) {
        jobs[i] = (job){.cfg = cfgs[i], .opt = &opt, .stop = &stop};
        atomic_init(&jobs[i].failed, 0);
        atomic_init(&jobs[i].done, 0);
        if (pthread_create(&jobs[i].thread, NULL, job_main, &jobs[i]) != 0) {
            fprintf(stderr, "tidemark run: %s: cannot start a thread\n",
                    files[i]);
            atomic_store(&stop, 1);
            rc = 1;
            break;
        }
        jobs[i].started = 1;
    }
    wait_until_down(jobs, nfiles, &stop);
    stop_within_limit(jobs, nfiles, rc);
    for (size_t i = 0; i < nfiles; i++) {
        if (!jobs[i].started)
            continue;
        pthread_join(jobs[i].thread, NULL);
        if (jobs[i].result != TM_RUN_STOPPED)
            rc = 1;
    }
out:
    tm_metrics_process_stop(metrics); /* the last write: final states */
    for (size_t i = 0; cfgs && i < nfiles; i++)
        tm_config_free(cfgs[i]);
    free(cfgs);
    free(jobs);
    free(dirs);
    free(extra);
    free(files);
    return rc;
}
