#include "config/did_you_mean.h"

#include <string.h>

#define MAX_WORD 64

/* Levenshtein distance with one rolling row; words longer than MAX_WORD
 * are not compared (no key is that long). */
static size_t edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > MAX_WORD || lb > MAX_WORD)
        return (size_t)-1;
    size_t row[MAX_WORD + 1];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            size_t best = diag + cost;
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *tm_did_you_mean(const char *word, const char *const *candidates,
                            size_t n) {
    const char *best = NULL;
    size_t best_d = (size_t)-1;
    size_t limit = strlen(word) / 3 + 1; /* close enough to be a typo */
    for (size_t i = 0; i < n; i++) {
        size_t d = edit_distance(word, candidates[i]);
        if (d < best_d) {
            best_d = d;
            best = candidates[i];
        }
    }
    return best_d <= limit ? best : NULL;
}
