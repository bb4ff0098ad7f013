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

/* 0 when TABLE is well formed: entries of a known struct_size and type,
 * names unique and non-empty, fields inside OUT_SIZE bytes (0: inside
 * TM_SETTING_STRUCT_MAX) and aligned, enumerations with allowed values,
 * defaults within their own bounds, the end entry within TM_SETTING_TABLE_MAX.
 * -1 with one line in why naming the entry. */
int tm_setting_table_check(const tm_setting *table, size_t out_size, char *why,
                           size_t why_size);

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
