/* The process's secrets and the one place text is cleaned of them before
 * it leaves the process (log lines, status files). Config interpolation
 * resolves ${env:...} and ${file:...} values; whoever loads a config adds
 * them here, so that every line, whatever produced it (librdkafka, a
 * plugin, an error from a database), is redacted the same way. */
#ifndef TM_REDACT_H
#define TM_REDACT_H

#include <stddef.h>

/* A piece at the very end of a text that is the start of a secret, at least
 * this long, is taken for a cut secret even when the caller does not know
 * the text was cut (a shorter one is too likely a coincidence). */
#define TM_REDACT_MIN_TAIL 4

/* Remembers SECRETS[0..n) (copied; "" and duplicates ignored) for the life
 * of the process. 0, or -1 when memory ran out (the ones added so far
 * stay). Thread-safe. */
int tm_redact_add(const char *const *secrets, size_t n);

/* Forgets every secret (tests only). */
void tm_redact_reset(void);

/* Copies text into out (size bytes, always NUL-terminated when size > 0)
 * with every occurrence of a secret replaced by "***", the longest first
 * where they overlap. The whole text is matched before out is cut, so a cut
 * never leaves a piece of a secret. A trailing piece of text that is the
 * start of a secret is replaced too: always when cut is non-zero (the text
 * is a truncated copy of a longer one), else when it is at least
 * TM_REDACT_MIN_TAIL bytes. Returns out. Thread-safe. */
char *tm_redact(const char *text, int cut, char *out, size_t size);

#endif
