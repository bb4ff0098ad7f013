/* The log line format: logfmt and JSON, the context fields, escaping that
 * keeps one event on one line, and the level filter. Lines are captured
 * from stderr; expectations are written here by hand. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "services/log.h"

#include "check_main.h"

/* Runs fn with stderr redirected to a file; returns what it wrote, with
 * the leading timestamp field cut off (it changes with every run). */
static const char *capture(void (*fn)(void)) {
    static char buf[8192];
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

static Suite *suite(void) {
    Suite *s = suite_create("log");
    TCase *t = tcase_create("format");
    tcase_add_test(t, logfmt_fields_and_quoting);
    tcase_add_test(t, json_line);
    tcase_add_test(t, bare_words_unquoted);
    tcase_add_test(t, level_filter);
    suite_add_tcase(s, t);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 0);
}
