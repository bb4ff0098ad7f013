/* The process's address space in bytes (VmSize of /proc/self/status), for
 * tests that hold RLIMIT_AS a little above it (tm_test_hold_as). */
#ifndef TM_TEST_VM_SIZE_H
#define TM_TEST_VM_SIZE_H

#include <stdio.h>
#include <sys/resource.h>

static inline long long tm_test_vm_size(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %lld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib * 1024;
}

/* Holds the address space to EXTRA bytes above what the process uses, the
 * limit before it in *WAS (setrlimit(RLIMIT_AS, WAS) gives it back): 0, or
 * -1 when the limit could not be read or set. */
static inline int tm_test_hold_as(long long extra, struct rlimit *was) {
    struct rlimit low;
    if (getrlimit(RLIMIT_AS, was) != 0)
        return -1;
    low = *was;
    low.rlim_cur = (rlim_t)(tm_test_vm_size() + extra);
    return setrlimit(RLIMIT_AS, &low);
}

#endif
