#define _GNU_SOURCE /* memmem */
/* Fault tests of the PostgreSQL sink (loaded like the host loads it)
 * against the server of scripts/postgres.sh. Each test first proves that
 * its fault landed where intended, else it fails as "inconclusive":
 *   proxy   a loopback TCP proxy in this process, between the sink and the
 *           server, parses the frontend protocol and cuts both sockets just
 *           before forwarding the Query 'COMMIT' (it never reaches the
 *           server: RETRY, resend OK) or just after it (the server commits,
 *           the sink never hears: RETRY, resend ALREADY);
 *   lock    another transaction holds the partition's marker row FOR
 *           UPDATE past statement_timeout_ms: RETRY, nothing written;
 *   restart the server stopped and started under a committing sink: RETRY
 *           while down, then no gap and no duplicate.
 * Run one group with argv[1] (proxy, lock, restart); none: all of them.
 * What the sink wrote is read back with libpq directly from the server. */
#include <arpa/inet.h>
#include <check.h>
#include <ctype.h>
#include <errno.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "pg_test_common.h"
#include "config/settings.h"
#include "plugin/loader.h"
#include "services/host_services.h"

static const tm_sink_api *api;
static char schema[64], connector[64];
static PGconn *admin; /* the test's own connection, to the real server */

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void admin_connect(void) {
    if (admin)
        PQfinish(admin);
    admin = pgt_connect(pgt_conninfo());
}

static PGresult *sql(const char *text) {
    return pgt_sql(admin, text);
}

static void sql_text(const char *fmt, char *out, size_t size) {
    pgt_sql_text(admin, schema, fmt, out, size);
}

static void setup(void) {
    (void)pgt_conninfo(); /* fails, never skips, without it */
    api = pgt_plugin(TM_POSTGRES_PLUGIN);
    static int n;
    snprintf(schema, sizeof schema, "pgfault_%d_%d", (int)getpid(), ++n);
    snprintf(connector, sizeof connector, "fault_%d_%d", (int)getpid(), n);
    admin_connect();
}

static void teardown(void) {
    char text[256];
    snprintf(text, sizeof text, "DROP SCHEMA IF EXISTS \"%s\" CASCADE", schema);
    if (admin && PQstatus(admin) != CONNECTION_OK)
        PQreset(admin);
    if (admin)
        PQclear(PQexec(admin, text));
    PQfinish(admin);
    admin = NULL;
}

static const tm_column COLS[] = {
    {sizeof(tm_column), "id", TM_TYPE_INT, 1, 1},
    {sizeof(tm_column), "body", TM_TYPE_TEXT, 0, 0},
};
#define NCOLS 2

typedef struct conf {
    tm_settings *settings;
    tm_sink_config config;
} conf;

static void conf_init(conf *c, const char *conn, int64_t statement_timeout) {
    json_t *obj =
        json_pack("{s:s, s:s, s:s, s:I, s:I}", "conninfo", conn, "schema",
                  schema, "table", "t", "connect_timeout_s", (json_int_t)2,
                  "statement_timeout_ms", (json_int_t)statement_timeout);
    ck_assert_ptr_nonnull(obj);
    c->settings = tm_settings_new(obj, "$.sink.settings");
    json_decref(obj);
    ck_assert_ptr_nonnull(c->settings);
    c->config = (tm_sink_config){.struct_size = sizeof(tm_sink_config),
                                 .connector = connector,
                                 .settings = c->settings,
                                 .columns = COLS,
                                 .ncolumns = NCOLS,
                                 .flags = 0};
}

static void conf_done(conf *c) {
    tm_settings_free(c->settings);
}

static void *open_ok(conf *c) {
    return pgt_open(api, tm_host_services(), &c->config);
}

static tm_marker claim1(void *sink) {
    return pgt_claim1(api, sink);
}

#define PER_BATCH 3

typedef struct batch {
    tm_batch b;
    tm_range range;
    tm_record records[PER_BATCH];
    tm_value values[PER_BATCH][NCOLS];
    char id[48];
} batch;

/* Offsets start .. start + PER_BATCH - 1, id = offset. */
static void batch_make(batch *bt, int64_t start, int64_t epoch) {
    static int seq;
    memset(bt, 0, sizeof *bt);
    snprintf(bt->id, sizeof bt->id, "fault-%d-%d", (int)getpid(), ++seq);
    bt->range = (tm_range){.struct_size = sizeof(tm_range),
                           .topic = "t",
                           .partition = 0,
                           .start_offset = start,
                           .end_offset = start + PER_BATCH,
                           .epoch = epoch};
    for (int i = 0; i < PER_BATCH; i++) {
        tm_value *v = bt->values[i];
        v[0] = (tm_value){.struct_size = sizeof(tm_value)};
        v[1] = (tm_value){.struct_size = sizeof(tm_value)};
        v[0].v.i = start + i;
        v[1].v.s.ptr = "row";
        v[1].v.s.len = 3;
        bt->records[i] = (tm_record){.struct_size = sizeof(tm_record),
                                     .offset = start + i,
                                     .timestamp_ms = 1000,
                                     .key = "k",
                                     .key_len = 1,
                                     .value = "{}",
                                     .value_len = 2,
                                     .values = v};
    }
    bt->b = (tm_batch){.struct_size = sizeof(tm_batch),
                       .connector = connector,
                       .batch_id = bt->id,
                       .ranges = &bt->range,
                       .nranges = 1,
                       .records = bt->records,
                       .nrecords = PER_BATCH};
}

static tm_status commit(void *sink, batch *bt, tm_error *err) {
    err->struct_size = sizeof *err;
    err->message[0] = '\0';
    return api->commit(sink, &bt->b, err);
}

static void commit_ok(void *sink, batch *bt) {
    tm_error err;
    tm_status rc = commit(sink, bt, &err);
    ck_assert_msg(rc == TM_OK, "commit %s: %s: %s", bt->id, tm_status_name(rc),
                  err.message);
}

/* Exactly one row per offset 0 .. end-1, no gap, no duplicate. */
static void assert_rows_exactly(int64_t end) {
    char q[512], v[128];
    snprintf(q, sizeof q,
             "SELECT count(*) || '/' || count(DISTINCT _tm_offset) || '/' || "
             "coalesce(min(_tm_offset), -1) || '/' || "
             "coalesce(max(_tm_offset), -1) FROM $S.t");
    sql_text(q, v, sizeof v);
    char want[128];
    snprintf(want, sizeof want, "%lld/%lld/0/%lld", (long long)end,
             (long long)end, (long long)end - 1);
    ck_assert_msg(strcmp(v, want) == 0,
                  "rows (count/distinct/min/max): %s, want %s", v, want);
}

/* The marker as the server has it: "next_offset/last_batch_id". */
static void marker_text(char *out, size_t size) {
    char q[512];
    snprintf(q, sizeof q,
             "SELECT next_offset || '/' || coalesce(last_batch_id, '') FROM "
             "$S.tidemark_markers WHERE connector = '%s' AND topic = 't' AND "
             "\"partition\" = 0",
             connector);
    sql_text(q, out, size);
}

static void assert_marker(int64_t next, const char *batch_id) {
    char v[128], want[128];
    marker_text(v, sizeof v);
    snprintf(want, sizeof want, "%lld/%s", (long long)next,
             batch_id ? batch_id : "");
    ck_assert_msg(strcmp(v, want) == 0, "marker %s, want %s", v, want);
}

/* ---- the proxy ---------------------------------------------------------- */

enum { ARM_NONE = 0, ARM_BEFORE = 1, ARM_AFTER = 2 };
#define MAXPAIRS 16

typedef struct buf {
    unsigned char *p;
    size_t len, cap;
} buf;

typedef struct pair {
    int cfd, sfd; /* -1: closed */
    int typed;    /* past the startup packet */
    int draining; /* cut after COMMIT: reading the server's reply only */
    buf in;       /* client bytes not yet forwarded (whole messages) */
    buf reply;    /* draining: the server's bytes, never forwarded */
} pair;

typedef struct proxy {
    int lfd, port;
    struct sockaddr_in server;
    pthread_t th;
    atomic_int stop, arm;
    atomic_int cuts;          /* cuts done */
    atomic_int commits_seen;  /* Query COMMIT messages seen */
    atomic_int accepted;      /* client connections */
    atomic_int srv_committed; /* after a cut: the server answered COMMIT */
    char cut_text[64];        /* the query text it cut at */
    pair pairs[MAXPAIRS];
} proxy;

static void buf_add(buf *b, const unsigned char *p, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q)
            abort();
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void buf_drop(buf *b, size_t n) {
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
}

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

static int send_all(int fd, const unsigned char *p, size_t n) {
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static void fd_close(int *fd) {
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static void pair_close(pair *c) {
    fd_close(&c->cfd);
    fd_close(&c->sfd);
    free(c->in.p);
    free(c->reply.p);
    memset(c, 0, sizeof *c);
    c->cfd = c->sfd = -1;
}

/* Query text (NUL-terminated within n bytes) is COMMIT: case-insensitive,
 * trimmed, maybe with ';'. */
static int is_commit(const unsigned char *p, size_t n) {
    char t[64];
    size_t len = strnlen((const char *)p, n);
    size_t a = 0;
    while (a < len && isspace(p[a]))
        a++;
    while (len > a && (isspace(p[len - 1]) || p[len - 1] == ';'))
        len--;
    if (len - a >= sizeof t)
        return 0;
    memcpy(t, p + a, len - a);
    t[len - a] = '\0';
    return strcasecmp(t, "COMMIT") == 0;
}

/* Forwards the client's whole messages; at an armed COMMIT, cuts. 0 to go
 * on, -1 to close the pair. */
static int client_messages(proxy *x, pair *c) {
    for (;;) {
        size_t msglen;
        int commit_q = 0;
        if (!c->typed) { /* SSLRequest, GSSENCRequest, startup: no type */
            if (c->in.len < 8)
                return 0;
            msglen = be32(c->in.p);
            if (msglen < 8 || c->in.len < msglen)
                return msglen < 8 ? -1 : 0;
            uint32_t code = be32(c->in.p + 4);
            if (code != 80877103 && code != 80877104)
                c->typed = 1;
        } else {
            if (c->in.len < 5)
                return 0;
            msglen = 1 + (size_t)be32(c->in.p + 1);
            if (msglen < 5)
                return -1;
            if (c->in.len < msglen)
                return 0;
            if (c->in.p[0] == 'Q' && is_commit(c->in.p + 5, msglen - 5)) {
                commit_q = 1;
                atomic_fetch_add(&x->commits_seen, 1);
            }
        }
        int arm = commit_q ? atomic_exchange(&x->arm, ARM_NONE) : ARM_NONE;
        if (commit_q && arm != ARM_NONE) {
            size_t n = msglen - 5 < sizeof x->cut_text - 1
                           ? msglen - 5
                           : sizeof x->cut_text - 1;
            memcpy(x->cut_text, c->in.p + 5, n);
            x->cut_text[n] = '\0';
        }
        if (arm == ARM_BEFORE) { /* never reaches the server */
            atomic_fetch_add(&x->cuts, 1);
            return -1;
        }
        if (send_all(c->sfd, c->in.p, msglen) != 0)
            return -1;
        buf_drop(&c->in, msglen);
        if (arm == ARM_AFTER) {
            /* Sent; the client hears nothing. FIN (not RST) to the server
             * after the COMMIT, so it gets all of it; its reply is read
             * and dropped. */
            atomic_fetch_add(&x->cuts, 1); /* before the client hears */
            shutdown(c->sfd, SHUT_WR);
            fd_close(&c->cfd);
            c->draining = 1;
            c->in.len = 0;
            return 0;
        }
    }
}

static void proxy_accept(proxy *x) {
    int fd = accept(x->lfd, NULL, NULL);
    if (fd < 0)
        return;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0 ||
        connect(s, (struct sockaddr *)&x->server, sizeof x->server) != 0) {
        if (s >= 0)
            close(s);
        close(fd);
        return;
    }
    for (int i = 0; i < MAXPAIRS; i++)
        if (x->pairs[i].cfd < 0 && x->pairs[i].sfd < 0) {
            x->pairs[i].cfd = fd;
            x->pairs[i].sfd = s;
            atomic_fetch_add(&x->accepted, 1);
            return;
        }
    close(s);
    close(fd);
}

static void *proxy_main(void *arg) {
    proxy *x = arg;
    unsigned char chunk[65536];
    while (!atomic_load(&x->stop)) {
        struct pollfd pf[1 + 2 * MAXPAIRS];
        int who[1 + 2 * MAXPAIRS]; /* pair * 2 + side (0 client, 1 server) */
        int n = 0;
        pf[n] = (struct pollfd){.fd = x->lfd, .events = POLLIN};
        who[n++] = -1;
        for (int i = 0; i < MAXPAIRS; i++) {
            if (x->pairs[i].cfd >= 0) {
                pf[n] =
                    (struct pollfd){.fd = x->pairs[i].cfd, .events = POLLIN};
                who[n++] = 2 * i;
            }
            if (x->pairs[i].sfd >= 0) {
                pf[n] =
                    (struct pollfd){.fd = x->pairs[i].sfd, .events = POLLIN};
                who[n++] = 2 * i + 1;
            }
        }
        if (poll(pf, (nfds_t)n, 50) <= 0)
            continue;
        for (int k = 0; k < n; k++) {
            if (!pf[k].revents)
                continue;
            if (who[k] < 0) {
                proxy_accept(x);
                continue;
            }
            pair *c = &x->pairs[who[k] / 2];
            int side = who[k] % 2;
            int fd = side ? c->sfd : c->cfd;
            if (fd != pf[k].fd)
                continue; /* closed earlier in this round */
            ssize_t got = recv(fd, chunk, sizeof chunk, 0);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0) {
                pair_close(c);
                continue;
            }
            if (side == 0) {
                buf_add(&c->in, chunk, (size_t)got);
                if (client_messages(x, c) != 0)
                    pair_close(c);
            } else if (c->draining) {
                static const unsigned char TAG[] = {
                    'C', 0, 0, 0, 11, 'C', 'O', 'M', 'M', 'I', 'T', 0};
                buf_add(&c->reply, chunk, (size_t)got);
                if (memmem(c->reply.p, c->reply.len, TAG, sizeof TAG))
                    atomic_store(&x->srv_committed, 1);
            } else if (send_all(c->cfd, chunk, (size_t)got) != 0) {
                pair_close(c);
            }
        }
    }
    for (int i = 0; i < MAXPAIRS; i++)
        pair_close(&x->pairs[i]);
    return NULL;
}

static char *conn_value(PQconninfoOption *o, const char *key) {
    for (; o && o->keyword; o++)
        if (strcmp(o->keyword, key) == 0)
            return o->val;
    return NULL;
}

static void add_kv(char *out, size_t size, const char *k, const char *v) {
    size_t len = strlen(out);
    len += (size_t)snprintf(out + len, size - len, "%s%s='", len ? " " : "", k);
    for (; *v && len + 3 < size; v++) {
        if (*v == '\'' || *v == '\\')
            out[len++] = '\\';
        out[len++] = *v;
    }
    snprintf(out + len, size - len, "'");
}

/* Starts the proxy to the server of TIDEMARK_PG_CONNINFO; *sink_conninfo
 * is that conninfo with host/port of the proxy and plain (no SSL/GSS). */
static void proxy_start(proxy *x, char *sink_conninfo, size_t size) {
    memset(x, 0, sizeof *x);
    for (int i = 0; i < MAXPAIRS; i++)
        x->pairs[i].cfd = x->pairs[i].sfd = -1;
    char *e = NULL;
    PQconninfoOption *o = PQconninfoParse(pgt_conninfo(), &e);
    ck_assert_msg(o != NULL, "TIDEMARK_PG_CONNINFO: %s", e ? e : "?");
    const char *host = conn_value(o, "hostaddr");
    if (!host || !*host)
        host = conn_value(o, "host");
    const char *port = conn_value(o, "port");
    x->server.sin_family = AF_INET;
    x->server.sin_port = htons((uint16_t)atoi(port && *port ? port : "5432"));
    ck_assert_msg(host && inet_pton(AF_INET, host, &x->server.sin_addr) == 1,
                  "the proxy needs an IPv4 host in TIDEMARK_PG_CONNINFO, "
                  "not %s",
                  host ? host : "(none)");
    x->lfd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(x->lfd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(x->lfd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(x->lfd, 16), 0);
    socklen_t al = sizeof a;
    ck_assert_int_eq(getsockname(x->lfd, (struct sockaddr *)&a, &al), 0);
    x->port = ntohs(a.sin_port);
    sink_conninfo[0] = '\0';
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", x->port);
    add_kv(sink_conninfo, size, "host", "127.0.0.1");
    add_kv(sink_conninfo, size, "port", portstr);
    add_kv(sink_conninfo, size, "sslmode", "disable");
    add_kv(sink_conninfo, size, "gssencmode", "disable");
    static const char *const SKIP[] = {"host",    "hostaddr",   "port",
                                       "sslmode", "gssencmode", NULL};
    for (PQconninfoOption *p = o; p->keyword; p++) {
        int skip = 0;
        for (int i = 0; SKIP[i]; i++)
            skip |= strcmp(p->keyword, SKIP[i]) == 0;
        if (!skip && p->val && *p->val)
            add_kv(sink_conninfo, size, p->keyword, p->val);
    }
    PQconninfoFree(o);
    PQfreemem(e);
    ck_assert_int_eq(pthread_create(&x->th, NULL, proxy_main, x), 0);
}

static void proxy_stop(proxy *x) {
    atomic_store(&x->stop, 1);
    pthread_join(x->th, NULL);
    close(x->lfd);
}

/* _i: 0 cut before forwarding COMMIT, 1 just after it. */
START_TEST(commit_cut_by_proxy) {
    const int after = _i == 1;
    proxy x;
    char conn[1024];
    proxy_start(&x, conn, sizeof conn);
    conf c;
    conf_init(&c, conn, 30000);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    ck_assert_msg(atomic_load(&x.accepted) >= 1,
                  "inconclusive: the sink did not connect through the proxy");
    batch b1, b2;
    batch_make(&b1, 0, m.epoch);
    int seen = atomic_load(&x.commits_seen);
    commit_ok(sink, &b1);
    ck_assert_msg(atomic_load(&x.commits_seen) == seen + 1,
                  "inconclusive: the proxy saw no Query COMMIT in a commit "
                  "(%d -> %d): does the sink still send COMMIT as a simple "
                  "query?",
                  seen, atomic_load(&x.commits_seen));
    assert_marker(PER_BATCH, b1.id);

    batch_make(&b2, PER_BATCH, m.epoch);
    atomic_store(&x.arm, after ? ARM_AFTER : ARM_BEFORE);
    tm_error err;
    tm_status rc = commit(sink, &b2, &err);
    ck_assert_msg(atomic_load(&x.cuts) == 1 && atomic_load(&x.arm) == ARM_NONE,
                  "inconclusive: the proxy did not cut at COMMIT (cuts %d); "
                  "commit gave %s: %s",
                  atomic_load(&x.cuts), tm_status_name(rc), err.message);
    ck_assert_msg(
        is_commit((const unsigned char *)x.cut_text, strlen(x.cut_text) + 1),
        "cut at %s", x.cut_text);
    ck_assert_msg(rc == TM_RETRY,
                  "commit with the connection cut %s COMMIT: "
                  "%s: %s",
                  after ? "after" : "before", tm_status_name(rc), err.message);
    if (after) {
        /* The server got the COMMIT: wait until it answered it (the proxy
         * read and dropped CommandComplete "COMMIT"), then the batch must
         * show on the server. */
        int64_t until = pgt_mono_ms() + 10000;
        while (!atomic_load(&x.srv_committed) && pgt_mono_ms() < until)
            sleep_ms(20);
        ck_assert_msg(atomic_load(&x.srv_committed),
                      "inconclusive: the server never answered the forwarded "
                      "COMMIT");
        assert_marker(2 * PER_BATCH, b2.id);
        assert_rows_exactly(2 * PER_BATCH);
    } else {
        assert_marker(PER_BATCH, b1.id); /* never reached the server */
        assert_rows_exactly(PER_BATCH);
    }
    int accepted = atomic_load(&x.accepted);
    rc = commit(sink, &b2, &err); /* the resend, through the disarmed proxy */
    ck_assert_msg(rc == (after ? TM_ALREADY : TM_OK), "resend: %s: %s",
                  tm_status_name(rc), err.message);
    ck_assert_msg(atomic_load(&x.accepted) == accepted + 1,
                  "the resend did not reconnect through the proxy");
    assert_rows_exactly(2 * PER_BATCH);
    assert_marker(2 * PER_BATCH, b2.id);
    /* and the sink goes on */
    batch b3;
    batch_make(&b3, 2 * PER_BATCH, m.epoch);
    commit_ok(sink, &b3);
    assert_rows_exactly(3 * PER_BATCH);
    assert_marker(3 * PER_BATCH, b3.id);
    api->close(sink);
    conf_done(&c);
    proxy_stop(&x);
}
END_TEST

/* ---- a lock past the statement timeout ---------------------------------- */

typedef struct watch {
    atomic_int stop, saw_lock_wait;
} watch;

/* Sees the sink's backend waiting on a lock (pg_stat_activity). */
static void *lock_watcher(void *arg) {
    watch *w = arg;
    PGconn *c = PQconnectdb(pgt_conninfo());
    char q[256];
    snprintf(q, sizeof q,
             "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
             "'%s' AND wait_event_type = 'Lock'",
             connector);
    while (PQstatus(c) == CONNECTION_OK && !atomic_load(&w->stop)) {
        PGresult *r = PQexec(c, q);
        if (PQresultStatus(r) == PGRES_TUPLES_OK &&
            atoi(PQgetvalue(r, 0, 0)) > 0)
            atomic_store(&w->saw_lock_wait, 1);
        PQclear(r);
        sleep_ms(20);
    }
    PQfinish(c);
    return NULL;
}

START_TEST(marker_lock_past_statement_timeout) {
    conf c;
    conf_init(&c, pgt_conninfo(), 500);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    batch b1, b2;
    batch_make(&b1, 0, m.epoch);
    commit_ok(sink, &b1);
    char q[512];
    PQclear(sql("BEGIN"));
    snprintf(q, sizeof q,
             "SELECT next_offset FROM \"%s\".tidemark_markers WHERE connector "
             "= '%s' AND topic = 't' AND \"partition\" = 0 FOR UPDATE",
             schema, connector);
    PGresult *r = sql(q);
    ck_assert_msg(PQntuples(r) == 1,
                  "inconclusive: no marker row to lock (%d rows)",
                  PQntuples(r));
    PQclear(r);
    watch w = {0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, lock_watcher, &w), 0);
    batch_make(&b2, PER_BATCH, m.epoch);
    tm_error err;
    int64_t t0 = pgt_mono_ms();
    tm_status rc = commit(sink, &b2, &err);
    int64_t took = pgt_mono_ms() - t0;
    atomic_store(&w.stop, 1);
    pthread_join(th, NULL);
    ck_assert_msg(atomic_load(&w.saw_lock_wait),
                  "inconclusive: the sink's backend was never seen waiting "
                  "for a lock (commit %s in %lld ms: %s)",
                  tm_status_name(rc), (long long)took, err.message);
    ck_assert_msg(rc == TM_RETRY, "commit: %s: %s", tm_status_name(rc),
                  err.message);
    ck_assert_msg(strstr(err.message, "57014"), "not the timeout: %s",
                  err.message);
    ck_assert_msg(took >= 450 && took < 2000, "gave up after %lld ms",
                  (long long)took);
    /* nothing written: the holder still sees the old marker */
    assert_rows_exactly(PER_BATCH);
    PQclear(sql("ROLLBACK"));
    assert_marker(PER_BATCH, b1.id);
    assert_rows_exactly(PER_BATCH);
    commit_ok(sink, &b2);
    assert_rows_exactly(2 * PER_BATCH);
    assert_marker(2 * PER_BATCH, b2.id);
    api->close(sink);
    conf_done(&c);
}
END_TEST

/* ---- the server restarted ----------------------------------------------- */

static int pg_script(const char *what) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "bash '%s/scripts/postgres.sh' %s >&2",
             TM_REPO_ROOT, what);
    return system(cmd);
}

static void *starter(void *arg) {
    (void)arg;
    sleep_ms(500); /* a few commits fail against the stopped server */
    intptr_t rc = pg_script("start");
    return (void *)rc;
}

START_TEST(server_restarted_mid_stream) {
    conf c;
    conf_init(&c, pgt_conninfo(), 30000);
    void *sink = open_ok(&c);
    tm_marker m = claim1(sink);
    const int before = 3, after = 3;
    batch b;
    for (int i = 0; i < before; i++) {
        batch_make(&b, (int64_t)i * PER_BATCH, m.epoch);
        commit_ok(sink, &b);
    }
    assert_rows_exactly(before * PER_BATCH);
    ck_assert_int_eq(pg_script("stop"), 0);
    ck_assert_msg(PQping(pgt_conninfo()) == PQPING_NO_RESPONSE,
                  "inconclusive: the server still answers after stop");
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, starter, NULL), 0);
    int retries = 0, down_retries = 0;
    int64_t until = pgt_mono_ms() + 30000;
    for (int i = before; i < before + after; i++) {
        batch_make(&b, (int64_t)i * PER_BATCH, m.epoch);
        int backoff = 50;
        for (;;) {
            tm_error err;
            int down = PQping(pgt_conninfo()) == PQPING_NO_RESPONSE;
            tm_status rc = commit(sink, &b, &err);
            if (rc == TM_OK)
                break;
            ck_assert_msg(rc == TM_RETRY, "batch %d: %s: %s", i,
                          tm_status_name(rc), err.message);
            retries++;
            down_retries += down;
            ck_assert_msg(pgt_mono_ms() < until,
                          "still RETRY after 30 s: %s (%d retries)",
                          err.message, retries);
            sleep_ms(backoff);
            backoff = backoff * 2 > 1000 ? 1000 : backoff * 2;
        }
    }
    void *started = NULL;
    pthread_join(th, &started);
    ck_assert_msg(started == NULL, "postgres.sh start failed");
    ck_assert_msg(down_retries >= 1,
                  "inconclusive: no commit was tried while the server was "
                  "down (%d retries)",
                  retries);
    fprintf(stderr,
            "restart: %d RETRY (%d with the server down) before the "
            "stream went on\n",
            retries, down_retries);
    admin_connect(); /* the old session died with the server */
    assert_rows_exactly((before + after) * PER_BATCH);
    assert_marker((before + after) * PER_BATCH, b.id);
    api->close(sink);
    conf_done(&c);
}
END_TEST

static TCase *tcase(const char *name) {
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 90);
    return tc;
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : NULL;
    Suite *s = suite_create("postgres_faults");
    if (!only || strcmp(only, "proxy") == 0) {
        TCase *tc = tcase("proxy");
        tcase_add_loop_test(tc, commit_cut_by_proxy, 0, 2);
        suite_add_tcase(s, tc);
    }
    if (!only || strcmp(only, "lock") == 0) {
        TCase *tc = tcase("lock");
        tcase_add_test(tc, marker_lock_past_statement_timeout);
        suite_add_tcase(s, tc);
    }
    if (!only || strcmp(only, "restart") == 0) {
        TCase *tc = tcase("restart");
        tcase_add_test(tc, server_restarted_mid_stream);
        suite_add_tcase(s, tc);
    }
    return tm_check_run(s, 1);
}
