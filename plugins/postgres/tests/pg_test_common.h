/* What the PostgreSQL sink's test programs share: the server from the
 * environment (a failure, never a skip, without it), the test's own libpq
 * connection, SQL with the test's schema, and loading, opening and
 * claiming through the plugin API. Check asserts: call from a test. */
#ifndef TM_PG_TEST_COMMON_H
#define TM_PG_TEST_COMMON_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>
#include <tidemark/sink.h>

#include "services/clock.h"

/* TIDEMARK_PG_CONNINFO, asserted set. */
const char *pgt_conninfo(void);
/* Connects with conninfo (asserted), DROP ... CASCADE notices silenced. */
PGconn *pgt_connect(const char *conninfo);
/* Runs text, asserting it succeeded; the caller PQclear()s. */
PGresult *pgt_sql(PGconn *c, const char *text);
/* FMT with every "$S" replaced by the quoted SCHEMA. */
void pgt_with_schema(const char *schema, const char *fmt, char *out,
                     size_t size);
/* Runs FMT ("$S": SCHEMA), asserting it succeeded. */
void pgt_run(PGconn *c, const char *schema, const char *fmt);
/* The one value of FMT ("$S": SCHEMA) as an integer. */
long long pgt_sql_int(PGconn *c, const char *schema, const char *fmt);
/* Names a test's schema and connector PREFIX_<pid>_<n> (PREFIX_c_...), drops
 * a schema of that name a failed run left; the test's own connection. */
PGconn *pgt_fresh_schema(const char *prefix, char *schema, size_t ssize,
                         char *connector, size_t csize);
/* Drops SCHEMA (never failing) and closes C. */
void pgt_drop_schema(PGconn *c, const char *schema);
/* Settings ($.sink.settings) from JSON text, asserted valid. */
tm_settings *pgt_settings(const char *json_text);
/* commit() with ERR reset; pgt_commit_ok asserts TM_OK. */
tm_status pgt_commit(const tm_sink_api *api, void *sink, const tm_batch *b,
                     tm_error *err);
void pgt_commit_ok(const tm_sink_api *api, void *sink, const tm_batch *b);
/* One value of fmt (with "$S" replaced by the quoted schema), as text. */
void pgt_sql_text(PGconn *c, const char *schema, const char *fmt, char *out,
                  size_t size);
/* The plugin of the build tree, loaded once as the host loads it. */
const tm_sink_api *pgt_plugin(const char *path);
void *pgt_open(const tm_sink_api *api, const tm_host_api *host,
               const tm_sink_config *config);
/* Claims partition t[0] at offset 0. */
tm_marker pgt_claim1(const tm_sink_api *api, void *sink);
/* The same for partition P. */
tm_marker pgt_claim_p(const tm_sink_api *api, void *sink, int32_t p);

#endif
