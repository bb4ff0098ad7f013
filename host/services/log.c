#include "services/log.h"

#include "convert/bytes_json.h"
#include "services/redact.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_int max_level = -1; /* -1: not read from the environment yet */
static atomic_int format = -1;

/* TIDEMARK_LOG_LEVEL; *bad gets a value that is none of the levels (info
 * is then used, and the first line says so). */
static int level_from_env(const char **bad) {
    const char *s = getenv("TIDEMARK_LOG_LEVEL");
    *bad = NULL;
    if (!s || !*s || strcmp(s, "info") == 0)
        return TM_LOG_INFO;
    if (strcmp(s, "debug") == 0)
        return TM_LOG_DEBUG;
    if (strcmp(s, "warn") == 0)
        return TM_LOG_WARN;
    if (strcmp(s, "error") == 0)
        return TM_LOG_ERROR;
    *bad = s;
    return TM_LOG_INFO;
}

static int format_from_env(const char **bad) {
    const char *s = getenv("TIDEMARK_LOG_FORMAT");
    *bad = NULL;
    if (!s || !*s || strcmp(s, "logfmt") == 0)
        return TM_LOG_LOGFMT;
    if (strcmp(s, "json") == 0)
        return TM_LOG_JSON;
    *bad = s;
    return TM_LOG_LOGFMT;
}

int tm_log_check_env(char *msg, size_t size) {
    const char *bad;
    (void)level_from_env(&bad);
    if (bad) {
        snprintf(
            msg, size,
            "TIDEMARK_LOG_LEVEL: expected one of debug, info, warn, error, "
            "found \"%s\"",
            bad);
        return -1;
    }
    (void)format_from_env(&bad);
    if (bad) {
        snprintf(msg, size,
                 "TIDEMARK_LOG_FORMAT: expected one of logfmt, json, found "
                 "\"%s\"",
                 bad);
        return -1;
    }
    return 0;
}

/* Reads the environment for what is not set yet. A value that means
 * nothing is not silently replaced: once both settings are stored, a
 * warning line names it (only from the thread that stored it). */
static void settle(void) {
    const char *bad_level = NULL, *bad_format = NULL;
    int unset = -1;
    int v = level_from_env(&bad_level);
    if (!atomic_compare_exchange_strong(&max_level, &unset, v))
        bad_level = NULL;
    unset = -1;
    v = format_from_env(&bad_format);
    if (!atomic_compare_exchange_strong(&format, &unset, v))
        bad_format = NULL;
    if (bad_level)
        tm_log(TM_LOG_WARN, NULL,
               "TIDEMARK_LOG_LEVEL=\"%s\" is not one of debug, info, warn, "
               "error: using info",
               bad_level);
    if (bad_format)
        tm_log(TM_LOG_WARN, NULL,
               "TIDEMARK_LOG_FORMAT=\"%s\" is not one of logfmt, json: using "
               "logfmt",
               bad_format);
}

void tm_log_set_level(tm_log_level level) {
    atomic_store(&max_level, (int)level);
}

void tm_log_set_format(tm_log_format f) {
    atomic_store(&format, (int)f);
}

void tm_log_reset(void) {
    atomic_store(&max_level, -1);
    atomic_store(&format, -1);
}

static const char *level_name(tm_log_level level) {
    switch (level) {
    case TM_LOG_ERROR: return "error";
    case TM_LOG_WARN: return "warn";
    case TM_LOG_INFO: return "info";
    case TM_LOG_DEBUG: return "debug";
    }
    return "?";
}

/* A line buffer on the stack. What does not fit is cut, never in the
 * middle of an escape or a character, and the bytes that close the line
 * (a value's quote, JSON's brace) always fit: a cut line is still one whole
 * logfmt line or JSON object. */
#define LINE_CLOSE 2 /* "\"}" */

typedef struct line {
    char buf[4096];
    size_t n;
    int full; /* something was cut: nothing more goes in but the close */
} line;

/* Appends s whole or not at all, keeping LINE_CLOSE bytes free. */
static int put(line *l, const char *s, size_t len) {
    if (l->full || len > sizeof l->buf - 1 - LINE_CLOSE - l->n) {
        l->full = 1;
        return -1;
    }
    memcpy(l->buf + l->n, s, len);
    l->n += len;
    return 0;
}

static int puts_(line *l, const char *s) {
    return put(l, s, strlen(s));
}

/* The closing bytes, into the room put() keeps for them. */
static void put_close(line *l, const char *s) {
    size_t len = strlen(s);
    if (len <= sizeof l->buf - 1 - l->n) {
        memcpy(l->buf + l->n, s, len);
        l->n += len;
    }
}

/* U+FFFD, which stands for each byte that is not part of well-formed UTF-8:
 * a log pipeline reading UTF-8 (and any JSON parser) takes the line. */
#define REPLACEMENT "\xef\xbf\xbd"

/* Escapes for both formats: quotes, backslashes and control characters,
 * so that one event is always one line; invalid UTF-8 replaced. */
static void put_escaped(line *l, const char *s) {
    size_t left = strlen(s);
    while (left > 0 && !l->full) {
        unsigned char c = (unsigned char)*s;
        size_t len = tm_utf8_char_len(s, left);
        char esc[8];
        if (len == 0) {
            put(l, REPLACEMENT, 3);
            len = 1;
        } else if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(l, esc, 2);
        } else if (c == '\n') {
            put(l, "\\n", 2);
        } else if (c == '\t') {
            put(l, "\\t", 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(l, esc, 6);
        } else {
            put(l, s, len);
        }
        s += len;
        left -= len;
    }
}

static int needs_quotes(const char *s) {
    if (!*s)
        return 1;
    for (; *s; s++)
        if ((unsigned char)*s <= ' ' || *s == '"' || *s == '=' || *s == '\\')
            return 1;
    return 0;
}

/* One field. Its key goes in whole or not at all; a quoted value is cut
 * where the line ends and closed, an unquoted one (a number, a bare word)
 * goes in whole or the field is left out. */
static void field(line *l, int json, const char *key, const char *value,
                  int quote) {
    char head[96];
    if (json) {
        snprintf(head, sizeof head, "%s\"%s\":%s", l->n > 1 ? "," : "", key,
                 quote ? "\"" : "");
    } else {
        quote = quote && needs_quotes(value);
        snprintf(head, sizeof head, "%s%s=%s", l->n ? " " : "", key,
                 quote ? "\"" : "");
    }
    size_t start = l->n;
    if (puts_(l, head) != 0)
        return;
    put_escaped(l, value);
    if (quote)
        put_close(l, "\"");
    else if (l->full)
        l->n = start;
}

/* Every value not made here is redacted (services/redact.h) before it is
 * escaped and before the line is cut: this is the one point every log line
 * of the process passes, librdkafka's and the plugins' included. */
static void field_redacted(line *l, int json, const char *key, const char *raw,
                           tm_redact_tail tail) {
    char value[sizeof l->buf];
    field(l, json, key, tm_redact(raw, tail, value, sizeof value), 1);
}

/* librdkafka's lines (kafka_conf.c's log callback writes them as
 * "librdkafka FAC: ...") cut their thread names inside a broker's name:
 * starts of secrets are replaced there too (tm_redact_prefixes). */
#define LIBRDKAFKA_LINE "librdkafka "

static void msg_redacted(line *l, int json, const char *raw) {
    char value[sizeof l->buf];
    if (strncmp(raw, LIBRDKAFKA_LINE, strlen(LIBRDKAFKA_LINE)) == 0)
        tm_redact_prefixes(raw, TM_REDACT_MAYBE_CUT, value, sizeof value);
    else
        tm_redact(raw, TM_REDACT_MAYBE_CUT, value, sizeof value);
    field(l, json, "msg", value, 1);
}

void tm_log_fields_v(tm_log_level level, const tm_log_fields *f,
                     const char *fmt, va_list ap) {
    if (atomic_load(&max_level) < 0 || atomic_load(&format) < 0)
        settle();
    if ((int)level > atomic_load(&max_level))
        return;
    int json = atomic_load(&format) == TM_LOG_JSON;
    /* The whole message, however long: it is redacted before anything
     * cuts it (a cut first could leave the start of a secret). */
    char small[2048];
    char *msg = small;
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n >= (int)sizeof small && (msg = malloc((size_t)n + 1)) != NULL)
        vsnprintf(msg, (size_t)n + 1, fmt, again);
    va_end(again);
    if (n < 0)
        return;
    if (!msg) {
        /* Out of memory: the cut message, its tail redacted as cut. */
        msg = small;
        char cut[sizeof small];
        tm_redact(small, TM_REDACT_CUT, cut, sizeof cut);
        memcpy(small, cut, sizeof cut);
    }
    struct timespec ts = {0, 0};
    struct tm tm;
    char when[40] = "";
    if (clock_gettime(CLOCK_REALTIME, &ts) == 0 && gmtime_r(&ts.tv_sec, &tm)) {
        char sec[24];
        strftime(sec, sizeof sec, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(when, sizeof when, "%s.%03dZ", sec,
                 (int)(ts.tv_nsec / 1000000L % 1000));
    }
    line l = {.n = 0, .full = 0};
    if (json)
        puts_(&l, "{");
    field(&l, json, "ts", when, 1);
    field(&l, json, "level", level_name(level), 1);
    /* A process-wide line (a signal, a warning about the environment) has
     * no connector field rather than a made-up one. */
    if (f && f->connector)
        field_redacted(&l, json, "connector", f->connector, TM_REDACT_WHOLE);
    if (f && f->plugin)
        field_redacted(&l, json, "plugin", f->plugin, TM_REDACT_WHOLE);
    if (f && f->topic)
        field_redacted(&l, json, "topic", f->topic, TM_REDACT_WHOLE);
    if (f && f->partition >= 0) {
        char p[16];
        snprintf(p, sizeof p, "%d", (int)f->partition);
        field(&l, json, "partition", p, 0);
    }
    if (f && f->batch_id)
        field_redacted(&l, json, "batch", f->batch_id, TM_REDACT_WHOLE);
    msg_redacted(&l, json, msg);
    if (msg != small)
        free(msg);
    if (json)
        put_close(&l, "}");
    l.buf[l.n] = '\0';
    /* One fprintf per line: stdio locks the stream, so lines of different
     * connector threads never interleave. */
    fprintf(stderr, "%s\n", l.buf);
}

void tm_log_ctx(tm_log_level level, const tm_log_fields *f, const char *fmt,
                ...) {
    va_list ap;
    va_start(ap, fmt);
    tm_log_fields_v(level, f, fmt, ap);
    va_end(ap);
}

void tm_log_v(tm_log_level level, const char *connector, const char *plugin,
              const char *fmt, va_list ap) {
    tm_log_fields f = {connector, plugin, NULL, -1, NULL};
    tm_log_fields_v(level, &f, fmt, ap);
}

void tm_log(tm_log_level level, const char *connector, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tm_log_v(level, connector, NULL, fmt, ap);
    va_end(ap);
}

void tm_warn_once(tm_warn_state *w, const char *connector, const char *prefix,
                  const char *why) {
    if (!why) {
        if (w->last[0])
            tm_log(TM_LOG_INFO, connector, "%s: ok again", prefix);
        w->last[0] = '\0';
        return;
    }
    char now[sizeof w->last];
    snprintf(now, sizeof now, "%s", why);
    if (strcmp(now, w->last) == 0)
        return;
    memcpy(w->last, now, sizeof now);
    tm_log(TM_LOG_WARN, connector, "%s: %s", prefix, why);
}
