/* End-to-end scenarios of static group membership (docs/operations.md,
 * "Restarts and static membership"): the group.instance.id a host keeps in
 * its state directory, against the real broker and the real binary. Each
 * scenario is one ctest test, e2e.static.<scenario>. Every verdict is read
 * from the database's rows, the broker's group description and the state
 * directory's files, never from the host's counters. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#define JSON_MAPPING                                                           \
    "\"mapping\": {\"mode\": \"json\", \"columns\": ["                         \
    "{\"name\": \"id\", \"pointer\": \"/id\", \"type\": \"int\", "             \
    "\"required\": true},"                                                     \
    "{\"name\": \"name\", \"pointer\": \"/name\", \"type\": \"text\"}]}"

/* A SQLite connector's config in the work dir, its state in
 * WORKDIR/STATE. kafka_extra goes into $.kafka (", \"key\": value"). */
static const char *config(const char *file, const char *name, const char *topic,
                          const char *db, const char *state,
                          const char *kafka_extra, const char *props) {
    static char text[8192];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\",\n"
             " \"kafka\": {\"bootstrap_servers\": \"%s\", \"topics\": "
             "[\"%s\"], \"start\": \"earliest\"%s,\n"
             "           \"properties\": {%s}},\n"
             " \"batch\": {\"max_records\": 20, \"max_wait_ms\": 100},\n"
             " \"sink\": {\"plugin\": \"sqlite\", \"settings\": {\"path\": "
             "\"%s\", \"table\": \"t\"}},\n"
             " \"state_dir\": \"%s/%s\",\n"
             " " JSON_MAPPING "}\n",
             name, h_bootstrap(), topic, kafka_extra ? kafka_extra : "",
             props ? props : "", db, h_workdir(), state);
    return h_write_file(file, text);
}

static int64_t rows(const char *db) {
    return h_sqlf(db, "SELECT count(*) FROM t");
}

/* Every row is one Kafka record, none twice, all of them there. */
static void check_exactly_once(const char *db, int64_t want) {
    int64_t n = rows(db);
    int64_t distinct = h_sqlf(db, "SELECT count(*) FROM (SELECT DISTINCT "
                                  "_tm_partition, _tm_offset FROM t)");
    int64_t ids = h_sqlf(db, "SELECT count(DISTINCT id) FROM t");
    H_CHECK(n == want, "rows: %lld, expected %lld", (long long)n,
            (long long)want);
    H_CHECK(distinct == n && ids == n,
            "%lld rows but %lld distinct offsets and %lld distinct ids: "
            "duplicates",
            (long long)n, (long long)distinct, (long long)ids);
}

static void wait_rows(const char *db, int64_t at_least, int timeout_ms,
                      const char *what) {
    int64_t t0 = h_now_ms();
    while (rows(db) < at_least) {
        H_CHECK(h_now_ms() - t0 < timeout_ms,
                "%s: fewer than %lld rows after %d ms", what,
                (long long)at_least, timeout_ms);
        h_sleep_ms(20);
    }
}

/* The member.id file of CONNECTOR under WORKDIR/STATE: its text, or ""
 * when there is none. */
static const char *member_file(const char *state, const char *connector,
                               char *out, size_t size) {
    char rel[1024];
    snprintf(rel, sizeof rel, "%s/%s/member.id", state, connector);
    const char *path = h_path(rel);
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return out;
    size_t n = fread(out, 1, size - 1, f);
    out[n] = '\0';
    fclose(f);
    return out;
}

/* Waits until the group has members owning every partition; returns the
 * owner of partition 0 in out. */
static int wait_owned(const char *group, const char *topic, int partitions,
                      char *out, size_t size, int timeout_ms) {
    int64_t t0 = h_now_ms();
    for (;;) {
        char owners[8][H_OWNER_MAX];
        int members = h_group_owners(group, topic, partitions, owners);
        int all = members > 0;
        for (int p = 0; p < partitions; p++)
            all = all && owners[p][0];
        if (all) {
            snprintf(out, size, "%s", owners[0]);
            return members;
        }
        H_CHECK(h_now_ms() - t0 < timeout_ms,
                "group %s: not every partition owned after %d ms (%d "
                "members)",
                group, timeout_ms, members);
        h_sleep_ms(200);
    }
}

/* The operator's soak, shortened: a backlog, a SIGKILL in the middle of
 * it, a restart at once. With the default session timeout (45 s, nothing
 * set here) a dynamic member's partitions came back only once the broker
 * had timed the dead member out: the restarted host applied nothing for
 * about 45 s. A static member gets them back at once. The bound (10 s) is
 * far above the goal (2 s) so that a loaded machine passes, and far below
 * the 45 s it replaces. */
static void scenario_restart_backlog(void) {
    const char *topic = h_name("static-rb");
    char name[256], group[300];
    snprintf(name, sizeof name, "%s", h_name("static-rb"));
    snprintf(group, sizeof group, "tidemark-%s", name);
    h_create_topic(topic, 2, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    const int per_part = 100000;
    for (int part = 0; part < 2; part++)
        h_produce_many(p, topic, part, part * 1000000, per_part,
                       "{\"id\": %d, \"name\": \"backlog\"}");
    const int64_t total = 2 * (int64_t)per_part;
    char db[4096]; /* h_path's buffers are reused */
    snprintf(db, sizeof db, "%s", h_path("rb.db"));
    const char *cfg = config("rb.json", name, topic, db, "state", NULL, NULL);
    pid_t pid = h_spawn(cfg, "rb1.log");
    wait_rows(db, 2000, 60000, "first host");
    int rc = h_stop(pid, SIGKILL, 5000, NULL);
    H_CHECK(rc == 128 + SIGKILL, "the host was not SIGKILLed (exit %d)", rc);
    int64_t at_kill = rows(db);
    H_CHECK(at_kill > 0 && at_kill < total / 2,
            "inconclusive: %lld of %lld rows at the SIGKILL (not mid-backlog)",
            (long long)at_kill, (long long)total);
    int64_t t_start = h_now_ms();
    pid = h_spawn(cfg, "rb2.log");
    /* The first commit after the restart: the database's row count grows
     * past what the killed host left. Waited for up to 120 s, so that the
     * old behaviour prints its figure instead of only failing. */
    int64_t first_ms = -1;
    while (h_now_ms() - t_start < 120000) {
        if (rows(db) > at_kill) {
            first_ms = h_now_ms() - t_start;
            break;
        }
        h_sleep_ms(10);
    }
    H_CHECK(first_ms >= 0, "no commit within 120 s of the restart");
    int64_t at_first = rows(db);
    h_step("SIGKILL at %lld of %lld rows; restarted: first commit after "
           "%lld ms (%lld rows then)",
           (long long)at_kill, (long long)total, (long long)first_ms,
           (long long)at_first);
    H_CHECK(at_first < total,
            "inconclusive: the whole backlog was applied by the first commit "
            "after the restart");
    H_CHECK(first_ms <= 10000,
            "first commit %lld ms after the restart: the partitions did not "
            "come back at once (more than 10 s)",
            (long long)first_ms);
    h_wait_caught_up(db, name, topic, 2, 180000);
    check_exactly_once(db, total);
    char owner[H_OWNER_MAX], file[512];
    wait_owned(group, topic, 2, owner, sizeof owner, 30000);
    member_file("state", name, file, sizeof file);
    H_CHECK(file[0] && strncmp(owner, file, strlen(owner)) == 0 &&
                file[strlen(owner)] == '\n',
            "the group's member is \"%s\", not the id of member.id (\"%s\")",
            owner, file);
    h_stop_clean(pid);
    rd_kafka_destroy(p);
}

/* The id's life: validate makes no file, run makes it (one line,
 * "tidemark-NAME-" and 16 hex digits) and joins the group with it, a
 * restart reuses it, two connectors of one process have their own, a
 * corrupt file is refused by name and left as it was. */
static void scenario_member_id(void) {
    const char *topic = h_name("static-id");
    char a[256], b[256], ga[300];
    snprintf(a, sizeof a, "%s", h_name("static-ida"));
    snprintf(b, sizeof b, "%s", h_name("static-idb"));
    snprintf(ga, sizeof ga, "tidemark-%s", a);
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 100, "{\"id\": %d, \"name\": \"n\"}");
    char db_a[4096]; /* h_path's buffers are reused */
    snprintf(db_a, sizeof db_a, "%s", h_path("ida.db"));
    char cfg_a[4096], cfg_b[4096];
    snprintf(cfg_a, sizeof cfg_a, "%s",
             config("ida.json", a, topic, db_a, "state", NULL, NULL));
    snprintf(
        cfg_b, sizeof cfg_b, "%s",
        config("idb.json", b, topic, h_path("idb.db"), "state", NULL, NULL));
    char id1[512], id2[512], idb[512];

    const char *validate[] = {"validate", cfg_a, cfg_b, NULL};
    int rc = h_tidemark("validate.out", validate);
    H_CHECK(rc == 0, "validate: exit %d\n%s", rc, h_read_file("validate.out"));
    H_CHECK(!member_file("state", a, id1, sizeof id1)[0],
            "validate created member.id: \"%s\"", id1);

    pid_t pid = h_spawn2(cfg_a, cfg_b, "id1.log");
    h_wait_caught_up(db_a, a, topic, 1, 60000);
    member_file("state", a, id1, sizeof id1);
    member_file("state", b, idb, sizeof idb);
    char want[300];
    snprintf(want, sizeof want, "tidemark-%s-", a);
    size_t n = strlen(want);
    H_CHECK(strncmp(id1, want, n) == 0 && strlen(id1) == n + 17 &&
                strspn(id1 + n, "0123456789abcdef") == 16 &&
                id1[n + 16] == '\n',
            "member.id of %s: \"%s\", expected \"%s\" and 16 hex digits", a,
            id1, want);
    H_CHECK(idb[0] && strcmp(id1, idb) != 0,
            "two connectors of one process: ids \"%s\" and \"%s\"", id1, idb);
    char owner[H_OWNER_MAX];
    wait_owned(ga, topic, 1, owner, sizeof owner, 30000);
    H_CHECK(strlen(owner) == n + 16 && strncmp(owner, id1, n + 16) == 0,
            "group %s's member is \"%s\", member.id says \"%s\"", ga, owner,
            id1);
    rc = h_stop(pid, SIGKILL, 5000, NULL);
    H_CHECK(rc == 128 + SIGKILL, "not SIGKILLed (exit %d)", rc);

    pid = h_spawn(cfg_a, "id2.log");
    h_produce_many(p, topic, 0, 100, 50, "{\"id\": %d, \"name\": \"n\"}");
    h_wait_caught_up(db_a, a, topic, 1, 60000);
    member_file("state", a, id2, sizeof id2);
    H_CHECK(strcmp(id1, id2) == 0,
            "member.id changed on restart: \"%s\" -> "
            "\"%s\"",
            id1, id2);
    check_exactly_once(db_a, 150);
    h_stop_clean(pid);
    h_step("member.id %.*s made by run (not validate), kept across a "
           "SIGKILL; the other connector's differs",
           (int)strlen(id1) - 1, id1);

    /* One hex digit cut: refused, not replaced. */
    char rel[1024];
    snprintf(rel, sizeof rel, "state/%s/member.id", a);
    FILE *f = fopen(h_path(rel), "w");
    H_CHECK(f != NULL, "cannot write %s", h_path(rel));
    fprintf(f, "%.*s\n", (int)strlen(id1) - 2, id1);
    fclose(f);
    char before[512];
    member_file("state", a, before, sizeof before);
    pid = h_spawn(cfg_a, "id3.log");
    rc = h_stop(pid, 0, 30000, NULL);
    const char *log = h_read_file("id3.log");
    H_CHECK(rc == 1, "a corrupt member.id: exit %d, expected 1\n%s", rc, log);
    H_CHECK(strstr(log, "member.id is corrupt") != NULL,
            "a corrupt member.id: the log does not say so:\n%s", log);
    member_file("state", a, id2, sizeof id2);
    H_CHECK(strcmp(before, id2) == 0,
            "the corrupt member.id was replaced: \"%s\" -> \"%s\"", before,
            id2);
    check_exactly_once(db_a, 150);
    h_step("a corrupt member.id refused (exit 1, named in the log), kept");
    rd_kafka_destroy(p);
}

/* $.kafka.static_membership false: no file, a dynamic member (the group
 * names it by client.id/member id), which leaves the group on a stop. */
static void scenario_opt_out(void) {
    const char *topic = h_name("static-out");
    char name[256], group[300];
    snprintf(name, sizeof name, "%s", h_name("static-out"));
    snprintf(group, sizeof group, "tidemark-%s", name);
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 100, "{\"id\": %d, \"name\": \"n\"}");
    char db[4096]; /* h_path's buffers are reused */
    snprintf(db, sizeof db, "%s", h_path("out.db"));
    const char *cfg = config("out.json", name, topic, db, "state",
                             ", \"static_membership\": false", NULL);
    pid_t pid = h_spawn(cfg, "out.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    char owner[H_OWNER_MAX], file[512];
    wait_owned(group, topic, 1, owner, sizeof owner, 30000);
    char client[300];
    snprintf(client, sizeof client, "tidemark-%s/", name);
    H_CHECK(strncmp(owner, client, strlen(client)) == 0,
            "opted out, yet the group's member is \"%s\" (expected a "
            "dynamic member, \"%s...\")",
            owner, client);
    H_CHECK(!member_file("state", name, file, sizeof file)[0],
            "opted out, yet member.id was made: \"%s\"", file);
    h_stop_clean(pid);
    /* A dynamic member leaves on close: the group is empty at once. */
    H_CHECK(h_group_owners(group, topic, 0, NULL) == 0,
            "opted out: the group still has a member after a clean stop");
    check_exactly_once(db, 100);
    h_step("opted out: dynamic member %s, no member.id, left on stop", owner);
    rd_kafka_destroy(p);
}

/* Two hosts of one connector on different state directories (two
 * machines): different ids, so neither fences the other; both are members
 * and the records are applied once. */
static void scenario_two_state_dirs(void) {
    const char *topic = h_name("static-two");
    char name[256], group[300];
    snprintf(name, sizeof name, "%s", h_name("static-two"));
    snprintf(group, sizeof group, "tidemark-%s", name);
    h_create_topic(topic, 2, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    for (int part = 0; part < 2; part++)
        h_produce_many(p, topic, part, part * 1000000, 2000,
                       "{\"id\": %d, \"name\": \"n\"}");
    char db[4096]; /* h_path's buffers are reused */
    snprintf(db, sizeof db, "%s", h_path("two.db"));
    char cfg_a[4096], cfg_b[4096];
    snprintf(cfg_a, sizeof cfg_a, "%s",
             config("two-a.json", name, topic, db, "sa", NULL, NULL));
    snprintf(cfg_b, sizeof cfg_b, "%s",
             config("two-b.json", name, topic, db, "sb", NULL, NULL));
    pid_t a = h_spawn(cfg_a, "two-a.log");
    pid_t b = h_spawn(cfg_b, "two-b.log");
    int64_t t0 = h_now_ms();
    char owners[2][H_OWNER_MAX];
    while (h_group_owners(group, topic, 2, owners) != 2 || !owners[0][0] ||
           !owners[1][0] || strcmp(owners[0], owners[1]) == 0) {
        H_CHECK(h_now_ms() - t0 < 60000,
                "two hosts on two state dirs: not two members sharing the "
                "partitions after 60 s");
        h_sleep_ms(200);
    }
    char ida[512], idb[512];
    member_file("sa", name, ida, sizeof ida);
    member_file("sb", name, idb, sizeof idb);
    H_CHECK(ida[0] && idb[0] && strcmp(ida, idb) != 0,
            "two state dirs: ids \"%s\" and \"%s\"", ida, idb);
    for (int part = 0; part < 2; part++)
        h_produce_many(p, topic, part, part * 1000000 + 2000, 500,
                       "{\"id\": %d, \"name\": \"n\"}");
    h_wait_caught_up(db, name, topic, 2, 60000);
    check_exactly_once(db, 5000);
    const char *logs[] = {"two-a.log", "two-b.log"};
    for (int i = 0; i < 2; i++)
        H_CHECK(!strstr(h_read_file(logs[i]), "fatal error"),
                "%s: a fatal consumer error (fenced?):\n%s", logs[i],
                h_read_file(logs[i]));
    h_stop_clean(a);
    h_stop_clean(b);
    h_step("two state dirs: members %s and %s, no fencing, 5000 rows once",
           owners[0], owners[1]);
    rd_kafka_destroy(p);
}

/* docs/operations.md: a static member stays in the group after its host
 * stopped, so `offsets --reset-to` right after a stop is refused, saying
 * to wait session.timeout.ms (the config's 6000 ms); once the broker timed
 * the member out, the reset goes through. */
static void scenario_reset_after_stop(void) {
    const char *topic = h_name("static-rs");
    char name[256], group[300], spec[300];
    snprintf(name, sizeof name, "%s", h_name("static-rs"));
    snprintf(group, sizeof group, "tidemark-%s", name);
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 100, "{\"id\": %d, \"name\": \"n\"}");
    char db[4096];
    snprintf(db, sizeof db, "%s", h_path("rs.db"));
    const char *cfg = config("rs.json", name, topic, db, "state", NULL,
                             "\"session.timeout.ms\": \"6000\", "
                             "\"heartbeat.interval.ms\": \"500\"");
    pid_t pid = h_spawn(cfg, "rs.log");
    h_wait_caught_up(db, name, topic, 1, 60000);
    h_stop_clean(pid);
    int64_t stopped = h_now_ms();
    snprintf(spec, sizeof spec, "%s:0=50", topic);
    const char *reset[] = {"offsets", cfg, "--reset-to", spec, NULL};
    int rc = h_tidemark("reset1.out", reset);
    const char *out = h_read_file("reset1.out");
    H_CHECK(h_now_ms() - stopped < 6000,
            "inconclusive: the first reset came after the session timeout");
    H_CHECK(rc == 1,
            "reset right after the stop: exit %d, expected 1 "
            "(refused)\n%s",
            rc, out);
    H_CHECK(strstr(out, "wait session.timeout.ms (6000 ms, 6 s) after the "
                        "last host stopped") != NULL,
            "the refusal does not say what to do:\n%s", out);
    H_CHECK(h_sqlf(db, "SELECT next_offset FROM tidemark_markers") == 100,
            "the refused reset moved the marker");
    h_step("reset right after the stop refused: %.*s", (int)strcspn(out, "\n"),
           out);
    int64_t t0 = h_now_ms();
    while (h_group_owners(group, topic, 0, NULL) != 0) {
        H_CHECK(h_now_ms() - t0 < 30000,
                "group %s still has a member 30 s after the stop", group);
        h_sleep_ms(200);
    }
    rc = h_tidemark("reset2.out", reset);
    H_CHECK(rc == 0, "reset once the group is empty: exit %d\n%s", rc,
            h_read_file("reset2.out"));
    H_CHECK(h_sqlf(db, "SELECT next_offset FROM tidemark_markers") == 50,
            "the reset did not move the marker to 50");
    h_step("the group empty %lld ms after the stop; the reset went through",
           (long long)(h_now_ms() - stopped));
    rd_kafka_destroy(p);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: static_e2e TIDEMARK PLUGIN_DIR SCENARIO\n");
        return 2;
    }
    static const struct {
        const char *name;
        void (*fn)(void);
    } scenarios[] = {
        {"restart_backlog", scenario_restart_backlog},
        {"member_id", scenario_member_id},
        {"opt_out", scenario_opt_out},
        {"two_state_dirs", scenario_two_state_dirs},
        {"reset_after_stop", scenario_reset_after_stop},
    };
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
        if (strcmp(scenarios[i].name, argv[3]) == 0) {
            h_init(argv[1], argv[2], argv[3]);
            scenarios[i].fn();
            h_step("PASS");
            return 0;
        }
    fprintf(stderr, "static_e2e: unknown scenario %s\n", argv[3]);
    return 2;
}
