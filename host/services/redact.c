#include "services/redact.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static char **secrets;
static size_t nsecrets;

static int known(const char *s) {
    for (size_t i = 0; i < nsecrets; i++)
        if (strcmp(secrets[i], s) == 0)
            return 1;
    return 0;
}

int tm_redact_add(const char *const *add, size_t n) {
    int rc = 0;
    if (pthread_rwlock_wrlock(&lock) != 0)
        return -1;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!add[i] || !*add[i] || known(add[i]))
            continue;
        char **v = realloc(secrets, (nsecrets + 1) * sizeof *v);
        if (!v) {
            rc = -1;
            break;
        }
        secrets = v;
        if (!(v[nsecrets] = strdup(add[i])))
            rc = -1;
        else
            nsecrets++;
    }
    pthread_rwlock_unlock(&lock);
    return rc;
}

void tm_redact_reset(void) {
    if (pthread_rwlock_wrlock(&lock) != 0)
        return;
    for (size_t i = 0; i < nsecrets; i++)
        free(secrets[i]);
    free(secrets);
    secrets = NULL;
    nsecrets = 0;
    pthread_rwlock_unlock(&lock);
}

/* The length of the longest secret starting at p (0: none); rest is
 * strlen(p). *tail is set when the whole rest is the start of a secret. */
static size_t match_at(const char *const *list, size_t n, const char *p,
                       size_t rest, int *tail) {
    size_t best = 0;
    *tail = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(list[i]);
        if (len <= rest) {
            if (len > best && memcmp(p, list[i], len) == 0)
                best = len;
        } else if (memcmp(p, list[i], rest) == 0) {
            *tail = 1;
        }
    }
    return best;
}

char *tm_redact_list(const char *const *list, size_t nlist, const char *text,
                     tm_redact_tail tail, char *out, size_t size) {
    if (size == 0)
        return out;
    size_t o = 0, len = strlen(text);
    for (size_t i = 0; i < len && o + 1 < size;) {
        int starts = 0;
        size_t n = match_at(list, nlist, text + i, len - i, &starts);
        if (!n && starts &&
            (tail == TM_REDACT_CUT ||
             (tail == TM_REDACT_MAYBE_CUT && len - i >= TM_REDACT_MIN_TAIL)))
            n = len - i; /* the rest is a cut secret */
        if (n) {
            for (const char *s = "***"; *s && o + 1 < size; s++)
                out[o++] = *s;
            i += n;
        } else {
            out[o++] = text[i++];
        }
    }
    out[o] = '\0';
    return out;
}

char *tm_redact(const char *text, tm_redact_tail tail, char *out, size_t size) {
    if (size == 0)
        return out;
    if (pthread_rwlock_rdlock(&lock) != 0) {
        /* Cannot tell the secrets: show nothing rather than too much. */
        snprintf(out, size, "***");
        return out;
    }
    tm_redact_list((const char *const *)secrets, nsecrets, text, tail, out,
                   size);
    pthread_rwlock_unlock(&lock);
    return out;
}
