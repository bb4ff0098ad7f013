/* The process's secrets and the one place text is cleaned of them before
 * it leaves the process (log lines, status files). Config interpolation
 * resolves ${env:...} and ${file:...} values; whoever loads a config adds
 * them here, so that every line, whatever produced it (librdkafka, a
 * plugin, an error from a database), is redacted the same way. */
#ifndef TM_REDACT_H
#define TM_REDACT_H

#include <stddef.h>

/* What to make of a piece at the very end of a text that is the start of a
 * secret (what a cut inside the secret leaves). */
typedef enum tm_redact_tail {
    TM_REDACT_WHOLE = 0,     /* never cut (a name, a field): kept */
    TM_REDACT_MAYBE_CUT = 1, /* may have been cut before it got here:
                                replaced from TM_REDACT_MIN_TAIL bytes on
                                (a shorter one is too likely a
                                coincidence) */
    TM_REDACT_CUT = 2        /* known to be cut: always replaced */
} tm_redact_tail;

#define TM_REDACT_MIN_TAIL 4

/* Remembers SECRETS[0..n) (copied; NULL, "" and duplicates ignored) for the
 * life of the process. 0, or -1 when memory ran out (the ones added so far
 * stay). Thread-safe. */
int tm_redact_add(const char *const *secrets, size_t n);

/* Forgets every secret (tests only). */
void tm_redact_reset(void);

/* Copies text into out (size bytes, always NUL-terminated when size > 0)
 * with every occurrence of one of the process's secrets replaced by "***",
 * the longest first where they overlap, and a trailing start of one as
 * tail says. Matching runs on the whole text, before out cuts it, so a cut
 * never leaves a piece of a secret. Returns out. Thread-safe. */
char *tm_redact(const char *text, tm_redact_tail tail, char *out, size_t size);

/* The same against the given list only (the matcher every redaction shares;
 * a connector config's own list, for instance). */
char *tm_redact_list(const char *const *secrets, size_t n, const char *text,
                     tm_redact_tail tail, char *out, size_t size);

#endif
