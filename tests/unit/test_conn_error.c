/* tm_conn_error (runtime/connector.c): the error the status file shows.
 * A message longer than last_error is cut after redaction, never before:
 * a secret straddling the cut must not leave its first bytes behind. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/connector_state.h"

#include "check_main.h"

#define SECRET "tc-err-s3cret-value-0451"

static tm_connector_config cfg;
static char *secrets[] = {SECRET};

static void setup(tm_connector *c) {
    memset(&cfg, 0, sizeof cfg);
    cfg.name = "conn_error";
    cfg.secrets = secrets;
    cfg.nsecrets = 1;
    memset(c, 0, sizeof *c);
    c->cfg = &cfg;
    c->state = TM_CONN_RUNNING;
}

/* The secret starts a few bytes before the end of last_error: formatting
 * into last_error's size first cut it to "tc-e...", which no redaction of
 * the cut text recognises as a whole secret. */
START_TEST(test_conn_error_secret_at_the_cut) {
    static tm_connector c;
    setup(&c);
    size_t room = sizeof c.last_error - 1;
    for (size_t lead = room - 12; lead < room; lead++) {
        char pad[sizeof c.last_error];
        memset(pad, 'x', lead);
        pad[lead] = '\0';
        tm_conn_error(&c, 0, "%s%s tail", pad, SECRET);
        ck_assert_msg(strstr(c.last_error, "tc-e") == NULL,
                      "lead %zu: a piece of the secret is left: ...%s", lead,
                      c.last_error + lead - 4);
        ck_assert_uint_le(strlen(c.last_error), room);
        ck_assert_int_eq(c.state, TM_CONN_RUNNING);
    }
}
END_TEST

/* Well inside the buffer the whole secret is replaced and the rest kept. */
START_TEST(test_conn_error_secret_inside) {
    static tm_connector c;
    setup(&c);
    tm_conn_error(&c, 0, "claim: password %s refused (%d)", SECRET, 7);
    ck_assert_str_eq(c.last_error, "claim: password *** refused (7)");
    ck_assert_int_ne(c.last_error_ms, 0);
}
END_TEST

/* A message far longer than last_error: cut to its size, terminated. */
START_TEST(test_conn_error_long_message) {
    static tm_connector c;
    setup(&c);
    static char big[8192];
    memset(big, 'y', sizeof big - 1);
    tm_conn_error(&c, 0, "%s", big);
    ck_assert_uint_eq(strlen(c.last_error), sizeof c.last_error - 1);
    ck_assert_int_eq(c.last_error[0], 'y');
}
END_TEST

int main(void) {
    Suite *s = suite_create("conn_error");
    TCase *tc = tcase_create("conn_error");
    tcase_add_test(tc, test_conn_error_secret_at_the_cut);
    tcase_add_test(tc, test_conn_error_secret_inside);
    tcase_add_test(tc, test_conn_error_long_message);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 1);
}
