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
