/* The log line format: logfmt and JSON, the context fields, escaping that
 * keeps one event on one line, and the level filter. Lines are captured
 * from stderr; expectations are written here by hand. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "services/host_services.h"
#include "services/log.h"
#include "services/redact.h"

#include "check_main.h"

/* Runs fn with stderr redirected to a file; returns all it wrote. */
static char *capture_raw(void (*fn)(void)) {
    static char buf[65536];
    fflush(stderr);
    int saved = dup(2);
    FILE *tmp = tmpfile();
    ck_assert_ptr_nonnull(tmp);
    dup2(fileno(tmp), 2);
    fn();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(buf, 1, sizeof buf - 1, tmp);
    buf[n] = '\0';
    fclose(tmp);
    return buf;
}

/* capture_raw, with the leading timestamp field cut off (it changes with
 * every run). */
static const char *capture(void (*fn)(void)) {
    char *buf = capture_raw(fn);
    if (buf[0] == '{') {
        /* {"ts":"...","level":...  ->  {"level":... */
        char *at = strstr(buf, ",\"level\"");
        if (!at)
            return buf;
        *at = '{';
        return at;
    }
    /* ts=... level=...  ->  level=... */
    char *at = strstr(buf, "level=");
    return at ? at : buf;
}

static void one_logfmt(void) {
    tm_log_set_format(TM_LOG_LOGFMT);
    tm_log_set_level(TM_LOG_INFO);
    tm_log_fields f = {"orders", "sqlite", "orders.v1", 3, "ab12-7"};
    tm_log_ctx(TM_LOG_WARN, &f, "commit: \"%s\" took %d ms\nnext", "RETRY", 40);
}

START_TEST(logfmt_fields_and_quoting) {
    ck_assert_str_eq(capture(one_logfmt),
                     "level=warn connector=orders plugin=sqlite "
                     "topic=orders.v1 partition=3 batch=ab12-7 "
                     "msg=\"commit: \\\"RETRY\\\" took 40 ms\\nnext\"\n");
}
END_TEST

/* A failure said at every try: one line while it stands, a new line when
 * it changes, "ok again" once when it is over, then said again if it comes
 * back. */
static void warn_once_sequence(void) {
    tm_log_set_format(TM_LOG_LOGFMT);
    tm_log_set_level(TM_LOG_INFO);
    tm_warn_state w = {""};
    tm_warn_once(&w, "c", "status", NULL); /* nothing standing: silent */
    for (int i = 0; i < 5; i++)
        tm_warn_once(&w, "c", "status", "cannot write s: No space left");
    tm_warn_once(&w, "c", "status", "cannot rename s: Read-only");
    tm_warn_once(&w, "c", "status", NULL);
    tm_warn_once(&w, "c", "status", NULL);
    tm_warn_once(&w, "c", "status", "cannot write s: No space left");
}

START_TEST(warn_once_until_it_changes) {
    const char *text = capture_raw(warn_once_sequence);
    const char *want[] = {
        "level=warn connector=c msg=\"status: cannot write s: No space left\"",
        "level=warn connector=c msg=\"status: cannot rename s: Read-only\"",
        "level=info connector=c msg=\"status: ok again\"",
        "level=warn connector=c msg=\"status: cannot write s: No space left\""};
    const char *at = text;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const char *hit = strstr(at, want[i]);
        ck_assert_msg(hit, "line %zu missing (%s) in: %s", i, want[i], text);
        at = hit + strlen(want[i]);
    }
    int lines = 0;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    ck_assert_msg(lines == 4, "%d lines, expected 4: %s", lines, text);
}
END_TEST

static void one_json(void) {
    tm_log_set_format(TM_LOG_JSON);
    tm_log_set_level(TM_LOG_INFO);
    tm_log_fields f = {"orders", NULL, NULL, -1, NULL};
    tm_log_ctx(TM_LOG_ERROR, &f, "tab\there \\ \"q\"");
}

START_TEST(json_line) {
    ck_assert_str_eq(capture(one_json),
                     "{\"level\":\"error\",\"connector\":\"orders\","
                     "\"msg\":\"tab\\there \\\\ \\\"q\\\"\"}\n");
}
END_TEST

static void bare_word_and_default_connector(void) {
    tm_log_set_format(TM_LOG_LOGFMT);
    tm_log_set_level(TM_LOG_INFO);
    tm_log(TM_LOG_INFO, NULL, "stopped");
}

/* A line about the whole process (a signal, a config-wide warning) has no
 * connector field: it used to say connector=tidemark, a connector that
 * does not exist. */
START_TEST(process_wide_line_has_no_connector) {
    ck_assert_str_eq(capture(bare_word_and_default_connector),
                     "level=info msg=stopped\n");
}
END_TEST

static void process_wide_json(void) {
    tm_log_set_format(TM_LOG_JSON);
    tm_log_set_level(TM_LOG_INFO);
    tm_log(TM_LOG_INFO, NULL, "SIGTERM: stopping");
}

START_TEST(process_wide_json_line_has_no_connector) {
    ck_assert_str_eq(capture(process_wide_json),
                     "{\"level\":\"info\",\"msg\":\"SIGTERM: stopping\"}\n");
}
END_TEST

static void filtered_out(void) {
    tm_log_set_format(TM_LOG_LOGFMT);
    tm_log_set_level(TM_LOG_INFO);
    tm_log(TM_LOG_DEBUG, "orders", "not shown");
}

START_TEST(level_filter) {
    ck_assert_str_eq(capture(filtered_out), "");
}
END_TEST

/* Secrets: every line is redacted in the logger, whoever logs it. */
#define SECRET "s3cr3t-broker-host"

static void with_secret(void) {
    const char *s[] = {SECRET};
    tm_redact_reset();
    ck_assert_int_eq(tm_redact_add(s, 1), 0);
    tm_log_set_format(TM_LOG_LOGFMT);
    tm_log_set_level(TM_LOG_DEBUG);
}

static void librdkafka_style_line(void) {
    with_secret();
    tm_log(TM_LOG_ERROR, "orders",
           "librdkafka FAIL: [thrd:" SECRET ":1/bootstrap]: " SECRET
           ":1/bootstrap: Connect to ipv4#127.0.0.1:1 failed");
}

START_TEST(secret_in_message_redacted) {
    ck_assert_str_eq(capture(librdkafka_style_line),
                     "level=error connector=orders msg=\"librdkafka FAIL: "
                     "[thrd:***:1/bootstrap]: ***:1/bootstrap: Connect to "
                     "ipv4#127.0.0.1:1 failed\"\n");
}
END_TEST

/* A plugin's host->log line goes through the same logger. */
static void plugin_line(void) {
    with_secret();
    tm_log_context ctx = {"orders", "sqlite"};
    tm_host_services()->log(&ctx, TM_LOG_WARN, "cannot reach %s", SECRET);
}

START_TEST(plugin_log_line_redacted) {
    ck_assert_str_eq(capture(plugin_line),
                     "level=warn connector=orders plugin=sqlite "
                     "msg=\"cannot reach ***\"\n");
}
END_TEST

/* A message far longer than a line: the secret sits across where the old
 * message buffer (2048 bytes) cut, and at the line's own end. Nothing of
 * it may show. */
static void long_line(void) {
    with_secret();
    char pad[2040];
    memset(pad, 'x', sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    char pad2[4050];
    memset(pad2, 'y', sizeof pad2 - 1);
    pad2[sizeof pad2 - 1] = '\0';
    tm_log(TM_LOG_ERROR, "orders", "%s %s %s %s", pad, SECRET, pad, SECRET);
    tm_log(TM_LOG_ERROR, "orders", "%s %s", pad2, SECRET);
}

START_TEST(long_message_redacted_before_cut) {
    const char *out = capture(long_line);
    ck_assert_ptr_null(strstr(out, "s3cr"));
    ck_assert_ptr_nonnull(strstr(out, "xxx ***"));
    /* Two lines, the second cut to the line size. */
    const char *nl = strchr(out, '\n');
    ck_assert_ptr_nonnull(nl);
    ck_assert_ptr_nonnull(strchr(nl + 1, '\n'));
}
END_TEST

/* A message that arrives already cut (a caller's fixed buffer ended inside
 * the secret): the piece of it at the end is redacted too. */
static void arrives_cut(void) {
    with_secret();
    tm_log(TM_LOG_ERROR, "orders", "batch 7: RETRY: connect to s3cr3t-bro");
}

START_TEST(cut_secret_prefix_redacted) {
    ck_assert_str_eq(capture(arrives_cut),
                     "level=error connector=orders "
                     "msg=\"batch 7: RETRY: connect to ***\"\n");
}
END_TEST

/* The context fields too (a connector named from an interpolated value). */
static void secret_in_field(void) {
    with_secret();
    tm_log_fields f = {"orders", NULL, "t-" SECRET, 1, NULL};
    tm_log_ctx(TM_LOG_INFO, &f, "assigned");
}

START_TEST(secret_in_field_redacted) {
    ck_assert_str_eq(capture(secret_in_field),
                     "level=info connector=orders topic=t-*** partition=1 "
                     "msg=assigned\n");
}
END_TEST

/* tm_redact itself: a cut text loses even a short tail that starts a
 * secret; one that may be cut keeps a tail shorter than TM_REDACT_MIN_TAIL;
 * a whole one (a name) keeps any tail. */
START_TEST(redact_tail_rules) {
    const char *s[] = {SECRET};
    tm_redact_reset();
    ck_assert_int_eq(tm_redact_add(s, 1), 0);
    char out[64];
    ck_assert_str_eq(tm_redact("to s3c", TM_REDACT_CUT, out, sizeof out),
                     "to ***");
    ck_assert_str_eq(tm_redact("to s3c", TM_REDACT_MAYBE_CUT, out, sizeof out),
                     "to s3c");
    ck_assert_str_eq(tm_redact("to s3cr", TM_REDACT_MAYBE_CUT, out, sizeof out),
                     "to ***");
    ck_assert_str_eq(tm_redact("to s3cr", TM_REDACT_WHOLE, out, sizeof out),
                     "to s3cr");
    ck_assert_str_eq(tm_redact("a " SECRET " b", TM_REDACT_WHOLE, out, 6),
                     "a ***");
    /* The shared matcher against a list of its own. */
    const char *list[] = {"abcdef", "abcdefgh"};
    ck_assert_str_eq(tm_redact_list(list, 2, "xabcdefghy abcdef abcdefg",
                                    TM_REDACT_WHOLE, out, sizeof out),
                     "x***y *** ***g");
    tm_redact_reset();
    ck_assert_str_eq(tm_redact("to " SECRET, TM_REDACT_CUT, out, sizeof out),
                     "to " SECRET);
}
END_TEST

/* TIDEMARK_LOG_LEVEL / TIDEMARK_LOG_FORMAT with a value that means nothing:
 * used to be silently info / logfmt. Now the first line says so. */
static void bogus_env(void) {
    tm_redact_reset();
    setenv("TIDEMARK_LOG_LEVEL", "bogus", 1);
    setenv("TIDEMARK_LOG_FORMAT", "yaml", 1);
    tm_log_reset();
    tm_log(TM_LOG_INFO, "orders", "first");
    tm_log(TM_LOG_INFO, "orders", "second");
    unsetenv("TIDEMARK_LOG_LEVEL");
    unsetenv("TIDEMARK_LOG_FORMAT");
    tm_log_reset();
}

START_TEST(bogus_env_values_warned) {
    const char *out = capture(bogus_env);
    /* capture() cut the first line's timestamp only: cut the others'. */
    char got[4096] = "";
    for (const char *p = out; *p;) {
        const char *nl = strchr(p, '\n');
        const char *lv = strstr(p, "level=");
        if (!nl || !lv)
            break;
        strncat(got, lv, (size_t)(nl - lv + 1));
        p = nl + 1;
    }
    ck_assert_str_eq(
        got, "level=warn "
             "msg=\"TIDEMARK_LOG_LEVEL=\\\"bogus\\\" is not one of debug, "
             "info, warn, error: using info\"\n"
             "level=warn "
             "msg=\"TIDEMARK_LOG_FORMAT=\\\"yaml\\\" is not one of logfmt, "
             "json: using logfmt\"\n"
             "level=info connector=orders msg=first\n"
             "level=info connector=orders msg=second\n");
}
END_TEST

/* ---- JSON lines: each one must parse, whatever the message held -------- */

/* Parses every line of out with jansson (which refuses invalid UTF-8 and
 * raw control characters); returns how many there were. Each line must be
 * one object with a string "msg". */
static size_t parse_lines(const char *out, json_t **objs, size_t max) {
    size_t n = 0;
    for (const char *p = out; *p;) {
        const char *nl = strchr(p, '\n');
        ck_assert_msg(nl != NULL, "a line without its newline: %.200s", p);
        ck_assert_uint_lt(n, max);
        json_error_t e;
        objs[n] = json_loadb(p, (size_t)(nl - p), 0, &e);
        ck_assert_msg(objs[n] != NULL, "line %zu is not JSON: %s: %.200s",
                      n + 1, e.text, p);
        ck_assert(json_is_string(json_object_get(objs[n], "msg")));
        n++;
        p = nl + 1;
    }
    return n;
}

static const char *msg_of(json_t *o) {
    return json_string_value(json_object_get(o, "msg"));
}

/* The replacement character U+FFFD, as UTF-8. */
#define REPL "\xef\xbf\xbd"

static void hostile_json(void) {
    tm_redact_reset();
    tm_log_set_format(TM_LOG_JSON);
    tm_log_set_level(TM_LOG_INFO);
    char ctl[40];
    size_t k = 0;
    for (int c = 1; c < 0x20; c++)
        ctl[k++] = (char)c;
    ctl[k++] = 0x7f;
    ctl[k] = '\0';
    tm_log(TM_LOG_INFO, "orders", "%s", ctl);
    /* Invalid UTF-8: a lone continuation byte, an overlong '/', a UTF-16
     * surrogate, a code point past U+10FFFF, a sequence cut by the end. */
    tm_log(TM_LOG_INFO, "orders",
           "a\x80"
           "b|\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80|\xe2\x82");
    /* Valid multi-byte characters stay as they are. */
    tm_log(TM_LOG_INFO, "orders", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e");
    /* Context fields too. */
    tm_log_fields f = {"ord\xffrs", "sq\"l", "t\x01", 2, "b\\1"};
    tm_log_ctx(TM_LOG_WARN, &f, "fields");
}

START_TEST(json_lines_escape_control_chars_and_invalid_utf8) {
    json_t *o[8];
    size_t n = parse_lines(capture_raw(hostile_json), o, 8);
    ck_assert_uint_eq(n, 4);
    char ctl[40];
    size_t k = 0;
    for (int c = 1; c < 0x20; c++)
        ctl[k++] = (char)c;
    ctl[k++] = 0x7f;
    ctl[k] = '\0';
    ck_assert_str_eq(msg_of(o[0]), ctl);
    ck_assert_str_eq(msg_of(o[1]), "a" REPL "b|" REPL REPL "|" REPL REPL REPL
                                   "|" REPL REPL REPL REPL "|" REPL REPL);
    ck_assert_str_eq(msg_of(o[2]), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e");
    ck_assert_str_eq(json_string_value(json_object_get(o[3], "connector")),
                     "ord" REPL "rs");
    ck_assert_str_eq(json_string_value(json_object_get(o[3], "plugin")),
                     "sq\"l");
    ck_assert_str_eq(json_string_value(json_object_get(o[3], "topic")),
                     "t\x01");
    ck_assert_int_eq(json_integer_value(json_object_get(o[3], "partition")), 2);
    ck_assert_str_eq(json_string_value(json_object_get(o[3], "batch")), "b\\1");
    for (size_t i = 0; i < n; i++)
        json_decref(o[i]);
}
END_TEST

/* A message longer than a line is cut; the cut line must still be one
 * whole JSON object, however the cut falls: inside an escape (\u0001 is six
 * bytes) or inside a multi-byte character. */
static void long_json(void) {
    tm_redact_reset();
    tm_log_set_format(TM_LOG_JSON);
    tm_log_set_level(TM_LOG_INFO);
    static char big[6000];
    for (int shift = 0; shift < 6; shift++) {
        size_t k = 0;
        for (int i = 0; i < shift; i++)
            big[k++] = 'x';
        while (k + 4 < sizeof big) {
            if (k % 3 == 0) {
                big[k++] = '\x01';
            } else {
                memcpy(big + k, "\xe2\x82\xac", 3);
                k += 3;
            }
        }
        big[k] = '\0';
        tm_log(TM_LOG_INFO, "orders", "%s", big);
    }
}

START_TEST(cut_json_line_is_still_json) {
    json_t *o[8];
    const char *out = capture_raw(long_json);
    size_t n = parse_lines(out, o, 8);
    ck_assert_uint_eq(n, 6);
    for (size_t i = 0; i < n; i++) {
        /* Cut, but not to nothing. */
        ck_assert_uint_gt(strlen(msg_of(o[i])), 1000);
        ck_assert_uint_lt(strlen(msg_of(o[i])), 4096);
        json_decref(o[i]);
    }
    for (const char *p = out; *p; p = strchr(p, '\n') + 1)
        ck_assert_uint_le((size_t)(strchr(p, '\n') - p), 4095);
}
END_TEST

/* The same bytes in logfmt: one line each, no raw control character, no
 * invalid UTF-8 (a log pipeline reading UTF-8 must not choke on it). */
static void hostile_logfmt(void) {
    tm_redact_reset();
    tm_log_set_format(TM_LOG_LOGFMT);
    tm_log_set_level(TM_LOG_INFO);
    tm_log(TM_LOG_INFO, "orders",
           "a\x80"
           "b\x01\r\x7f");
}

START_TEST(logfmt_escapes_invalid_utf8) {
    ck_assert_str_eq(capture(hostile_logfmt),
                     "level=info connector=orders "
                     "msg=\"a" REPL "b\\u0001\\u000d\x7f\"\n");
}
END_TEST

/* ---- TIDEMARK_LOG_LEVEL / TIDEMARK_LOG_FORMAT checked at start ---------- */

START_TEST(env_check_names_the_bad_variable) {
    char msg[256];
    unsetenv("TIDEMARK_LOG_LEVEL");
    unsetenv("TIDEMARK_LOG_FORMAT");
    ck_assert_int_eq(tm_log_check_env(msg, sizeof msg), 0);
    setenv("TIDEMARK_LOG_FORMAT", "json", 1);
    setenv("TIDEMARK_LOG_LEVEL", "debug", 1);
    ck_assert_int_eq(tm_log_check_env(msg, sizeof msg), 0);
    setenv("TIDEMARK_LOG_FORMAT", "yaml", 1);
    ck_assert_int_eq(tm_log_check_env(msg, sizeof msg), -1);
    ck_assert_str_eq(msg, "TIDEMARK_LOG_FORMAT: expected one of logfmt, json, "
                          "found \"yaml\"");
    setenv("TIDEMARK_LOG_FORMAT", "logfmt", 1);
    setenv("TIDEMARK_LOG_LEVEL", "bogus", 1);
    ck_assert_int_eq(tm_log_check_env(msg, sizeof msg), -1);
    ck_assert_str_eq(msg, "TIDEMARK_LOG_LEVEL: expected one of debug, info, "
                          "warn, error, found \"bogus\"");
    unsetenv("TIDEMARK_LOG_LEVEL");
    unsetenv("TIDEMARK_LOG_FORMAT");
    tm_log_reset();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("log");
    TCase *t = tcase_create("format");
    tcase_add_test(t, logfmt_fields_and_quoting);
    tcase_add_test(t, warn_once_until_it_changes);
    tcase_add_test(t, json_line);
    tcase_add_test(t, process_wide_line_has_no_connector);
    tcase_add_test(t, process_wide_json_line_has_no_connector);
    tcase_add_test(t, json_lines_escape_control_chars_and_invalid_utf8);
    tcase_add_test(t, cut_json_line_is_still_json);
    tcase_add_test(t, logfmt_escapes_invalid_utf8);
    tcase_add_test(t, env_check_names_the_bad_variable);
    tcase_add_test(t, level_filter);
    suite_add_tcase(s, t);
    TCase *r = tcase_create("redaction");
    tcase_add_test(r, secret_in_message_redacted);
    tcase_add_test(r, plugin_log_line_redacted);
    tcase_add_test(r, long_message_redacted_before_cut);
    tcase_add_test(r, cut_secret_prefix_redacted);
    tcase_add_test(r, secret_in_field_redacted);
    tcase_add_test(r, redact_tail_rules);
    tcase_add_test(r, bogus_env_values_warned);
    suite_add_tcase(s, r);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 0);
}
