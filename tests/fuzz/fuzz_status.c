/* libFuzzer target: any bytes as a connector's status.json in a state
 * directory, read by tm_status_read (what `tidemark status` does; no host
 * holds the lock, so it is reported STOPPED), then shown both ways: the
 * text block with its partition table and the JSON document; then both
 * again as if a live host held the lock. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_tmp.h"
#include "status/status_lock.h"
#include "status/status_print.h"
#include "status/status_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char dir[512], file[512];
    static FILE *devnull;
    char why[512];
    if (!dir[0]) {
        fuzz_mkdir("state");
        fuzz_path(dir, sizeof dir, "state");
        if (tm_status_path(file, sizeof file, dir, "fz", TM_STATUS_FILE, why,
                           sizeof why) != 0 ||
            !(devnull = fopen("/dev/null", "w")))
            abort();
        fuzz_mkdir("state/fz");
    }
    fuzz_write(file, data, size);
    tm_status_view v = {.running = 1};
    if (tm_status_read(dir, "fz", &v.r, why, sizeof why) != 0)
        return 0;
    int64_t now = INT64_C(1764770000000);
    tm_status_print_text(devnull, &v, 1, now);
    json_t *doc = tm_status_views_json(dir, &v, 1, now);
    free(json_dumps(doc, 0));
    json_decref(doc);
    (void)tm_status_health(&v, 1, now);
    /* Again as if its host held the lock: the live paths (uptime, the
     * stale line) do arithmetic on the file's times too. */
    v.r.live = 1;
    tm_status_print_text(devnull, &v, 1, now);
    doc = tm_status_views_json(dir, &v, 1, now);
    free(json_dumps(doc, 0));
    json_decref(doc);
    (void)tm_status_health(&v, 1, now);
    tm_status_view_free(&v);
    return 0;
}
