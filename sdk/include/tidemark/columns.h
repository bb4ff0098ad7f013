/*
 * tidemark/columns.h - source-level helpers for a sink that takes its
 * columns from each batch (TM_CAP_SCHEMA_COLUMNS, tm_batch.columns).
 *
 * Not part of the ABI: static inline functions a plugin compiles into
 * itself (a plugin links no code of the host or of another plugin). A sink
 * embeds a tm_columns, keeps in it a copy of the columns its table was
 * last made to fit (a batch is the host's for one call only), compares the
 * next batch's columns with the copy (tm_columns_same: nothing to do when
 * they are the same) and, when the table exists, compares each batch
 * column with the table's declared column (tm_column_conflict), so that a
 * change refused once is refused again after a restart, when the copy is
 * gone. docs/writing-a-sink.md says how the built-in sinks use them.
 */
#ifndef TIDEMARK_COLUMNS_H
#define TIDEMARK_COLUMNS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tidemark/sink.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A plugin-owned copy of a column list: tm_column elements of this SDK's
 * size, names malloc'd. Zero-initialised: no columns. */
typedef struct tm_columns {
    tm_column *cols;
    size_t n;
} tm_columns;

/* The mapping's word for a type ("int", "timestamp"), as configs and the
 * host's messages spell it; NULL for a value this SDK does not know. */
static inline const char *tm_type_name(tm_type t) {
    switch (t) {
    case TM_TYPE_TEXT: return "text";
    case TM_TYPE_INT: return "int";
    case TM_TYPE_FLOAT: return "float";
    case TM_TYPE_BOOL: return "bool";
    case TM_TYPE_TIMESTAMP: return "timestamp";
    case TM_TYPE_JSON: return "json";
    case TM_TYPE_BYTES: return "bytes";
    }
    return NULL;
}

static inline void tm_columns_free(tm_columns *own) {
    for (size_t i = 0; own->cols && i < own->n; i++)
        free((char *)(uintptr_t)own->cols[i].name);
    free(own->cols);
    own->cols = NULL;
    own->n = 0;
}

/* 1 when COLS (N of them, walked with TM_CELEM: the host's stride) are
 * those of OWN: same names in the same order, same type, key and required
 * flags (a column without a name is never the same). */
static inline int tm_columns_same(const tm_columns *own, const tm_column *cols,
                                  size_t n) {
    if (n != own->n)
        return 0;
    for (size_t i = 0; i < n; i++) {
        const tm_column *a = TM_CELEM(tm_column, cols, i);
        const tm_column *o = &own->cols[i];
        if (!a->name || strcmp(a->name, o->name) != 0 || a->type != o->type ||
            a->key != o->key || a->required != o->required)
            return 0;
    }
    return 1;
}

/* Replaces OWN with a copy of COLS (N, walked with TM_CELEM), each of
 * which has a name (the sink checks them first). 0, or -1 when out of
 * memory, OWN then unchanged. */
static inline int tm_columns_copy(tm_columns *own, const tm_column *cols,
                                  size_t n) {
    tm_column *c = calloc(n ? n : 1, sizeof *c);
    size_t i = 0;
    for (; c && i < n; i++) {
        const tm_column *a = TM_CELEM(tm_column, cols, i);
        char *name = malloc(strlen(a->name) + 1);
        if (!name)
            break;
        memcpy(name, a->name, strlen(a->name) + 1);
        c[i] = (tm_column){.struct_size = (uint32_t)sizeof *c,
                           .name = name,
                           .type = a->type,
                           .required = a->required,
                           .key = a->key};
    }
    if (!c || i < n) {
        tm_columns part = {c, i};
        tm_columns_free(&part);
        return -1;
    }
    tm_columns_free(own);
    own->cols = c;
    own->n = n;
    return 0;
}

/* Compares batch column WANT with the table's column of the same name:
 * HAVE its type as the sink reads it back from the declaration the sink
 * wrote (0 when the declared type is none the sink writes), DECL that
 * declared type as the table states it, HAVE_NOTNULL its NOT NULL. The
 * table's column must have the batch's type, and may be NOT NULL only
 * where the batch's column is required (an optional one may carry null).
 * 0 when it fits; else 1 with WHY (SIZE bytes) naming the column and both
 * types, for the sink's TM_FATAL message (which names the table). Key
 * membership is the sink's own check (a primary key, a unique index). */
static inline int tm_column_conflict(const tm_column *want, tm_type have,
                                     const char *decl, int have_notnull,
                                     char *why, size_t size) {
    const char *want_name = tm_type_name(want->type);
    const char *have_name = tm_type_name(have);
    if (have != want->type) {
        snprintf(why, size,
                 "column \"%s\" is %s (%s) in the table, the batch's columns "
                 "say %s: a changed type is not followed",
                 want->name, decl,
                 have_name ? have_name : "no type this sink writes",
                 want_name ? want_name : "?");
        return 1;
    }
    if (have_notnull && !want->required) {
        snprintf(why, size,
                 "column \"%s\" is %s NOT NULL in the table, the batch's "
                 "columns say %s, optional (its events may carry null)",
                 want->name, decl, want_name ? want_name : "?");
        return 1;
    }
    return 0;
}

/* 1 when every record of batch B is a delete (TM_OP_DELETE), or it has
 * none (dead letters alone). Such a batch writes no column but its key:
 * its columns may be the key columns alone (the host learnt no other,
 * e.g. from a tombstone read first after a restart), and a NOT NULL
 * column of the table they lack does not refuse it. A batch with any
 * other record keeps that check. */
static inline int tm_batch_deletes_only(const tm_batch *b) {
    for (size_t i = 0; i < b->nrecords; i++)
        if (TM_RECORD_OP(TM_CELEM(tm_record, b->records, i)) != TM_OP_DELETE)
            return 0;
    return 1;
}

/* C's letter in lower case when it is an ASCII capital, else C: no
 * locale plays a part in a column name's case. */
static inline unsigned char tm_ascii_lower(unsigned char c) {
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

/* 1 when A and B are the same name but for ASCII letter case (bytes
 * outside A-Z/a-z must be equal): the locale's rules play no part. */
static inline int tm_name_caseeq(const char *a, const char *b) {
    for (;; a++, b++) {
        if (tm_ascii_lower((unsigned char)*a) !=
            tm_ascii_lower((unsigned char)*b))
            return 0;
        if (!*a)
            return 1;
    }
}

/* 1 when NAME starts with PREFIX but for ASCII letter case. */
static inline int tm_name_has_prefix_caseeq(const char *name,
                                            const char *prefix) {
    for (; *prefix; name++, prefix++)
        if (tm_ascii_lower((unsigned char)*name) !=
            tm_ascii_lower((unsigned char)*prefix))
            return 0;
    return 1;
}

/* Whether a sink can make every column of COLS (N, walked with TM_CELEM):
 * each needs a name, a type the sink writes (SQL_TYPE, the sink's own
 * type-to-SQL function, gives non-NULL) and a name not starting with the
 * sink's HIDDEN prefix in any ASCII case (its own coordinate columns).
 * 0 with WHY (SIZE bytes) naming the first that fails; 1 when all pass.
 * For a mapping's columns at open and a batch's columns alike, so that a
 * name is refused for one reason, in one wording. */
static inline int tm_columns_makeable(const tm_column *cols, size_t n,
                                      const char *hidden,
                                      const char *(*sql_type)(tm_type),
                                      char *why, size_t size) {
    for (size_t i = 0; i < n; i++) {
        const tm_column *c = TM_CELEM(tm_column, cols, i);
        if (!c->name || !*c->name || !sql_type(c->type)) {
            snprintf(why, size, "column %zu: no name or an unknown type", i);
            return 0;
        }
        if (tm_name_has_prefix_caseeq(c->name, hidden)) {
            snprintf(why, size,
                     "column \"%s\": names starting with \"%s\" are the "
                     "sink's own (hidden coordinate columns)",
                     c->name, hidden);
            return 0;
        }
    }
    return 1;
}

/* Compares a batch's columns COLS (N, walked with TM_CELEM, each named)
 * with the table's column names TABLE (NT), read BEFORE the batch's DDL
 * adds any: 1 when a batch column is not in the table byte for byte but is
 * there in another ASCII case only (the batch's "Name", the table's
 * "name"), with WHY (SIZE bytes) naming both spellings. The source renamed
 * a field in case only: a database folding case (SQLite) would write the
 * new field into the old column, one that does not (PostgreSQL) would add
 * a second column beside it; either way the operator decides, so the sink
 * answers TM_FATAL with nothing committed, after a restart as well (the
 * host stops the partition at such a rename only while it runs). A table
 * column no batch column spells (one a user added beside ours, "Name"
 * beside "name") is no rename. 0 otherwise. */
static inline int tm_columns_case_renamed(const tm_column *cols, size_t n,
                                          const char *const *table, size_t nt,
                                          char *why, size_t size) {
    for (size_t i = 0; i < n; i++) {
        const char *want = TM_CELEM(tm_column, cols, i)->name;
        const char *twin = NULL;
        size_t k = 0;
        for (; k < nt && strcmp(table[k], want) != 0; k++)
            if (!twin && tm_name_caseeq(table[k], want))
                twin = table[k];
        if (k < nt || !twin)
            continue;
        snprintf(why, size,
                 "column \"%s\" of the table is \"%s\" in the batch's "
                 "columns: a column renamed in case only is not followed "
                 "(rename the table's column, or the field back)",
                 twin, want);
        return 1;
    }
    return 0;
}

/* What a sink keeps to follow its batches' columns (TM_CONFIG_SCHEMA_COLUMNS)
 * with as little DDL as it can: the columns its table was last made to fit
 * and whether that fit holds. Zero-initialised: nothing fitted yet. */
typedef struct tm_columns_follow {
    tm_columns cols; /* the columns the table was last made to fit */
    /* 1: the table fits every batch of cols; 2: only their batches of
     * deletes only (a delete needs no NOT NULL column; DDL each time would
     * lock the table for nothing); 0: not known (set it to 0 when a
     * rollback takes the DDL back: the next commit does it again) */
    int ready;
    /* set while the table is fitted to a batch of deletes only: the
     * sink's shape check then lets it lack a NOT NULL column, which it
     * never writes */
    int deletes_only;
} tm_columns_follow;

/* Starts following BATCH's columns: 0 when the table fits them already
 * (or the batch has none); 1 when it must be made to fit: F->cols now
 * holds the batch's columns (the sink points its config there), the sink
 * runs its DDL inside the batch's transaction, then calls
 * tm_columns_follow_end. -1 with WHY (SIZE bytes) when a column cannot be
 * made (tm_columns_makeable: the sink answers TM_FATAL), -2 when out of
 * memory (TM_RETRY). */
static inline int tm_columns_follow_begin(tm_columns_follow *f,
                                          const tm_batch *b, const char *hidden,
                                          const char *(*sql_type)(tm_type),
                                          char *why, size_t size) {
    if (!TM_BATCH_HAS_COLUMNS(b) || b->ncolumns == 0)
        return 0;
    if (f->ready && (f->ready == 1 || tm_batch_deletes_only(b)) &&
        tm_columns_same(&f->cols, b->columns, b->ncolumns))
        return 0;
    if (!tm_columns_makeable(b->columns, b->ncolumns, hidden, sql_type, why,
                             size))
        return -1;
    if (tm_columns_copy(&f->cols, b->columns, b->ncolumns) != 0) {
        snprintf(why, size, "out of memory");
        return -2;
    }
    f->deletes_only = tm_batch_deletes_only(b);
    /* Until this batch commits the table may not have them: a rollback
     * takes the DDL back too. */
    f->ready = 0;
    return 1;
}

/* Ends what tm_columns_follow_begin started: OK, the sink's DDL worked
 * (its transaction still has to commit). A fit made for a batch of deletes
 * only holds for the next such batches of the same columns alone. */
static inline void tm_columns_follow_end(tm_columns_follow *f, int ok) {
    f->ready = !ok ? 0 : f->deletes_only ? 2 : 1;
    f->deletes_only = 0;
}

#ifdef __cplusplus
}
#endif
#endif /* TIDEMARK_COLUMNS_H */
