#include "metrics/metrics_exporter.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "metrics/metrics_status.h"
#include "metrics/metrics_targets.h"
#include "metrics/metrics_textfile.h"
#include "services/clock.h"
#include "services/log.h"
#include "services/thread_name.h"

struct tm_metrics_exporter {
    const char *path;
    int interval_s;
    tm_metrics_targets *targets;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stop;
    char last_error[512]; /* logged once until it changes */
};

int tm_metrics_render(FILE *out, const tm_metrics_target *targets, size_t n) {
    tm_status_view *views = calloc(n ? n : 1, sizeof *views);
    const char **dirs = calloc(n ? n : 1, sizeof *dirs);
    if (!views || !dirs) {
        free(views);
        free(dirs);
        return -1;
    }
    size_t shown = 0;
    for (size_t i = 0; i < n; i++) {
        tm_status_view *v = &views[shown];
        char why[1024];
        int rc = tm_status_read(targets[i].state_dir, targets[i].connector,
                                &v->r, why, sizeof why);
        if (rc == 1)
            continue; /* not started yet: nothing to say */
        dirs[shown] = targets[i].state_dir;
        if (rc < 0) {
            memset(v, 0, sizeof *v);
            snprintf(v->r.snap.connector, sizeof v->r.snap.connector, "%s",
                     targets[i].connector);
            snprintf(v->error, sizeof v->error, "%s", why);
        } else {
            v->running = 1;
        }
        shown++;
    }
    tm_metrics_status_write(out, views, shown, dirs, tm_clock_wall_ms());
    for (size_t i = 0; i < shown; i++)
        tm_status_view_free(&views[i]);
    free(views);
    free(dirs);
    return 0;
}

/* One write of the file. 0, or -1 with errstr. */
static int write_once(tm_metrics_exporter *e, char *errstr, size_t errsize) {
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) {
        snprintf(errstr, errsize, "out of memory");
        return -1;
    }
    int rc = tm_metrics_targets_render(e->targets, mem);
    if (fclose(mem) != 0 || !buf)
        rc = -1;
    if (rc != 0)
        snprintf(errstr, errsize, "out of memory");
    else
        rc = tm_metrics_textfile_write(e->path, buf, len, errstr, errsize);
    free(buf);
    return rc;
}

static void write_logged(tm_metrics_exporter *e) {
    char why[512] = "";
    if (write_once(e, why, sizeof why) != 0) {
        if (strcmp(why, e->last_error) != 0)
            tm_log(TM_LOG_WARN, NULL, "metrics file: %s (retried every %d s)",
                   why, e->interval_s);
    } else if (e->last_error[0]) {
        tm_log(TM_LOG_INFO, NULL, "metrics file: written again");
    }
    snprintf(e->last_error, sizeof e->last_error, "%s", why);
}

static void *exporter_main(void *arg) {
    tm_thread_name("tm:exporter");
    tm_metrics_exporter *e = arg;
    pthread_mutex_lock(&e->lock);
    while (!e->stop) {
        /* Monotonic: a wall clock stepped back an hour must not leave the
         * file unwritten for that hour (test_metrics_clock). */
        struct timespec until =
            tm_clock_mono_after((int64_t)e->interval_s * 1000);
        while (!e->stop &&
               pthread_cond_timedwait(&e->wake, &e->lock, &until) != ETIMEDOUT)
            ;
        pthread_mutex_unlock(&e->lock);
        write_logged(e); /* also the last one, after the stop */
        pthread_mutex_lock(&e->lock);
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

tm_metrics_exporter *tm_metrics_exporter_start(const char *path, int interval_s,
                                               tm_metrics_targets *targets,
                                               char *errstr, size_t errsize) {
    tm_metrics_exporter *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(errstr, errsize, "out of memory");
        return NULL;
    }
    *e = (tm_metrics_exporter){
        .path = path, .interval_s = interval_s, .targets = targets};
    if (write_once(e, errstr, errsize) != 0) {
        free(e);
        return NULL;
    }
    if (pthread_mutex_init(&e->lock, NULL) != 0) {
        snprintf(errstr, errsize, "cannot make a mutex");
        free(e);
        return NULL;
    }
    if (tm_cond_init_mono(&e->wake) != 0) {
        snprintf(errstr, errsize, "cannot make a condition variable");
        pthread_mutex_destroy(&e->lock);
        free(e);
        return NULL;
    }
    if (pthread_create(&e->thread, NULL, exporter_main, e) != 0) {
        snprintf(errstr, errsize, "cannot start its thread");
        pthread_cond_destroy(&e->wake);
        pthread_mutex_destroy(&e->lock);
        free(e);
        return NULL;
    }
    return e;
}

void tm_metrics_exporter_stop(tm_metrics_exporter *e) {
    if (!e)
        return;
    pthread_mutex_lock(&e->lock);
    e->stop = 1;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->lock);
    pthread_join(e->thread, NULL);
    pthread_cond_destroy(&e->wake);
    pthread_mutex_destroy(&e->lock);
    free(e);
}
