/* The one error formatter: every tm_error in the host and (through
 * tm_host_api.set_error) in plugins is written here. */
#ifndef TM_ERROR_H
#define TM_ERROR_H

#include <stdarg.h>
#include <stdio.h>
#include <tidemark/sink.h>

/* Formats into err->message, truncating safely; a NULL err is ignored. */
void tm_error_set(tm_error *err, const char *fmt, ...) TM_PRINTF(2, 3);
void tm_error_vset(tm_error *err, const char *fmt, va_list ap);
/* Prefixes err->message with "prefix: " (context added on the way up). */
void tm_error_prefix(tm_error *err, const char *fmt, ...) TM_PRINTF(2, 3);
/* A zeroed error with struct_size set. */
tm_error tm_error_init(void);

#endif
