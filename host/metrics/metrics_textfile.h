/* The metrics textfile: written whole to a temporary name in the same
 * directory and renamed over, so that a reader (node_exporter's textfile
 * collector) never sees half a file. */
#ifndef TM_METRICS_TEXTFILE_H
#define TM_METRICS_TEXTFILE_H

#include <stddef.h>

/* Whether PATH may be the textfile: its name ends in ".prom" (the
 * collector reads only those) and is more than that, and its directory
 * exists. 0, or -1 with errstr saying what was expected. */
int tm_metrics_textfile_check(const char *path, char *errstr, size_t errsize);

/* Writes LEN bytes of TEXT as PATH: PATH.tmp (never ".prom", so the
 * collector skips it) created without following a link, written, then
 * renamed over PATH. 0, or -1 with errstr. */
int tm_metrics_textfile_write(const char *path, const char *text, size_t len,
                              char *errstr, size_t errsize);

#endif
