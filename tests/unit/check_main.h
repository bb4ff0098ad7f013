/* The one main() of the Check unit tests: runs a suite, exits non-zero on
 * any failure. Each test file defines its suite and includes this. */
#ifndef TM_CHECK_MAIN_H
#define TM_CHECK_MAIN_H

#include <check.h>
#include <stdlib.h>

static inline int tm_check_run(Suite *s, int fork_tests) {
    SRunner *sr = srunner_create(s);
    if (!fork_tests)
        srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
