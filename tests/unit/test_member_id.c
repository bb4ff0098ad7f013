/* Static group membership: $.kafka.static_membership in the config, and the
 * group.instance.id kept in the state directory (host/kafka/member_id.h):
 * made once, atomically, reused, a corrupt file refused and left alone. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/connector_config.h"
#include "kafka/member_id.h"
#include "kafka/subscription.h"
#include "check_main.h"
#include "config_ok.h"

#define CONFIG(kafka_extra, props)                                             \
    "{\"name\":\"orders\","                                                    \
    " \"kafka\":{\"bootstrap_servers\":\"localhost:9092\","                    \
    "            \"topics\":[\"orders\"]" kafka_extra                          \
    "            ,\"properties\":{" props "}},"                                \
    " \"sink\":{\"plugin\":\"sqlite\","                                        \
    "           \"settings\":{\"path\":\"/tmp/x.db\",\"table\":\"t\"}},"       \
    " \"mapping\":{\"mode\":\"raw\"}}"

static tm_connector_config *load_ok(const char *text) {
    return tm_test_config_ok(text, "t.json");
}

static void load_refused(const char *text, const char *line) {
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    tm_connector_config *cfg = tm_config_load_string(text, "t.json", &errs);
    ck_assert_ptr_null(cfg);
    ck_assert_msg(errs.count == 1 && strcmp(errs.lines[0], line) == 0,
                  "expected the one line\n  %s\ngot %zu, first: %s", line,
                  errs.count, errs.count ? errs.lines[0] : "(none)");
    tm_config_errors_free(&errs);
}

START_TEST(static_membership_setting) {
    tm_connector_config *cfg = load_ok(CONFIG("", ""));
    ck_assert_int_eq(cfg->kafka.static_membership, 1);
    ck_assert_int_eq(tm_member_id_wanted(cfg), 1);
    tm_config_free(cfg);

    cfg = load_ok(CONFIG(",\"static_membership\":false", ""));
    ck_assert_int_eq(cfg->kafka.static_membership, 0);
    ck_assert_int_eq(tm_member_id_wanted(cfg), 0);
    tm_config_free(cfg);

    /* The user's own id wins: nothing is made for it. */
    cfg = load_ok(CONFIG("", "\"group.instance.id\":\"mine\""));
    ck_assert_int_eq(tm_member_id_wanted(cfg), 0);
    tm_config_free(cfg);
    cfg = load_ok(CONFIG(",\"static_membership\":true",
                         "\"group.instance.id\":\"mine\""));
    ck_assert_int_eq(tm_member_id_wanted(cfg), 0);
    tm_config_free(cfg);

    load_refused(CONFIG(",\"static_membership\":\"no\"", ""),
                 "$.kafka.static_membership: expected a boolean, found "
                 "string \"no\"");
    load_refused(
        CONFIG(",\"static_membership\":false", "\"group.instance.id\":\"x\""),
        "$.kafka.static_membership: expected true or no "
        "\"static_membership\" when $.kafka.properties[\"group.instance.id\"] "
        "is set, found false (a member id makes the member static: remove "
        "one of the two)");
    load_refused(CONFIG(",\"static_membershp\":true", ""),
                 "$.kafka.static_membershp: unknown setting (did you mean "
                 "\"static_membership\"?)");
}
END_TEST

typedef struct dir {
    char path[256];
    int fd;
} dir;

static void dir_new(dir *d) {
    snprintf(d->path, sizeof d->path, "/tmp/tm-member-id-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(d->path));
    d->fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(d->fd, 0);
}

static void dir_free(dir *d) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->path);
    ck_assert_int_eq(system(cmd), 0);
    close(d->fd);
}

static void write_text(const dir *d, const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", d->path, name);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static int exists(const dir *d, const char *name) {
    struct stat st;
    return fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

START_TEST(made_once_then_reused) {
    dir d;
    dir_new(&d);
    char id[300], again[300], other[300], err[1024];
    ck_assert_int_eq(tm_member_id_get(d.fd, d.path, "orders", 0, id, sizeof id,
                                      err, sizeof err),
                     0);
    ck_assert_msg(!exists(&d, TM_MEMBER_ID_FILE), "made without create");
    ck_assert_int_eq(tm_member_id_get(d.fd, d.path, "orders", 1, id, sizeof id,
                                      err, sizeof err),
                     1);
    ck_assert_msg(strncmp(id, "tidemark-orders-", 16) == 0 &&
                      strlen(id) == 32 &&
                      strspn(id + 16, "0123456789abcdef") == 16,
                  "id %s", id);
    ck_assert_msg(!exists(&d, TM_MEMBER_ID_FILE ".tmp"), "temp file left");
    ck_assert_int_eq(tm_member_id_get(d.fd, d.path, "orders", 1, again,
                                      sizeof again, err, sizeof err),
                     1);
    ck_assert_str_eq(id, again);
    /* Another directory (another host): another id. */
    dir d2;
    dir_new(&d2);
    ck_assert_int_eq(tm_member_id_get(d2.fd, d2.path, "orders", 1, other,
                                      sizeof other, err, sizeof err),
                     1);
    ck_assert_str_ne(id, other);
    dir_free(&d2);
    dir_free(&d);
}
END_TEST

/* Each way a file can be wrong is refused by name, and left as it was. */
START_TEST(corrupt_refused_not_replaced) {
    static const char *const BAD[] = {
        "",
        "tidemark-orders-0123456789abcdef",         /* no newline */
        "tidemark-orders-0123456789abcde\n",        /* a digit short */
        "tidemark-orders-0123456789ABCDEF\n",       /* not ours */
        "tidemark-other-0123456789abcdef\n",        /* another connector */
        "tidemark-orders-0123456789abcdef\nmore\n", /* trailing text */
        "tidemark-orders-0123456789abcdef\n\n",     /* a blank line */
        "tidemark-orders-0123456789abcdeg\n",       /* not hex */
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        dir d;
        dir_new(&d);
        write_text(&d, TM_MEMBER_ID_FILE, BAD[i]);
        char id[300], err[1024], want[600];
        ck_assert_int_eq(tm_member_id_get(d.fd, d.path, "orders", 1, id,
                                          sizeof id, err, sizeof err),
                         -1);
        snprintf(want, sizeof want,
                 "%s/member.id is corrupt: expected one "
                 "line \"tidemark-orders-\" and 16 hex digits",
                 d.path);
        ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "case %zu: %s", i,
                      err);
        char p[512], back[128] = "";
        snprintf(p, sizeof p, "%s/%s", d.path, TM_MEMBER_ID_FILE);
        FILE *f = fopen(p, "r");
        ck_assert_ptr_nonnull(f);
        size_t n = fread(back, 1, sizeof back - 1, f);
        fclose(f);
        ck_assert_msg(n == strlen(BAD[i]) && memcmp(back, BAD[i], n) == 0,
                      "case %zu: the file was changed", i);
        dir_free(&d);
    }
}
END_TEST

START_TEST(unreadable_refused) {
    dir d;
    dir_new(&d);
    char id[300], err[1024];
    /* A link planted in the state directory is never followed. */
    ck_assert_int_eq(symlinkat("/etc/hostname", d.fd, TM_MEMBER_ID_FILE), 0);
    ck_assert_int_eq(tm_member_id_get(d.fd, d.path, "orders", 1, id, sizeof id,
                                      err, sizeof err),
                     -1);
    ck_assert_msg(strstr(err, "is a symbolic link: refused") != NULL, "%s",
                  err);
    ck_assert_int_eq(unlinkat(d.fd, TM_MEMBER_ID_FILE, 0), 0);
    /* A directory in its place. */
    ck_assert_int_eq(mkdirat(d.fd, TM_MEMBER_ID_FILE, 0700), 0);
    ck_assert_int_eq(tm_member_id_get(d.fd, d.path, "orders", 1, id, sizeof id,
                                      err, sizeof err),
                     -1);
    ck_assert_msg(strstr(err, "member.id") != NULL, "%s", err);
    dir_free(&d);
}
END_TEST

START_TEST(applied_to_the_consumer_conf) {
    dir d;
    dir_new(&d);
    char id[300], err[1024], got[300];
    size_t n = sizeof got;
    tm_connector_config *cfg = load_ok(CONFIG("", ""));
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    int rotated = -1;
    ck_assert_int_eq(tm_member_id_apply(conf, cfg, d.fd, d.path, NULL, id,
                                        sizeof id, &rotated, err, sizeof err),
                     0);
    ck_assert_int_eq(rd_kafka_conf_get(conf, "group.instance.id", got, &n),
                     RD_KAFKA_CONF_OK);
    ck_assert_str_eq(got, id);
    rd_kafka_conf_destroy(conf);
    tm_config_free(cfg);

    /* Opted out: no id, no file. */
    dir d2;
    dir_new(&d2);
    cfg = load_ok(CONFIG(",\"static_membership\":false", ""));
    conf = rd_kafka_conf_new();
    ck_assert_int_eq(tm_member_id_apply(conf, cfg, d2.fd, d2.path, NULL, id,
                                        sizeof id, &rotated, err, sizeof err),
                     0);
    ck_assert_str_eq(id, "");
    n = sizeof got;
    got[0] = '\0';
    /* Unset: librdkafka reports no value (or an empty one). */
    ck_assert_msg(rd_kafka_conf_get(conf, "group.instance.id", got, &n) !=
                          RD_KAFKA_CONF_OK ||
                      got[0] == '\0',
                  "opted out, yet group.instance.id is %s", got);
    ck_assert_msg(!exists(&d2, TM_MEMBER_ID_FILE), "opted out, yet made");
    rd_kafka_conf_destroy(conf);
    tm_config_free(cfg);
    dir_free(&d2);
    dir_free(&d);
}
END_TEST

/* The whole text of member.id in d ("" when missing). */
static void read_text(dir *d, char *out, size_t size) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", d->path, TM_MEMBER_ID_FILE);
    out[0] = '\0';
    FILE *f = fopen(p, "r");
    if (!f)
        return;
    size_t n = fread(out, 1, size - 1, f);
    out[n] = '\0';
    fclose(f);
}

#define FP_A "0123456789abcdef"
#define FP_B "fedcba9876543210"

/* The id is kept while the subscription's fingerprint is the one stored
 * with it; a different one, an unknown one (NULL) or none stored (a file
 * of an earlier version) takes a new id, written with the fingerprint. */
START_TEST(rotated_when_the_subscription_changes) {
    dir d;
    dir_new(&d);
    char id[300], again[300], err[1024], text[512], want[512];
    int rotated = -1;
    ck_assert_int_eq(tm_member_id_for(d.fd, d.path, "orders", FP_A, id,
                                      sizeof id, &rotated, err, sizeof err),
                     1);
    ck_assert_int_eq(rotated, 0); /* the first: nothing replaced */
    read_text(&d, text, sizeof text);
    snprintf(want, sizeof want, "%s\nsubscription " FP_A "\n", id);
    ck_assert_str_eq(text, want);

    ck_assert_int_eq(tm_member_id_for(d.fd, d.path, "orders", FP_A, again,
                                      sizeof again, &rotated, err, sizeof err),
                     1);
    ck_assert_int_eq(rotated, 0);
    ck_assert_str_eq(again, id);

    ck_assert_int_eq(tm_member_id_for(d.fd, d.path, "orders", FP_B, again,
                                      sizeof again, &rotated, err, sizeof err),
                     1);
    ck_assert_int_eq(rotated, 1);
    ck_assert_str_ne(again, id);
    read_text(&d, text, sizeof text);
    snprintf(want, sizeof want, "%s\nsubscription " FP_B "\n", again);
    ck_assert_str_eq(text, want);

    /* Unknown: rotated, no fingerprint kept, so rotated again next time. */
    snprintf(id, sizeof id, "%s", again);
    ck_assert_int_eq(tm_member_id_for(d.fd, d.path, "orders", NULL, again,
                                      sizeof again, &rotated, err, sizeof err),
                     1);
    ck_assert_int_eq(rotated, 1);
    ck_assert_str_ne(again, id);
    read_text(&d, text, sizeof text);
    snprintf(want, sizeof want, "%s\n", again);
    ck_assert_str_eq(text, want);
    /* A one-line file (an earlier version's): read as it was... */
    ck_assert_int_eq(tm_member_id_get(d.fd, d.path, "orders", 0, id, sizeof id,
                                      err, sizeof err),
                     1);
    ck_assert_str_eq(id, again);
    /* ...and rotated once under a known subscription. */
    ck_assert_int_eq(tm_member_id_for(d.fd, d.path, "orders", FP_A, again,
                                      sizeof again, &rotated, err, sizeof err),
                     1);
    ck_assert_int_eq(rotated, 1);
    ck_assert_str_ne(again, id);
    dir_free(&d);
}
END_TEST

/* A second line that is not "subscription " and 16 hex digits: corrupt,
 * refused and left as it was, never rotated over. */
START_TEST(corrupt_subscription_refused) {
    static const char *const BAD[] = {
        "tidemark-orders-0123456789abcdef\nsubscription 0123456789abcde\n",
        "tidemark-orders-0123456789abcdef\nsubscription 0123456789abcdef",
        "tidemark-orders-0123456789abcdef\nsubscriptio 0123456789abcdef\n",
        "tidemark-orders-0123456789abcdef\nsubscription 0123456789ABCDEF\n",
        "tidemark-orders-0123456789abcdef\nsubscription 0123456789abcdef\n\n",
    };
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        dir d;
        dir_new(&d);
        write_text(&d, TM_MEMBER_ID_FILE, BAD[i]);
        char id[300], err[1024], text[512];
        int rotated = -1;
        ck_assert_int_eq(tm_member_id_for(d.fd, d.path, "orders", FP_A, id,
                                          sizeof id, &rotated, err, sizeof err),
                         -1);
        ck_assert_msg(strstr(err, "member.id is corrupt") != NULL,
                      "case %zu: %s", i, err);
        read_text(&d, text, sizeof text);
        ck_assert_msg(strcmp(text, BAD[i]) == 0, "case %zu: changed", i);
        dir_free(&d);
    }
}
END_TEST

/* The guard's remedy: a new id without a fingerprint; nothing when there
 * is no file. */
START_TEST(forget_takes_a_new_id) {
    dir d;
    dir_new(&d);
    char id[300], now[300], err[1024], text[512];
    ck_assert_int_eq(tm_member_id_forget_subscription(d.fd, d.path, "orders",
                                                      NULL, err, sizeof err),
                     0);
    ck_assert_msg(!exists(&d, TM_MEMBER_ID_FILE), "forget made a file");
    int rotated = -1;
    ck_assert_int_eq(tm_member_id_for(d.fd, d.path, "orders", FP_A, id,
                                      sizeof id, &rotated, err, sizeof err),
                     1);
    ck_assert_int_eq(tm_member_id_forget_subscription(d.fd, d.path, "orders",
                                                      NULL, err, sizeof err),
                     0);
    ck_assert_int_eq(tm_member_id_get(d.fd, d.path, "orders", 0, now,
                                      sizeof now, err, sizeof err),
                     1);
    ck_assert_str_ne(now, id);
    read_text(&d, text, sizeof text);
    ck_assert_ptr_null(strstr(text, "subscription"));
    dir_free(&d);
}
END_TEST

/* Forgotten with the subscription it is for, the new id is kept by the
 * next start under that subscription: not rotated once more. */
START_TEST(forget_with_the_subscription_keeps_the_new_id) {
    dir d;
    dir_new(&d);
    char id[300], fresh[300], again[300], err[1024];
    int rotated = -1;
    ck_assert_int_eq(tm_member_id_for(d.fd, d.path, "orders", FP_A, id,
                                      sizeof id, &rotated, err, sizeof err),
                     1);
    ck_assert_int_eq(tm_member_id_forget_subscription(d.fd, d.path, "orders",
                                                      FP_A, err, sizeof err),
                     0);
    ck_assert_int_eq(tm_member_id_get(d.fd, d.path, "orders", 0, fresh,
                                      sizeof fresh, err, sizeof err),
                     1);
    ck_assert_str_ne(fresh, id);
    ck_assert_int_eq(tm_member_id_for(d.fd, d.path, "orders", FP_A, again,
                                      sizeof again, &rotated, err, sizeof err),
                     1);
    ck_assert_str_eq(again, fresh);
    ck_assert_int_eq(rotated, 0);
    dir_free(&d);
}
END_TEST

#define TOPICS_CONFIG(list)                                                    \
    "{\"name\":\"orders\","                                                    \
    " \"kafka\":{\"bootstrap_servers\":\"localhost:9092\","                    \
    "            \"topics\":" list "},"                                        \
    " \"sink\":{\"plugin\":\"sqlite\","                                        \
    "           \"settings\":{\"path\":\"/tmp/x.db\",\"table\":\"t\"}},"       \
    " \"mapping\":{\"mode\":\"raw\"}}"

/* The fingerprint of a topics list with the partitions of ALL. */
static void hash_of(const char *text, rd_kafka_topic_partition_list_t *all,
                    char *out) {
    tm_connector_config *cfg = load_ok(text);
    ck_assert_int_eq(
        tm_subscription_hash(cfg, all, out, TM_SUBSCRIPTION_HEX + 1), 0);
    ck_assert_uint_eq(strlen(out), TM_SUBSCRIPTION_HEX);
    tm_config_free(cfg);
}

/* Reordering $.kafka.topics (or naming a topic twice) is the same
 * subscription: the static member id is kept. Another topic is not. */
START_TEST(topics_order_keeps_the_fingerprint) {
    rd_kafka_topic_partition_list_t *all = rd_kafka_topic_partition_list_new(2);
    ck_assert_ptr_nonnull(all);
    rd_kafka_topic_partition_list_add(all, "a", 0);
    rd_kafka_topic_partition_list_add(all, "b", 0);
    char ab[TM_SUBSCRIPTION_HEX + 1], ba[TM_SUBSCRIPTION_HEX + 1],
        aba[TM_SUBSCRIPTION_HEX + 1], abc[TM_SUBSCRIPTION_HEX + 1];
    hash_of(TOPICS_CONFIG("[\"a\",\"b\"]"), all, ab);
    hash_of(TOPICS_CONFIG("[\"b\",\"a\"]"), all, ba);
    hash_of(TOPICS_CONFIG("[\"a\",\"b\",\"a\"]"), all, aba);
    hash_of(TOPICS_CONFIG("[\"a\",\"b\",\"c\"]"), all, abc);
    ck_assert_str_eq(ba, ab);
    ck_assert_str_eq(aba, ab);
    ck_assert_str_ne(abc, ab);
    rd_kafka_topic_partition_list_destroy(all);
}
END_TEST

int main(void) {
    Suite *s = suite_create("member_id");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, static_membership_setting);
    tcase_add_test(tc, made_once_then_reused);
    tcase_add_test(tc, corrupt_refused_not_replaced);
    tcase_add_test(tc, unreadable_refused);
    tcase_add_test(tc, applied_to_the_consumer_conf);
    tcase_add_test(tc, rotated_when_the_subscription_changes);
    tcase_add_test(tc, corrupt_subscription_refused);
    tcase_add_test(tc, forget_takes_a_new_id);
    tcase_add_test(tc, forget_with_the_subscription_keeps_the_new_id);
    tcase_add_test(tc, topics_order_keeps_the_fingerprint);
    suite_add_tcase(s, tc);
    return tm_check_run(s, 1);
}
