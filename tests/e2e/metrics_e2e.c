/* End-to-end scenarios of the metrics (docs/operations.md, Metrics), each
 * one ctest test e2e.metrics.<scenario>:
 *
 * - textfile_scraped: `tidemark run --metrics-file` into Debian's
 *   prometheus-node-exporter (textfile collector), scraped by Debian's
 *   prometheus, queried through its HTTP API on loopback for one series per
 *   family; every value is compared with the source of truth (the SQLite
 *   file's rows and markers, the broker's watermarks, /proc), never with
 *   tidemark's own output;
 * - listener_scraped: `tidemark run --metrics-listen 127.0.0.1:PORT`
 *   scraped by prometheus directly; other paths 404; a client that
 *   connects and says nothing delays the next answer (bounded), never
 *   stops it;
 * - bad_options: the process options refused with what was expected, exit
 *   2, nothing started. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static const char *config(const char *file, const char *name, const char *topic,
                          const char *db) {
    static char text[8192];
    snprintf(text, sizeof text,
             "{\"name\": \"%s\",\n"
             " \"kafka\": {\"bootstrap_servers\": \"%s\", \"topics\": "
             "[\"%s\"], \"start\": \"earliest\", \"static_membership\": "
             "false},\n"
             " \"batch\": {\"max_records\": 20, \"max_wait_ms\": 100},\n"
             " \"sink\": {\"plugin\": \"sqlite\", \"settings\": {\"path\": "
             "\"%s\", \"table\": \"t\"}},\n"
             " \"state_dir\": \"%s/state\",\n"
             " \"mapping\": {\"mode\": \"json\", \"columns\": ["
             "{\"name\": \"id\", \"pointer\": \"/id\", \"type\": \"int\", "
             "\"required\": true}]}}\n",
             name, h_bootstrap(), topic, db, h_workdir());
    return h_write_file(file, text);
}

/* A loopback port free now (the kernel's pick). */
static int free_port(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    H_CHECK(s >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    H_CHECK(bind(s, (struct sockaddr *)&a, sizeof a) == 0 &&
                getsockname(s, (struct sockaddr *)&a, &len) == 0,
            "bind: %s", strerror(errno));
    close(s);
    return ntohs(a.sin_port);
}

/* The tools started (node_exporter, prometheus): killed at exit, also
 * when a check fails (h_fail exits). */
static pid_t tools[4];
static size_t ntools;

static void kill_tools(void) {
    for (size_t i = 0; i < ntools; i++)
        if (tools[i] > 0 && kill(tools[i], SIGKILL) == 0)
            waitpid(tools[i], NULL, 0);
}

/* Starts ARGV (NULL-ended) with stdout and stderr into the work dir's
 * LOG. */
static pid_t spawn_tool(const char *const *argv, const char *log) {
    if (ntools == 0)
        atexit(kill_tools);
    H_CHECK(ntools < sizeof tools / sizeof tools[0], "too many tools");
    pid_t pid = fork();
    H_CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = open(h_path(log), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    tools[ntools++] = pid;
    return pid;
}

static void stop_tool(pid_t pid) {
    kill(pid, SIGTERM);
    for (int i = 0; i < 100; i++) {
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return;
        h_sleep_ms(100);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* After stop_tool: nothing left to kill at exit. */
static void forget_tool(pid_t pid) {
    for (size_t i = 0; i < ntools; i++)
        if (tools[i] == pid)
            tools[i] = 0;
}

/* GET PATH from 127.0.0.1:PORT; the body (malloc'd) or NULL when the
 * server does not answer 200. */
static char *http_get(int port, const char *path) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    H_CHECK(s >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        close(s);
        return NULL;
    }
    char req[4096];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    H_CHECK(n > 0 && (size_t)n < sizeof req && write(s, req, (size_t)n) == n,
            "sending the request");
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    H_CHECK(buf != NULL, "out of memory");
    ssize_t r;
    while ((r = read(s, buf + len, cap - len - 1)) > 0) {
        len += (size_t)r;
        if (len + 1 == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            H_CHECK(buf != NULL, "out of memory");
        }
    }
    close(s);
    buf[len] = '\0';
    char *body = strstr(buf, "\r\n\r\n");
    if (strncmp(buf, "HTTP/1.", 7) != 0 || strncmp(buf + 8, " 200", 4) != 0 ||
        !body) {
        free(buf);
        return NULL;
    }
    memmove(buf, body + 4, strlen(body + 4) + 1);
    return buf;
}

/* PromQL EXPR queried through prometheus's HTTP API: the value of its one
 * series, or NAN while it has none yet. More than one series fails. */
static double prom_query(int port, const char *expr) {
    char path[2048] = "/api/v1/query?query=";
    size_t k = strlen(path);
    for (const unsigned char *p = (const unsigned char *)expr;
         *p && k + 4 < sizeof path; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
            (*p >= '0' && *p <= '9') || *p == '_' || *p == '.')
            path[k++] = (char)*p;
        else
            k += (size_t)snprintf(path + k, sizeof path - k, "%%%02X", *p);
    }
    path[k] = '\0';
    char *body = http_get(port, path);
    if (!body)
        return NAN;
    json_error_t e;
    json_t *doc = json_loads(body, 0, &e);
    H_CHECK(doc != NULL, "prometheus answered no JSON: %s", body);
    json_t *res = json_object_get(json_object_get(doc, "data"), "result");
    H_CHECK(json_is_array(res), "query %s: %s", expr, body);
    H_CHECK(json_array_size(res) <= 1, "query %s: more than one series: %s",
            expr, body);
    double v = NAN;
    if (json_array_size(res) == 1) {
        const char *s = json_string_value(json_array_get(
            json_object_get(json_array_get(res, 0), "value"), 1));
        H_CHECK(s != NULL, "query %s: no value: %s", expr, body);
        v = strtod(s, NULL);
    }
    json_decref(doc);
    free(body);
    return v;
}

/* Waits (60 s at most) until EXPR has a series whose value is WANT. */
static void expect_query(int port, const char *expr, double want) {
    double got = NAN;
    for (int64_t until = h_now_ms() + 60000; h_now_ms() < until;
         h_sleep_ms(250)) {
        got = prom_query(port, expr);
        if (got == want)
            return;
    }
    h_fail("prometheus: %s = %g, expected %g", expr, got, want);
}

static long long rss_of(pid_t pid) {
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/statm", (int)pid);
    FILE *f = fopen(p, "r");
    long long size = 0, res = -1;
    if (f) {
        if (fscanf(f, "%lld %lld", &size, &res) != 2)
            res = -1;
        fclose(f);
    }
    return res < 0 ? -1 : res * sysconf(_SC_PAGESIZE);
}

static void scenario_textfile_scraped(void) {
    const char *topic = h_name("metrics-ts");
    char name[256], q[1024];
    snprintf(name, sizeof name, "%s", h_name("metrics-ts"));
    h_create_topic(topic, 2, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 100, "{\"id\": %d}");
    H_CHECK(h_produce(p, topic, 0, NULL, 0, "{oops", 5, NULL, NULL) == 100,
            "inconclusive: the bad record is not at offset 100");
    h_produce_many(p, topic, 1, 1000, 50, "{\"id\": %d}");
    rd_kafka_destroy(p);

    char dir[4096], file_opt[4200];
    snprintf(dir, sizeof dir, "%s/textfile", h_workdir());
    H_CHECK(mkdir(dir, 0755) == 0, "mkdir %s: %s", dir, strerror(errno));
    snprintf(file_opt, sizeof file_opt, "--metrics-file=%s/tidemark.prom", dir);
    const char *db = h_path("ts.db");
    char dbp[4096];
    snprintf(dbp, sizeof dbp, "%s", db);
    const char *cfg = config("ts.json", name, topic, dbp);
    const char *args[] = {file_opt, "--metrics-interval-s=1", cfg, NULL};
    pid_t host = h_spawn_many(args, "ts.log", NULL);
    h_wait_caught_up(dbp, name, topic, 2, 60000);

    int ne_port = free_port(), prom_port = free_port();
    char listen[64], tdir[4200];
    snprintf(listen, sizeof listen, "--web.listen-address=127.0.0.1:%d",
             ne_port);
    snprintf(tdir, sizeof tdir, "--collector.textfile.directory=%s", dir);
    const char *ne_argv[] = {
        "prometheus-node-exporter", listen, "--collector.disable-defaults",
        "--collector.textfile",     tdir,   NULL};
    pid_t ne = spawn_tool(ne_argv, "node_exporter.log");
    char yml[512];
    snprintf(yml, sizeof yml,
             "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
             "scrape_configs:\n  - job_name: tidemark\n    static_configs:\n"
             "      - targets: ['127.0.0.1:%d']\n",
             ne_port);
    const char *yml_path = h_write_file("prometheus.yml", yml);
    char c1[4200], c2[4200], c3[64];
    snprintf(c1, sizeof c1, "--config.file=%s", yml_path);
    snprintf(c2, sizeof c2, "--storage.tsdb.path=%s/tsdb", h_workdir());
    snprintf(c3, sizeof c3, "--web.listen-address=127.0.0.1:%d", prom_port);
    const char *prom_argv[] = {"prometheus", c1, c2, c3, NULL};
    pid_t prom = spawn_tool(prom_argv, "prometheus.log");
    h_step("node_exporter on %d, prometheus on %d", ne_port, prom_port);

    /* node_exporter read the file without an error. */
    expect_query(prom_port, "node_textfile_scrape_error", 0);

    /* The truth: the database's rows and dead letters, the broker's
     * watermarks (the host caught up to them), the host's /proc. */
    int64_t rows = h_sqlf(dbp, "SELECT count(*) FROM t");
    int64_t dead = h_sqlf(dbp, "SELECT count(*) FROM tidemark_dead_letters");
    H_CHECK(rows == 150 && dead == 1, "inconclusive: %lld rows, %lld dead",
            (long long)rows, (long long)dead);
    int64_t lo, hi0, hi1;
    h_watermarks(topic, 0, &lo, &hi0);
    h_watermarks(topic, 1, &lo, &hi1);

#define SEL(fmt, ...) (snprintf(q, sizeof q, fmt, __VA_ARGS__), q)
    expect_query(prom_port,
                 SEL("tidemark_connector_state{connector=\"%s\","
                     "state=\"RUNNING\"}",
                     name),
                 1);
    expect_query(prom_port,
                 SEL("tidemark_connector_status_error{connector=\"%s\"}", name),
                 0);
    expect_query(prom_port,
                 SEL("tidemark_records_total{connector=\"%s\","
                     "outcome=\"row\"}",
                     name),
                 (double)rows);
    expect_query(prom_port,
                 SEL("tidemark_records_total{connector=\"%s\","
                     "outcome=\"dead_letter\"}",
                     name),
                 (double)dead);
    expect_query(prom_port,
                 SEL("tidemark_partition_next_offset{connector=\"%s\","
                     "partition=\"0\"}",
                     name),
                 (double)hi0);
    expect_query(prom_port,
                 SEL("tidemark_partition_next_offset{connector=\"%s\","
                     "partition=\"1\"}",
                     name),
                 (double)hi1);
    expect_query(prom_port,
                 SEL("tidemark_partition_epoch{connector=\"%s\","
                     "partition=\"1\"}",
                     name),
                 (double)h_sqlf(dbp,
                                "SELECT epoch FROM tidemark_markers WHERE "
                                "connector = '%s' AND \"partition\" = 1",
                                name));
    expect_query(prom_port,
                 SEL("tidemark_partition_high_watermark{connector=\"%s\","
                     "partition=\"0\"}",
                     name),
                 (double)hi0);
    expect_query(prom_port,
                 SEL("tidemark_partition_lag{connector=\"%s\","
                     "partition=\"0\"}",
                     name),
                 0);
    expect_query(prom_port,
                 SEL("tidemark_partition_paused{connector=\"%s\","
                     "partition=\"0\"}",
                     name),
                 0);
    /* Every record read once was converted once (no retry in this run). */
    expect_query(prom_port,
                 SEL("tidemark_record_conversion_seconds_count{connector="
                     "\"%s\"}",
                     name),
                 (double)(hi0 + hi1));
    /* Caught up: the consumer holds nothing fetched and not consumed. */
    expect_query(
        prom_port,
        SEL("tidemark_consumer_fetch_queue_bytes{connector=\"%s\"}", name), 0);
    expect_query(
        prom_port,
        SEL("tidemark_consumer_fetch_queue_messages{connector=\"%s\"}", name),
        0);
    /* Histogram: +Inf holds every commit; the count is the batches' (no
     * retry). */
    double batches = prom_query(
        prom_port,
        SEL("tidemark_batches_total{connector=\"%s\",answer=\"OK\"}", name));
    H_CHECK(batches >= 8,
            "batches_total OK = %g: 151 records in batches of "
            "20 at most are 8 at least",
            batches);
    expect_query(prom_port,
                 SEL("tidemark_commit_duration_seconds_count{connector="
                     "\"%s\"}",
                     name),
                 batches);
    expect_query(prom_port,
                 SEL("tidemark_commit_duration_seconds_bucket{connector="
                     "\"%s\",le=\"+Inf\"}",
                     name),
                 batches);
    double csum = prom_query(
        prom_port,
        SEL("tidemark_record_conversion_seconds_sum{connector=\"%s\"}", name));
    H_CHECK(csum > 0 && csum < 10, "conversion seconds %g for %lld records",
            csum, (long long)(hi0 + hi1));
    double sum = prom_query(
        prom_port,
        SEL("tidemark_commit_duration_seconds_sum{connector=\"%s\"}", name));
    H_CHECK(sum > 0 && sum < 60, "commit duration sum %g", sum);
    double errors = prom_query(
        prom_port, SEL("tidemark_errors_total{connector=\"%s\"}", name));
    H_CHECK(errors == 0, "errors_total %g in a clean run", errors);
    double start = prom_query(
        prom_port,
        SEL("tidemark_connector_start_time_seconds{connector=\"%s\"}", name));
    double wall = (double)time(NULL);
    H_CHECK(start > wall - 600 && start <= wall + 1, "start time %g, now %g",
            start, wall);
    double rss = prom_query(
        prom_port,
        SEL("tidemark_process_resident_memory_bytes{pid=\"%d\"}", (int)host));
    long long mine = rss_of(host);
    H_CHECK(mine > 0 && rss > mine / 2 && rss < mine * 2,
            "rss %g, /proc says %lld", rss, mine);
    expect_query(prom_port,
                 SEL("tidemark_last_error_timestamp_seconds{connector="
                     "\"%s\"}",
                     name),
                 0);
    double updated = prom_query(
        prom_port,
        SEL("tidemark_status_updated_timestamp_seconds{connector=\"%s\"}",
            name));
    H_CHECK(updated > start, "updated %g, started %g", updated, start);
    double last_batch = prom_query(
        prom_port,
        SEL("tidemark_last_batch_timestamp_seconds{connector=\"%s\"}", name));
    H_CHECK(last_batch >= start, "last batch %g, started %g", last_batch,
            start);

    /* `status --format prometheus` reads the same status file. */
    char sd[4200];
    snprintf(sd, sizeof sd, "%s/state", h_workdir());
    const char *st[] = {"status",      "--format", "prometheus",
                        "--state-dir", sd,         NULL};
    int rc = h_tidemark("status.prom", st);
    H_CHECK(rc == 0, "status --format prometheus: exit %d\n%s", rc,
            h_read_file("status.prom"));
    char line[1024];
    snprintf(line, sizeof line,
             "tidemark_records_total{connector=\"%s\",outcome=\"row\"} %lld\n",
             name, (long long)rows);
    H_CHECK(strstr(h_read_file("status.prom"), line) != NULL,
            "status --format prometheus lacks %s", line);
    snprintf(line, sizeof line,
             "tidemark_commit_duration_seconds_count{connector=\"%s\"} ", name);
    H_CHECK(strstr(h_read_file("status.prom"), line) != NULL,
            "status --format prometheus lacks %s (the saved figures)", line);

    /* The stop writes the file a last time: STOPPED. */
    h_stop_clean(host);
    snprintf(line, sizeof line,
             "tidemark_connector_state{connector=\"%s\",state=\"STOPPED\"} 1\n",
             name);
    char prom_name[4300];
    snprintf(prom_name, sizeof prom_name, "textfile/tidemark.prom");
    H_CHECK(strstr(h_read_file(prom_name), line) != NULL,
            "the last textfile lacks %s:\n%s", line, h_read_file(prom_name));
    H_CHECK(access(h_path("textfile/tidemark.prom.tmp"), F_OK) != 0,
            "a temporary file was left behind");
    stop_tool(prom);
    forget_tool(prom);
    stop_tool(ne);
    forget_tool(ne);
#undef SEL
}

static pid_t start_prometheus(int target_port, int *prom_port) {
    char yml[512];
    snprintf(yml, sizeof yml,
             "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
             "scrape_configs:\n  - job_name: tidemark\n    static_configs:\n"
             "      - targets: ['127.0.0.1:%d']\n",
             target_port);
    const char *yml_path = h_write_file("prometheus-l.yml", yml);
    *prom_port = free_port();
    static char c1[4200], c2[4200], c3[64];
    snprintf(c1, sizeof c1, "--config.file=%s", yml_path);
    snprintf(c2, sizeof c2, "--storage.tsdb.path=%s/tsdb-l", h_workdir());
    snprintf(c3, sizeof c3, "--web.listen-address=127.0.0.1:%d", *prom_port);
    const char *prom_argv[] = {"prometheus", c1, c2, c3, NULL};
    return spawn_tool(prom_argv, "prometheus-l.log");
}

static void scenario_listener_scraped(void) {
    const char *topic = h_name("metrics-ls");
    char name[256], q[1024];
    snprintf(name, sizeof name, "%s", h_name("metrics-ls"));
    h_create_topic(topic, 1, NULL, NULL);
    rd_kafka_t *p = h_producer(NULL, NULL);
    h_produce_many(p, topic, 0, 0, 60, "{\"id\": %d}");
    rd_kafka_destroy(p);
    char dbp[4096];
    snprintf(dbp, sizeof dbp, "%s", h_path("ls.db"));
    const char *cfg = config("ls.json", name, topic, dbp);
    int port = free_port();
    char listen[64];
    snprintf(listen, sizeof listen, "--metrics-listen=127.0.0.1:%d", port);
    const char *args[] = {listen, cfg, NULL};
    pid_t host = h_spawn_many(args, "ls.log", NULL);
    h_wait_caught_up(dbp, name, topic, 1, 60000);
    int prom_port;
    pid_t prom = start_prometheus(port, &prom_port);
    int64_t rows = h_sqlf(dbp, "SELECT count(*) FROM t");
    H_CHECK(rows == 60, "inconclusive: %lld rows", (long long)rows);
#define SEL(fmt, ...) (snprintf(q, sizeof q, fmt, __VA_ARGS__), q)
    expect_query(prom_port,
                 SEL("tidemark_records_total{connector=\"%s\","
                     "outcome=\"row\"}",
                     name),
                 (double)rows);
    expect_query(prom_port,
                 SEL("tidemark_connector_state{connector=\"%s\","
                     "state=\"RUNNING\"}",
                     name),
                 1);
    double n = prom_query(
        prom_port,
        SEL("tidemark_commit_duration_seconds_count{connector=\"%s\"}", name));
    H_CHECK(n >= 3, "commit count %g: 60 records in batches of 20 at most", n);
    expect_query(prom_port, "up{job=\"tidemark\"}", 1);
#undef SEL
    /* Only GET /metrics is served. */
    char *other = http_get(port, "/other");
    H_CHECK(other == NULL, "GET /other answered 200: %s", other);
    /* A client that connects and says nothing holds the listener at most
     * its timeout: the next GET is answered. */
    int idle = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    H_CHECK(idle >= 0 && connect(idle, (struct sockaddr *)&a, sizeof a) == 0,
            "connect: %s", strerror(errno));
    int64_t t0 = h_now_ms();
    char *body = http_get(port, "/metrics");
    int64_t took = h_now_ms() - t0;
    close(idle);
    H_CHECK(body && strstr(body, "# TYPE tidemark_connector_state gauge"),
            "GET /metrics behind an idle client: %s", body ? body : "(none)");
    H_CHECK(took < 10000, "GET /metrics behind an idle client took %lld ms",
            (long long)took);
    h_step("GET /metrics behind an idle client: %lld ms", (long long)took);
    free(body);
    h_stop_clean(host);
    stop_tool(prom);
    forget_tool(prom);
}

/* Each bad option: exit 2, the message, no file written. */
static void expect_refused(const char *const *args, const char *needle) {
    int rc = h_tidemark("bad.out", args);
    const char *out = h_read_file("bad.out");
    H_CHECK(rc == 2, "exit %d, expected 2:\n%s", rc, out);
    H_CHECK(strstr(out, needle) != NULL, "\"%s\" not in:\n%s", needle, out);
}

static void scenario_bad_options(void) {
    const char *cfg = config("bad.json", h_name("metrics-bad"), "t", "x.db");
    char prom[4200];
    snprintf(prom, sizeof prom, "%s/m.prom", h_workdir());
    const char *a1[] = {"run", "--metrics-file", "/nonexistent-dir/m.prom", cfg,
                        NULL};
    expect_refused(a1, "--metrics-file: \"/nonexistent-dir/m.prom\": expected "
                       "an existing directory");
    const char *a2[] = {"run", "--metrics-file", "m.txt", cfg, NULL};
    expect_refused(a2, "expected a file name ending in \".prom\"");
    const char *a3[] = {
        "run", "--metrics-file", prom, "--metrics-interval-s", "0", cfg, NULL};
    expect_refused(a3, "--metrics-interval-s: expected a number of seconds "
                       "1..3600, found \"0\"");
    const char *a4[] = {"run", "--metrics-interval-s", "5", cfg, NULL};
    expect_refused(a4, "--metrics-interval-s needs --metrics-file");
    const char *a5[] = {"run", "--metrics-file", cfg, NULL};
    expect_refused(a5, "expected a file name ending in \".prom\"");
    const char *a7[] = {"run", "--metrics-listen", "0.0.0.0:9100", cfg, NULL};
    expect_refused(a7, "--metrics-listen: expected a loopback address and a "
                       "port, 127.0.0.1:PORT or [::1]:PORT (PORT 1..65535), "
                       "found \"0.0.0.0:9100\"");
    const char *a8[] = {"run", "--metrics-listen", "localhost:9100", cfg, NULL};
    expect_refused(a8, "expected a loopback address");
    const char *a9[] = {"run", "--metrics-listen", "127.0.0.1:0", cfg, NULL};
    expect_refused(a9, "expected a loopback address");
    H_CHECK(access(prom, F_OK) != 0, "a refused run wrote %s", prom);
    const char *a6[] = {"status", "--format", "yaml", NULL};
    int rc = h_tidemark("bad.out", a6);
    H_CHECK(rc == 1 && strstr(h_read_file("bad.out"),
                              "--format: expected one of text, json, "
                              "prometheus, found \"yaml\""),
            "status --format yaml: exit %d\n%s", rc, h_read_file("bad.out"));
}

static const h_scenario SCENARIOS[] = {
    {"textfile_scraped", scenario_textfile_scraped},
    {"listener_scraped", scenario_listener_scraped},
    {"bad_options", scenario_bad_options},
};

int main(int argc, char **argv) {
    return h_main(argc, argv, "metrics_e2e", SCENARIOS,
                  H_NSCENARIOS(SCENARIOS));
}
