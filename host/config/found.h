/* What was found, for "PATH: expected X, found Y", with a string redacted
 * before it is shortened: the one routine every such message goes
 * through, so that no part of a secret (the first bytes of a long one)
 * survives the cut. */
#ifndef TM_CONFIG_FOUND_H
#define TM_CONFIG_FOUND_H

#include <jansson.h>
#include <stddef.h>

#include "config/connector_config.h"

/* The most bytes of a found string shown. */
#define TM_FOUND_MAX_LEN 64

/* "string \"ten\"", "integer -5", "object" (tm_json_found), a string's
 * text redacted against CFG's secrets, or against the process's
 * (services/redact.h) when CFG is NULL, and then cut to TM_FOUND_MAX_LEN
 * bytes. Returns buf. */
const char *tm_config_found(const tm_connector_config *cfg, const json_t *v,
                            char *buf, size_t size);

#endif
