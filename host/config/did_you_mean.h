/* "Did you mean": the known word closest to an unknown one. */
#ifndef TM_DID_YOU_MEAN_H
#define TM_DID_YOU_MEAN_H

#include <stddef.h>

/* The candidate within a small edit distance of word, or NULL. */
const char *tm_did_you_mean(const char *word, const char *const *candidates,
                            size_t n);

#endif
