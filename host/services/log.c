#include "services/log.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_int max_level = -1; /* -1: not read from the environment yet */

static int level_from_env(void) {
    const char *s = getenv("TIDEMARK_LOG_LEVEL");
    if (!s)
        return TM_LOG_INFO;
    if (strcmp(s, "debug") == 0)
        return TM_LOG_DEBUG;
    if (strcmp(s, "warn") == 0)
        return TM_LOG_WARN;
    if (strcmp(s, "error") == 0)
        return TM_LOG_ERROR;
    return TM_LOG_INFO;
}

void tm_log_set_level(tm_log_level level) {
    atomic_store(&max_level, (int)level);
}

static const char *level_name(tm_log_level level) {
    switch (level) {
    case TM_LOG_ERROR: return "ERROR";
    case TM_LOG_WARN: return "WARN";
    case TM_LOG_INFO: return "INFO";
    case TM_LOG_DEBUG: return "DEBUG";
    }
    return "?";
}

void tm_log_v(tm_log_level level, const char *connector, const char *plugin,
              const char *fmt, va_list ap) {
    int max = atomic_load(&max_level);
    if (max < 0) {
        max = level_from_env();
        atomic_store(&max_level, max);
    }
    if ((int)level > max)
        return;
    char msg[2048];
    if (vsnprintf(msg, sizeof msg, fmt, ap) < 0)
        return;
    struct timespec ts = {0, 0};
    struct tm tm;
    char when[32] = "";
    if (clock_gettime(CLOCK_REALTIME, &ts) == 0 && gmtime_r(&ts.tv_sec, &tm))
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    /* One fprintf per line: stdio locks the stream, so lines of different
     * connector threads never interleave. */
    fprintf(stderr, "%s.%03ldZ %-5s [%s%s%s] %s\n", when, ts.tv_nsec / 1000000L,
            level_name(level), connector ? connector : "tidemark",
            plugin ? "/" : "", plugin ? plugin : "", msg);
}

void tm_log(tm_log_level level, const char *connector, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tm_log_v(level, connector, NULL, fmt, ap);
    va_end(ap);
}
