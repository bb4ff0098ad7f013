#include "metrics/metrics_targets.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "metrics/metrics_exporter.h"

struct tm_metrics_targets {
    /* Held while the list is replaced and while it is rendered: a render
     * never sees a list half replaced, nor one freed under it. */
    pthread_mutex_t lock;
    tm_metrics_target *v;
    char **strings; /* the copies v points to: 2 per target */
    size_t n;
};

tm_metrics_targets *tm_metrics_targets_new(void) {
    tm_metrics_targets *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    if (pthread_mutex_init(&t->lock, NULL) != 0) {
        free(t);
        return NULL;
    }
    return t;
}

static void strings_free(char **strings, size_t n) {
    for (size_t i = 0; strings && i < 2 * n; i++)
        free(strings[i]);
    free(strings);
}

int tm_metrics_targets_set(tm_metrics_targets *t, const char *const *names,
                           const char *const *state_dirs, size_t n) {
    tm_metrics_target *v = calloc(n ? n : 1, sizeof *v);
    char **strings = calloc(2 * (n ? n : 1), sizeof *strings);
    int ok = v && strings;
    for (size_t i = 0; ok && i < n; i++) {
        strings[2 * i] = strdup(state_dirs[i]);
        strings[2 * i + 1] = strdup(names[i]);
        ok = strings[2 * i] && strings[2 * i + 1];
        v[i] = (tm_metrics_target){strings[2 * i], strings[2 * i + 1]};
    }
    if (!ok) {
        free(v);
        strings_free(strings, n); /* calloc'd: unset ones are NULL */
        return -1;
    }
    pthread_mutex_lock(&t->lock);
    tm_metrics_target *old_v = t->v;
    char **old_strings = t->strings;
    size_t old_n = t->n;
    t->v = v;
    t->strings = strings;
    t->n = n;
    pthread_mutex_unlock(&t->lock);
    free(old_v);
    strings_free(old_strings, old_n);
    return 0;
}

int tm_metrics_targets_render(tm_metrics_targets *t, FILE *out) {
    pthread_mutex_lock(&t->lock);
    int rc = tm_metrics_render(out, t->v, t->n);
    pthread_mutex_unlock(&t->lock);
    return rc;
}

void tm_metrics_targets_free(tm_metrics_targets *t) {
    if (!t)
        return;
    free(t->v);
    strings_free(t->strings, t->n);
    pthread_mutex_destroy(&t->lock);
    free(t);
}
