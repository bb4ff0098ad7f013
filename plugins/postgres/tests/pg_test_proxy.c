#define _GNU_SOURCE /* memmem */
#include "pg_test_proxy.h"

#include <arpa/inet.h>
#include <check.h>
#include <ctype.h>
#include <errno.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pg_test_common.h"

static void buf_add(pgp_buf *b, const unsigned char *p, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q)
            abort(); /* the test's own proxy, not the plugin */
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void buf_drop(pgp_buf *b, size_t n) {
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

static void pair_close(pgp_pair *c) {
    fd_close(&c->cfd);
    fd_close(&c->sfd);
    free(c->in.p);
    free(c->reply.p);
    memset(c, 0, sizeof *c);
    c->cfd = c->sfd = -1;
}

/* SQL text equal to WORD: case-insensitive, trimmed, maybe with ';'. */
static int is_word(const char *sql, const char *word) {
    size_t len = strlen(sql), a = 0, n = strlen(word);
    while (a < len && isspace((unsigned char)sql[a]))
        a++;
    while (len > a &&
           (isspace((unsigned char)sql[len - 1]) || sql[len - 1] == ';'))
        len--;
    return len - a == n && strncasecmp(sql + a, word, n) == 0;
}

pgp_stmt pgp_classify(const char *sql) {
    if (is_word(sql, "BEGIN"))
        return PGP_BEGIN;
    if (is_word(sql, "COMMIT"))
        return PGP_COMMIT;
    int markers = strstr(sql, "tidemark_markers") != NULL;
    if (markers && strstr(sql, "FOR UPDATE"))
        return PGP_LOCK;
    if (markers &&
        (strncasecmp(sql, "UPDATE", 6) == 0 ||
         (strncasecmp(sql, "WITH", 4) == 0 && strstr(sql, "UPDATE"))))
        return PGP_MARKER_UPDATE;
    if (strstr(sql, "COPY ") && strstr(sql, "FROM STDIN"))
        return PGP_COPY;
    return PGP_OTHER;
}

const char *pgp_cut_name(pgp_cut c) {
    switch (c) {
    case PGP_CUT_NONE: return "none";
    case PGP_CUT_BEFORE_BEGIN: return "before BEGIN";
    case PGP_CUT_AFTER_LOCK: return "after the marker lock";
    case PGP_CUT_MID_COPY: return "mid-COPY";
    case PGP_CUT_BEFORE_UPDATE: return "before the marker UPDATE";
    case PGP_CUT_BEFORE_COMMIT: return "before COMMIT";
    case PGP_CUT_AFTER_COMMIT: return "after COMMIT";
    }
    return "?";
}

static pgp_stmt trigger_of(int cut) {
    switch (cut) {
    case PGP_CUT_BEFORE_BEGIN: return PGP_BEGIN;
    case PGP_CUT_AFTER_LOCK: return PGP_LOCK;
    case PGP_CUT_MID_COPY: return PGP_COPY;
    case PGP_CUT_BEFORE_UPDATE: return PGP_MARKER_UPDATE;
    case PGP_CUT_BEFORE_COMMIT:
    case PGP_CUT_AFTER_COMMIT: return PGP_COMMIT;
    }
    return PGP_NSTMT; /* matches nothing */
}

/* The NUL-terminated string at *at within [*at, end), or NULL; *at moves
 * past it. */
static const char *cstring(const char **at, const char *end) {
    const char *p = *at;
    size_t n = strnlen(p, (size_t)(end - p));
    if (p + n >= end)
        return NULL;
    *at = p + n + 1;
    return p;
}

static void remember(pgp_pair *c, const char *name, pgp_stmt kind) {
    for (int i = 0; i < PGP_MAXNAMED; i++)
        if (!c->named[i].name[0] || strcmp(c->named[i].name, name) == 0) {
            snprintf(c->named[i].name, sizeof c->named[i].name, "%s", name);
            c->named[i].kind = kind;
            return;
        }
}

static int recalled(const pgp_pair *c, const char *name) {
    for (int i = 0; i < PGP_MAXNAMED; i++)
        if (c->named[i].name[0] && strcmp(c->named[i].name, name) == 0)
            return c->named[i].kind;
    return PGP_OTHER;
}

/* The statement a message runs: a simple Query, the Parse of an unnamed
 * statement, the Bind of a prepared one (whose Parse, at prepare time, is
 * only remembered). -1 for anything else; *sql the text, if there is one. */
static int message_stmt(pgp_pair *c, const unsigned char *m, size_t len,
                        const char **sql) {
    const char *at = (const char *)m + 5, *end = (const char *)m + len;
    *sql = NULL;
    if (m[0] == 'Q' && (*sql = cstring(&at, end)) != NULL)
        return pgp_classify(*sql);
    if (m[0] == 'P') {
        const char *name = cstring(&at, end);
        const char *text = name ? cstring(&at, end) : NULL;
        if (!text)
            return -1;
        if (*name) {
            remember(c, name, pgp_classify(text));
            return -1;
        }
        *sql = text;
        return pgp_classify(text);
    }
    if (m[0] == 'B') { /* portal, then statement */
        const char *portal = cstring(&at, end);
        const char *name = portal ? cstring(&at, end) : NULL;
        if (!name || !*name)
            return -1;
        *sql = name;
        return recalled(c, name);
    }
    return -1;
}

static void cut_done(pgp_proxy *x, int kind) {
    atomic_store(&x->cut_kind, kind);
    atomic_fetch_add(&x->cuts, 1); /* before the client can hear of it */
}

/* Cut after a forwarded statement: FIN (not RST) to the server, so it gets
 * all of it and answers; the answer is read and dropped; the client is
 * closed without hearing anything. */
static void cut_after(pgp_proxy *x, pgp_pair *c) {
    cut_done(x, c->pending);
    shutdown(c->sfd, SHUT_WR);
    fd_close(&c->cfd);
    c->draining = c->pending;
    c->pending = PGP_CUT_NONE;
    c->in.len = 0;
}

/* Forwards the client's whole messages, cutting where armed. 0 to go on,
 * -1 to close the pair. */
static int client_messages(pgp_proxy *x, pgp_pair *c) {
    while (!c->draining) {
        size_t msglen;
        char type = 0;
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
            type = (char)c->in.p[0];
        }
        const char *sql = NULL;
        int kind = type ? message_stmt(c, c->in.p, msglen, &sql) : -1;
        if (kind >= 0)
            atomic_fetch_add(&x->seen[kind], 1);
        int arm = atomic_load(&x->arm);
        if (kind >= 0 && arm != PGP_CUT_NONE && kind == (int)trigger_of(arm) &&
            atomic_compare_exchange_strong(&x->arm, &arm, PGP_CUT_NONE)) {
            snprintf(x->cut_text, sizeof x->cut_text, "%s", sql);
            c->pending = arm;
        }
        int p = c->pending;
        if (p == PGP_CUT_BEFORE_BEGIN || p == PGP_CUT_BEFORE_UPDATE ||
            p == PGP_CUT_BEFORE_COMMIT ||
            (p == PGP_CUT_MID_COPY && type == 'c')) {
            cut_done(x, p); /* this message never reaches the server */
            return -1;
        }
        if (send_all(c->sfd, c->in.p, msglen) != 0)
            return -1;
        buf_drop(&c->in, msglen);
        if (type == 'd')
            atomic_fetch_add(&x->copy_data, 1);
        if (type == 'c')
            atomic_fetch_add(&x->copy_done, 1);
        if (p == PGP_CUT_MID_COPY && type == 'd') {
            cut_done(x, p); /* part of the rows sent, no CopyDone */
            return -1;
        }
        /* After a statement: up to its Sync (extended protocol), or at
         * once after a simple Query. */
        if ((p == PGP_CUT_AFTER_LOCK || p == PGP_CUT_AFTER_COMMIT) &&
            (type == 'S' || type == 'Q'))
            cut_after(x, c);
    }
    c->in.len = 0;
    return 0;
}

/* The server's CommandComplete for what a draining pair cut after. */
static void server_reply(pgp_proxy *x, pgp_pair *c) {
    const char *tag = c->draining == PGP_CUT_AFTER_LOCK ? "SELECT 1" : "COMMIT";
    unsigned char want[32];
    size_t n = strlen(tag) + 1;
    want[0] = 'C';
    uint32_t len = (uint32_t)(4 + n);
    want[1] = (unsigned char)(len >> 24);
    want[2] = (unsigned char)(len >> 16);
    want[3] = (unsigned char)(len >> 8);
    want[4] = (unsigned char)len;
    memcpy(want + 5, tag, n);
    if (memmem(c->reply.p, c->reply.len, want, 5 + n))
        atomic_store(&x->srv_reply, 1);
}

static void proxy_accept(pgp_proxy *x) {
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
    for (int i = 0; i < PGP_MAXPAIRS; i++)
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
    pgp_proxy *x = arg;
    unsigned char chunk[65536];
    while (!atomic_load(&x->stop)) {
        struct pollfd pf[1 + 2 * PGP_MAXPAIRS];
        int who[1 + 2 * PGP_MAXPAIRS]; /* pair * 2 + side (0 client) */
        int n = 0;
        pf[n] = (struct pollfd){.fd = x->lfd, .events = POLLIN};
        who[n++] = -1;
        for (int i = 0; i < PGP_MAXPAIRS; i++) {
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
            pgp_pair *c = &x->pairs[who[k] / 2];
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
                buf_add(&c->reply, chunk, (size_t)got);
                server_reply(x, c);
            } else if (send_all(c->cfd, chunk, (size_t)got) != 0) {
                pair_close(c);
            }
        }
    }
    for (int i = 0; i < PGP_MAXPAIRS; i++)
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

void pgp_start(pgp_proxy *x, char *sink_conninfo, size_t size) {
    memset(x, 0, sizeof *x);
    for (int i = 0; i < PGP_MAXPAIRS; i++)
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

void pgp_stop(pgp_proxy *x) {
    atomic_store(&x->stop, 1);
    pthread_join(x->th, NULL);
    close(x->lfd);
}
