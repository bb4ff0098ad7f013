/* The tables the sink creates (in one transaction at open, under an
 * advisory lock so that hosts starting together do not collide), and the
 * check that an existing target table fits the mapping. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_sink.h"

/* The hidden coordinate columns, in the order of every COPY. */
static const char *const HIDDEN[PG_NHIDDEN][2] = {{"_tm_topic", "text"},
                                                  {"_tm_partition", "integer"},
                                                  {"_tm_offset", "bigint"},
                                                  {"_tm_identity", "text"}};
static const int HIDDEN_NOTNULL[PG_NHIDDEN] = {1, 1, 1, 0};

/* Any key of the two-int advisory lock space: "TMDL" (tidemark DDL). */
#define PG_DDL_LOCK_CLASS 0x544D444C

/* What open must make, one bit per object (missing_objects). Only what is
 * missing gets DDL: on PostgreSQL ALTER TABLE ... ADD COLUMN IF NOT EXISTS
 * of a column there and CREATE INDEX IF NOT EXISTS of an index there still
 * need the table's owner, so a role with only privileges on up-to-date
 * helper tables could not otherwise open (with a new target table, say). */
enum {
    PG_MISS_SCHEMA = 1u << 0,
    PG_MISS_MARKERS = 1u << 1,
    PG_MISS_LINEAGE = 1u << 2, /* a lineage column of the markers */
    PG_MISS_DLS = 1u << 3,
    PG_MISS_DLS_INDEX = 1u << 4,
    PG_MISS_KEYS = 1u << 5,
    PG_MISS_KEYS_AGE = 1u << 6, /* only with a retention */
    PG_MISS_WALL = 1u << 7,     /* applied_wall of the keys */
    PG_MISS_OWNERS = 1u << 8,
    PG_MISS_TABLE = 1u << 9, /* only with "create" */
    PG_MISS_KEYSETS = 1u << 10,
    PG_MISS_KEY_BATCHES = 1u << 11,
    PG_MISS_KEYS_GUARD = 1u << 12, /* only for keys held in memory */
    PG_NMISS = 13
};

/* *missing: the PG_MISS_* bits of the objects not there (a missing table
 * also lacks its indexes and added columns). One query on the catalog. */
static tm_status missing_objects(pg_sink *s, unsigned *missing, tm_error *err) {
    pg_buf bk = {0}, bd = {0};
    pg_buf_add(&bk, s->q_schema);
    pg_buf_add(&bk, "." PG_KEYS "_by_age");
    pg_buf_add(&bd, s->q_schema);
    pg_buf_add(&bd, "." PG_DEAD_LETTERS "_by_offset");
    tm_status r = TM_RETRY;
    if (bk.oom || bd.oom) {
        s->host->set_error(err, "out of memory");
    } else {
        const char *v[13] = {s->q_schema,
                             s->q_markers,
                             s->q_dls,
                             bd.p,
                             s->q_keys,
                             bk.p,
                             s->q_owners,
                             s->q_table,
                             s->set.retention_s > 0 ? "t" : "f",
                             s->set.create ? "t" : "f",
                             s->q_keysets,
                             s->q_key_batches,
                             pg_keyset_on(s) ? "t" : "f"};
        /* Columns in the order of the PG_MISS_* bits. */
        PGresult *res = pg_query(
            s,
            "SELECT to_regnamespace($1) IS NULL, to_regclass($2) IS NULL, "
            "(SELECT count(*) FROM pg_attribute WHERE attrelid = "
            "to_regclass($2) AND NOT attisdropped AND attname IN "
            "('last_offset', 'last_timestamp_ms', 'last_record_hash')) < 3, "
            "to_regclass($3) IS NULL, to_regclass($4) IS NULL, "
            "to_regclass($5) IS NULL, $9::bool AND to_regclass($6) IS NULL, "
            "NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = "
            "to_regclass($5) AND attname = 'applied_wall' AND NOT "
            "attisdropped), to_regclass($7) IS NULL, $10::bool AND "
            "to_regclass($8) IS NULL, to_regclass($11) IS NULL, "
            "to_regclass($12) IS NULL, $13::bool AND NOT EXISTS (SELECT 1 "
            "FROM pg_trigger WHERE tgrelid = to_regclass($5) AND tgname = "
            "'" PG_KEYS_GUARD "')",
            13, v, NULL, NULL, 1, "checking the tables", &r, err);
        if (res && (PQntuples(res) != 1 || PQnfields(res) != PG_NMISS)) {
            s->host->set_error(err, "checking the tables: unexpected answer");
            r = TM_RETRY;
        } else if (res) {
            *missing = 0;
            for (int i = 0; i < PG_NMISS; i++)
                if (*PQgetvalue(res, 0, i) == 't')
                    *missing |= 1u << i;
        }
        PQclear(res);
    }
    pg_buf_free(&bk);
    pg_buf_free(&bd);
    return r;
}

/* The DDL of the helper objects in MISSING (PG_MISS_*). */
static void helpers_ddl(pg_sink *s, unsigned missing, pg_buf *b) {
    if (missing & PG_MISS_SCHEMA) {
        pg_buf_add(b, "CREATE SCHEMA IF NOT EXISTS ");
        pg_buf_add(b, s->q_schema);
        pg_buf_add(b, "; ");
    }
    if (missing & PG_MISS_MARKERS) {
        pg_buf_add(b, "CREATE TABLE IF NOT EXISTS ");
        pg_buf_add(b, s->q_markers);
        pg_buf_add(b,
                   " (connector text NOT NULL, topic text NOT NULL, "
                   "\"partition\" integer NOT NULL, next_offset bigint NOT "
                   "NULL, epoch bigint NOT NULL, last_batch_id text NOT NULL "
                   "DEFAULT '', \"rows\" bigint NOT NULL DEFAULT 0, "
                   "dead_letters bigint NOT NULL DEFAULT 0, filtered bigint "
                   "NOT NULL DEFAULT 0, duplicates bigint NOT NULL DEFAULT 0, "
                   "PRIMARY KEY (connector, topic, \"partition\")); ");
    }
    if (missing & PG_MISS_LINEAGE) {
        /* The marker's lineage (ABI 1.1), also on a table made before it. */
        pg_buf_add(b, "ALTER TABLE ");
        pg_buf_add(b, s->q_markers);
        pg_buf_add(b, " ADD COLUMN IF NOT EXISTS last_offset bigint NOT NULL "
                      "DEFAULT -1, ADD COLUMN IF NOT EXISTS last_timestamp_ms "
                      "bigint NOT NULL DEFAULT -1, ADD COLUMN IF NOT EXISTS "
                      "last_record_hash text NOT NULL DEFAULT ''; ");
    }
    if (missing & PG_MISS_DLS) {
        pg_buf_add(b, "CREATE TABLE IF NOT EXISTS ");
        pg_buf_add(b, s->q_dls);
        pg_buf_add(b, " (connector text NOT NULL, topic text NOT NULL, "
                      "\"partition\" integer NOT NULL, \"offset\" bigint NOT "
                      "NULL, timestamp_ms bigint, reason text NOT NULL, detail "
                      "text, \"key\" bytea, \"value\" bytea, headers text, "
                      "batch_id text NOT NULL); ");
    }
    if (missing & PG_MISS_DLS_INDEX) {
        pg_buf_add(b, "CREATE INDEX IF NOT EXISTS " PG_DEAD_LETTERS
                      "_by_offset ON ");
        pg_buf_add(b, s->q_dls);
        pg_buf_add(b, " (connector, topic, \"partition\", \"offset\"); ");
    }
    if (missing & PG_MISS_KEYS) {
        pg_buf_add(b, "CREATE TABLE IF NOT EXISTS ");
        pg_buf_add(b, s->q_keys);
        pg_buf_add(b, " (connector text NOT NULL, identity text NOT NULL, "
                      "payload_hash text, first_topic text NOT NULL, "
                      "first_partition integer NOT NULL, first_offset bigint "
                      "NOT NULL, applied_at bigint NOT NULL, applied_wall "
                      "bigint NOT NULL, PRIMARY KEY (connector, identity)); ");
    }
    /* The keys' age index serves only the retention's pruning, and every
     * key stored pays for it: a connector with a retention makes it (the
     * keys table is shared by the schema's connectors: once made, it is
     * kept and every connector's keys go into it); one without never
     * reads it (missing_objects never reports it). */
    if (missing & PG_MISS_KEYS_AGE) {
        pg_buf_add(b, "CREATE INDEX IF NOT EXISTS " PG_KEYS "_by_age ON ");
        pg_buf_add(b, s->q_keys);
        pg_buf_add(b, " (connector, applied_at); ");
    }
    /* applied_wall came later: a table from before gets it, its old keys
     * counting as applied now (the safe side: kept the retention from
     * here). now() is stable, so PostgreSQL evaluates it once and does not
     * rewrite the table; the sink always writes the column itself. */
    if ((missing & PG_MISS_WALL) && !(missing & PG_MISS_KEYS)) {
        pg_buf_add(b, "ALTER TABLE ");
        pg_buf_add(b, s->q_keys);
        pg_buf_add(b, " ADD COLUMN IF NOT EXISTS applied_wall bigint NOT NULL "
                      "DEFAULT (extract(epoch FROM now()) * 1000)::bigint; ");
    }
    /* The business keys held in memory (keyset.c): the connector's row,
     * and one row of packed digests a batch, stored uncompressed out of
     * line (EXTERNAL: digests do not compress, and trying costs CPU). */
    if (missing & PG_MISS_KEYSETS) {
        pg_buf_add(b, "CREATE TABLE IF NOT EXISTS ");
        pg_buf_add(b, s->q_keysets);
        pg_buf_add(b, " (connector text PRIMARY KEY, seed bytea NOT NULL, "
                      "seed_check bigint NOT NULL, generation bigint NOT "
                      "NULL, pruned_generation bigint NOT NULL, "
                      "legacy_pruned bigint NOT NULL DEFAULT 0); ");
    }
    if (missing & PG_MISS_KEY_BATCHES) {
        pg_buf_add(b, "CREATE TABLE IF NOT EXISTS ");
        pg_buf_add(b, s->q_key_batches);
        pg_buf_add(b, " (connector text NOT NULL, generation bigint NOT NULL, "
                      "applied_wall bigint NOT NULL, newest_applied_at bigint "
                      "NOT NULL, nkeys bigint NOT NULL, keys bytea NOT NULL, "
                      "seed_check bigint NOT NULL, PRIMARY KEY (connector, "
                      "generation)); ALTER TABLE ");
        pg_buf_add(b, s->q_key_batches);
        pg_buf_add(b, " ALTER keys SET STORAGE EXTERNAL; ");
    }
    /* Keys held in memory are not read from tidemark_keys by the hosts
     * holding them (only at a claim): a host storing a connector's keys
     * there meanwhile (an older build in a rolling upgrade, or "dedup_keys":
     * "rows") would have its keys stored twice. Its INSERT is refused for a
     * connector with a keysets row, failing its commit (TM_FATAL: a code
     * of no class the sinks take for a record's), once per statement (the
     * rows it inserted, a transition table). The body names no schema:
     * the keysets table beside the keys table (TG_TABLE_SCHEMA). */
    if (missing & PG_MISS_KEYS_GUARD) {
        pg_buf_add(b, "CREATE OR REPLACE FUNCTION ");
        pg_buf_add(b, s->q_schema);
        pg_buf_add(
            b,
            "." PG_KEYS_GUARD "() RETURNS trigger LANGUAGE plpgsql AS "
            "$body$ DECLARE c text; BEGIN EXECUTE format('SELECT "
            "min(a.connector) FROM added a JOIN %I." PG_KEYSETS " k ON "
            "k.connector = a.connector', TG_TABLE_SCHEMA) INTO c; IF c IS "
            "NOT NULL THEN RAISE EXCEPTION USING ERRCODE = '" PG_KEYS_GUARD_CODE
            "', MESSAGE = format('connector %s holds its business keys in "
            "memory (its row in %I." PG_KEYSETS "), which its hosts do not "
            "read from " PG_KEYS ": a host storing them there (a build from "
            "before the keys held in memory, or \"dedup_keys\": \"rows\") "
            "would store a resent key twice. Upgrade every host of the "
            "connector (docs/sinks/postgres.md, A rolling upgrade)', c, "
            "TG_TABLE_SCHEMA); END IF; RETURN NULL; END $body$; ");
        pg_buf_add(b, "CREATE TRIGGER " PG_KEYS_GUARD " AFTER INSERT ON ");
        pg_buf_add(b, s->q_keys);
        pg_buf_add(b, " REFERENCING NEW TABLE AS added FOR EACH STATEMENT "
                      "EXECUTE FUNCTION ");
        pg_buf_add(b, s->q_schema);
        pg_buf_add(b, "." PG_KEYS_GUARD "(); ");
    }
    if (missing & PG_MISS_OWNERS) {
        pg_buf_add(b, "CREATE TABLE IF NOT EXISTS ");
        pg_buf_add(b, s->q_owners);
        pg_buf_add(b, " (table_name text NOT NULL, connector text NOT NULL, "
                      "shared boolean NOT NULL, PRIMARY KEY (table_name, "
                      "connector)); ");
    }
}

#define PG_KEY_SUFFIX "_tm_key"

/* Upsert's unique index: "<table>_tm_key" when that fits and HASHED is
 * 0; else the table name cut on a UTF-8 character boundary (a cut inside
 * one is not UTF-8 and the name is refused) and "_tm_key_<hash of the
 * whole table name>", so two tables sharing a long prefix get two indexes,
 * not one name (and a relation that took the short name is stepped
 * around). */
static void key_index_name(const pg_sink *s, int hashed,
                           char out[PG_NAME_MAX + 1]) {
    const char *t = s->set.table;
    size_t n = strlen(t);
    if (!hashed && n + strlen(PG_KEY_SUFFIX) <= PG_NAME_MAX) {
        snprintf(out, PG_NAME_MAX + 1, "%s" PG_KEY_SUFFIX, t);
        return;
    }
    uint32_t h = 2166136261u; /* FNV-1a, 32 bits */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)t[i]) * 16777619u;
    size_t keep = PG_NAME_MAX - strlen(PG_KEY_SUFFIX "_") - 8;
    if (keep > n)
        keep = n;
    while (keep > 0 && ((unsigned char)t[keep] & 0xC0) == 0x80)
        keep--; /* t[keep] continues a character: cut before it */
    snprintf(out, PG_NAME_MAX + 1, "%.*s" PG_KEY_SUFFIX "_%08x", (int)keep, t,
             (unsigned)h);
}

/* The target table (upsert's index: make_key_index). */
static void target_ddl(pg_sink *s, pg_buf *b) {
    const tm_sink_config *c = s->config;
    pg_buf_add(b, "CREATE TABLE IF NOT EXISTS ");
    pg_buf_add(b, s->q_table);
    pg_buf_add(b, " (");
    for (size_t i = 0; i < c->ncolumns; i++) {
        const tm_column *col = TM_CELEM(tm_column, c->columns, i);
        pg_buf_ident(s, b, col->name);
        pg_buf_add(b, " ");
        pg_buf_add(b, pg_type_sql(col->type));
        pg_buf_add(b, col->required ? " NOT NULL, " : ", ");
    }
    for (int h = 0; h < PG_NHIDDEN; h++) {
        pg_buf_add(b, HIDDEN[h][0]);
        pg_buf_add(b, " ");
        pg_buf_add(b, HIDDEN[h][1]);
        pg_buf_add(b, HIDDEN_NOTNULL[h] ? " NOT NULL" : "");
        pg_buf_add(b, h + 1 < PG_NHIDDEN ? ", " : ");");
    }
}

static tm_status has_key_index(pg_sink *s, int *found, tm_error *err);

/* Whether open must make upsert's unique index: not when the table has a
 * fitting one already, whatever its name (one made under an older naming
 * rule, or by the user), so a table never gets a second one. */
static int index_wanted(pg_sink *s) {
    if (!s->set.create || s->set.mode != PG_UPSERT ||
        (s->schema_cols && s->config->ncolumns == 0))
        return 0;
    int found = 0;
    tm_error scratch = {sizeof scratch, ""};
    return has_key_index(s, &found, &scratch) != TM_OK || !found;
}

/* *taken: a relation called NAME exists in the schema. */
static tm_status name_taken(pg_sink *s, const char *name, int *taken,
                            tm_error *err) {
    pg_buf q = {0};
    pg_buf_add(&q, s->q_schema);
    pg_buf_add(&q, ".");
    pg_buf_ident(s, &q, name);
    const char *v[1] = {q.p};
    tm_status r = TM_FATAL;
    PGresult *res =
        q.oom ? NULL
              : pg_query(s, "SELECT to_regclass($1) IS NOT NULL", 1, v, NULL,
                         NULL, 1, "looking up the index name", &r, err);
    if (q.oom)
        s->host->set_error(err, "out of memory");
    pg_buf_free(&q);
    if (!res)
        return r;
    *taken = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return TM_OK;
}

/* Upsert's unique index, inside open's DDL transaction (under its lock, so
 * a fitting index another host made meanwhile is seen and kept). A
 * relation holding the usual name (a table "<table>_tm_key", say) makes it
 * take the hashed name: IF NOT EXISTS would skip it silently and leave the
 * table without the index. Rows already repeating a key are a setting to
 * fix (TM_INVALID), not something a retry changes. */
static tm_status make_key_index(pg_sink *s, tm_error *err) {
    int found = 0, taken = 0;
    tm_status r = has_key_index(s, &found, err);
    if (r != TM_OK || found)
        return r;
    char name[PG_NAME_MAX + 1];
    key_index_name(s, 0, name);
    if ((r = name_taken(s, name, &taken, err)) != TM_OK)
        return r;
    if (taken) {
        key_index_name(s, 1, name);
        if ((r = name_taken(s, name, &taken, err)) != TM_OK)
            return r;
        if (taken) {
            s->host->set_error(
                err,
                "setting \"mode\": upsert's unique index on %s would be "
                "called \"%s\", but a relation of that name exists in "
                "schema %s: create a unique index on the key columns "
                "yourself",
                s->q_table, name, s->q_schema);
            return TM_INVALID;
        }
    }
    pg_buf b = {0}, keys = {0};
    const char *sep = "";
    for (size_t i = 0; i < s->config->ncolumns; i++) {
        const tm_column *col = TM_CELEM(tm_column, s->config->columns, i);
        if (!col->key)
            continue;
        pg_buf_add(&keys, sep);
        pg_buf_ident(s, &keys, col->name);
        sep = ", ";
    }
    pg_buf_add(&b, "CREATE UNIQUE INDEX ");
    pg_buf_ident(s, &b, name);
    pg_buf_add(&b, " ON ");
    pg_buf_add(&b, s->q_table);
    pg_buf_add(&b, " (");
    pg_buf_add(&b, keys.p ? keys.p : "");
    pg_buf_add(&b, ")");
    s->last_state[0] = '\0';
    if (b.oom || keys.oom) {
        s->host->set_error(err, "out of memory");
        r = TM_FATAL;
    } else {
        r = pg_exec(s, b.p, "creating upsert's unique index", err);
    }
    if (r != TM_OK && strcmp(s->last_state, "23505") == 0) {
        char why[TM_ERROR_MAX];
        snprintf(why, sizeof why, "%s", err->message);
        s->host->set_error(err,
                           "setting \"mode\": upsert needs a unique index on "
                           "the key columns (%s) of %s, and the table's "
                           "rows have duplicate keys, so it cannot be made "
                           "(%s): remove the duplicate rows, or map other "
                           "key columns",
                           keys.p, s->q_table, why);
        r = TM_INVALID;
    }
    pg_buf_free(&b);
    pg_buf_free(&keys);
    return r;
}

tm_status pg_schema_create(pg_sink *s, tm_error *err) {
    int with_index = index_wanted(s);
    unsigned missing = 0;
    tm_error scratch = {sizeof scratch, ""};
    /* Everything there: no lock at all (a restart beside a busy writer
     * does not wait). */
    if (!with_index && missing_objects(s, &missing, &scratch) == TM_OK &&
        !missing)
        return TM_OK;
    if (!s->conn)
        return pg_ready(s, err);
    /* One transaction under a transaction-level advisory lock (released by
     * COMMIT or by the session's end): a host killed half-way leaves
     * nothing, and two hosts opening at once do not race on the catalog
     * (CREATE ... IF NOT EXISTS alone can still fail with 23505 then).
     * What is missing is read again under the lock: another host may have
     * made it meanwhile. */
    char cls[32];
    snprintf(cls, sizeof cls, "%d", PG_DDL_LOCK_CLASS);
    const char *v[2] = {cls, s->set.schema};
    pg_buf b = {0};
    tm_status r = pg_exec(s, "BEGIN", "BEGIN (creating tables)", err);
    if (r == TM_OK) {
        PGresult *res = pg_query(s,
                                 "SELECT pg_advisory_xact_lock($1::int, "
                                 "hashtext($2))",
                                 2, v, NULL, NULL, 1,
                                 "taking the DDL advisory lock", &r, err);
        PQclear(res);
    }
    if (r == TM_OK)
        r = missing_objects(s, &missing, err);
    if (r == TM_OK) {
        helpers_ddl(s, missing, &b);
        if ((missing & PG_MISS_TABLE) && !s->schema_cols)
            target_ddl(s, &b);
        if (b.oom) {
            s->host->set_error(err, "out of memory");
            r = TM_FATAL;
        }
    }
    if (r == TM_OK && b.p && b.p[0])
        r = pg_exec(s, b.p,
                    "creating the tables (or adding the lineage columns to "
                    "an older " PG_MARKERS ")",
                    err);
    if (r == TM_OK && with_index)
        r = make_key_index(s, err);
    if (r == TM_OK)
        r = pg_exec(s, "COMMIT", "COMMIT (creating tables)", err);
    pg_buf_free(&b);
    if (r != TM_OK) {
        pg_rollback(s);
        /* A missing privilege or a bad name is a setting to fix. */
        if (r == TM_FATAL)
            r = TM_INVALID;
    }
    return r;
}

/* A batch column the table has only in another case (tidemark/columns.h),
 * read before ADD COLUMN IF NOT EXISTS would make it a second column
 * beside the old one, after which a rename and a user's own column of the
 * other case look alike. */
static tm_status refuse_case_renames(pg_sink *s, tm_error *err) {
    const char *v[1] = {s->q_table};
    tm_status r;
    PGresult *res =
        pg_query(s,
                 "SELECT a.attname FROM pg_attribute a WHERE a.attrelid = "
                 "to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped",
                 1, v, NULL, NULL, 1, "reading the table's columns", &r, err);
    if (!res)
        return r;
    int nt = PQntuples(res);
    const char **names = malloc((nt > 0 ? (size_t)nt : 1) * sizeof *names);
    if (!names) {
        PQclear(res);
        s->host->set_error(err, "out of memory");
        return TM_RETRY;
    }
    for (int i = 0; i < nt; i++)
        names[i] = PQgetvalue(res, i, 0);
    char why[TM_ERROR_MAX / 2] = "";
    r = TM_OK;
    if (tm_columns_case_renamed(s->config->columns, s->config->ncolumns, names,
                                (size_t)nt, why, sizeof why)) {
        s->host->set_error(err,
                           "setting \"table\": %s does not fit the "
                           "mapping: %s",
                           s->q_table, why);
        r = TM_FATAL;
    }
    free(names);
    PQclear(res);
    return r;
}

tm_status pg_schema_evolve(pg_sink *s, tm_error *err) {
    int existed = 0;
    tm_status r = pg_table_exists(s, &existed, err);
    if (r == TM_OK && existed && s->schema_cols)
        r = refuse_case_renames(s, err);
    /* CREATE TABLE IF NOT EXISTS, then each column ADD COLUMN IF NOT
     * EXISTS (nullable: the rows before it have none) */
    for (size_t i = 0; s->set.create && r == TM_OK && i <= s->config->ncolumns;
         i++) {
        pg_buf b = {0};
        if (i == 0) {
            target_ddl(s, &b);
        } else {
            const tm_column *col =
                TM_CELEM(tm_column, s->config->columns, i - 1);
            pg_buf_add(&b, "ALTER TABLE ");
            pg_buf_add(&b, s->q_table);
            pg_buf_add(&b, " ADD COLUMN IF NOT EXISTS ");
            pg_buf_ident(s, &b, col->name);
            pg_buf_add(&b, " ");
            pg_buf_add(&b, pg_type_sql(col->type));
        }
        if (b.oom) {
            s->host->set_error(err, "out of memory");
            r = TM_FATAL;
        } else {
            r = pg_exec(s, b.p, "fitting the table to the batch's columns",
                        err);
        }
        pg_buf_free(&b);
    }
    /* Upsert's unique index only on a table this batch makes: a table
     * there before has its key in its index (made with it by an earlier
     * batch, or by hand), and a batch keyed otherwise (the host refused a
     * key change, then was restarted) is refused below, not given a
     * second index. */
    if (r == TM_OK && !existed && index_wanted(s))
        r = make_key_index(s, err);
    /* A column of another type, a key the index does not match: the
     * operator decides; no batch goes in meanwhile. */
    if (r == TM_OK && (r = pg_shape_check(s, err)) == TM_INVALID)
        r = TM_FATAL;
    return r;
}

tm_status pg_table_exists(pg_sink *s, int *exists, tm_error *err) {
    const char *v[1] = {s->q_table};
    tm_status r;
    PGresult *res = pg_query(s, "SELECT to_regclass($1) IS NOT NULL", 1, v,
                             NULL, NULL, 1, "looking up the table", &r, err);
    if (!res)
        return r;
    *exists = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return TM_OK;
}

static int type_fits(const char *found, const char *want) {
    if (strcmp(found, want) == 0)
        return 1;
    return strcmp(want, "text") == 0 &&
           strncmp(found, "character varying", 17) == 0;
}

/* The column type whose pg_type_sql a column of type FOUND (format_type)
 * fits; 0 when none does. */
static tm_type pg_type_of(const char *found) {
    for (int t = TM_TYPE_TEXT; t <= TM_TYPE_BYTES; t++)
        if (pg_type_sql((tm_type)t) &&
            type_fits(found, pg_type_sql((tm_type)t)))
            return (tm_type)t;
    return (tm_type)0;
}

/* "id bigint NOT NULL, ..." of the mapping, for messages. */
static void expected_shape(const pg_sink *s, pg_buf *b) {
    for (size_t i = 0; i < s->config->ncolumns; i++) {
        const tm_column *col = TM_CELEM(tm_column, s->config->columns, i);
        pg_buf_add(b, i ? ", " : "");
        pg_buf_add(b, col->name);
        pg_buf_add(b, " ");
        pg_buf_add(b, pg_type_sql(col->type));
        pg_buf_add(b, col->required ? " NOT NULL" : "");
    }
    for (int h = 0; h < PG_NHIDDEN; h++) {
        pg_buf_add(b, ", ");
        pg_buf_add(b, HIDDEN[h][0]);
        pg_buf_add(b, " ");
        pg_buf_add(b, HIDDEN[h][1]);
        pg_buf_add(b, HIDDEN_NOTNULL[h] ? " NOT NULL" : "");
    }
}

static int find_col(PGresult *res, const char *name) {
    for (int i = 0; i < PQntuples(res); i++)
        if (strcmp(PQgetvalue(res, i, 0), name) == 0)
            return i;
    return -1;
}

void pg_key_names(const pg_sink *s, pg_buf *names, char n[16]) {
    int nkeys = 0;
    for (size_t i = 0; i < s->config->ncolumns; i++) {
        const tm_column *c = TM_CELEM(tm_column, s->config->columns, i);
        if (!c->key)
            continue;
        if (nkeys++)
            pg_buf_add(names, "\x01");
        pg_buf_add(names, c->name);
    }
    snprintf(n, 16, "%d", nkeys);
}

/* 1 when a unique, non-partial index covers exactly the key columns, so
 * that ON CONFLICT (keys) has a constraint to infer. */
static tm_status has_key_index(pg_sink *s, int *found, tm_error *err) {
    pg_buf names = {0};
    char n[16];
    pg_key_names(s, &names, n);
    const char *v[3] = {s->q_table, names.oom ? "" : names.p, n};
    tm_status r;
    PGresult *res =
        pg_query(s,
                 "SELECT 1 FROM pg_index i WHERE i.indrelid = to_regclass($1) "
                 "AND " PG_KEY_INDEX_SQL " LIMIT 1",
                 3, v, NULL, NULL, 1, "reading the table's indexes", &r, err);
    pg_buf_free(&names);
    if (!res)
        return r;
    *found = PQntuples(res) > 0;
    PQclear(res);
    return TM_OK;
}

tm_status pg_shape_check(pg_sink *s, tm_error *err) {
    const char *v[1] = {s->q_table};
    tm_status r;
    PGresult *res = pg_query(
        s,
        "SELECT a.attname, format_type(a.atttypid, a.atttypmod), "
        "a.attnotnull, a.atthasdef FROM pg_attribute a WHERE a.attrelid = "
        "to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY "
        "a.attnum",
        1, v, NULL, NULL, 1, "reading the table's columns", &r, err);
    if (!res)
        return r;
    pg_buf shape = {0}, want = {0};
    char why[TM_ERROR_MAX] = "";
    for (int i = 0; i < PQntuples(res); i++) {
        pg_buf_add(&shape, i ? ", " : "");
        pg_buf_add(&shape, PQgetvalue(res, i, 0));
        pg_buf_add(&shape, " ");
        pg_buf_add(&shape, PQgetvalue(res, i, 1));
        pg_buf_add(&shape, *PQgetvalue(res, i, 2) == 't' ? " NOT NULL" : "");
    }
    expected_shape(s, &want);
    for (size_t i = 0; i < s->config->ncolumns && !why[0]; i++) {
        const tm_column *col = TM_CELEM(tm_column, s->config->columns, i);
        int k = find_col(res, col->name);
        if (k < 0)
            snprintf(why, sizeof why, "column \"%.*s\" is missing",
                     (int)pg_utf8_prefix(col->name, 100), col->name);
        else if (s->schema_cols)
            /* Columns of a batch: NOT NULL only where required, so that a
             * column made optional stops again after a restart. */
            tm_column_conflict(col, pg_type_of(PQgetvalue(res, k, 1)),
                               PQgetvalue(res, k, 1),
                               *PQgetvalue(res, k, 2) == 't', why, sizeof why);
        else if (!type_fits(PQgetvalue(res, k, 1), pg_type_sql(col->type)))
            snprintf(why, sizeof why,
                     "column \"%.*s\" is %.*s, the mapping needs %s",
                     (int)pg_utf8_prefix(col->name, 100), col->name,
                     (int)pg_utf8_prefix(PQgetvalue(res, k, 1), 60),
                     PQgetvalue(res, k, 1), pg_type_sql(col->type));
    }
    for (int h = 0; h < PG_NHIDDEN && !why[0]; h++) {
        int k = find_col(res, HIDDEN[h][0]);
        if (k < 0 || strcmp(PQgetvalue(res, k, 1), HIDDEN[h][1]) != 0)
            snprintf(why, sizeof why,
                     "hidden column \"%s\" %s is missing or of another type "
                     "(create the table with the sink, or add it)",
                     HIDDEN[h][0], HIDDEN[h][1]);
    }
    for (int i = 0; i < PQntuples(res) && !why[0]; i++) {
        const char *name = PQgetvalue(res, i, 0);
        int ours =
            strncmp(name, PG_HIDDEN_PREFIX, strlen(PG_HIDDEN_PREFIX)) == 0;
        for (size_t k = 0; k < s->config->ncolumns && !ours; k++)
            ours = strcmp(TM_CELEM(tm_column, s->config->columns, k)->name,
                          name) == 0;
        /* a batch of deletes only writes no column but its key */
        if (!ours && *PQgetvalue(res, i, 2) == 't' &&
            *PQgetvalue(res, i, 3) != 't' && !s->follow.deletes_only)
            snprintf(why, sizeof why,
                     "column \"%.*s\" is NOT NULL without a default but not "
                     "in the mapping: every insert would fail",
                     (int)pg_utf8_prefix(name, 100), name);
    }
    int ncols = PQntuples(res);
    PQclear(res);
    if (ncols == 0 && !why[0])
        snprintf(why, sizeof why, "the table has no columns");
    if (!why[0] && s->set.mode == PG_UPSERT) {
        int found = 0;
        if ((r = has_key_index(s, &found, err)) != TM_OK)
            goto out;
        if (!found)
            snprintf(why, sizeof why,
                     "mode upsert needs a UNIQUE index on exactly the key "
                     "columns; the table has none");
    }
    r = TM_OK;
    if (why[0]) {
        s->host->set_error(err,
                           "setting \"table\": %s does not fit the mapping: "
                           "%s. Table: (%s). Mapping: (%s)",
                           s->q_table, why,
                           shape.oom ? "?"
                           : shape.p ? shape.p
                                     : "",
                           want.oom ? "?" : want.p);
        r = TM_INVALID;
    }
out:
    pg_buf_free(&shape);
    pg_buf_free(&want);
    return r;
}
