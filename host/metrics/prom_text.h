/* The Prometheus text exposition format (version 0.0.4), the one place
 * that knows its syntax: family headers, label value escaping, samples. */
#ifndef TM_PROM_TEXT_H
#define TM_PROM_TEXT_H

#include <stdint.h>
#include <stdio.h>

/* "# HELP NAME HELP" and "# TYPE NAME TYPE" (TYPE: counter, gauge,
 * histogram, summary). HELP must hold no newline or backslash. */
void tm_prom_family(FILE *out, const char *name, const char *type,
                    const char *help);

/* VALUE as a label value between double quotes: the backslash, the
 * double quote and the newline escaped (\\, \", \n) as the format asks;
 * every other byte as it is (the format is UTF-8, and a name may hold
 * anything the config allows). */
void tm_prom_label_value(FILE *out, const char *value);

/* One sample line: NAME{LABELS} VALUE. labels is a list of nlabels
 * name/value pairs (names are ours, values escaped here); nlabels 0 writes
 * no braces. */
void tm_prom_sample(FILE *out, const char *name, const char *const *labels,
                    int nlabels, double value);

/* The same for an exact integer (counters beyond 2^53 stay exact). */
void tm_prom_sample_u64(FILE *out, const char *name, const char *const *labels,
                        int nlabels, uint64_t value);

#endif
