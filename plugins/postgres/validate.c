/* validate(): settings, the connection, the privileges of the session's
 * role and the table's shape, checked without changing anything (a
 * read-only transaction). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_sink.h"

/* One has_*_privilege answer: 1 granted, 0 refused, -1 unknown (NULL, the
 * object does not exist). */
static int priv_answer(PGresult *res, int col) {
    if (PQgetisnull(res, 0, col))
        return -1;
    return *PQgetvalue(res, 0, col) == 't';
}

static tm_status refuse(pg_sink *s, const char *role, const char *priv,
                        const char *kind, const char *object, const char *why,
                        tm_error *err) {
    s->host->set_error(err,
                       "privileges: role \"%s\" lacks %s on %s %s%s (GRANT %s "
                       "ON %s%s TO \"%s\")",
                       role, priv, kind, object, why, priv,
                       strcmp(kind, "table") == 0 ? "" : "SCHEMA ", object,
                       role);
    return TM_INVALID;
}

/* The schema: USAGE, and CREATE when anything must be created in it (the
 * target with "create", a helper table); a missing schema needs CREATE on
 * the database. *target_exists: whether the target table exists. */
static tm_status schema_privileges(pg_sink *s, char *role, size_t role_size,
                                   int *target_exists, tm_error *err) {
    const char *v[8] = {s->q_schema,  s->q_table,      s->q_markers,
                        s->q_dls,     s->q_keys,       s->q_owners,
                        s->q_keysets, s->q_key_batches};
    tm_status r;
    /* Each to_regclass only with USAGE: without it the lookup fails. */
    PGresult *res = pg_query(
        s,
        "SELECT current_user, n.oid IS NOT NULL, "
        "has_schema_privilege(current_user, n.oid, 'USAGE'), "
        "has_schema_privilege(current_user, n.oid, 'CREATE'), "
        "has_database_privilege(current_database(), 'CREATE'), "
        "current_database(), "
        "CASE WHEN has_schema_privilege(current_user, n.oid, 'USAGE') THEN "
        "to_regclass($2) IS NOT NULL END, "
        "CASE WHEN has_schema_privilege(current_user, n.oid, 'USAGE') THEN "
        "to_regclass($3) IS NOT NULL AND to_regclass($4) IS NOT NULL AND "
        "to_regclass($5) IS NOT NULL AND to_regclass($6) IS NOT NULL AND "
        "to_regclass($7) IS NOT NULL AND to_regclass($8) IS NOT NULL END "
        "FROM (SELECT to_regnamespace($1) AS oid) n",
        8, v, NULL, NULL, 1, "validate: reading privileges", &r, err);
    if (!res)
        return r;
    snprintf(role, role_size, "%s", PQgetvalue(res, 0, 0));
    int schema_exists = *PQgetvalue(res, 0, 1) == 't';
    int usage = priv_answer(res, 2), create = priv_answer(res, 3);
    int db_create = priv_answer(res, 4);
    char db[128];
    snprintf(db, sizeof db, "%s", PQgetvalue(res, 0, 5));
    *target_exists = priv_answer(res, 6) == 1;
    int helpers_exist = priv_answer(res, 7) == 1;
    PQclear(res);
    if (!schema_exists) {
        if (db_create != 1) {
            s->host->set_error(err,
                               "privileges: role \"%s\" lacks CREATE on "
                               "database \"%s\", needed to create the schema "
                               "%s (GRANT CREATE ON DATABASE \"%s\" TO \"%s\")",
                               role, db, s->q_schema, db, role);
            return TM_INVALID;
        }
        return TM_OK;
    }
    if (usage != 1)
        return refuse(s, role, "USAGE", "schema", s->q_schema, "", err);
    if (create != 1 && !helpers_exist)
        return refuse(s, role, "CREATE", "schema", s->q_schema,
                      ", needed to create the helper tables", err);
    if (create != 1 && !*target_exists && s->set.create)
        return refuse(s, role, "CREATE", "schema", s->q_schema,
                      ", needed to create the table (\"create\" is true)", err);
    return TM_OK;
}

/* Each of PRIVS (NULL-terminated) on TABLE, if it exists. */
static tm_status table_privileges(pg_sink *s, const char *role,
                                  const char *table, const char *const *privs,
                                  const char *why, tm_error *err) {
    for (size_t i = 0; privs[i]; i++) {
        const char *v[2] = {table, privs[i]};
        tm_status r;
        PGresult *res = pg_query(s,
                                 "SELECT has_table_privilege(current_user, "
                                 "to_regclass($1), $2)",
                                 2, v, NULL, NULL, 1,
                                 "validate: reading privileges", &r, err);
        if (!res)
            return r;
        int granted = priv_answer(res, 0);
        PQclear(res);
        if (granted == 0)
            return refuse(s, role, privs[i], "table", table, why, err);
    }
    return TM_OK;
}

/* An existing tidemark_keys without the trigger refusing keys held in
 * memory there gets it at the open of a connector holding them (schema.c):
 * CREATE TRIGGER needs TRIGGER on the table, its function CREATE on the
 * schema. */
static tm_status guard_privileges(pg_sink *s, const char *role, tm_error *err) {
    static const char *const TRIGGER[] = {"TRIGGER", NULL};
    const char *v[3] = {s->q_keys, PG_KEYS_GUARD, s->q_schema};
    tm_status r;
    PGresult *res = pg_query(
        s,
        "SELECT to_regclass($1) IS NOT NULL AND NOT EXISTS (SELECT 1 FROM "
        "pg_trigger WHERE tgrelid = to_regclass($1) AND tgname = $2), "
        "has_schema_privilege(current_user, to_regnamespace($3), 'CREATE')",
        3, v, NULL, NULL, 1, "validate: reading privileges", &r, err);
    if (!res)
        return r;
    int missing = *PQgetvalue(res, 0, 0) == 't';
    int create = priv_answer(res, 1);
    PQclear(res);
    if (!missing)
        return TM_OK;
    r = table_privileges(s, role, s->q_keys, TRIGGER,
                         ", needed to make its trigger " PG_KEYS_GUARD
                         " (keys held in memory are refused there)",
                         err);
    if (r == TM_OK && create == 0)
        r = refuse(s, role, "CREATE", "schema", s->q_schema,
                   ", needed to make the function of the trigger " PG_KEYS_GUARD
                   " on " PG_KEYS,
                   err);
    return r;
}

/* What the sink does with each table (commit.c, markers.c, scan.c). */
static tm_status privileges(pg_sink *s, const char *role, tm_error *err) {
    static const char *const APPEND[] = {"INSERT", "SELECT", NULL};
    static const char *const UPSERT[] = {"INSERT", "SELECT", "UPDATE", NULL};
    static const char *const CDC[] = {"INSERT", "SELECT", "UPDATE", "DELETE",
                                      NULL};
    static const char *const MARKERS[] = {"INSERT", "UPDATE", "SELECT", NULL};
    static const char *const KEYS[] = {"INSERT", "SELECT", "DELETE", NULL};
    static const char *const KEYSETS[] = {"INSERT", "UPDATE", "SELECT", NULL};
    static const char *const DLS[] = {"INSERT", "SELECT", NULL};
    static const char *const OWNERS[] = {"INSERT", "UPDATE", "SELECT", NULL};
    tm_status r = table_privileges(s, role, s->q_table,
                                   s->config->flags & TM_CONFIG_CDC ? CDC
                                   : s->set.mode == PG_UPSERT       ? UPSERT
                                                                    : APPEND,
                                   "", err);
    if (r == TM_OK)
        r = table_privileges(s, role, s->q_markers, MARKERS,
                             " (the sink's markers)", err);
    if (r == TM_OK)
        r = table_privileges(s, role, s->q_keys, KEYS,
                             " (the sink's business keys)", err);
    if (r == TM_OK)
        r = table_privileges(s, role, s->q_dls, DLS,
                             " (the sink's dead letters)", err);
    if (r == TM_OK)
        r = table_privileges(s, role, s->q_owners, OWNERS,
                             " (the sink's table owners)", err);
    /* the keys held in memory: only a connector with dedup uses them */
    if (r == TM_OK && pg_keyset_on(s))
        r = table_privileges(s, role, s->q_keysets, KEYSETS,
                             " (the sink's business keys held in memory)", err);
    if (r == TM_OK && pg_keyset_on(s))
        r = table_privileges(s, role, s->q_key_batches, KEYS,
                             " (the sink's business keys held in memory)", err);
    if (r == TM_OK && pg_keyset_on(s))
        r = guard_privileges(s, role, err);
    /* "dedup_keys": "rows" reads the connector's keysets row too: its claim
     * refuses a connector whose keys are held in memory, and the trigger
     * on tidemark_keys its key rows fire reads the table */
    static const char *const READ[] = {"SELECT", NULL};
    if (r == TM_OK && (s->config->flags & TM_CONFIG_DEDUP) && !pg_keyset_on(s))
        r = table_privileges(s, role, s->q_keysets, READ,
                             " (read for the sink's business keys kept as "
                             "rows: a connector holding them in memory is "
                             "refused)",
                             err);
    if (r != TM_OK || s->set.mode != PG_UPSERT)
        return r;
    /* Upsert stages rows in a temporary table. */
    tm_status q;
    PGresult *res = pg_query(s,
                             "SELECT has_database_privilege(current_database(),"
                             " 'TEMP'), current_database()",
                             0, NULL, NULL, NULL, 1,
                             "validate: reading privileges", &q, err);
    if (!res)
        return q;
    if (priv_answer(res, 0) == 0) {
        s->host->set_error(err,
                           "privileges: role \"%s\" lacks TEMP on database "
                           "\"%s\", needed by mode upsert's staging table "
                           "(GRANT TEMP ON DATABASE \"%s\" TO \"%s\")",
                           role, PQgetvalue(res, 0, 1), PQgetvalue(res, 0, 1),
                           role);
        r = TM_INVALID;
    }
    PQclear(res);
    return r;
}

/* An existing helper TABLE for which MISSING (an SQL condition on its
 * pg_class row c, with $2 = ARG) holds gets WHAT at open by HOW
 * (schema.c), which only the table's owner (or a member of its role) may
 * run: open would fail with 42501, so validate refuses naming the owner
 * and the fix. A table that needs nothing needs no ownership. */
static tm_status owner_needed(pg_sink *s, const char *role, const char *table,
                              const char *missing, const char *arg,
                              const char *what, const char *how,
                              tm_error *err) {
    const char *v[2] = {table, arg};
    tm_status r = TM_RETRY;
    pg_buf q = {0};
    pg_buf_add(&q, "SELECT pg_get_userbyid(c.relowner) FROM pg_class c WHERE "
                   "c.oid = to_regclass($1) AND NOT pg_has_role(current_user, "
                   "c.relowner, 'USAGE') AND ");
    pg_buf_add(&q, missing);
    PGresult *res =
        q.oom ? NULL
              : pg_query(s, q.p, 2, v, NULL, NULL, 1,
                         "validate: reading the table's owner", &r, err);
    if (q.oom)
        s->host->set_error(err, "out of memory");
    pg_buf_free(&q);
    if (!res)
        return r;
    if (PQntuples(res) == 1) {
        const char *owner = PQgetvalue(res, 0, 0);
        s->host->set_error(err,
                           "privileges: role \"%s\" is not the owner of "
                           "table %s (owner \"%s\"), and open must add %s to "
                           "it with %s, which needs the owner: the owner "
                           "opens the sink once (or runs the %s of "
                           "docs/sinks/postgres.md), or GRANT \"%s\" TO "
                           "\"%s\"",
                           role, table, owner, what, how, how, owner, role);
        r = TM_INVALID;
    }
    PQclear(res);
    return r;
}

/* The columns of the text[] literal COLUMNS, added by ALTER TABLE. */
static tm_status owner_for_columns(pg_sink *s, const char *role,
                                   const char *table, const char *columns,
                                   const char *what, tm_error *err) {
    return owner_needed(s, role, table,
                        "(SELECT count(*) FROM pg_attribute a WHERE a.attrelid "
                        "= c.oid AND NOT a.attisdropped AND a.attname = "
                        "ANY($2::text[])) < cardinality($2::text[])",
                        columns, what, "ALTER TABLE", err);
}

/* INDEX (a name in the schema) of TABLE, made by open when missing. */
static tm_status owner_for_index(pg_sink *s, const char *role,
                                 const char *table, const char *index,
                                 const char *what, tm_error *err) {
    pg_buf name = {0};
    pg_buf_add(&name, s->q_schema);
    pg_buf_add(&name, ".");
    pg_buf_add(&name, index);
    tm_status r;
    if (name.oom) {
        s->host->set_error(err, "out of memory");
        r = TM_RETRY;
    } else {
        r = owner_needed(s, role, table, "to_regclass($2) IS NULL", name.p,
                         what, "CREATE INDEX", err);
    }
    pg_buf_free(&name);
    return r;
}

/* What open adds to an existing helper table, only when it is missing
 * (schema.c, missing_objects): the columns of an older version, the dead
 * letters' by-offset index, and the keys' age index, made by the first
 * connector with a retention. */
static tm_status owners(pg_sink *s, const char *role, tm_error *err) {
    tm_status r =
        owner_for_columns(s, role, s->q_markers,
                          "{last_offset,last_timestamp_ms,last_record_hash}",
                          "the marker's lineage columns", err);
    if (r == TM_OK)
        r = owner_for_columns(s, role, s->q_keys, "{applied_wall}",
                              "the column applied_wall", err);
    if (r == TM_OK)
        r = owner_for_index(s, role, s->q_dls, PG_DEAD_LETTERS "_by_offset",
                            "the index " PG_DEAD_LETTERS "_by_offset", err);
    if (r == TM_OK && s->set.retention_s > 0)
        r = owner_for_index(s, role, s->q_keys, PG_KEYS "_by_age",
                            "the retention's index " PG_KEYS "_by_age", err);
    return r;
}

tm_status pg_validate(const tm_host_api *host, const tm_sink_config *config,
                      tm_error *err) {
    pg_sink s = {.host = host, .config = config};
    atomic_init(&s.interrupted, 0);
    atomic_init(&s.in_call, 0);
    atomic_flag_clear(&s.cancel_busy);
    tm_status r = pg_settings_load(host, config, &s.set, err);
    if (r != TM_OK)
        return r;
    if ((r = pg_connect(&s, err)) == TM_OK &&
        (r = pg_exec(&s, "BEGIN READ ONLY", "validate: BEGIN", err)) == TM_OK) {
        int exists = 0;
        char role[128] = "";
        if ((r = schema_privileges(&s, role, sizeof role, &exists, err)) !=
            TM_OK)
            ; /* err says why */
        else if (!exists && !s.set.create) {
            host->set_error(err,
                            "setting \"table\": no table %s and \"create\" "
                            "is false",
                            s.q_table);
            r = TM_INVALID;
        } else if ((r = privileges(&s, role, err)) != TM_OK ||
                   (r = owners(&s, role, err)) != TM_OK)
            ; /* err says why */
        else if (exists && (config->flags & TM_CONFIG_SCHEMA_COLUMNS))
            r = pg_owner_check(&s, err); /* the shape: at each batch */
        else if (exists && (r = pg_shape_check(&s, err)) == TM_OK)
            r = pg_owner_check(&s, err);
        pg_rollback(&s);
    }
    pg_disconnect(&s);
    PQfreemem(s.q_schema);
    free(s.q_table);
    free(s.q_markers);
    free(s.q_dls);
    free(s.q_keys);
    free(s.q_owners);
    free(s.q_keysets);
    free(s.q_key_batches);
    return r == TM_FATAL ? TM_INVALID : r;
}
