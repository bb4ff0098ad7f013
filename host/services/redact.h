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

/* A secret shorter than this is matched only as a whole token (no letter or
 * digit just before or after it): inside words it would turn every "e"
 * into "***" and give itself away. tm_redact_add warns about each. */
#define TM_REDACT_MIN_LEN 6

/* The shortest start of a secret tm_redact_prefixes replaces. */
#define TM_REDACT_MIN_PREFIX 8

/* Remembers SECRETS[0..n) (copied; NULL, "" and duplicates ignored) for the
 * life of the process, each with: its parts (split on ',', ';' and
 * whitespace) and the host of each "host:port" part, those of at least
 * TM_REDACT_MIN_LEN bytes; and, for any of these holding '"' or '\', its
 * SQL-quoted ('"' doubled) and JSON-escaped forms. Logs a warning (never
 * the value) for each secret shorter than TM_REDACT_MIN_LEN. 0, or -1 when
 * memory ran out (the ones added so far stay). Thread-safe. */
int tm_redact_add(const char *const *secrets, size_t n);

/* Forgets every secret (tests only). */
void tm_redact_reset(void);

/* Copies text into out (size bytes, always NUL-terminated when size > 0)
 * with every occurrence of one of the process's secrets replaced by "***",
 * the longest first where they overlap, and a trailing start of one as
 * tail says. Matching runs on the whole text, before out cuts it, so a cut
 * never leaves a piece of a secret. Returns out. Thread-safe. */
char *tm_redact(const char *text, tm_redact_tail tail, char *out, size_t size);

/* tm_redact, plus: a start of a secret (at least TM_REDACT_MIN_PREFIX bytes)
 * that ends just before ']', '/', ':' or ' ', wherever it is. For
 * librdkafka's lines, whose thread names ("[thrd:HOST:PORT/ID]") are cut to
 * 63 bytes, so a broker name's start shows mid-line. */
char *tm_redact_prefixes(const char *text, tm_redact_tail tail, char *out,
                         size_t size);

/* tm_redact into a new heap string (free() it), never cut; NULL when memory
 * ran out. */
char *tm_redact_dup(const char *text, tm_redact_tail tail);

/* The same against the given list only (the matcher every redaction shares;
 * a connector config's own list, for instance). */
char *tm_redact_list(const char *const *secrets, size_t n, const char *text,
                     tm_redact_tail tail, char *out, size_t size);

#endif
