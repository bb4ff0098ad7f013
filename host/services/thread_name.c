#include "services/thread_name.h"

#if defined(__linux__)
#include <sys/prctl.h>
#endif

void tm_thread_name(const char *role) {
#if defined(__linux__)
    /* The kernel keeps 15 bytes and the NUL, cutting a longer name. */
    (void)prctl(PR_SET_NAME, role, 0, 0, 0);
#else
    (void)role;
#endif
}
