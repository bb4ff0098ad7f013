/* The host's log: one line per event on stderr, with the context that makes
 * a plugin's message findable (connector, plugin). */
#ifndef TM_LOG_H
#define TM_LOG_H

#include <stdarg.h>
#include <tidemark/sink.h>

/* Lines above this level are dropped
 * (TIDEMARK_LOG_LEVEL=debug|info|warn|error). */
void tm_log_set_level(tm_log_level level);
void tm_log_v(tm_log_level level, const char *connector, const char *plugin,
              const char *fmt, va_list ap);
void tm_log(tm_log_level level, const char *connector, const char *fmt, ...)
    TM_PRINTF(3, 4);

#endif
