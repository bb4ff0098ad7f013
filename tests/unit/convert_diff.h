/* The differential harness: json-mode conversion by the streaming
 * extractor against the same conversion fed by jansson, the reference,
 * for one document at a time. Shared by the Check test
 * (test_convert_differential.c) and the libFuzzer target (tests/fuzz/).
 *
 * Two levels are compared. The values found: for each pointer, whether
 * something is there, its kind, integer, real (bit for bit), string
 * content and canonical text, and whether the document is JSON at all.
 * And whole records through tm_convert: for configs mapping every pointer
 * as each column type (required or not) and filtering on some of them,
 * the outcome, the dead letter's reason and detail, and every value. */
#ifndef TM_CONVERT_DIFF_H
#define TM_CONVERT_DIFF_H

#include <stddef.h>

typedef struct tm_diff tm_diff;

/* The pointers both levels follow (valid JSON pointers, as a config
 * would hold them). NULL on failure (a message on stderr). */
tm_diff *tm_diff_new(const char *const *pointers, size_t npointers);
void tm_diff_free(tm_diff *d);

/* NULL when both paths agree on doc[0..n); else what differs, valid until
 * the next call. */
const char *tm_diff_check(tm_diff *d, const char *doc, size_t n);

/* The values-found level alone, with other pointers (e.g. paths taken
 * from the document itself). */
const char *tm_diff_check_pointers(tm_diff *d, const char *doc, size_t n,
                                   const char *const *pointers,
                                   size_t npointers);

/* The values-found level with pointers to the document's own values (as
 * jansson reads it), the first `max` in document order; NULL when it is
 * not JSON. */
const char *tm_diff_check_own_paths(tm_diff *d, const char *doc, size_t n,
                                    size_t max);

/* How many documents each path accepted as JSON so far (the corpus
 * should hold both kinds). */
void tm_diff_counts(const tm_diff *d, size_t *valid, size_t *invalid);

#endif
