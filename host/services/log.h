/* The host's log: one line per event on stderr, logfmt by default or JSON
 * (TIDEMARK_LOG_FORMAT=logfmt|json), with the context that makes a line
 * findable: connector, plugin, and where it applies the partition and the
 * batch (PostgreSQL's errcontext, as fields a log pipeline can index). */
#ifndef TM_LOG_H
#define TM_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <tidemark/sink.h>

typedef enum tm_log_format { TM_LOG_LOGFMT = 0, TM_LOG_JSON = 1 } tm_log_format;

/* The context fields of a line; NULL / negative members are left out. */
typedef struct tm_log_fields {
    const char *connector;
    const char *plugin;
    const char *topic;
    int32_t partition; /* -1: none */
    const char *batch_id;
} tm_log_fields;

/* Lines above this level are dropped
 * (TIDEMARK_LOG_LEVEL=debug|info|warn|error). */
void tm_log_set_level(tm_log_level level);
/* Checks TIDEMARK_LOG_LEVEL and TIDEMARK_LOG_FORMAT: 0 when each is unset,
 * empty or a known value; else -1 and msg names the variable, the values it
 * takes and the one found. The commands call it before anything else, so a
 * typo is an error at start, not a process logging in a format nobody
 * parses. (The logger itself, used without this check, falls back to info
 * and logfmt and says so in its first line.) */
int tm_log_check_env(char *msg, size_t size);
void tm_log_set_format(tm_log_format format);
/* Forgets the level and format set or read so far: the next line reads
 * TIDEMARK_LOG_LEVEL and TIDEMARK_LOG_FORMAT again. */
void tm_log_reset(void);

void tm_log_fields_v(tm_log_level level, const tm_log_fields *f,
                     const char *fmt, va_list ap);
void tm_log_ctx(tm_log_level level, const tm_log_fields *f, const char *fmt,
                ...) TM_PRINTF(3, 4);
void tm_log_v(tm_log_level level, const char *connector, const char *plugin,
              const char *fmt, va_list ap);
void tm_log(tm_log_level level, const char *connector, const char *fmt, ...)
    TM_PRINTF(3, 4);

/* A warning said once until it changes: a failure that comes back at every
 * try (a full disk under the status file, tried every second) is one line,
 * not one a try. One owner (no lock inside). */
typedef struct tm_warn_state {
    char last[512]; /* the message last said; "" when none is standing */
} tm_warn_state;
/* Logs "PREFIX: WHY" at WARN unless WHY is the message standing; with WHY
 * NULL (the failure is over) logs "PREFIX: ok again" at INFO when one was
 * standing, and forgets it. */
void tm_warn_once(tm_warn_state *w, const char *connector, const char *prefix,
                  const char *why);

#endif
