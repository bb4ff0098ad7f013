/* Declared settings (tm_setting, ABI 1.3): the one walker that checks a
 * plugin's settings against its table and fills the plugin's struct, the
 * check of the table itself, and the JSON schema built from it. */
#ifndef TM_SETTINGS_TABLE_H
#define TM_SETTINGS_TABLE_H

#include <jansson.h>
#include <stddef.h>
#include <tidemark/sink.h>

/* The most entries a table may have: a table without its end entry is
 * refused here instead of being read past its end for ever. */
#define TM_SETTING_TABLE_MAX 256

/* The largest settings struct a table may describe: every field ends
 * within it, so that a check without the plugin's struct (`tidemark
 * validate`) allocates no more than this for its scratch one. */
#define TM_SETTING_STRUCT_MAX 65536

/* tm_setting as ABI 1.3 declared it. A later minor version only appends
 * fields, so a table of a 1.3 plugin has entries of this size under any
 * later host. */
#define TM_SETTING_SIZE_1_3                                                    \
    (offsetof(tm_setting, description) + sizeof(const char *))

/* 0 when TABLE is well formed: entries of a known struct_size and type,
 * names unique and non-empty, fields inside OUT_SIZE bytes (0: inside
 * TM_SETTING_STRUCT_MAX) and aligned, enumerations with allowed values,
 * defaults within their own bounds, the end entry within TM_SETTING_TABLE_MAX.
 * Entries may be smaller than this host's tm_setting, down to ABI 1.3's.
 * -1 with one line in why naming the entry. */
int tm_setting_table_check(const tm_setting *table, size_t out_size, char *why,
                           size_t why_size);

/* The same for a host whose own tm_setting is HOST_SIZE bytes
 * (tm_setting_table_check passes sizeof(tm_setting); the test, a grown
 * one): entries of TM_SETTING_SIZE_1_3 to HOST_SIZE bytes, all of one
 * size, walked with it as the stride; larger ones (a newer plugin's) and
 * smaller ones are refused. */
int tm_setting_table_check_sized(const tm_setting *table, size_t host_size,
                                 size_t out_size, char *why, size_t why_size);

/* host->settings_fill() (sink.h). */
int tm_settings_fill(const tm_settings *s, const tm_setting *table, void *out,
                     size_t out_size, tm_error *err);

/* The check of tm_settings_fill() without a struct of the plugin's to
 * fill (a scratch one as large as the table's fields): for `tidemark
 * validate`, which has no instance. 0, or -1 with err set. */
int tm_settings_check(const tm_settings *s, const tm_setting *table,
                      tm_error *err);

/* The settings' JSON schema ({"type": "object", "required": [...],
 * "additionalProperties": false, "properties": {...}}), a new reference;
 * NULL when out of memory. The table must have passed
 * tm_setting_table_check(). */
json_t *tm_setting_table_schema(const tm_setting *table);

#endif
