/* A stand-in for a running host, for status_offsets.sh: takes the
 * connector's host lock through the real writer, publishes a status
 * snapshot with fixed values the test knows by heart, says "ready" on
 * stdout and waits to be killed.
 *   status_holder STATE_DIR CONNECTOR STATE [LAST_ERROR]
 * Exit 3 (with the writer's message on stderr) when the lock is taken. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "status/status_file.h"

static const tm_status_partition PARTS[2] = {
    {.topic = "orders",
     .partition = 0,
     .next_offset = 240,
     .epoch = 2,
     .high_watermark = 250,
     .rows = 230,
     .dead_letters = 3,
     .filtered = 5,
     .duplicates = 2},
    {.topic = "orders",
     .partition = 1,
     .next_offset = -1,
     .epoch = 0,
     .high_watermark = 12,
     .paused = 1},
};

int main(int argc, char **argv) {
    if (argc < 4 || argc > 5) {
        fprintf(stderr,
                "usage: status_holder STATE_DIR CONNECTOR STATE [ERROR]\n");
        return 2;
    }
    tm_status_snapshot s;
    memset(&s, 0, sizeof s);
    if (tm_conn_state_parse(argv[3], &s.state) != 0) {
        fprintf(stderr, "status_holder: unknown state %s\n", argv[3]);
        return 2;
    }
    char err[1024];
    tm_status_writer *w =
        tm_status_writer_open(argv[1], argv[2], err, sizeof err);
    if (!w) {
        fprintf(stderr, "%s\n", err);
        return 3;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    snprintf(s.connector, sizeof s.connector, "%s", argv[2]);
    snprintf(s.plugin, sizeof s.plugin, "sqlite");
    snprintf(s.plugin_version, sizeof s.plugin_version, "1.0.0");
    snprintf(s.instance_id, sizeof s.instance_id, "hold01");
    s.pid = (long)getpid();
    s.started_ms = now - 3723000; /* up 1h02m03s */
    s.updated_ms = now;
    snprintf(s.last_batch_id, sizeof s.last_batch_id, "hold01-000007");
    s.last_batch_ms = 1764680041000; /* 2025-12-02T12:54:01Z */
    s.last_batch_records = 250;
    s.partitions = PARTS;
    s.npartitions = 2;
    s.totals.rows = 230;
    s.totals.dead_letters = 3;
    s.totals.filtered = 5;
    s.totals.duplicates = 2;
    s.totals.batches = 7;
    s.totals.conflicts = 1;
    s.totals.retries = 4;
    if (argc == 5) {
        snprintf(s.last_error, sizeof s.last_error, "%s", argv[4]);
        s.last_error_ms = 1764680030000; /* 2025-12-02T12:53:50Z */
    }
    if (tm_status_writer_write(w, &s, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
}
