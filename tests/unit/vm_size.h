/* The process's address space in bytes (VmSize of /proc/self/status), for
 * tests that hold RLIMIT_AS a little above it. */
#ifndef TM_TEST_VM_SIZE_H
#define TM_TEST_VM_SIZE_H

#include <stdio.h>

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

#endif
