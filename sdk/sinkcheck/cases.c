/* The table of cases, in the order they run. Names are what --case takes
 * and what the output prints. */
#include "cases.h"

const kit_case kit_cases[] = {
    {"claim", kit_case_claim,
     "claim creates markers and raises the epoch; read_markers never does"},
    {"contiguous_batch", kit_case_contiguous,
     "a contiguous batch: OK; rows, dead letters, markers visible together"},
    {"values", kit_case_values,
     "scan gives back exactly the column values the kit sent"},
    {"same_batch_again", kit_case_already,
     "the same batch again: ALREADY, nothing changes"},
    {"gap_overlap_fenced", kit_case_conflict_fenced,
     "gap, overlap: CONFLICT; older epoch: FENCED; nothing written"},
    {"multi_partition_atomic", kit_case_multi_partition,
     "one partition refused: nothing written for any partition"},
    {"holes_and_empty_ranges", kit_case_holes,
     "offsets with holes; empty ranges only move the marker"},
    {"crash_points", kit_case_crash_points,
     "a kill at each named point: effects exactly match the marker"},
    {"random_kills", kit_case_random_kills,
     "random SIGKILLs of a committing child: effects match the marker"},
    {"concurrent_owners", kit_case_concurrent_owners,
     "two processes claim and commit one store at once: fencing holds"},
    {"power_loss", kit_case_power_loss,
     "writes not made durable by fsync are dropped: acknowledged ones stay"},
    {"dead_letters", kit_case_dead_letters,
     "dead letters committed atomically with the batch"},
    {"dedup", kit_case_dedup,
     "business-key duplicates and identity conflicts, atomically"},
    {"lineage", kit_case_lineage,
     "the marker's lineage round-trips; a reset claim forgets it"},
    {"cdc", kit_case_cdc,
     "change events: upserts and deletes by key in offset order; a replay "
     "does not bring a deleted row back"},
    {"schema_columns", kit_case_schema_columns,
     "columns from each batch: table made, a column added, a changed type "
     "or a required column made optional refused, also after a reopen"},
    {"bad_settings", kit_case_bad_settings,
     "missing and unknown settings: INVALID naming the key, no crash"},
};
const size_t kit_ncases = sizeof kit_cases / sizeof kit_cases[0];
