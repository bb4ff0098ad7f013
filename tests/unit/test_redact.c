/* Secrets that still left the process (an attacker's review): list-valued
 * secrets printed part by part, librdkafka's thread names cut inside a
 * secret, messages cut before they reach the host, encoded forms, and a
 * short secret that wrecked every line. Expectations written by hand. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kafka/dead_letter_producer.h"
#include "services/error.h"
#include "services/host_services.h"
#include "services/log.h"
#include "services/redact.h"
#include "check_main.h"

static char out[8192];

static void secrets(const char *const *s, size_t n) {
    tm_redact_reset();
    ck_assert_int_eq(tm_redact_add(s, n), 0);
}

static const char *red(const char *text) {
    return tm_redact(text, TM_REDACT_WHOLE, out, sizeof out);
}

/* Runs fn with stderr redirected; what it wrote. */
static const char *capture(void (*fn)(void)) {
    static char buf[16384];
    fflush(stderr);
    int saved = dup(2);
    FILE *tmp = tmpfile();
    ck_assert_ptr_nonnull(tmp);
    ck_assert_int_ge(dup2(fileno(tmp), 2), 0);
    fn();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(buf, 1, sizeof buf - 1, tmp);
    buf[n] = '\0';
    fclose(tmp);
    /* Each line without its leading "ts=... " (it changes every run). */
    static char lines[sizeof buf];
    size_t o = 0;
    for (const char *p = buf; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) + 1 : strlen(p);
        const char *from = p;
        if (strncmp(p, "ts=", 3) == 0) {
            const char *sp = memchr(p, ' ', len);
            if (sp)
                from = sp + 1;
        }
        memcpy(lines + o, from, len - (size_t)(from - p));
        o += len - (size_t)(from - p);
        p += len;
    }
    lines[o] = '\0';
    return lines;
}

/* ---- 3a: the parts of a list-valued secret ------------------------------ */

#define BROKERS                                                                \
    "b-1.orders-prod.kafka.example.net:9096,b-2.orders-prod.kafka.example."    \
    "net:"                                                                     \
    "9096; b-3.orders-prod.kafka.example.net:9096"

START_TEST(list_secret_parts_redacted) {
    const char *s[] = {BROKERS};
    secrets(s, 1);
    /* librdkafka names each broker on its own, with or without the port. */
    ck_assert_str_eq(
        red("Connect to b-2.orders-prod.kafka.example.net:9096 failed"),
        "Connect to *** failed");
    ck_assert_str_eq(red("resolve b-3.orders-prod.kafka.example.net: failed"),
                     "resolve ***: failed");
    ck_assert_str_eq(red("all: " BROKERS), "all: ***");
    /* A part shorter than the minimum length is not matched on its own. */
    const char *t[] = {"alpha-long-enough,ab"};
    secrets(t, 1);
    ck_assert_str_eq(red("ab alpha-long-enough"), "ab ***");
}
END_TEST

/* ---- 3b: librdkafka's thread names cut to 63 bytes ---------------------- */

#define HOSTSECRET                                                             \
    "b-1.orders-prod-cluster.abc123.c2.kafka.us-east-1.amazonaws.com"

static void librdkafka_cut_thread_name(void) {
    const char *s[] = {HOSTSECRET ":9096"};
    secrets(s, 1);
    tm_log_set_format(TM_LOG_LOGFMT);
    tm_log_set_level(TM_LOG_DEBUG);
    /* What librdkafka's log callback gets: the thread name cut inside the
     * host, then the broker name in full. */
    tm_log(TM_LOG_ERROR, "orders",
           "librdkafka FAIL: [thrd:b-1.orders-prod-cluster.abc123.c2.kafka.us-"
           "east-1.amaz]: " HOSTSECRET ":9096/bootstrap: Connect failed");
    /* Prefixes at each boundary: '/', ':', ' '. */
    tm_log(
        TM_LOG_ERROR, "orders",
        "librdkafka X: b-1.orders-prod/x b-1.orders-prod:y b-1.orders-prod z");
    /* Not at a boundary, or shorter than 8 bytes: kept. */
    tm_log(TM_LOG_ERROR, "orders",
           "librdkafka X: b-1.orders-prodX b-1.ord] b-1.orders-prod");
    /* The same prefix in a line that is not librdkafka's: kept (the rule
     * is for its thread names; elsewhere it would eat ordinary words). */
    tm_log(TM_LOG_ERROR, "orders", "host: b-1.orders-prod-cluster]");
}

START_TEST(librdkafka_cut_prefix_redacted) {
    ck_assert_str_eq(
        capture(librdkafka_cut_thread_name),
        "level=error connector=orders msg=\"librdkafka FAIL: [thrd:***]: "
        "***/bootstrap: Connect failed\"\n"
        "level=error connector=orders msg=\"librdkafka X: ***/x ***:y *** z\"\n"
        "level=error connector=orders msg=\"librdkafka X: b-1.orders-prodX "
        "b-1.ord] ***\"\n"
        "level=error connector=orders msg=\"host: "
        "b-1.orders-prod-cluster]\"\n");
}
END_TEST

/* ---- 3c: a plugin's set_error cut at TM_ERROR_MAX inside a secret ------- */

#define PGSECRET "pg-password-0123456789"

START_TEST(set_error_cut_inside_secret_redacted) {
    const char *s[] = {PGSECRET};
    secrets(s, 1);
    /* The secret straddles the 512-byte buffer's end. */
    char pad[TM_ERROR_MAX];
    memset(pad, 'x', TM_ERROR_MAX - 10);
    pad[TM_ERROR_MAX - 10] = '\0';
    tm_error err = tm_error_init();
    tm_host_services()->set_error(&err, "%s %s tail", pad, PGSECRET);
    ck_assert_ptr_null(strstr(err.message, "pg-p"));
    ck_assert_uint_eq(strlen(err.message), TM_ERROR_MAX - 1);
    /* The host then adds its own text: the secret's start is not at the
     * end any more, and must not be there at all. */
    char line[TM_ERROR_MAX + 32];
    snprintf(line, sizeof line, "%s; retrying", err.message);
    ck_assert_ptr_null(strstr(line, "pg-p"));
    /* The host's own errors too. */
    tm_error_set(&err, "%s %s", pad, PGSECRET);
    ck_assert_ptr_null(strstr(err.message, "pg-p"));
    /* Short messages are redacted whole. */
    tm_error_set(&err, "auth %s failed", PGSECRET);
    ck_assert_str_eq(err.message, "auth *** failed");
}
END_TEST

/* ---- 3e: encoded forms -------------------------------------------------- */

START_TEST(quoted_and_escaped_forms_redacted) {
    const char *s[] = {"tab\"le\\name"};
    secrets(s, 1);
    /* SQL identifier quoting doubles '"'; JSON escapes '"' and '\'. */
    ck_assert_str_eq(red("relation \"tab\"\"le\\name\" does not exist"),
                     "relation \"***\" does not exist");
    ck_assert_str_eq(red("{\"t\":\"tab\\\"le\\\\name\"}"), "{\"t\":\"***\"}");
    ck_assert_str_eq(red("raw tab\"le\\name"), "raw ***");
}
END_TEST

/* ---- 3d: the dead-letter headers the host builds ------------------------ */

START_TEST(dead_letter_headers_redacted) {
    const char *s[] = {"secret_column_name"};
    secrets(s, 1);
    tm_range r = {.struct_size = sizeof r, .topic = "orders", .partition = 2};
    tm_dead_letter d = {.struct_size = sizeof d,
                        .range = 0,
                        .offset = 41,
                        .reason = TM_DL_REJECTED,
                        .detail = "column \"secret_column_name\" violates "
                                  "not-null"};
    tm_batch b = {.struct_size = sizeof b,
                  .batch_id = "b-7",
                  .ranges = &r,
                  .nranges = 1,
                  .dead_letters = &d,
                  .ndead_letters = 1};
    rd_kafka_headers_t *h = tm_dlq_headers("orders-sink", &b, &d);
    ck_assert_ptr_nonnull(h);
    const void *v = NULL;
    size_t n = 0;
    ck_assert_int_eq(rd_kafka_header_get_last(
                         h, "__connect.errors.exception.message", &v, &n),
                     RD_KAFKA_RESP_ERR_NO_ERROR);
    char got[256];
    ck_assert_uint_lt(n, sizeof got);
    memcpy(got, v, n);
    got[n] = '\0';
    ck_assert_str_eq(got, "column \"***\" violates not-null");
    ck_assert_int_eq(
        rd_kafka_header_get_last(h, "__connect.errors.offset", &v, &n),
        RD_KAFKA_RESP_ERR_NO_ERROR);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(memcmp(v, "41", 2), 0);
    rd_kafka_headers_destroy(h);
}
END_TEST

/* ---- 4: short secrets --------------------------------------------------- */

static void short_secret_lines(void) {
    tm_log_set_format(TM_LOG_LOGFMT);
    tm_log_set_level(TM_LOG_DEBUG);
    tm_log_fields f = {"orders-e", NULL, "events", 0, NULL};
    tm_log_ctx(TM_LOG_INFO, &f, "suffix is e; see the e-mail (e)");
}

START_TEST(short_secret_only_as_token) {
    const char *s[] = {"e"};
    secrets(s, 1); /* its warning is checked below */
    ck_assert_str_eq(capture(short_secret_lines),
                     "level=info connector=orders-*** topic=events "
                     "partition=0 msg=\"suffix is ***; see the ***-mail "
                     "(***)\"\n");
    ck_assert_str_eq(red("sweet"), "sweet");
}
END_TEST

static void add_short_secret(void) {
    tm_log_set_format(TM_LOG_LOGFMT);
    tm_log_set_level(TM_LOG_DEBUG);
    tm_redact_reset();
    const char *s[] = {"xyz42", "long-enough-secret"};
    ck_assert_int_eq(tm_redact_add(s, 2), 0);
}

START_TEST(short_secret_warned_at_load) {
    const char *line = capture(add_short_secret);
    ck_assert_msg(strstr(line, "level=warn") != NULL &&
                      strstr(line, "shorter than 6 bytes") != NULL,
                  "%s", line);
    ck_assert_ptr_null(strstr(line, "xyz42"));
    ck_assert_ptr_null(strstr(line, "long-enough"));
    /* One warning: the long one is not mentioned. */
    ck_assert_ptr_null(strchr(strchr(line, '\n') + 1, '\n'));
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("redact");
    TCase *tc = tcase_create("review");
    tcase_add_test(tc, list_secret_parts_redacted);
    tcase_add_test(tc, librdkafka_cut_prefix_redacted);
    tcase_add_test(tc, set_error_cut_inside_secret_redacted);
    tcase_add_test(tc, quoted_and_escaped_forms_redacted);
    tcase_add_test(tc, dead_letter_headers_redacted);
    tcase_add_test(tc, short_secret_only_as_token);
    tcase_add_test(tc, short_secret_warned_at_load);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return tm_check_run(suite(), 1);
}
