/* The metrics module: the exposition format's label escaping, the
 * textfile's name checks and atomic write, the commit histogram's
 * buckets. The text as a whole is judged by prometheus_client's own
 * parser (metrics_parse.py). Expectations are written by hand. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "metrics/metrics_http.h"
#include "metrics/metrics_kafka.h"
#include "metrics/metrics_persist.h"
#include "metrics/metrics_registry.h"
#include "metrics/metrics_textfile.h"
#include "metrics/prom_text.h"

/* What FN wrote to a memory stream, in a static buffer. */
static char text[65536];
static FILE *mem_open(void) {
    memset(text, 0, sizeof text);
    FILE *f = fmemopen(text, sizeof text - 1, "w");
    ck_assert_ptr_nonnull(f);
    return f;
}

/* M's families, as a host saves and a reader writes them. */
static void write_registry(FILE *f, const tm_metrics_conn *m) {
    tm_metrics_values v;
    tm_metrics_snapshot(m, &v);
    const char *names[] = {m->name};
    const tm_metrics_values *vals[] = {&v};
    tm_metrics_values_write(f, names, vals, 1);
}

START_TEST(label_value_escaped) {
    FILE *f = mem_open();
    tm_prom_label_value(f, "a\"b\\c\nd}e,f=g\xc3\xa9");
    fclose(f);
    ck_assert_str_eq(text, "\"a\\\"b\\\\c\\nd}e,f=g\xc3\xa9\"");
}
END_TEST

START_TEST(sample_with_labels) {
    FILE *f = mem_open();
    const char *l[] = {"connector", "x\"y", "topic", "t"};
    tm_prom_sample_u64(f, "tidemark_x_total", l, 2, 18446744073709551615u);
    tm_prom_sample(f, "tidemark_y", NULL, 0, 0.25);
    fclose(f);
    ck_assert_str_eq(text, "tidemark_x_total{connector=\"x\\\"y\",topic=\"t\"}"
                           " 18446744073709551615\ntidemark_y 0.25\n");
}
END_TEST

START_TEST(textfile_names_checked) {
    char why[512];
    ck_assert_int_eq(tm_metrics_textfile_check("/tmp/m.txt", why, sizeof why),
                     -1);
    ck_assert_ptr_nonnull(strstr(why, "expected a file name ending in "
                                      "\".prom\""));
    ck_assert_int_eq(tm_metrics_textfile_check("/tmp/.prom", why, sizeof why),
                     -1);
    ck_assert_int_eq(
        tm_metrics_textfile_check("/nonexistent-dir/m.prom", why, sizeof why),
        -1);
    ck_assert_ptr_nonnull(strstr(why, "expected an existing directory"));
    ck_assert_int_eq(tm_metrics_textfile_check("/tmp/m.prom", why, sizeof why),
                     0);
}
END_TEST

START_TEST(textfile_written_whole_and_renamed) {
    char dir[] = "/tmp/tm-metrics-XXXXXX", path[256], tmp[300], why[512];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/tidemark.prom", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ck_assert_int_eq(
        tm_metrics_textfile_write(path, "a 1\n", 4, why, sizeof why), 0);
    ck_assert_int_eq(access(tmp, F_OK), -1); /* renamed away */
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char got[16] = "";
    ck_assert_ptr_nonnull(fgets(got, sizeof got, f));
    fclose(f);
    ck_assert_str_eq(got, "a 1\n");
    /* A link planted at the temporary name is never followed. */
    char victim[300];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    int fd = open(victim, O_WRONLY | O_CREAT, 0600);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(symlink(victim, tmp), 0);
    ck_assert_int_eq(
        tm_metrics_textfile_write(path, "b 2\n", 4, why, sizeof why), -1);
    struct stat st;
    ck_assert_int_eq(stat(victim, &st), 0);
    ck_assert_int_eq(st.st_size, 0);
    unlink(tmp);
    unlink(victim);
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(commit_histogram_buckets) {
    tm_metrics_registry_reset();
    tm_metrics_conn *m = tm_metrics_conn_get("c\"1");
    ck_assert_ptr_eq(m, tm_metrics_conn_get("c\"1"));
    tm_metrics_commit_observe(m, 3000000);     /* 3 ms: le 0.005 */
    tm_metrics_commit_observe(m, 5000000);     /* 5 ms: le 0.005 (<=) */
    tm_metrics_commit_observe(m, 20000000);    /* 20 ms: le 0.025 */
    tm_metrics_commit_observe(m, 40000000000); /* 40 s: +Inf only */
    tm_metrics_convert_observe(m, 1500);
    tm_metrics_error(m);
    tm_metrics_commit_observe(NULL, 1); /* ignored */
    FILE *f = mem_open();
    write_registry(f, m);
    fclose(f);
    const char *want[] = {
        "tidemark_commit_duration_seconds_bucket{connector=\"c\\\"1\","
        "le=\"0.005\"} 2\n",
        "le=\"0.01\"} 2\n",
        "le=\"0.025\"} 3\n",
        "le=\"30\"} 3\n",
        "le=\"+Inf\"} 4\n",
        "tidemark_commit_duration_seconds_sum{connector=\"c\\\"1\"} 40.028\n",
        "tidemark_commit_duration_seconds_count{connector=\"c\\\"1\"} 4\n",
        "tidemark_record_conversion_seconds_count{connector=\"c\\\"1\"} 1\n",
        "tidemark_errors_total{connector=\"c\\\"1\"} 1\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(text, want[i]), "missing %s in:\n%s", want[i],
                      text);
    tm_metrics_registry_reset();
}
END_TEST

/* A statistics document as librdkafka 2.0 writes it (cut to the fields
 * read): two partitions hold fetched records, the internal -1 is left
 * out. */
START_TEST(fetch_queue_from_statistics) {
    const char *doc =
        "{\"name\": \"c#consumer-1\", \"brokers\": {}, \"topics\": {"
        "\"orders\": {\"topic\": \"orders\", \"partitions\": {"
        "\"0\": {\"partition\": 0, \"fetchq_cnt\": 3, \"fetchq_size\": 300},"
        "\"1\": {\"partition\": 1, \"fetchq_cnt\": 1, \"fetchq_size\": 20},"
        "\"-1\": {\"partition\": -1, \"fetchq_cnt\": 9, \"fetchq_size\": "
        "999}}},"
        "\"other\": {\"partitions\": {\"0\": {\"partition\": 0, "
        "\"fetchq_cnt\": 2, \"fetchq_size\": 5}}}}}";
    int64_t bytes = -1, msgs = -1;
    ck_assert_int_eq(tm_metrics_fetchq_parse(doc, strlen(doc), &bytes, &msgs),
                     0);
    ck_assert_int_eq(bytes, 325);
    ck_assert_int_eq(msgs, 6);
    ck_assert_int_eq(tm_metrics_fetchq_parse("{\"x\": 1}", 8, &bytes, &msgs),
                     -1);
    ck_assert_int_eq(tm_metrics_fetchq_parse("nope", 4, &bytes, &msgs), -1);

    tm_metrics_registry_reset();
    tm_metrics_conn *m = tm_metrics_conn_get("c");
    FILE *f = mem_open();
    write_registry(f, m);
    fclose(f);
    /* No statistics yet: no sample (never a made-up 0). */
    ck_assert_ptr_null(strstr(text, "tidemark_consumer_fetch_queue_bytes{"));
    tm_metrics_kafka_stats(m, doc, strlen(doc));
    tm_metrics_kafka_stats(m, "nope", 4); /* changes nothing */
    f = mem_open();
    write_registry(f, m);
    fclose(f);
    ck_assert_ptr_nonnull(
        strstr(text, "tidemark_consumer_fetch_queue_bytes{connector=\"c\"} "
                     "325\n"));
    ck_assert_ptr_nonnull(strstr(
        text, "tidemark_consumer_fetch_queue_messages{connector=\"c\"} 6\n"));
    tm_metrics_registry_reset();
}
END_TEST

/* The figures a host saves read back whole; a malformed or linked file is
 * refused naming it, a missing one is "none". */
START_TEST(saved_figures_round_trip) {
    char sd[] = "/tmp/tm-metrics-sd-XXXXXX", dir[300], path[400], why[1024];
    ck_assert_ptr_nonnull(mkdtemp(sd));
    snprintf(dir, sizeof dir, "%s/conn", sd);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(path, sizeof path, "%s/metrics.json", dir);
    tm_metrics_values v;
    ck_assert_int_eq(tm_metrics_load(sd, "conn", &v, why, sizeof why), 1);

    tm_metrics_registry_reset();
    tm_metrics_conn *m = tm_metrics_conn_get("conn");
    tm_metrics_commit_observe(m, 7000000); /* le 0.01 */
    tm_metrics_commit_observe(m, 40000000000);
    tm_metrics_convert_observe(m, 42);
    tm_metrics_error(m);
    tm_metrics_error(m);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(tm_metrics_save_at(m, fd, dir, why, sizeof why), 0);
    ck_assert_int_eq(tm_metrics_load(sd, "conn", &v, why, sizeof why), 0);
    ck_assert_uint_eq(v.commit_buckets[1], 1);
    ck_assert_uint_eq(v.commit_buckets[TM_METRICS_COMMIT_BUCKETS], 1);
    ck_assert_uint_eq(v.commit_count, 2);
    ck_assert_uint_eq(v.commit_ns, 40007000000u);
    ck_assert_uint_eq(v.convert_count, 1);
    ck_assert_uint_eq(v.convert_ns, 42);
    ck_assert_uint_eq(v.errors, 2);
    ck_assert_int_eq(v.fetchq_bytes, -1);

    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"format\": 1, \"errors\": 1}", f);
    fclose(f);
    ck_assert_int_eq(tm_metrics_load(sd, "conn", &v, why, sizeof why), -1);
    ck_assert_msg(strstr(why, path) != NULL, "%s", why);

    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(symlink("/etc/passwd", path), 0);
    ck_assert_int_eq(tm_metrics_load(sd, "conn", &v, why, sizeof why), -1);
    ck_assert_msg(strstr(why, "symbolic link") != NULL, "%s", why);
    /* Saving does not follow a link planted at the temporary name. */
    char tmp[420];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ck_assert_int_eq(symlink("/etc/passwd", tmp), 0);
    ck_assert_int_eq(tm_metrics_save_at(m, fd, dir, why, sizeof why), -1);
    close(fd);
    unlink(tmp);
    unlink(path);
    rmdir(dir);
    rmdir(sd);
    tm_metrics_registry_reset();
}
END_TEST

/* The listener binds loopback only: anything else is refused before
 * anything starts. */
START_TEST(listen_address_loopback_only) {
    int family, port;
    unsigned char ip[16];
    char why[512];
    ck_assert_int_eq(tm_metrics_listen_parse("127.0.0.1:9100", &family, ip,
                                             &port, why, sizeof why),
                     0);
    ck_assert_int_eq(port, 9100);
    ck_assert_int_eq(ip[0], 127);
    ck_assert_int_eq(ip[3], 1);
    ck_assert_int_eq(
        tm_metrics_listen_parse("[::1]:1", &family, ip, &port, why, sizeof why),
        0);
    ck_assert_int_eq(ip[15], 1);
    const char *bad[] = {"0.0.0.0:9100", "10.0.0.1:9100",  "localhost:9100",
                         "127.0.0.1",    "127.0.0.1:",     "127.0.0.1:65536",
                         "127.0.0.1:0",  "127.0.0.1:9x",   "[::]:9100",
                         "::1:9100",     "127.0.0.2:9100", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(tm_metrics_listen_parse(bad[i], &family, ip, &port, why,
                                              sizeof why) == -1,
                      "%s accepted", bad[i]);
        ck_assert_ptr_nonnull(strstr(why, "expected a loopback address"));
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, label_value_escaped);
    tcase_add_test(tc, sample_with_labels);
    tcase_add_test(tc, textfile_names_checked);
    tcase_add_test(tc, textfile_written_whole_and_renamed);
    tcase_add_test(tc, commit_histogram_buckets);
    tcase_add_test(tc, fetch_queue_from_statistics);
    tcase_add_test(tc, saved_figures_round_trip);
    tcase_add_test(tc, listen_address_loopback_only);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
