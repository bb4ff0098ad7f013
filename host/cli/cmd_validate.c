/* tidemark validate [--plugin-dir DIR]... CONFIG|DIR...
 *
 * For each connector config (a DIR stands for its *.json files, as in
 * `tidemark run`: cli/run_configs.h): parse and check it (every error, one line
 * "FILE: PATH: message"), load its sink plugin, refuse what the plugin's
 * capabilities cannot keep (dedup without TM_CAP_DEDUP), then let the
 * plugin's validate() check its settings and its store, read-only. Every
 * line printed goes through tm_config_redact(): no resolved secret shows. */
#include "cli/commands.h"
#include "kafka/broker_watch.h"

#include "cli/cli_args.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_sink.h"
#include "cli/run_configs.h"
#include "kafka/member_id.h"
#include "status/status_file.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: tidemark validate [--plugin-dir DIR]... CONFIG|DIR...\n"
            "\n"
            "Checks each connector config (a DIR stands for its *.json\n"
            "files, as in run): every setting (all errors, each\n"
            "as FILE: JSON-PATH: message), its ${env:NAME} and ${file:PATH}\n"
            "references, the sink plugin (loaded, capabilities) and, when\n"
            "the plugin has a validate callback, its settings and store\n"
            "(read-only: nothing is created or changed), and the\n"
            "connector's member.id when its state directory holds one.\n"
            "Several configs are also checked together, as run would run\n"
            "them: no dead letter going round a cycle of connectors, no\n"
            "consumer group (or group.instance.id) shared.\n"
            "Exit status: 0 all valid, 2 any invalid or a usage error\n"
            "(1 out of memory).\n"
            "\n"
            "  --plugin-dir DIR  search DIR for plugins first (repeatable);\n"
            "                    then TIDEMARK_PLUGIN_PATH, then %s\n",
            tm_plugin_default_dir());
}

/* What validate keeps of each file until the checks across files: its
 * loaded config (NULL when it did not load) and, when it passed its own
 * checks, the OK line (already redacted). */
typedef struct checked {
    tm_connector_config *cfg;
    char *ok;
} checked;

/* As run reads it: an existing member.id (in the config's state_dir, else
 * the default one) that run would refuse as corrupt or unreadable is
 * refused here too, by its path. Read only: no directory or id is made.
 * 0 fine (or no file), 1 refused (reported). */
static int check_member_id(const tm_connector_config *cfg, const char *file) {
    if (!tm_member_id_wanted(cfg))
        return 0;
    char top[PATH_MAX], dir[PATH_MAX + 256], why[PATH_MAX + 1024], id[300];
    if (cfg->state_dir)
        snprintf(top, sizeof top, "%s", cfg->state_dir);
    else
        tm_status_default_dir(top, sizeof top);
    snprintf(dir, sizeof dir, "%s/%s", top, cfg->name);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0; /* never run here: run makes the id */
        snprintf(why, sizeof why, "cannot open %s: %s", dir, strerror(errno));
        tm_cli_report(cfg, file, NULL, why);
        return 1;
    }
    int rc =
        tm_member_id_get(fd, dir, cfg->name, 0, id, sizeof id, why, sizeof why);
    close(fd);
    if (rc >= 0)
        return 0;
    tm_cli_report(cfg, file, NULL, why);
    return 1;
}

/* 0 valid, 1 not, 2 out of memory: files[i], whose connector must not
 * have the name of files[0..i) (names[k], NULL when files[k] did not
 * load); names[i] gets a copy of its name when it loads. */
static int validate_one(const char *const *files, char **names, size_t i,
                        const char *const *dirs, size_t ndirs, checked *out) {
    const char *file = files[i];
    tm_cli_sink s;
    if (tm_cli_sink_load(&s, file, dirs, ndirs) != 0)
        return s.oom ? 2 : 1;
    int bad = 0;
    if (!(names[i] = strdup(s.cfg->name))) {
        tm_cli_report(s.cfg, file, NULL, "out of memory");
        tm_cli_sink_free(&s);
        return 2;
    }
    /* As run refuses it: one process, one connector of a name. */
    if (tm_cli_name_clash(files, (const char *const *)names, i))
        bad = 1;
    const tm_sink_api *api = s.inst.api;
    /* Capabilities the config needs were checked by tm_cli_sink_load. */
    if (tm_cli_sink_validate(&s) != 0)
        bad = 1;
    if (check_member_id(s.cfg, file) != 0)
        bad = 1;
    if (!bad) {
        char line[1024], red[1024];
        int declared = TM_SINK_API_HAS_SETTINGS(api) && api->settings;
        snprintf(line, sizeof line,
                 "%s: OK (connector \"%s\", plugin \"%s\" %s%s)", file,
                 s.cfg->name, api->name, api->version ? api->version : "",
                 api->validate ? ""
                 : declared    ? ", no validate callback: settings checked "
                                 "against its declared table only"
                               : ", no validate callback: settings not "
                                 "checked");
        tm_config_redact(s.cfg, line, red, sizeof red);
        if (!(out->ok = strdup(red))) {
            tm_cli_report(s.cfg, file, NULL, "out of memory");
            tm_cli_sink_free(&s);
            return 2;
        }
    }
    /* Valid, but a setting that delays what the health shows. */
    tm_broker_watch_config_warn(s.cfg, file, stderr);
    /* The config outlives its plugin instance, for the checks across
     * files. */
    tm_sink_instance_close(&s.inst);
    out->cfg = s.cfg;
    s.cfg = NULL;
    tm_cli_sink_free(&s);
    return bad;
}

int tm_cmd_validate(int argc, char **argv) {
    const char **extra = calloc((size_t)(argc > 0 ? argc : 1), sizeof *extra);
    const char **args = calloc((size_t)(argc > 0 ? argc : 1), sizeof *args);
    size_t nextra = 0, nargs = 0, nfiles = 0;
    char **files = NULL; /* the config files of args */
    char **names = NULL;
    checked *done = NULL;
    int *cross_bad = NULL;
    tm_connector_config **cfgs = NULL;
    int rc = 0;
    if (!extra || !args) {
        fprintf(stderr, "tidemark validate: out of memory\n");
        rc = 1;
        goto out;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m = tm_cli_opt("validate", "--plugin-dir", argc, argv, &i,
                           &extra[nextra]);
        if (m != 0) {
            if (m < 0) {
                rc = 2;
                goto out;
            }
            nextra++;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            goto out;
        } else if (strcmp(a, "--") == 0) {
            while (++i < argc)
                args[nargs++] = argv[i];
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "tidemark validate: unknown option '%s'\n", a);
            usage(stderr);
            rc = 2;
            goto out;
        } else {
            args[nargs++] = a;
        }
    }
    if (nargs == 0) {
        fprintf(stderr, "tidemark validate: no CONFIG given\n");
        usage(stderr);
        rc = 2;
        goto out;
    }
    /* As run reads its arguments (each problem printed). */
    if (tm_run_config_files(args, nargs, &files, &nfiles) != 0) {
        rc = TM_EXIT_INVALID_CONFIG;
        goto out;
    }
    size_t ndirs = 0;
    const char **dirs = tm_cli_plugin_dirs(extra, nextra, &ndirs);
    if (!dirs) {
        fprintf(stderr, "tidemark validate: out of memory\n");
        rc = 1;
        goto out;
    }
    names = calloc(nfiles, sizeof *names);
    done = calloc(nfiles, sizeof *done);
    cross_bad = calloc(nfiles, sizeof *cross_bad);
    cfgs = calloc(nfiles, sizeof *cfgs);
    if (!names || !done || !cross_bad || !cfgs) {
        fprintf(stderr, "tidemark validate: out of memory\n");
        rc = 1;
        free(dirs);
        goto out;
    }
    /* As run does: each file on its own, then no name twice, then the
     * configs together (a dead letter going round them, a shared group). */
    int oom = 0;
    for (size_t i = 0; i < nfiles; i++) {
        int r = validate_one((const char *const *)files, names, i, dirs, ndirs,
                             &done[i]);
        if (r == 2)
            oom = 1;
        if (r != 0)
            rc = TM_EXIT_INVALID_CONFIG;
        cfgs[i] = done[i].cfg;
    }
    free(dirs);
    if (tm_cli_cross_check(cfgs, nfiles, cross_bad) != 0)
        rc = TM_EXIT_INVALID_CONFIG;
    for (size_t i = 0; i < nfiles; i++)
        if (done[i].ok && !cross_bad[i])
            printf("%s\n", done[i].ok);
    if (oom)
        rc = 1;
out:
    for (size_t i = 0; names && i < nfiles; i++)
        free(names[i]);
    for (size_t i = 0; done && i < nfiles; i++) {
        tm_config_free(done[i].cfg);
        free(done[i].ok);
    }
    free(done);
    free(cross_bad);
    free(cfgs);
    free(names);
    free(extra);
    free(args);
    tm_run_files_free(files, nfiles);
    return rc;
}
