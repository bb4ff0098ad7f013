#include "services/redact.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "services/log.h"

static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static char **secrets; /* every form of every secret (see tm_redact_add) */
static size_t nsecrets;

static int known(const char *s) {
    for (size_t i = 0; i < nsecrets; i++)
        if (strcmp(secrets[i], s) == 0)
            return 1;
    return 0;
}

/* Adds one form (copied). 0, or -1 when memory ran out. */
static int add_form(const char *s, size_t len) {
    if (len == 0)
        return 0;
    char *copy = malloc(len + 1);
    if (!copy)
        return -1;
    memcpy(copy, s, len);
    copy[len] = '\0';
    if (known(copy)) {
        free(copy);
        return 0;
    }
    char **v = realloc(secrets, (nsecrets + 1) * sizeof *v);
    if (!v) {
        free(copy);
        return -1;
    }
    secrets = v;
    secrets[nsecrets++] = copy;
    return 0;
}

/* S as an SQL quoted identifier or string shows it ('"' doubled) and as a
 * JSON string does ('"' and '\' escaped): a database's error quotes a
 * name that way. Only for a secret holding one of them. */
static int add_encoded(const char *s, size_t len) {
    if (!memchr(s, '"', len) && !memchr(s, '\\', len))
        return 0;
    char *buf = malloc(2 * len + 1);
    if (!buf)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '"')
            buf[n++] = '"';
        buf[n++] = s[i];
    }
    int rc = add_form(buf, n);
    n = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '"' || s[i] == '\\')
            buf[n++] = '\\';
        buf[n++] = s[i];
    }
    if (rc == 0)
        rc = add_form(buf, n);
    free(buf);
    return rc;
}

static int add_with_encodings(const char *s, size_t len) {
    return add_form(s, len) != 0 || add_encoded(s, len) != 0 ? -1 : 0;
}

/* The host of "host:port" (port all digits), else 0. */
static size_t host_len(const char *s, size_t len) {
    size_t colon = len;
    while (colon > 0 && s[colon - 1] != ':')
        colon--;
    if (colon == 0 || colon == len)
        return 0;
    for (size_t i = colon; i < len; i++)
        if (!isdigit((unsigned char)s[i]))
            return 0;
    return colon - 1;
}

/* A list-valued secret ("a:9092,b:9092") is printed part by part (each
 * broker, each host): each part of at least TM_REDACT_MIN_LEN bytes, and
 * its host, is a secret too. */
static int add_parts(const char *s) {
    static const char seps[] = ",; \t\r\n";
    size_t len = strlen(s);
    if (strcspn(s, seps) == len && host_len(s, len) == 0)
        return 0; /* one part, no port: the whole value is already in */
    for (size_t i = 0; i < len;) {
        size_t n = strcspn(s + i, seps);
        if (n >= TM_REDACT_MIN_LEN && add_with_encodings(s + i, n) != 0)
            return -1;
        size_t h = host_len(s + i, n);
        if (h >= TM_REDACT_MIN_LEN && add_with_encodings(s + i, h) != 0)
            return -1;
        i += n;
        i += strspn(s + i, seps);
    }
    return 0;
}

int tm_redact_add(const char *const *add, size_t n) {
    int rc = 0;
    size_t short_ones = 0;
    if (pthread_rwlock_wrlock(&lock) != 0)
        return -1;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!add[i] || !*add[i] || known(add[i]))
            continue;
        size_t len = strlen(add[i]);
        if (len < TM_REDACT_MIN_LEN)
            short_ones++;
        rc = add_with_encodings(add[i], len) != 0 || add_parts(add[i]) != 0 ? -1
                                                                            : 0;
    }
    pthread_rwlock_unlock(&lock);
    /* After the lock: the logger redacts with it. Never the value. */
    for (size_t i = 0; i < short_ones; i++)
        tm_log(TM_LOG_WARN, NULL,
               "a secret (a resolved ${env:} or ${file:} value) is shorter "
               "than %d bytes: it is redacted only where it stands alone "
               "between non-alphanumeric characters, not inside words; use "
               "a longer value",
               TM_REDACT_MIN_LEN);
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

static int word_char(char c) {
    return isalnum((unsigned char)c);
}

/* Where librdkafka cuts its thread names and ends a broker's name. */
static int prefix_end(char c) {
    return c == ']' || c == '/' || c == ':' || c == ' ';
}

/* The length of the longest secret starting at text[i] (0: none); len is
 * strlen(text). A secret shorter than TM_REDACT_MIN_LEN matches only as a
 * whole token (no alphanumeric just before or after). With prefixes, a
 * start of a secret of at least TM_REDACT_MIN_PREFIX bytes that ends just
 * before a prefix_end() character matches too. *tail is set when the whole
 * rest is the start of a (long enough) secret. */
static size_t match_at(const char *const *list, size_t n, const char *text,
                       size_t i, size_t len, int prefixes, int *tail) {
    const char *p = text + i;
    size_t rest = len - i, best = 0;
    *tail = 0;
    for (size_t k = 0; k < n; k++) {
        const char *s = list[k];
        size_t slen = strlen(s);
        int token = slen < TM_REDACT_MIN_LEN;
        if (token && i > 0 && word_char(text[i - 1]))
            continue;
        if (slen <= rest) {
            if (slen > best && memcmp(p, s, slen) == 0 &&
                !(token && slen < rest && word_char(p[slen])))
                best = slen;
        } else if (!token && memcmp(p, s, rest) == 0) {
            *tail = 1;
        }
        if (prefixes && !token && slen > TM_REDACT_MIN_PREFIX) {
            size_t limit = slen - 1 < rest ? slen - 1 : rest - 1;
            size_t common = 0;
            while (common < limit && p[common] == s[common])
                common++;
            for (size_t c = common; c >= TM_REDACT_MIN_PREFIX; c--) {
                if (c < rest && prefix_end(p[c])) {
                    if (c > best)
                        best = c;
                    break;
                }
            }
        }
    }
    return best;
}

static char *redact_list(const char *const *list, size_t nlist,
                         const char *text, tm_redact_tail tail, int prefixes,
                         char *out, size_t size) {
    if (size == 0)
        return out;
    size_t o = 0, len = strlen(text);
    for (size_t i = 0; i < len && o + 1 < size;) {
        int starts = 0;
        size_t n = match_at(list, nlist, text, i, len, prefixes, &starts);
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

char *tm_redact_list(const char *const *list, size_t nlist, const char *text,
                     tm_redact_tail tail, char *out, size_t size) {
    return redact_list(list, nlist, text, tail, 0, out, size);
}

static char *redact_global(const char *text, tm_redact_tail tail, int prefixes,
                           char *out, size_t size) {
    if (size == 0)
        return out;
    if (pthread_rwlock_rdlock(&lock) != 0) {
        /* Cannot tell the secrets: show nothing rather than too much. */
        snprintf(out, size, "***");
        return out;
    }
    redact_list((const char *const *)secrets, nsecrets, text, tail, prefixes,
                out, size);
    pthread_rwlock_unlock(&lock);
    return out;
}

char *tm_redact(const char *text, tm_redact_tail tail, char *out, size_t size) {
    return redact_global(text, tail, 0, out, size);
}

char *tm_redact_prefixes(const char *text, tm_redact_tail tail, char *out,
                         size_t size) {
    return redact_global(text, tail, 1, out, size);
}

char *tm_redact_dup(const char *text, tm_redact_tail tail) {
    /* "***" for a one-byte secret: at most three times as long. */
    size_t size = 3 * strlen(text) + 4;
    char *out = malloc(size);
    return out ? tm_redact(text, tail, out, size) : NULL;
}
