/* The connection: connecting with application_name and timeouts, the
 * cancel object interrupt() uses, the mapping of server errors to what the
 * host does next, a lost connection reset, and small SQL text helpers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pg_sink.h"

int64_t pg_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- text --------------------------------------------------------------- */

void pg_buf_addn(pg_buf *b, const char *s, size_t n) {
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
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void pg_buf_add(pg_buf *b, const char *s) {
    pg_buf_addn(b, s, strlen(s));
}

void pg_buf_free(pg_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

void pg_buf_ident(pg_sink *s, pg_buf *b, const char *name) {
    char *q = s->conn ? PQescapeIdentifier(s->conn, name, strlen(name)) : NULL;
    if (!q) {
        b->oom = 1;
        return;
    }
    pg_buf_add(b, q);
    PQfreemem(q);
}

/* Length of a UTF-8 sequence starting with byte C (0: not a lead byte). */
static size_t utf8_seq_len(unsigned char c) {
    return c < 0x80   ? 1
           : c < 0xC2 ? 0
           : c < 0xE0 ? 2
           : c < 0xF0 ? 3
           : c < 0xF5 ? 4
                      : 0;
}

/* Whether P[0..N) is one valid UTF-8 character of n bytes (no overlong
 * form, no surrogate, not past U+10FFFF: what PostgreSQL accepts). */
static int utf8_char_ok(const unsigned char *p, size_t n) {
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    if (n == 3)
        return !(p[0] == 0xE0 && p[1] < 0xA0) &&
               !(p[0] == 0xED && p[1] >= 0xA0);
    if (n == 4)
        return !(p[0] == 0xF0 && p[1] < 0x90) &&
               !(p[0] == 0xF4 && p[1] >= 0x90);
    return 1;
}

size_t pg_utf8_prefix(const char *s, size_t max) {
    size_t n = 0;
    while (s[n]) {
        size_t k = utf8_seq_len((unsigned char)s[n]);
        size_t have = 0;
        while (have < k && s[n + have])
            have++;
        if (k == 0 || have < k ||
            !utf8_char_ok((const unsigned char *)s + n, k))
            k = 1; /* a stray byte: cut anywhere around it */
        if (n + k > max)
            break;
        n += k;
    }
    return n;
}

char *pg_utf8_valid(const char *s) {
    size_t len = strlen(s);
    char *out = malloc(len + 1);
    if (!out)
        return NULL;
    size_t i = 0;
    while (i < len) {
        size_t k = utf8_seq_len((unsigned char)s[i]);
        if (k == 0 || i + k > len ||
            !utf8_char_ok((const unsigned char *)s + i, k)) {
            out[i++] = '?';
            continue;
        }
        memcpy(out + i, s + i, k);
        i += k;
    }
    out[len] = '\0';
    return out;
}

/* "schema"."name", malloc'd; NULL on failure. */
static char *qualified(pg_sink *s, const char *name) {
    pg_buf b = {0};
    pg_buf_ident(s, &b, s->set.schema);
    pg_buf_add(&b, ".");
    pg_buf_ident(s, &b, name);
    if (b.oom) {
        pg_buf_free(&b);
        return NULL;
    }
    return b.p;
}

/* ---- connection --------------------------------------------------------- */

static void quiet_notices(void *arg, const char *message) {
    (void)arg, (void)message; /* "already exists, skipping" and the like */
}

static void set_cancel(pg_sink *s, PGcancel *c) {
    while (atomic_flag_test_and_set(&s->cancel_busy))
        ; /* interrupt() holds it for one PQcancel at most */
    PGcancel *old = s->cancel;
    s->cancel = c;
    atomic_flag_clear(&s->cancel_busy);
    if (old)
        PQfreeCancel(old);
}

static void trimmed(char *out, size_t size, const char *msg) {
    msg = msg ? msg : "";
    snprintf(out, size, "%.*s", (int)pg_utf8_prefix(msg, size - 1), msg);
    size_t n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == ' '))
        out[--n] = '\0';
}

/* TCP keepalives and tcp_user_timeout: without them a network partition
 * leaves a connector blocked on a dead socket for the kernel's
 * retransmissions (about 15 minutes) or for ever when idle. The user's
 * conninfo wins where it sets one. Ignored on a Unix socket. */
static const char *const NET_KEYS[] = {"keepalives", "keepalives_idle",
                                       "keepalives_interval",
                                       "keepalives_count", "tcp_user_timeout"};
static const char *const NET_VALS[] = {"1", "10", "5", "3", "30000"};
#define NNET (sizeof NET_KEYS / sizeof NET_KEYS[0])

/* Whether the user's conninfo sets KEY (it parsed at open already). */
static int user_sets(const PQconninfoOption *opts, const char *key) {
    for (const PQconninfoOption *o = opts; o && o->keyword; o++)
        if (strcmp(o->keyword, key) == 0)
            return o->val != NULL && *o->val != '\0';
    return 0;
}

/* The session's idle_in_transaction_session_timeout: statement_timeout_ms,
 * at least PG_IDLE_MIN_MS (also when it is 0, none). A host stopped
 * inside a transaction (a stopped or swapped-out process, a cut
 * connection) holds its locks, among them the connector's tidemark_keysets
 * row that every host's keyed commit takes: the server ends such a session
 * once it has waited this long for its next statement, and the others'
 * lock waits end with it. It cannot fire on a healthy host: between two
 * statements of its transactions the sink waits for nothing but its own
 * CPU on one batch (encoding the next statement, deciding keys already in
 * memory: milliseconds for 10 000 records), never for the host, a lock or
 * another service; scan, whose reader paces its FETCHes, lifts it. */
int64_t pg_idle_timeout_ms(const pg_sink *s) {
    return s->set.statement_timeout_ms > PG_IDLE_MIN_MS
               ? s->set.statement_timeout_ms
               : PG_IDLE_MIN_MS;
}

tm_status pg_connect(pg_sink *s, tm_error *err) {
    char timeout[32];
    snprintf(timeout, sizeof timeout, "%lld",
             (long long)s->set.connect_timeout_s);
    /* dbname first and expanded (keywords or URI); what follows
     * overrides it: application_name is the connector's name. */
    const char *keys[5 + NNET] = {"dbname", "application_name",
                                  "connect_timeout", "client_encoding"};
    const char *vals[5 + NNET] = {s->set.conninfo, s->config->connector,
                                  timeout, "UTF8"};
    size_t k = 4;
    PQconninfoOption *opts = PQconninfoParse(s->set.conninfo, NULL);
    if (!opts) {
        s->host->set_error(err, "setting \"conninfo\": out of memory");
        return TM_RETRY;
    }
    for (size_t i = 0; i < NNET; i++)
        if (!user_sets(opts, NET_KEYS[i])) {
            keys[k] = NET_KEYS[i];
            vals[k++] = NET_VALS[i];
        }
    PQconninfoFree(opts);
    keys[k] = vals[k] = NULL;
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    if (!c || PQstatus(c) != CONNECTION_OK) {
        char msg[400];
        trimmed(msg, sizeof msg, c ? PQerrorMessage(c) : "out of memory");
        s->host->set_error(err, "setting \"conninfo\": cannot connect: %s",
                           msg);
        PQfinish(c);
        return TM_RETRY;
    }
    PQsetNoticeProcessor(c, quiet_notices, NULL);
    s->conn = c;
    /* prepared statements live in a session */
    s->prepared = s->keys_prepared = s->upsert_prepared = 0;
    char st[32], idle[32];
    snprintf(st, sizeof st, "%lld", (long long)s->set.statement_timeout_ms);
    snprintf(idle, sizeof idle, "%lld", (long long)pg_idle_timeout_ms(s));
    const char *p[2] = {st, idle};
    tm_status r = TM_OK;
    PGresult *res =
        pg_query(s,
                 "SELECT set_config('statement_timeout', $1, false), "
                 "set_config('idle_in_transaction_session_timeout', $2, "
                 "false), set_config('TimeZone', 'UTC', false), "
                 "set_config('default_transaction_isolation', "
                 "'read committed', false)",
                 2, p, NULL, NULL, 1, "setting statement_timeout", &r, err);
    if (!res)
        return r;
    PQclear(res);
    if (!s->q_schema) {
        pg_buf b = {0};
        pg_buf_ident(s, &b, s->set.schema);
        s->q_schema = b.p;
        s->q_table = qualified(s, s->set.table);
        s->q_markers = qualified(s, PG_MARKERS);
        s->q_dls = qualified(s, PG_DEAD_LETTERS);
        s->q_keys = qualified(s, PG_KEYS);
        s->q_owners = qualified(s, PG_OWNERS);
        s->q_keysets = qualified(s, PG_KEYSETS);
        s->q_key_batches = qualified(s, PG_KEY_BATCHES);
        if (b.oom || !s->q_table || !s->q_markers || !s->q_dls || !s->q_keys ||
            !s->q_owners || !s->q_keysets || !s->q_key_batches) {
            s->host->set_error(err, "out of memory (escaping identifiers)");
            pg_disconnect(s);
            return TM_FATAL;
        }
    }
    set_cancel(s, PQgetCancel(c));
    return TM_OK;
}

void pg_disconnect(pg_sink *s) {
    set_cancel(s, NULL);
    if (s->conn)
        PQfinish(s->conn);
    s->conn = NULL;
}

tm_status pg_ready(pg_sink *s, tm_error *err) {
    if (s->conn && PQstatus(s->conn) == CONNECTION_OK)
        return TM_OK;
    pg_disconnect(s);
    tm_status r = pg_connect(s, err);
    return r == TM_OK ? TM_OK : r == TM_FATAL ? TM_FATAL : TM_RETRY;
}

/* The interrupt flag is cleared when a call returns, not when it starts
 * its statements: an interrupt() that came once the host had entered the
 * call (e.g. from its fault hook, or while the call reconnected) would
 * otherwise be lost, and the call would wait for a lock until
 * statement_timeout_ms. One with no call in progress is ignored. */
void pg_call_enter(pg_sink *s) {
    atomic_store(&s->in_call, 1);
}

void pg_call_begin(pg_sink *s, int64_t deadline_ms) {
    s->deadline_ms = deadline_ms > 0 ? deadline_ms : 0;
}

void pg_call_end(pg_sink *s) {
    s->deadline_ms = 0;
    atomic_store(&s->in_call, 0);
    atomic_store(&s->interrupted, 0);
}

tm_status pg_if_interrupted(pg_sink *s, const char *step, tm_error *err) {
    if (!atomic_load(&s->interrupted))
        return TM_OK;
    s->host->set_error(err, "%s: given up (interrupted)", step);
    return TM_RETRY;
}

int pg_should_stop(pg_sink *s) {
    return atomic_load(&s->interrupted) ||
           (s->deadline_ms > 0 && pg_now_ms() > s->deadline_ms);
}

/* What each SQLSTATE means for the host, in one table (docs/sinks/postgres.md,
 * "Error classes"). First match wins, so a code comes before its class.
 * ROW: the database refuses the record's content; in a record's own write
 * (its row, its business key) the record becomes a dead letter and the
 * batch goes on, because the same record would fail again after every
 * restart. In any other statement the same code is OTHER. */
static const struct {
    const char *prefix;
    pg_err_class row, other;
} CLASSES[] = {
    /* a unique index of the table's refuses the row; elsewhere a
     * concurrent writer's key (e.g. a catalog row of CREATE ... IF NOT
     * EXISTS) */
    {"23505", PG_ERR_ROW, PG_ERR_RETRY},
    {"22", PG_ERR_ROW, PG_ERR_FATAL},    /* data exception: NUL, encoding */
    {"23", PG_ERR_ROW, PG_ERR_FATAL},    /* NOT NULL, CHECK, foreign key */
    {"54000", PG_ERR_ROW, PG_ERR_FATAL}, /* index row too large */
    {"08", PG_ERR_RETRY, PG_ERR_RETRY},  /* connection */
    /* configuration limit exceeded (temp_file_limit): the same statement
     * exceeds it again on every retry until the setting is raised */
    {"53400", PG_ERR_FATAL, PG_ERR_FATAL},
    {"53", PG_ERR_RETRY, PG_ERR_RETRY},    /* disk full, memory, connections */
    {"57P0", PG_ERR_RETRY, PG_ERR_RETRY},  /* shutdown, crash, starting */
    {"57014", PG_ERR_RETRY, PG_ERR_RETRY}, /* cancelled: interrupt, timeout */
    {"40001", PG_ERR_RETRY, PG_ERR_RETRY}, /* serialization failure */
    {"40P01", PG_ERR_RETRY, PG_ERR_RETRY}, /* deadlock */
    {"55P03", PG_ERR_RETRY, PG_ERR_RETRY}, /* lock not available */
    {"42", PG_ERR_FATAL, PG_ERR_FATAL},    /* schema or privilege mismatch */
    /* PL/pgSQL's own class: RAISE EXCEPTION without a code of its own
     * (P0001), ASSERT (P0004), no or too many rows (P0002, P0003), a
     * bare RAISE (P0000). In a record's write, a trigger refusing the
     * row, as SQLite's RAISE(ABORT) refuses it. A code the trigger names
     * itself (ERRCODE) is its own: fatal unless its class is listed. */
    {"P0", PG_ERR_ROW, PG_ERR_FATAL},
};

pg_err_class pg_state_class(const char *state, int in_record) {
    for (size_t i = 0; state && i < sizeof CLASSES / sizeof CLASSES[0]; i++)
        if (strncmp(state, CLASSES[i].prefix, strlen(CLASSES[i].prefix)) == 0)
            return in_record ? CLASSES[i].row : CLASSES[i].other;
    return PG_ERR_FATAL;
}

tm_status pg_fail(pg_sink *s, PGresult *res, const char *step, tm_error *err) {
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *prim =
        res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    char msg[400];
    trimmed(msg, sizeof msg,
            prim                                ? prim
            : res && *PQresultErrorMessage(res) ? PQresultErrorMessage(res)
            : s->conn                           ? PQerrorMessage(s->conn)
                                                : "no connection");
    /* An error of severity FATAL ends the session (the server closes it
     * after sending it, e.g. idle_in_transaction_session_timeout, 25P03,
     * ending a host paused inside a commit), whether or not libpq has seen
     * the close yet: lost, RETRY, the next call connects afresh. */
    const char *sev =
        res ? PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED) : NULL;
    int lost =
        !s->conn || PQstatus(s->conn) != CONNECTION_OK ||
        (sev && (strcmp(sev, "FATAL") == 0 || strcmp(sev, "PANIC") == 0));
    if (state && strcmp(state, "57014") == 0 && atomic_load(&s->interrupted))
        s->host->set_error(err, "%s: given up (interrupted)", step);
    else
        s->host->set_error(err, "%s on %s: %s%s%s%s", step,
                           s->q_table ? s->q_table : s->set.table, msg,
                           state ? " (SQLSTATE " : "", state ? state : "",
                           state ? ")" : "");
    int again = pg_state_class(state, 0) == PG_ERR_RETRY; /* state in res */
    snprintf(s->last_state, sizeof s->last_state, "%s", state ? state : "");
    PQclear(res);
    if (lost) {
        pg_disconnect(s); /* the next call connects afresh */
        return TM_RETRY;
    }
    return again ? TM_RETRY : TM_FATAL;
}

/* RES of a statement: itself when it succeeded as WANT_TUPLES says, else
 * NULL with pg_fail's answer in *r. */
static PGresult *query_result(pg_sink *s, PGresult *res, int want_tuples,
                              const char *step, tm_status *r, tm_error *err) {
    ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    if (st == (want_tuples ? PGRES_TUPLES_OK : PGRES_COMMAND_OK)) {
        *r = TM_OK;
        return res;
    }
    *r = pg_fail(s, res, step, err);
    return NULL;
}

static PGresult *query(pg_sink *s, const char *sql, int n,
                       const char *const *vals, const int *lens,
                       const int *formats, int want_tuples, int binary,
                       const char *step, tm_status *r, tm_error *err) {
    if (!s->conn) {
        s->host->set_error(err, "%s: no connection", step);
        *r = TM_RETRY;
        return NULL;
    }
    /* Not sent once interrupted: PQcancel reaches only a statement the
     * server is running, not one sent after it. */
    if ((*r = pg_if_interrupted(s, step, err)) != TM_OK)
        return NULL;
    PGresult *res =
        n == 0 && !want_tuples
            ? PQexec(s->conn, sql)
            : PQexecParams(s->conn, sql, n, NULL, vals, lens, formats, binary);
    return query_result(s, res, want_tuples, step, r, err);
}

PGresult *pg_query(pg_sink *s, const char *sql, int n, const char *const *vals,
                   const int *lens, const int *formats, int want_tuples,
                   const char *step, tm_status *r, tm_error *err) {
    return query(s, sql, n, vals, lens, formats, want_tuples, 0, step, r, err);
}

PGresult *pg_query_binary(pg_sink *s, const char *sql, int n,
                          const char *const *vals, const int *lens,
                          const int *formats, const char *step, tm_status *r,
                          tm_error *err) {
    return query(s, sql, n, vals, lens, formats, 1, 1, step, r, err);
}

PGresult *pg_query_prepared(pg_sink *s, const char *name, int n,
                            const char *const *vals, const int *lens,
                            const int *formats, int want_tuples,
                            const char *step, tm_status *r, tm_error *err) {
    if (!s->conn) {
        s->host->set_error(err, "%s: no connection", step);
        *r = TM_RETRY;
        return NULL;
    }
    if ((*r = pg_if_interrupted(s, step, err)) != TM_OK)
        return NULL;
    PGresult *res = PQexecPrepared(s->conn, name, n, vals, lens, formats, 0);
    return query_result(s, res, want_tuples, step, r, err);
}

tm_status pg_prepare(pg_sink *s, const char *name, const char *sql, int n,
                     const char *step, tm_error *err) {
    if (!sql) {
        s->host->set_error(err, "%s: out of memory", step);
        return TM_RETRY;
    }
    if (!s->conn) {
        s->host->set_error(err, "%s: no connection", step);
        return TM_RETRY;
    }
    PGresult *res = PQprepare(s->conn, name, sql, n, NULL);
    if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
        return pg_fail(s, res, step, err);
    PQclear(res);
    return TM_OK;
}

tm_status pg_exec(pg_sink *s, const char *sql, const char *step,
                  tm_error *err) {
    tm_status r;
    PGresult *res = pg_query(s, sql, 0, NULL, NULL, NULL, 0, step, &r, err);
    PQclear(res);
    return r;
}

void pg_rollback(pg_sink *s) {
    if (!s->conn)
        return;
    PGTransactionStatusType t = PQtransactionStatus(s->conn);
    if (t == PQTRANS_IDLE)
        return;
    if (t == PQTRANS_UNKNOWN || t == PQTRANS_ACTIVE) {
        pg_disconnect(s); /* the server rolls back a closed session */
        return;
    }
    PGresult *res = PQexec(s->conn, "ROLLBACK");
    int ok = res && PQresultStatus(res) == PGRES_COMMAND_OK;
    PQclear(res);
    if (!ok)
        pg_disconnect(s);
}
