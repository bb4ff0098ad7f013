/* The iceberg-lite sink loaded the way the host loads it, with the real
 * host services: a temp table directory, a config with a column of every
 * type, and batches whose values derive from the offset (the rule that
 * judge_table.py recomputes on its side). */
#ifndef TM_ICE_FIXTURE_H
#define TM_ICE_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include <tidemark/sink.h>

#include "config/settings.h"

extern const tm_sink_api *ice_api;

typedef struct ice_fx {
    char dir[256]; /* temp dir; the table is dir/table */
    char table[300];
    tm_settings *settings;
    tm_sink_config config;
} ice_fx;

/* 0 or -1 (message on stderr). extra_settings: JSON members added to
 * {"path": ...}, e.g. "\"fsync\": false", or "". */
int ice_fx_init(ice_fx *fx, const char *extra_settings);
/* Settings from a whole JSON object text ("$T" becomes the table path). */
int ice_fx_settings(ice_fx *fx, const char *json_text);
void ice_fx_done(ice_fx *fx, int keep);
tm_status ice_fx_open(ice_fx *fx, void **sink, tm_error *err);

/* A batch over up to 4 partitions of topic "orders". */
#define ICE_FX_MAXR 4
typedef struct ice_fx_batch {
    tm_batch b;
    tm_range ranges[ICE_FX_MAXR];
    tm_record *recs;
    tm_value *vals;
    char (*text)[64];
    tm_dead_letter *dls;
    size_t cap, dcap;
    char id[TM_BATCH_ID_MAX];
} ice_fx_batch;

void ice_fx_batch_init(ice_fx_batch *kb, const char *batch_id);
uint32_t ice_fx_range(ice_fx_batch *kb, int32_t partition, int64_t start,
                      int64_t end, int64_t epoch);
/* A record at OFFSET with every column derived from it (see .c). */
void ice_fx_record(ice_fx_batch *kb, uint32_t range, int64_t offset);
void ice_fx_dead_letter(ice_fx_batch *kb, uint32_t range, int64_t offset);
/* Points the batch at its arrays (after the last add). */
void ice_fx_seal(ice_fx_batch *kb);
void ice_fx_batch_free(ice_fx_batch *kb);

/* Claims partitions 0..n-1 of "orders" at offset 0; epochs into m. */
tm_status ice_fx_claim(void *sink, tm_marker *m, size_t n, tm_error *err);
/* Rows and dead letters scan() emits for a partition. */
int ice_fx_scan_count(void *sink, int32_t partition, size_t *rows, size_t *dls,
                      int64_t *max_offset);

#endif
