/* The cases, one function each; cases.c lists them in running order. */
#ifndef TM_SINKCHECK_CASES_H
#define TM_SINKCHECK_CASES_H

#include "kit.h"

void kit_case_claim(const kit_run *run, kit_result *res);
void kit_case_contiguous(const kit_run *run, kit_result *res);
void kit_case_already(const kit_run *run, kit_result *res);
void kit_case_conflict_fenced(const kit_run *run, kit_result *res);
void kit_case_multi_partition(const kit_run *run, kit_result *res);
void kit_case_holes(const kit_run *run, kit_result *res);
void kit_case_crash_points(const kit_run *run, kit_result *res);
void kit_case_random_kills(const kit_run *run, kit_result *res);
void kit_case_concurrent_owners(const kit_run *run, kit_result *res);
void kit_case_power_loss(const kit_run *run, kit_result *res);
void kit_case_values(const kit_run *run, kit_result *res);
void kit_case_dead_letters(const kit_run *run, kit_result *res);
void kit_case_dedup(const kit_run *run, kit_result *res);
void kit_case_bad_settings(const kit_run *run, kit_result *res);
void kit_case_lineage(const kit_run *run, kit_result *res);
void kit_case_cdc(const kit_run *run, kit_result *res);
void kit_case_schema_columns(const kit_run *run, kit_result *res);

#endif
