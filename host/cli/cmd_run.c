/* tidemark run [--plugin-dir DIR]... [--state-dir DIR]
 *              [--metrics-file PATH.prom [--metrics-interval-s N]]
 *              [--metrics-listen 127.0.0.1:PORT] CONFIG|DIR...
 *
 * Runs each connector config on its own thread, with its own consumer and
 * sink instance (runtime/supervisor.h), until SIGTERM or SIGINT. Every
 * config is loaded and checked as `tidemark validate` checks it (the
 * plugin's own validate included) before anything starts: one bad file
 * starts nothing. SIGHUP reads the same CONFIG and DIR arguments again and
 * applies the difference; one bad file changes nothing. */
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
#include "cli/run_configs.h"
#include "config/connector_config.h"
#include "metrics/metrics_process.h"
#include "plugin/loader.h"
#include "runtime/connector.h"
#include "runtime/reload_plan.h"
#include "runtime/signals.h"
#include "runtime/supervisor.h"
#include "services/log.h"
#include "status/status_file.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: tidemark run [--plugin-dir DIR]... [--state-dir DIR]\n"
            "                    [--metrics-file PATH.prom] "
            "[--metrics-interval-s N]\n"
            "                    [--metrics-listen ADDR:PORT] CONFIG|DIR...\n"
            "\n"
            "Runs the connectors until SIGTERM or SIGINT (the first signal\n"
            "finishes or abandons each batch in flight and closes the\n"
            "consumer; a second exits at once). Status: `tidemark status`.\n"
            "A DIR stands for its *.json files. SIGHUP reloads: the same\n"
            "arguments read again, changed, added, removed and FAILED\n"
            "connectors restarted, started or stopped, the others left\n"
            "running; an invalid config changes nothing (logged).\n"
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

/* The metrics of the process about the N connectors CFGS, each read in
 * its state directory (tm_run_state_dir): started (*metrics NULL), or
 * switched to them after a reload. 0, or -1 (printed or logged). */
static int metrics_for(tm_metrics_process **metrics,
                       const tm_metrics_options *mo, const tm_run_options *opt,
                       tm_connector_config *const *cfgs, size_t n) {
    char(*dirs)[PATH_MAX] = calloc(n ? n : 1, sizeof *dirs);
    const char **ptrs = calloc(n ? n : 1, sizeof *ptrs);
    const char **names = calloc(n ? n : 1, sizeof *names);
    int rc = -1;
    if (dirs && ptrs && names) {
        for (size_t i = 0; i < n; i++) {
            tm_run_state_dir(cfgs[i], opt, dirs[i], PATH_MAX);
            ptrs[i] = dirs[i];
            names[i] = cfgs[i]->name;
        }
        if (*metrics)
            rc = tm_metrics_process_set(*metrics, names, ptrs, n);
        else
            rc = (*metrics = tm_metrics_process_start(mo, names, ptrs, n)) ? 0
                                                                           : -1;
    } else if (*metrics) {
        tm_log(TM_LOG_ERROR, NULL,
               "metrics: out of memory: they keep the connectors of before "
               "the reload");
    } else {
        fprintf(stderr, "tidemark run: out of memory\n");
    }
    free(dirs);
    free(ptrs);
    free(names);
    return rc;
}

/* What the run loop and each reload work with. */
typedef struct run_ctx {
    tm_supervisor *sup;
    tm_metrics_process *metrics;
    const tm_run_options *opt;
    const char *const *args; /* the CONFIG and DIR arguments */
    size_t nargs;
} run_ctx;

/* A config its running connector already runs with (a reload does not
 * ask its plugin to validate it again: a store that is briefly down must
 * not refuse the reload of the other connectors). */
static int unchanged_running(void *ctx, const tm_connector_config *cfg) {
    const tm_supervisor *sup = ctx;
    const tm_connector_config *now = tm_sup_config(sup, cfg->name);
    return now && !tm_sup_is_down(sup, cfg->name) && tm_reload_same(now, cfg);
}

/* Reload SEQ: the same arguments read and checked again as at start; any
 * problem refuses the whole reload and leaves every connector as it is.
 * The metrics follow the connectors it leaves. */
static void reload(run_ctx *rc, unsigned seq) {
    tm_supervisor *sup = rc->sup;
    tm_log(TM_LOG_INFO, NULL, "SIGHUP: reload %u: reading the configs again",
           seq);
    char **files = NULL;
    size_t n = 0;
    tm_connector_config **cfgs = NULL;
    int ok = tm_run_config_files(rc->args, rc->nargs, &files, &n) == 0;
    if (ok) {
        cfgs = calloc(n, sizeof *cfgs);
        ok = cfgs && tm_run_configs_load(files, n, rc->opt->plugin_dirs,
                                         rc->opt->nplugin_dirs,
                                         unchanged_running, sup, cfgs) == 0;
    }
    if (!ok) {
        tm_log(TM_LOG_ERROR, NULL,
               "SIGHUP: reload %u refused: a config is invalid (each problem "
               "above as FILE: PATH: message); every connector runs as "
               "before",
               seq);
        for (size_t i = 0; cfgs && i < n; i++)
            tm_config_free(cfgs[i]);
    } else if (tm_sup_reload(sup, seq, cfgs, n) == 0) {
        /* Once applied (a refused reload leaves them as they are): the
         * connectors the supervisor runs now. One added shows once its
         * host wrote its status, one removed goes at once. */
        size_t m = tm_sup_configs(sup, NULL, 0);
        tm_connector_config **now = calloc(m ? m : 1, sizeof *now);
        if (now) {
            tm_sup_configs(sup, now, m);
            metrics_for(&rc->metrics, NULL, rc->opt, now, m);
        } else if (rc->metrics) {
            tm_log(TM_LOG_ERROR, NULL,
                   "metrics: out of memory: they keep the connectors of "
                   "before the reload");
        }
        free(now);
    }
    free(cfgs);
    tm_run_files_free(files, n);
}

/* Until a signal, or until no connector runs any more (each FAILED or
 * returned): a process that does nothing must not look alive to a service
 * manager. Reloads are applied in between, one at a time: SIGHUPs that
 * come while one is still stopping connectors are served by the next. */
static void supervise(run_ctx *rc, atomic_int *stop, atomic_uint *reloads) {
    tm_supervisor *sup = rc->sup;
    unsigned handled = 0;
    while (!atomic_load(stop)) {
        tm_sup_tick(sup);
        unsigned asked = atomic_load(reloads);
        if (asked != handled && !tm_sup_busy(sup)) {
            handled = asked;
            reload(rc, asked);
        }
        size_t failed;
        if (tm_sup_all_down(sup, &failed)) {
            if (failed)
                tm_log(TM_LOG_ERROR, NULL,
                       "every connector is FAILED or could not start: "
                       "exiting with status 1");
            atomic_store(stop, 1);
            return;
        }
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
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
    char **cfg_files = NULL;
    size_t ncfgs = 0;
    tm_supervisor *sup = NULL;
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
    size_t ndirs = 0;
    dirs = tm_cli_plugin_dirs(extra, nextra, &ndirs);
    if (!dirs) {
        fprintf(stderr, "tidemark run: out of memory\n");
        rc = 1;
        goto out;
    }
    if (tm_run_config_files(files, nfiles, &cfg_files, &ncfgs) != 0) {
        rc = TM_EXIT_INVALID_CONFIG;
        goto out;
    }
    cfgs = calloc(ncfgs, sizeof *cfgs);
    if (!cfgs) {
        fprintf(stderr, "tidemark run: out of memory\n");
        rc = 1;
        goto out;
    }
    if (tm_run_configs_load(cfg_files, ncfgs, dirs, ndirs, NULL, NULL, cfgs) !=
        0) {
        rc = TM_EXIT_INVALID_CONFIG;
        goto out;
    }
    tm_run_options opt = {
        .plugin_dirs = dirs, .nplugin_dirs = ndirs, .state_dir = state_dir};
    static atomic_int stop;
    static atomic_uint reloads;
    atomic_store(&stop, 0);
    atomic_store(&reloads, 0);
    if (tm_signals_start(&stop, &reloads) != 0) {
        fprintf(stderr, "tidemark run: cannot set up signal handling\n");
        rc = 1;
        goto out;
    }
    /* After the signal thread: it inherits the blocked signals. */
    metrics_for(&metrics, &mo, &opt, cfgs, ncfgs);
    sup = metrics ? tm_sup_new(&opt, &stop) : NULL;
    if (!sup) {
        if (metrics)
            fprintf(stderr, "tidemark run: out of memory\n");
        rc = 1;
        goto out;
    }
    /* A SIGTERM from now on reaches every connector at once. */
    tm_signals_on_stop(tm_sup_stop_all_hook, sup);
    for (size_t i = 0; i < ncfgs; i++) {
        tm_connector_config *cfg = cfgs[i];
        cfgs[i] = NULL; /* the supervisor's now */
        if (tm_sup_start(sup, cfg) != 0) {
            atomic_store(&stop, 1);
            rc = 1;
            break;
        }
    }
    run_ctx ctx = {sup, metrics, &opt, files, nfiles};
    supervise(&ctx, &stop, &reloads);
    tm_sup_stop_all(sup);
    rc = tm_sup_finish(sup, rc);
out:
    tm_metrics_process_stop(metrics); /* the last write: final states */
    tm_signals_on_stop(NULL, NULL);   /* before sup goes */
    tm_sup_free(sup);
    for (size_t i = 0; cfgs && i < ncfgs; i++)
        tm_config_free(cfgs[i]);
    free(cfgs);
    tm_run_files_free(cfg_files, ncfgs);
    free(dirs);
    free(extra);
    free(files);
    return rc;
}
