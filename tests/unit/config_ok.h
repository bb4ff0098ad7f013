/* The unit tests' one way to load a config they expect to be valid: every
 * error line printed (so a failure says which JSON path the loader
 * refused), then the test fails at once unless the config loaded. */
#ifndef TM_TEST_CONFIG_OK_H
#define TM_TEST_CONFIG_OK_H

#include <check.h>
#include <stdio.h>

#include "config/connector_config.h"

static inline tm_connector_config *tm_test_config_ok(const char *text,
                                                     const char *file) {
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    tm_connector_config *cfg = tm_config_load_string(text, file, &errs);
    for (size_t i = 0; i < errs.count; i++)
        fprintf(stderr, "%s: unexpected: %s\n", file, errs.lines[i]);
    tm_config_errors_free(&errs);
    ck_assert_msg(cfg != NULL, "%s: the config was refused", file);
    return cfg;
}

#endif
