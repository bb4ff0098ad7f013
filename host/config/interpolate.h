/* ${env:NAME} and ${file:PATH} references in config string values.
 * Resolution happens on the raw JSON tree before any section is read, so
 * every setting (and every error about it) sees resolved values; each
 * resolved value is added to cfg->secrets for tm_config_redact(). */
#ifndef TM_CONFIG_INTERPOLATE_H
#define TM_CONFIG_INTERPOLATE_H

#include <jansson.h>

#include "config/config_internal.h"

/* Resolves every string value (not keys) of the tree at v, in place; path
 * is v's JSON path, for errors. "$${" stands for a literal "${". */
void cfg_interpolate_tree(loader *L, json_t *v, const char *path);

#endif
