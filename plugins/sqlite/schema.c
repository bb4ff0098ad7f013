/* SQL text, the tables the sink creates, and the check that an existing
 * target table fits the mapping. Identifiers are always double-quoted with
 * embedded quotes doubled; values are always bound parameters. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sqlite_sink.h"

/* ---- text --------------------------------------------------------------- */

void sq_buf_add(sq_buf *b, const char *s) {
    size_t n = strlen(s);
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n + 1);
    b->len += n;
}

void sq_buf_ident(sq_buf *b, const char *name) {
    char one[2] = {0, 0};
    sq_buf_add(b, "\"");
    for (const char *p = name; *p; p++) {
        one[0] = *p;
        sq_buf_add(b, *p == '"' ? "\"\"" : one);
    }
    sq_buf_add(b, "\"");
}

void sq_buf_free(sq_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* The declared type the sink writes for each column type. SQLite stores
 * by the declaration's affinity alone (INTEGER: it contains "INT"; TEXT:
 * it contains "TEXT"), so bool, timestamp and json need words of their
 * own only so that a table read back says which type it was made for:
 * int, bool and timestamp would all be INTEGER (sq_type_of_decl). */
const char *sq_type_sql(tm_type t) {
    switch (t) {
    case TM_TYPE_TEXT: return "TEXT";
    case TM_TYPE_INT: return "INTEGER";
    case TM_TYPE_FLOAT: return "REAL";
    case TM_TYPE_BOOL: return "BOOLEAN INTEGER"; /* 0 or 1 */
    case TM_TYPE_TIMESTAMP:
        return "TIMESTAMP INTEGER"; /* microseconds since epoch */
    case TM_TYPE_JSON: return "JSON TEXT";
    case TM_TYPE_BYTES: return "BLOB";
    }
    return NULL;
}

tm_type sq_type_of_decl(const char *decl) {
    for (int t = TM_TYPE_TEXT; decl && t <= TM_TYPE_BYTES; t++)
        if (strcasecmp(decl, sq_type_sql((tm_type)t)) == 0)
            return (tm_type)t;
    return (tm_type)0;
}

/* The hidden coordinate columns, in the order of every INSERT. */
static const char *const HIDDEN[SQ_NHIDDEN][2] = {
    {"_tm_topic", "TEXT NOT NULL"},
    {"_tm_partition", "INTEGER NOT NULL"},
    {"_tm_offset", "INTEGER NOT NULL"},
    {"_tm_identity", "TEXT"}};

/* ---- DDL ---------------------------------------------------------------- */

static const char HELPERS[] =
    "CREATE TABLE IF NOT EXISTS " SQ_MARKERS " ("
    "connector TEXT NOT NULL, topic TEXT NOT NULL, \"partition\" INTEGER NOT "
    "NULL, next_offset INTEGER NOT NULL, epoch INTEGER NOT NULL, "
    "last_batch_id TEXT NOT NULL DEFAULT '', rows INTEGER NOT NULL DEFAULT 0, "
    "dead_letters INTEGER NOT NULL DEFAULT 0, filtered INTEGER NOT NULL "
    "DEFAULT 0, duplicates INTEGER NOT NULL DEFAULT 0, "
    "PRIMARY KEY (connector, topic, \"partition\"));"
    "CREATE TABLE IF NOT EXISTS " SQ_DEAD_LETTERS " ("
    "connector TEXT NOT NULL, topic TEXT NOT NULL, \"partition\" INTEGER NOT "
    "NULL, \"offset\" INTEGER NOT NULL, timestamp_ms INTEGER, reason TEXT NOT "
    "NULL, detail TEXT, \"key\" BLOB, \"value\" BLOB, headers TEXT, batch_id "
    "TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS " SQ_DEAD_LETTERS
    "_by_offset ON " SQ_DEAD_LETTERS
    " (connector, topic, \"partition\", \"offset\");"
    "CREATE TABLE IF NOT EXISTS " SQ_KEYS " ("
    "connector TEXT NOT NULL, identity TEXT NOT NULL, payload_hash TEXT, "
    "first_topic TEXT NOT NULL, first_partition INTEGER NOT NULL, "
    "first_offset INTEGER NOT NULL, applied_at INTEGER NOT NULL, "
    "applied_wall INTEGER NOT NULL, PRIMARY KEY (connector, identity)) "
    /* One B-tree keyed by the key: a rowid table wrote every key twice,
     * its row and its primary key index entry (docs/benchmarks.md). A
     * keys table made before (with a rowid) is used as it is: the
     * statements are the same. */
    "WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS " SQ_OWNERS " ("
    "table_name TEXT NOT NULL, connector TEXT NOT NULL, shared INTEGER NOT "
    "NULL, PRIMARY KEY (table_name, connector));"
    /* Business keys held in memory (keyset.c): a batch's new keys as one
     * row of 24-byte digests; the row's age columns before the blob, so
     * the retention's index and scans never read it. */
    "CREATE TABLE IF NOT EXISTS " SQ_KEY_BATCHES " ("
    "connector TEXT NOT NULL, generation INTEGER NOT NULL, applied_wall "
    "INTEGER NOT NULL, newest_applied_at INTEGER NOT NULL, nkeys INTEGER "
    "NOT NULL, keys BLOB NOT NULL, PRIMARY KEY (connector, generation)) "
    "WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS " SQ_KEYSETS " ("
    "connector TEXT NOT NULL PRIMARY KEY, seed BLOB NOT NULL, pruned "
    "INTEGER NOT NULL, seed_check INTEGER);";

/* The keys' age index serves only the retention's pruning, and every key
 * stored writes it: a connector with a retention makes it (the keys table
 * is shared by the database's connectors: once made, it is kept and holds
 * every connector's keys); one without never reads it. */
static const char AGE_INDEX[] =
    "CREATE INDEX IF NOT EXISTS " SQ_KEYS "_by_age ON " SQ_KEYS
    " (connector, applied_at);"
    /* the same for the keys held in memory: one entry per batch row */
    "CREATE INDEX IF NOT EXISTS " SQ_KEY_BATCHES "_by_age ON " SQ_KEY_BATCHES
    " (connector, newest_applied_at);";

/* The marker's lineage (ABI 1.1), added to a markers table made before
 * it: SQLite has no ADD COLUMN IF NOT EXISTS, so lineage_columns() says
 * whether they are there; all three are added in one transaction. */
static const char LINEAGE_DDL[] =
    "ALTER TABLE " SQ_MARKERS
    " ADD COLUMN last_offset INTEGER NOT NULL DEFAULT -1;"
    "ALTER TABLE " SQ_MARKERS
    " ADD COLUMN last_timestamp_ms INTEGER NOT NULL DEFAULT -1;"
    "ALTER TABLE " SQ_MARKERS
    " ADD COLUMN last_record_hash TEXT NOT NULL DEFAULT '';";

/* 1 when the markers table has the lineage columns (0 on any error). */
static int lineage_columns(sq_sink *s) {
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        s->db,
        "SELECT count(*) FROM pragma_table_info('" SQ_MARKERS
        "') WHERE name IN ('last_offset', 'last_timestamp_ms', "
        "'last_record_hash')",
        -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    int there = rc == SQLITE_ROW && sqlite3_column_int(st, 0) == 3;
    sqlite3_finalize(st);
    return there;
}

/* The one key column of an upsert table the sink makes keyed by it (the
 * rowid: INTEGER PRIMARY KEY), or NULL. Only a required integer key alone
 * is the rowid: a null integer key would take the next rowid instead of
 * being refused, and a rowid holds nothing but integers. Anything else
 * is keyed by a unique index beside the table's own rowid. */
static const tm_column *rowid_key_column(const sq_sink *s) {
    const tm_sink_config *c = s->config;
    const tm_column *key = NULL;
    if (s->set.mode != SQ_UPSERT)
        return NULL;
    for (size_t i = 0; i < c->ncolumns; i++) {
        const tm_column *col = TM_CELEM(tm_column, c->columns, i);
        if (!col->key)
            continue;
        if (key)
            return NULL;
        key = col;
    }
    return key && key->type == TM_TYPE_INT && key->required ? key : NULL;
}

/* CREATE TABLE for the target and, for upsert, its key: the table's rowid
 * when the table is new (FRESH) and its key one required integer column
 * (rowid_key_column: the rows are one B-tree keyed by it, as append's are
 * by their rowid, and ON CONFLICT probes that B-tree), else a unique index
 * on the key columns. An existing table keyed by its INTEGER PRIMARY KEY
 * (KEYED_BY_ROWID) gets no second index. */
static void target_ddl(const sq_sink *s, sq_buf *b, int fresh,
                       int keyed_by_rowid) {
    const tm_sink_config *c = s->config;
    const tm_column *rowid = fresh ? rowid_key_column(s) : NULL;
    sq_buf_add(b, "CREATE TABLE IF NOT EXISTS ");
    sq_buf_ident(b, s->set.table);
    sq_buf_add(b, " (");
    for (size_t i = 0; i < c->ncolumns; i++) {
        const tm_column *col = TM_CELEM(tm_column, c->columns, i);
        sq_buf_ident(b, col->name);
        sq_buf_add(b, " ");
        sq_buf_add(b, sq_type_sql(col->type));
        sq_buf_add(b, col->required ? " NOT NULL, " : ", ");
    }
    for (int h = 0; h < SQ_NHIDDEN; h++) {
        sq_buf_add(b, HIDDEN[h][0]);
        sq_buf_add(b, " ");
        sq_buf_add(b, HIDDEN[h][1]);
        sq_buf_add(b, h + 1 < SQ_NHIDDEN ? ", " : "");
    }
    if (rowid) {
        /* "INTEGER" exactly (sq_type_sql): the column is the rowid */
        sq_buf_add(b, ", PRIMARY KEY (");
        sq_buf_ident(b, rowid->name);
        sq_buf_add(b, ")");
    }
    sq_buf_add(b, ");");
    if (s->set.mode != SQ_UPSERT || rowid || keyed_by_rowid)
        return;
    sq_buf b2 = {0};
    sq_buf_add(&b2, s->set.table);
    sq_buf_add(&b2, "_tm_key");
    sq_buf_add(b, "CREATE UNIQUE INDEX IF NOT EXISTS ");
    sq_buf_ident(b, b2.oom ? "tm_key" : b2.p);
    sq_buf_free(&b2);
    sq_buf_add(b, " ON ");
    sq_buf_ident(b, s->set.table);
    sq_buf_add(b, " (");
    const char *sep = "";
    for (size_t i = 0; i < c->ncolumns; i++) {
        const tm_column *col = TM_CELEM(tm_column, c->columns, i);
        if (!col->key)
            continue;
        sq_buf_add(b, sep);
        sq_buf_ident(b, col->name);
        sep = ", ";
    }
    sq_buf_add(b, ");");
}

static int table_keyed_by_pk(sq_sink *s);

/* 1 when every object the DDL would create is there already: then open
 * needs no write lock (a restart beside a busy writer does not wait). */
static int schema_complete(sq_sink *s) {
    static const char *const HELPER_NAMES[] = {
        SQ_MARKERS,     SQ_DEAD_LETTERS,          SQ_DEAD_LETTERS "_by_offset",
        SQ_KEYS,        SQ_KEYS "_by_age",        SQ_OWNERS,
        SQ_KEY_BATCHES, SQ_KEY_BATCHES "_by_age", SQ_KEYSETS};
    enum { AGE = 4, BATCHES_AGE = 7, TARGET = 10, TARGET_KEY = 11 };
    sq_buf key = {0};
    sq_buf_add(&key, s->set.table);
    sq_buf_add(&key, "_tm_key");
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT count(*) FROM sqlite_schema WHERE name "
                                "IN (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
                                "?10, ?11)",
                                -1, &st, NULL);
    const int nhelpers = (int)(sizeof HELPER_NAMES / sizeof HELPER_NAMES[0]);
    int want = 0;
    for (int i = 0; rc == SQLITE_OK && i < nhelpers; i++) {
        /* the age index only with a retention (AGE_INDEX) */
        if ((i == AGE || i == BATCHES_AGE) && s->set.retention_s == 0)
            continue;
        rc = sqlite3_bind_text(st, i + 1, HELPER_NAMES[i], -1, SQLITE_STATIC);
        want++;
    }
    if (rc == SQLITE_OK && s->set.create && !s->schema_cols) {
        rc = sqlite3_bind_text(st, TARGET, s->set.table, -1, SQLITE_STATIC);
        want++;
    }
    if (rc == SQLITE_OK && s->set.create && !s->schema_cols &&
        s->set.mode == SQ_UPSERT && !key.oom && !table_keyed_by_pk(s)) {
        rc = sqlite3_bind_text(st, TARGET_KEY, key.p, -1, SQLITE_STATIC);
        want++;
    }
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    int complete = rc == SQLITE_ROW && sqlite3_column_int(st, 0) == want;
    sqlite3_finalize(st);
    sq_buf_free(&key);
    /* on any error: not known complete, run the DDL */
    return complete && lineage_columns(s);
}

tm_status sq_schema_create(sq_sink *s, tm_error *err) {
    if (schema_complete(s))
        return TM_OK;
    sq_buf b = {0};
    sq_buf_add(&b, HELPERS);
    if (s->set.retention_s > 0)
        sq_buf_add(&b, AGE_INDEX);
    if (b.oom) {
        sq_buf_free(&b);
        s->host->set_error(err, "out of memory");
        return TM_FATAL;
    }
    /* One write transaction: a host killed half-way leaves nothing, and
     * two hosts opening at once create each table once. Whether the
     * target is there is read inside it: a new table is keyed by its
     * rowid where it can be, one there before keeps its layout. */
    int rc = sq_exec(s, "BEGIN IMMEDIATE");
    const char *step = "BEGIN IMMEDIATE (creating tables)";
    if (rc == SQLITE_OK) {
        rc = sq_exec(s, b.p);
        step = "creating the tables";
    }
    if (rc == SQLITE_OK && s->set.create && !s->schema_cols) {
        tm_error scratch = {sizeof scratch, ""};
        int exists = 0;
        sq_buf t = {0};
        if (sq_table_exists(s, &exists, &scratch) != TM_OK)
            rc = sqlite3_errcode(s->db) != SQLITE_OK ? sqlite3_errcode(s->db)
                                                     : SQLITE_ERROR;
        else
            target_ddl(s, &t, !exists, exists && table_keyed_by_pk(s));
        if (rc == SQLITE_OK)
            rc = t.oom ? SQLITE_NOMEM : sq_exec(s, t.p);
        sq_buf_free(&t);
    }
    if (rc == SQLITE_OK && !lineage_columns(s)) {
        rc = sq_exec(s, LINEAGE_DDL);
        step = "adding the lineage columns to " SQ_MARKERS;
    }
    if (rc == SQLITE_OK) {
        rc = sq_exec(s, "COMMIT");
        step = "COMMIT (creating tables)";
    }
    sq_buf_free(&b);
    if (rc == SQLITE_OK)
        return TM_OK;
    tm_status r = sq_fail(s, rc, step, err);
    sq_rollback(s);
    return r;
}

/* ---- shape -------------------------------------------------------------- */

/* SQLite's column affinity of a declared type (datatype3.html, 3.1). */
static const char *affinity(const char *decl) {
    char up[128];
    size_t i;
    for (i = 0; decl && decl[i] && i + 1 < sizeof up; i++)
        up[i] =
            (char)(decl[i] >= 'a' && decl[i] <= 'z' ? decl[i] - 32 : decl[i]);
    up[i] = '\0';
    if (strstr(up, "INT"))
        return "INTEGER";
    if (strstr(up, "CHAR") || strstr(up, "CLOB") || strstr(up, "TEXT"))
        return "TEXT";
    if (!up[0] || strstr(up, "BLOB"))
        return "BLOB";
    if (strstr(up, "REAL") || strstr(up, "FLOA") || strstr(up, "DOUB"))
        return "REAL";
    return "NUMERIC";
}

tm_status sq_table_exists(sq_sink *s, int *exists, tm_error *err) {
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        s->db,
        /* SQLite's names are case-insensitive (ASCII), as NOCASE folds */
        "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1 "
        "COLLATE NOCASE",
        -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 1, s->set.table, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK)
        rc = sqlite3_step(st);
    sqlite3_finalize(st);
    *exists = rc == SQLITE_ROW;
    if (rc == SQLITE_ROW || rc == SQLITE_DONE)
        return TM_OK;
    return sq_fail(s, rc, "looking up the table", err);
}

/* The expected column list, for messages: "id INTEGER NOT NULL, ...". */
static void expected_shape(const sq_sink *s, sq_buf *b) {
    for (size_t i = 0; i < s->config->ncolumns; i++) {
        const tm_column *col = TM_CELEM(tm_column, s->config->columns, i);
        sq_buf_add(b, i ? ", " : "");
        sq_buf_add(b, col->name);
        sq_buf_add(b, " ");
        sq_buf_add(b, sq_type_sql(col->type));
    }
    for (int h = 0; h < SQ_NHIDDEN; h++) {
        sq_buf_add(b, ", ");
        sq_buf_add(b, HIDDEN[h][0]);
        sq_buf_add(b, " ");
        sq_buf_add(b, HIDDEN[h][1]);
    }
}

typedef struct found_col {
    char *name, *decl;
    int notnull, pk;
} found_col;

/* Reads the table's columns (PRAGMA table_info, the table name bound). */
static int read_columns(sq_sink *s, found_col **out, size_t *n, sq_buf *shape) {
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(
        s->db,
        "SELECT name, type, \"notnull\", pk FROM pragma_table_info(?1) "
        "ORDER BY cid",
        -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 1, s->set.table, -1, SQLITE_STATIC);
    *out = NULL;
    *n = 0;
    while (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        const char *decl = (const char *)sqlite3_column_text(st, 1);
        found_col *f = realloc(*out, (*n + 1) * sizeof *f);
        if (!f) {
            rc = SQLITE_NOMEM;
            break;
        }
        *out = f;
        f = &f[(*n)++];
        f->name = strdup(name ? name : "");
        f->decl = strdup(decl ? decl : "");
        f->notnull = sqlite3_column_int(st, 2);
        f->pk = sqlite3_column_int(st, 3);
        if (!f->name || !f->decl) {
            rc = SQLITE_NOMEM;
            break;
        }
        sq_buf_add(shape, *n > 1 ? ", " : "");
        sq_buf_add(shape, f->name);
        sq_buf_add(shape, f->decl[0] ? " " : "");
        sq_buf_add(shape, f->decl);
        sq_buf_add(shape, f->notnull ? " NOT NULL" : "");
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static void free_columns(found_col *f, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(f[i].name);
        free(f[i].decl);
    }
    free(f);
}

static const found_col *find_col(const found_col *f, size_t n,
                                 const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(f[i].name, name) == 0) /* SQLite's own rule */
            return &f[i];
    return NULL;
}

/* The table's INTEGER PRIMARY KEY when it is one of the mapping's
 * columns (its index in *COL, when COL), or NULL. It has no index of its
 * own (in a rowid table it is the rowid). */
static const found_col *integer_pk_mapped(const sq_sink *s, const found_col *f,
                                          size_t n, size_t *col) {
    size_t npk = 0;
    const found_col *pk = NULL;
    for (size_t i = 0; i < n; i++)
        if (f[i].pk)
            npk++, pk = &f[i];
    if (npk != 1 || strcasecmp(pk->decl, "INTEGER") != 0)
        return NULL;
    for (size_t i = 0; i < s->config->ncolumns; i++)
        if (strcasecmp(TM_CELEM(tm_column, s->config->columns, i)->name,
                       pk->name) == 0) {
            if (col)
                *col = i;
            return pk;
        }
    return NULL;
}

/* The table's INTEGER PRIMARY KEY when it is the mapping's one key
 * column, or NULL. */
static const found_col *integer_pk_key(const sq_sink *s, const found_col *f,
                                       size_t n) {
    size_t nkeys = 0;
    const tm_column *key = NULL;
    for (size_t i = 0; i < s->config->ncolumns; i++) {
        const tm_column *c = TM_CELEM(tm_column, s->config->columns, i);
        if (c->key)
            nkeys++, key = c;
    }
    const found_col *pk = integer_pk_mapped(s, f, n, NULL);
    return nkeys == 1 && pk && strcasecmp(key->name, pk->name) == 0 ? pk : NULL;
}

/* 1 when the target table exists keyed by its INTEGER PRIMARY KEY on a
 * mapped column: no unique index is added beside it. On the key column
 * (integer_pk_key) it needs none; on another (the table was made keyed by
 * a column the mapping no longer keys by) the table keeps its key, as a
 * table keeps its unique index, and sq_shape_check refuses the mapping: an
 * index on the new key would make every record whose old key another row
 * holds a dead letter. A table whose INTEGER PRIMARY KEY is not mapped (a
 * rowid of its own, named) is given the index. 0 when not, or on any
 * error (then the DDL's IF NOT EXISTS decides). */
static int table_keyed_by_pk(sq_sink *s) {
    found_col *f;
    size_t n;
    sq_buf shape = {0};
    int rc = read_columns(s, &f, &n, &shape);
    int keyed = rc == SQLITE_OK && s->set.mode == SQ_UPSERT &&
                integer_pk_mapped(s, f, n, NULL) != NULL;
    sq_buf_free(&shape);
    free_columns(f, n);
    return keyed;
}

/* What SQLite says refusing a null in NOT NULL column COL of the target
 * (the table's name as stored), into s->null_key_detail: an INTEGER
 * PRIMARY KEY that is the rowid gives a null the next rowid instead, so
 * the sink refuses a null there itself, as a table keyed by a unique
 * index (its column NOT NULL) does, in upsert and in append. */
static int null_key_detail(sq_sink *s, const found_col *col) {
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(s->db,
                                "SELECT name FROM sqlite_schema WHERE type = "
                                "'table' AND name = ?1 COLLATE NOCASE",
                                -1, &st, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_bind_text(st, 1, s->set.table, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        snprintf(s->null_key_detail, sizeof s->null_key_detail,
                 "NOT NULL constraint failed: %s.%s", name ? name : "",
                 col->name);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* 1 when a unique index (or the primary key) covers exactly the key
 * columns, so that ON CONFLICT (keys) has a constraint to act on. */
static int has_key_index(sq_sink *s, const found_col *f, size_t n, int *rc) {
    size_t nkeys = 0;
    for (size_t i = 0; i < s->config->ncolumns; i++)
        nkeys += TM_CELEM(tm_column, s->config->columns, i)->key != 0;
    if (integer_pk_key(s, f, n))
        return 1;
    sqlite3_stmt *st = NULL;
    *rc = sqlite3_prepare_v2(
        s->db,
        "SELECT il.name, ii.name FROM pragma_index_list(?1) AS il, "
        "pragma_index_info(il.name) AS ii WHERE il.\"unique\" = 1 "
        "AND il.partial = 0 ORDER BY il.name",
        -1, &st, NULL);
    if (*rc == SQLITE_OK)
        *rc = sqlite3_bind_text(st, 1, s->set.table, -1, SQLITE_STATIC);
    int found = 0;
    char index[256] = "";
    size_t cols = 0, matched = 0;
    while (*rc == SQLITE_OK && !found &&
           (*rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *iname = (const char *)sqlite3_column_text(st, 0);
        const char *cname = (const char *)sqlite3_column_text(st, 1);
        if (!iname || strcmp(iname, index) != 0) { /* next index */
            found = cols > 0 && cols == nkeys && matched == nkeys;
            snprintf(index, sizeof index, "%s", iname ? iname : "");
            cols = matched = 0;
        }
        cols++;
        for (size_t i = 0; cname && i < s->config->ncolumns; i++) {
            const tm_column *c = TM_CELEM(tm_column, s->config->columns, i);
            matched += c->key && strcasecmp(c->name, cname) == 0;
        }
        *rc = SQLITE_OK;
    }
    if (*rc == SQLITE_DONE) {
        *rc = SQLITE_OK;
        found = found || (cols > 0 && cols == nkeys && matched == nkeys);
    }
    sqlite3_finalize(st);
    return found;
}

/* tm_column_conflict of batch column COL with the table's FC, which says
 * more where the declaration has the affinity COL's type needs (the values
 * stored fit, only the word differs): a word this sink writes for another
 * type is a type changed at the source or, for INTEGER and TEXT, a column
 * of an older build, which declared bool and timestamp INTEGER and json
 * TEXT; a word it never writes is a table made by hand. Such a column is
 * declared again to go on (docs/sinks/sqlite.md, "Upgrading"). */
static void decl_conflict(const tm_column *col, const found_col *fc, char *why,
                          size_t size) {
    tm_type have = sq_type_of_decl(fc->decl);
    const char *want = sq_type_sql(col->type);
    const char *decl = fc->decl[0] ? fc->decl : "untyped";
    int same_affinity = strcmp(affinity(fc->decl), affinity(want)) == 0;
    if (same_affinity && !have) {
        snprintf(why, size,
                 "column \"%s\" is declared %s in the table, not this sink's "
                 "word for the batch's %s (%s, the same affinity): declare it "
                 "again as %s (docs/sinks/sqlite.md, \"Upgrading\")",
                 col->name, decl, tm_type_name(col->type), want, want);
        return;
    }
    if (!tm_column_conflict(col, have, decl, fc->notnull, why, size) ||
        !same_affinity || have == col->type ||
        (have != TM_TYPE_INT && have != TM_TYPE_TEXT))
        return;
    size_t len = strlen(why);
    snprintf(why + len, size - len,
             ", or the column was made by an older build (which declared "
             "bool and timestamp INTEGER, json TEXT): if so, declare it "
             "again as %s (docs/sinks/sqlite.md, \"Upgrading\")",
             want);
}

tm_status sq_shape_check(sq_sink *s, tm_error *err) {
    found_col *f;
    size_t n;
    sq_buf shape = {0}, want = {0};
    char why[TM_ERROR_MAX] = "";
    int rc = read_columns(s, &f, &n, &shape);
    expected_shape(s, &want);
    tm_status r = TM_OK;
    if (rc != SQLITE_OK) {
        r = sq_fail(s, rc, "reading the table's columns", err);
        goto out;
    }
    /* find_col folds case as SQLite does: a batch column renamed in case
     * only would be taken for the old one (SQLite never holds both). */
    if (s->schema_cols && n > 0) {
        const char **names = malloc(n * sizeof *names);
        if (!names) {
            r = TM_RETRY;
            s->host->set_error(err, "out of memory");
            goto out;
        }
        for (size_t i = 0; i < n; i++)
            names[i] = f[i].name;
        tm_columns_case_renamed(s->config->columns, s->config->ncolumns, names,
                                n, why, sizeof why);
        free(names);
    }
    for (size_t i = 0; i < s->config->ncolumns && !why[0]; i++) {
        const tm_column *col = TM_CELEM(tm_column, s->config->columns, i);
        const found_col *fc = find_col(f, n, col->name);
        const char *aff = fc ? affinity(fc->decl) : NULL;
        const char *need = affinity(sq_type_sql(col->type));
        if (!fc)
            snprintf(why, sizeof why, "column \"%s\" is missing", col->name);
        else if (s->schema_cols)
            /* Columns of a batch: the type the sink declared for it, and
             * NOT NULL only where required, so that a change stopped once
             * stops again after a restart (affinity would take int, bool
             * and timestamp for one another). */
            decl_conflict(col, fc, why, sizeof why);
        else if (strcmp(aff, need) != 0)
            snprintf(why, sizeof why,
                     "column \"%s\" is %s (%s affinity), the mapping needs %s",
                     col->name, fc->decl[0] ? fc->decl : "untyped", aff, need);
    }
    for (int h = 0; h < SQ_NHIDDEN && !why[0]; h++) {
        const found_col *fc = find_col(f, n, HIDDEN[h][0]);
        if (!fc || strncmp(affinity(fc->decl), HIDDEN[h][1],
                           strlen(affinity(fc->decl))) != 0)
            snprintf(why, sizeof why,
                     "hidden column \"%s\" %s is missing or of another type "
                     "(create the table with the sink, or add it)",
                     HIDDEN[h][0], HIDDEN[h][1]);
    }
    for (size_t i = 0; i < n && !why[0]; i++) {
        /* ours: a hidden column or a mapped one (checked above) */
        int ours = strncasecmp(f[i].name, SQ_HIDDEN_PREFIX,
                               strlen(SQ_HIDDEN_PREFIX)) == 0;
        for (size_t k = 0; k < s->config->ncolumns && !ours; k++)
            ours = strcasecmp(TM_CELEM(tm_column, s->config->columns, k)->name,
                              f[i].name) == 0;
        /* a batch of deletes only writes no column but its key */
        if (!ours && f[i].notnull && !s->follow.deletes_only)
            snprintf(why, sizeof why,
                     "column \"%s\" is NOT NULL but not in the mapping: "
                     "every insert would fail",
                     f[i].name);
    }
    /* in upsert the key (has_key_index refuses another); in append any
     * mapped column, as where an upsert connector made the table */
    const found_col *pk = integer_pk_mapped(s, f, n, &s->null_key_col);
    s->null_key_detail[0] = '\0';
    if (!why[0] && pk && pk->notnull &&
        (rc = null_key_detail(s, pk)) != SQLITE_OK) {
        r = sq_fail(s, rc, "reading the table's name", err);
        goto out;
    }
    if (!why[0] && s->set.mode == SQ_UPSERT && !has_key_index(s, f, n, &rc)) {
        if (rc != SQLITE_OK) {
            r = sq_fail(s, rc, "reading the table's indexes", err);
            goto out;
        }
        snprintf(why, sizeof why,
                 "mode upsert needs a UNIQUE index on exactly the key "
                 "columns; the table has none");
    }
    if (why[0]) {
        s->host->set_error(err,
                           "setting \"table\": \"%s\" does not fit the "
                           "mapping: %s. Table: (%s). Mapping: (%s)",
                           s->set.table, why, shape.oom ? "?" : shape.p,
                           want.oom ? "?" : want.p);
        r = TM_INVALID;
    }
out:
    free_columns(f, n);
    sq_buf_free(&shape);
    sq_buf_free(&want);
    return r;
}

/* ---- statements --------------------------------------------------------- */

/* INSERT of one row: mapped columns, then the hidden ones; for upsert an
 * ON CONFLICT on the key columns that updates the others (and the key
 * columns too for change events). */
static void insert_sql(const sq_sink *s, sq_buf *b) {
    const tm_sink_config *c = s->config;
    char num[32];
    sq_buf_add(b, "INSERT INTO ");
    sq_buf_ident(b, s->set.table);
    sq_buf_add(b, " (");
    for (size_t i = 0; i < c->ncolumns; i++) {
        sq_buf_ident(b, TM_CELEM(tm_column, c->columns, i)->name);
        sq_buf_add(b, ", ");
    }
    for (int h = 0; h < SQ_NHIDDEN; h++) {
        sq_buf_add(b, HIDDEN[h][0]);
        sq_buf_add(b, h + 1 < SQ_NHIDDEN ? ", " : ") VALUES (");
    }
    for (size_t i = 0; i < c->ncolumns + SQ_NHIDDEN; i++) {
        snprintf(num, sizeof num, "%s?%zu", i ? ", " : "", i + 1);
        sq_buf_add(b, num);
    }
    sq_buf_add(b, ")");
    if (s->set.mode != SQ_UPSERT)
        return;
    const char *sep = "";
    sq_buf_add(b, " ON CONFLICT (");
    for (size_t i = 0; i < c->ncolumns; i++) {
        const tm_column *col = TM_CELEM(tm_column, c->columns, i);
        if (col->key) {
            sq_buf_add(b, sep);
            sq_buf_ident(b, col->name);
            sep = ", ";
        }
    }
    sq_buf_add(b, ") DO UPDATE SET ");
    /* A change event's row is its image, the key's spelling included
     * (under a NOCASE key "A" and "a" are one key): as PostgreSQL does. */
    int cdc = (c->flags & TM_CONFIG_CDC) != 0;
    for (size_t i = 0; i < c->ncolumns; i++) {
        const tm_column *col = TM_CELEM(tm_column, c->columns, i);
        if (col->key && !cdc)
            continue;
        sq_buf_ident(b, col->name);
        sq_buf_add(b, " = excluded.");
        sq_buf_ident(b, col->name);
        sq_buf_add(b, ", ");
    }
    for (int h = 0; h < SQ_NHIDDEN; h++) {
        sq_buf_add(b, HIDDEN[h][0]);
        sq_buf_add(b, " = excluded.");
        sq_buf_add(b, HIDDEN[h][0]);
        sq_buf_add(b, h + 1 < SQ_NHIDDEN ? ", " : "");
    }
}

/* DELETE of the row of one key (TM_OP_DELETE): the key columns' values
 * bound in column order; no key columns (not upsert) deletes nothing. */
static void delete_sql(const sq_sink *s, sq_buf *b) {
    const tm_sink_config *c = s->config;
    char num[32];
    const char *sep = " WHERE ";
    size_t k = 0;
    sq_buf_add(b, "DELETE FROM ");
    sq_buf_ident(b, s->set.table);
    for (size_t i = 0; i < c->ncolumns; i++) {
        const tm_column *col = TM_CELEM(tm_column, c->columns, i);
        if (!col->key)
            continue;
        sq_buf_add(b, sep);
        sq_buf_ident(b, col->name);
        snprintf(num, sizeof num, " = ?%zu", ++k);
        sq_buf_add(b, num);
        sep = " AND ";
    }
    if (k == 0)
        sq_buf_add(b, " WHERE 0");
}

/* SELECT of one partition's rows and dead letters, in offset order: four
 * fixed columns (offset, kind, the row's identity or the dead letter's
 * reason, the dead letter's detail; scan.c reads them as SQ_SCAN_*), then a
 * row's mapped columns in config order (NULL for a dead letter). Four, as
 * the hidden columns are four: a table at SQLite's column limit is still
 * scanned in one result set. */
static void scan_sql(const sq_sink *s, sq_buf *b) {
    sq_buf_add(b, "SELECT _tm_offset, 1, _tm_identity, NULL");
    for (size_t i = 0; i < s->config->ncolumns; i++) {
        sq_buf_add(b, ", ");
        sq_buf_ident(b, TM_CELEM(tm_column, s->config->columns, i)->name);
    }
    sq_buf_add(b, " FROM ");
    sq_buf_ident(b, s->set.table);
    sq_buf_add(b, " WHERE _tm_topic = ?2 AND _tm_partition = ?3 UNION ALL "
                  "SELECT \"offset\", 2, reason, detail");
    for (size_t i = 0; i < s->config->ncolumns; i++)
        sq_buf_add(b, ", NULL");
    sq_buf_add(b, " FROM " SQ_DEAD_LETTERS
                  " WHERE connector = ?1 AND topic = ?2 AND \"partition\" = "
                  "?3 ORDER BY 1, 2");
}

static const char *const FIXED_SQL[SQ_NSTMTS] = {
    [SQ_INS_DL] = "INSERT INTO " SQ_DEAD_LETTERS
                  " (connector, topic, \"partition\", \"offset\", "
                  "timestamp_ms, reason, detail, \"key\", \"value\", headers, "
                  "batch_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
                  "?11)",
    [SQ_MK_GET] = "SELECT next_offset, epoch, last_batch_id, rows, "
                  "dead_letters, filtered, duplicates, last_offset, "
                  "last_timestamp_ms, last_record_hash FROM " SQ_MARKERS
                  " WHERE connector = ?1 AND topic = ?2 AND \"partition\" = ?3",
    /* Creates a missing marker at the offset given, raises the epoch of
     * an existing one (and with ?5 = 1, TM_CLAIM_RESET, sets its offset
     * and forgets its lineage: no record is known applied there). */
    [SQ_MK_CLAIM] = "INSERT INTO " SQ_MARKERS
                    " (connector, topic, \"partition\", next_offset, epoch) "
                    "VALUES (?1, ?2, ?3, ?4, 1) ON CONFLICT (connector, topic, "
                    "\"partition\") DO UPDATE SET epoch = epoch + 1, "
                    "next_offset = CASE WHEN ?5 THEN excluded.next_offset "
                    "ELSE next_offset END, last_offset = CASE WHEN ?5 THEN "
                    "-1 ELSE last_offset END, last_record_hash = CASE WHEN "
                    "?5 THEN '' ELSE last_record_hash END",
    [SQ_MK_UPD] = "UPDATE " SQ_MARKERS
                  " SET next_offset = ?4, epoch = ?5, last_batch_id = ?6, "
                  "rows = ?7, dead_letters = ?8, filtered = ?9, duplicates = "
                  "?10, last_offset = ?11, last_timestamp_ms = ?12, "
                  "last_record_hash = ?13 WHERE connector = ?1 AND topic = ?2 "
                  "AND \"partition\" = ?3",
    [SQ_KEY_INS] = "INSERT OR IGNORE INTO " SQ_KEYS
                   " (connector, identity, payload_hash, first_topic, "
                   "first_partition, first_offset, applied_at, "
                   "applied_wall) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [SQ_KEY_GET] =
        "SELECT payload_hash, first_topic, first_partition, "
        "first_offset FROM " SQ_KEYS " WHERE connector = ?1 AND identity = ?2",
    [SQ_KEY_DEL] =
        "DELETE FROM " SQ_KEYS " WHERE connector = ?1 AND identity = ?2",
    /* Both clocks must say old (docs/sinks/sqlite.md, Dedup retention). */
    [SQ_KEY_PRUNE] = "DELETE FROM " SQ_KEYS " WHERE connector = ?1 AND "
                     "applied_at < ?2 AND applied_wall < ?3",
    /* the newest generation is the batch rows' own (no write of the
     * connector's row per commit): a removal moves pruned, and every
     * process reloads then, so a generation number freed by it and used
     * again is never taken for one already loaded */
    [SQ_KS_GET] =
        "SELECT seed, (SELECT coalesce(max(generation), 0) FROM " SQ_KEY_BATCHES
        " WHERE connector = ?1), pruned, seed_check FROM " SQ_KEYSETS
        " WHERE connector = ?1",
    [SQ_KS_PUT] = "INSERT INTO " SQ_KEYSETS
                  " (connector, seed, pruned, seed_check) VALUES (?1, ?2, ?3, "
                  "?4) ON CONFLICT (connector) DO UPDATE SET pruned = "
                  "excluded.pruned",
    [SQ_KB_INS] = "INSERT INTO " SQ_KEY_BATCHES
                  " (connector, generation, applied_wall, newest_applied_at, "
                  "nkeys, keys) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [SQ_KB_COUNT] =
        "SELECT count(*), coalesce(sum(nkeys), 0) FROM " SQ_KEY_BATCHES
        " WHERE connector = ?1",
    [SQ_KB_LOAD] = "SELECT keys FROM " SQ_KEY_BATCHES
                   " WHERE connector = ?1 AND generation > ?2",
    /* a batch row goes when its newest key is past both clocks */
    [SQ_KB_PRUNE] = "DELETE FROM " SQ_KEY_BATCHES
                    " WHERE connector = ?1 AND newest_applied_at < ?2 AND "
                    "applied_wall < ?3 RETURNING keys",
    [SQ_KEY_LOAD] =
        "SELECT identity, payload_hash FROM " SQ_KEYS " WHERE connector = ?1",
    [SQ_KEY_PRUNE_RET] =
        "DELETE FROM " SQ_KEYS " WHERE connector = ?1 AND applied_at < ?2 AND "
        "applied_wall < ?3 RETURNING identity, payload_hash",
    [SQ_KEY_ANY] =
        "SELECT EXISTS (SELECT 1 FROM " SQ_KEYS " WHERE connector = ?1)",
};

static int is_target_stmt(int i) {
    return i == SQ_INS_ROW || i == SQ_SCAN || i == SQ_DEL_ROW;
}

/* Prepares the statements of s->stmt that only_target selects (1: the
 * target table's three, 0: all), finalizing any there. Columns from the
 * events' schemas and none yet: no target statement (no table to name). */
static tm_status prepare(sq_sink *s, int only_target, tm_error *err) {
    sq_buf ins = {0}, scan = {0}, del = {0};
    insert_sql(s, &ins);
    scan_sql(s, &scan);
    delete_sql(s, &del);
    tm_status r = TM_OK;
    if (ins.oom || scan.oom || del.oom) {
        s->host->set_error(err, "out of memory");
        r = TM_FATAL;
    }
    int no_target = s->schema_cols && s->config->ncolumns == 0;
    for (int i = 0; r == TM_OK && i < SQ_NSTMTS; i++) {
        if ((only_target && !is_target_stmt(i)) ||
            (no_target && is_target_stmt(i)))
            continue;
        sqlite3_finalize(s->stmt[i]);
        s->stmt[i] = NULL;
        const char *sql = i == SQ_INS_ROW   ? ins.p
                          : i == SQ_SCAN    ? scan.p
                          : i == SQ_DEL_ROW ? del.p
                                            : FIXED_SQL[i];
        int rc = sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT,
                                    &s->stmt[i], NULL);
        if (rc != SQLITE_OK) {
            /* A table that changed under us, or upsert without the index. */
            s->host->set_error(err, "setting \"table\": preparing %.200s: %s",
                               sql, sqlite3_errmsg(s->db));
            /* SQLITE_ERROR: a column or table the SQL names is not
             * there; anything else by its class (not a database: FATAL). */
            r = (rc & 0xff) == SQLITE_ERROR ? TM_INVALID : sq_status_of(rc);
        }
    }
    sq_buf_free(&ins);
    sq_buf_free(&scan);
    sq_buf_free(&del);
    return r;
}

tm_status sq_prepare_all(sq_sink *s, tm_error *err) {
    return prepare(s, 0, err);
}

tm_status sq_prepare_bare_scan(sq_sink *s, tm_error *err) {
    int exists = 0;
    tm_status r = sq_table_exists(s, &exists, err);
    if (r != TM_OK)
        return r;
    sq_buf b = {0};
    if (exists) {
        scan_sql(s, &b); /* s->config has no columns: the fixed four */
    } else {
        sq_buf_add(&b,
                   "SELECT \"offset\", 2, reason, detail FROM " SQ_DEAD_LETTERS
                   " WHERE connector = ?1 AND topic = ?2 AND "
                   "\"partition\" = ?3 ORDER BY 1, 2");
    }
    int rc = b.oom
                 ? SQLITE_NOMEM
                 : sqlite3_prepare_v2(s->db, b.p, -1, &s->stmt[SQ_SCAN], NULL);
    sq_buf_free(&b);
    return rc == SQLITE_OK ? TM_OK : sq_fail(s, rc, "preparing the scan", err);
}

/* ALTER TABLE ... ADD COLUMN for each column of s->config the table lacks
 * (nullable: the rows before it have none). SQLITE_OK or the error. */
static int add_missing(sq_sink *s) {
    found_col *f;
    size_t n;
    sq_buf shape = {0};
    int rc = read_columns(s, &f, &n, &shape);
    sq_buf_free(&shape);
    for (size_t i = 0; rc == SQLITE_OK && i < s->config->ncolumns; i++) {
        const tm_column *col = TM_CELEM(tm_column, s->config->columns, i);
        if (find_col(f, n, col->name))
            continue;
        sq_buf b = {0};
        sq_buf_add(&b, "ALTER TABLE ");
        sq_buf_ident(&b, s->set.table);
        sq_buf_add(&b, " ADD COLUMN ");
        sq_buf_ident(&b, col->name);
        sq_buf_add(&b, " ");
        sq_buf_add(&b, sq_type_sql(col->type));
        rc = b.oom ? SQLITE_NOMEM : sq_exec(s, b.p);
        sq_buf_free(&b);
    }
    free_columns(f, n);
    return rc;
}

tm_status sq_schema_evolve(sq_sink *s, tm_error *err) {
    sq_buf b = {0};
    int existed = 0;
    tm_status r = sq_table_exists(s, &existed, err);
    if (r != TM_OK)
        return r;
    int rc = SQLITE_OK;
    const char *step = "creating the table";
    if (s->set.create) {
        /* The table and upsert's unique index only when this batch makes
         * the table: a table there before has its key in its index (made
         * with it by an earlier batch, or by hand), and a batch keyed
         * otherwise (the host refused a key change, then was restarted)
         * is refused below, not given a second index. */
        if (!existed) {
            target_ddl(s, &b, 1, 0);
            rc = b.oom ? SQLITE_NOMEM : sq_exec(s, b.p);
        }
        if (rc == SQLITE_OK) {
            step = "adding columns";
            rc = add_missing(s);
        }
    }
    sq_buf_free(&b);
    if (rc != SQLITE_OK)
        return sq_fail(s, rc, step, err);
    /* A column of another type, a key the index does not match: the
     * operator decides; no batch goes in meanwhile. */
    r = sq_shape_check(s, err);
    if (r == TM_INVALID)
        return TM_FATAL;
    return r == TM_OK ? prepare(s, 1, err) : r;
}
