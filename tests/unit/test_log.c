/* The log line format: logfmt and JSON, the context fields, escaping that
 * keeps one event on one line, and the level filter. Lines are captured
 * from stderr; expectations are written here by hand. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "services/host_services.h"
#include "services/log.h"
#include "services/redact.h"

#include "check_main.h"

/* Runs fn with stderr redirected to a file; returns what it wrote, with
 * the leading timestamp field cut off (it changes with every run). */
static const char *capture(void (*fn)(void)) {
    static char buf[16384];
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

START_TEST(bare_words_unquoted) {
    ck_assert_str_eq(capture(bare_word_and_default_connector),
                     "level=info connector=tidemark msg=stopped\n");
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
        got, "level=warn connector=tidemark "
             "msg=\"TIDEMARK_LOG_LEVEL=\\\"bogus\\\" is not one of debug, "
             "info, warn, error: using info\"\n"
             "level=warn connector=tidemark "
             "msg=\"TIDEMARK_LOG_FORMAT=\\\"yaml\\\" is not one of logfmt, "
             "json: using logfmt\"\n"
             "level=info connector=orders msg=first\n"
             "level=info connector=orders msg=second\n");
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("log");
    TCase *t = tcase_create("format");
    tcase_add_test(t, logfmt_fields_and_quoting);
    tcase_add_test(t, json_line);
    tcase_add_test(t, bare_words_unquoted);
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
