/* libFuzzer target: any bytes as a record value, converted through the
 * streaming extractor and through jansson, the reference; the run stops
 * (abort) at the first input on which they differ, printing how
 * (tests/unit/convert_diff.h says what is compared). Besides a fixed set
 * of pointers, every input that is JSON is also read at pointers to its
 * own values. How to build and run it: tests/fuzz/CMakeLists.txt. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "convert_diff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const POINTERS[] = {
    "",     "/a",  "/b",   "/0",     "/1",   "/a/b",      "/a/0", "/a/1",
    "/b/a", "/~0", "/~1",  "/a~1b",  "/~01", "/x y",      "/-",   "/00",
    "/",    "/ab", "/0/0", "/a/b/a", "/0/a", "/\xc3\xa9", "/a/"};

#define OWN_PATHS 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static tm_diff *diff;
    if (!diff &&
        !(diff = tm_diff_new(POINTERS, sizeof POINTERS / sizeof POINTERS[0])))
        abort();
    const char *doc = (const char *)data;
    const char *why = tm_diff_check(diff, doc, size);
    if (!why)
        why = tm_diff_check_own_paths(diff, doc, size, OWN_PATHS);
    if (why) {
        fprintf(stderr, "extractor and jansson differ: %s\n", why);
        abort();
    }
    return 0;
}
