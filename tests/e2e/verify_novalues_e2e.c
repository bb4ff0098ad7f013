/* verify asks the sink's scan for no values (ABI 1.4 no_values): it
 * compares offsets and business keys only, so no sink need read, convert
 * or hold the rows' values for it.
 *
 * - verify_asks_no_values: a connector runs into the CSV test sink built
 *   so that its scan fails when asked for values (tests/sdk,
 *   CSV_SCAN_REFUSES_VALUES); `tidemark verify` must pass, having scanned
 *   every stored row (rows= in its report, checked against Kafka's own
 *   count of the records).
 *
 * usage: verify_novalues_e2e TIDEMARK_BIN PLUGIN_DIR SCENARIO
 * CSV_NOVALUES_PLUGIN */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"

static const char *plugin;

#define RECORDS 30

static void scenario_verify_asks_no_values(void) {
    const char *topic = h_name("verify-nv");
    char name[256], group[300], text[16384], out_dir[1024];
    snprintf(name, sizeof name, "%s", h_name("verify-nv"));
    snprintf(group, sizeof group, "tidemark-%s", name);
    snprintf(out_dir, sizeof out_dir, "%s/csv", h_workdir());
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, RECORDS, "{\"id\": %d, \"body\": \"b\"}");
    int64_t lo = -1, hi = -1;
    h_watermarks(topic, 0, &lo, &hi);
    H_CHECK(lo == 0 && hi == RECORDS,
            "inconclusive: the topic holds [%lld, %lld), expected [0, %d)",
            (long long)lo, (long long)hi, RECORDS);
    snprintf(text, sizeof text,
             "{\"name\": \"%s\",\n"
             " \"kafka\": {\"bootstrap_servers\": \"%s\", \"topics\": "
             "[\"%s\"], \"start\": \"earliest\", \"static_membership\": "
             "false},\n"
             " \"batch\": {\"max_records\": 10, \"max_wait_ms\": 100},\n"
             " \"sink\": {\"plugin\": \"%s\", \"settings\": {\"path\": "
             "\"%s\"}},\n"
             " \"state_dir\": \"%s/state\",\n"
             " \"mapping\": {\"mode\": \"json\", \"columns\": ["
             "{\"name\": \"id\", \"pointer\": \"/id\", \"type\": \"int\", "
             "\"required\": true},"
             "{\"name\": \"body\", \"pointer\": \"/body\", \"type\": "
             "\"text\"}]}}\n",
             name, h_bootstrap(), topic, plugin, out_dir, h_workdir());
    H_CHECK(mkdir(out_dir, 0700) == 0, "mkdir %s", out_dir);
    const char *cfg = h_write_file("nv.json", text);
    pid_t pid = h_spawn(cfg, "nv.log");
    /* Caught up: Kafka's own committed offset of the group reaches the
     * end (offsets go to the group only after the sink's commit). */
    int64_t deadline = h_now_ms() + 60000;
    while (h_group_offset(group, topic, 0) < RECORDS) {
        if (h_now_ms() > deadline) {
            h_dump_log("nv.log");
            h_fail("the connector did not commit %d records in 60 s", RECORDS);
        }
        h_sleep_ms(100);
    }
    h_stop_clean(pid);
    h_step("%d records stored by the CSV sink", RECORDS);

    const char *args[] = {"verify", cfg, NULL};
    int rc = h_tidemark("verify.out", args);
    const char *out = h_read_file("verify.out");
    H_CHECK(strstr(out, "asked for values") == NULL,
            "verify asked the sink's scan for values (exit %d):\n%s", rc, out);
    char want[128];
    snprintf(want, sizeof want, "kafka_records=%d rows=%d", RECORDS, RECORDS);
    H_CHECK(rc == 0 && strstr(out, want) && strstr(out, "result=OK"),
            "verify: exit %d, expected 0 with '%s' and 'result=OK':\n%s", rc,
            want, out);
    h_step("verify scanned %d rows without asking for values", RECORDS);
    rd_kafka_destroy(p);
}

static const h_scenario SCENARIOS[] = {
    {"verify_asks_no_values", scenario_verify_asks_no_values},
};

/* argv[4]: the csv plugin built without scan values (CSV_NOVALUES_PLUGIN). */
int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr,
                "usage: verify_novalues_e2e TIDEMARK_BIN PLUGIN_DIR SCENARIO "
                "CSV_NOVALUES_PLUGIN\n");
        return 2;
    }
    plugin = argv[4];
    return h_main(4, argv, "verify_novalues_e2e", SCENARIOS,
                  H_NSCENARIOS(SCENARIOS));
}
