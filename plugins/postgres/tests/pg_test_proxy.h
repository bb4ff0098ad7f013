/* A loopback TCP proxy for the PostgreSQL sink's fault tests: a poll()
 * thread on 127.0.0.1:0 between the sink and the server of
 * TIDEMARK_PG_CONNINFO. It parses the frontend protocol (startup packet,
 * then type + length), classifies each statement the client runs (a simple
 * Query, the Parse of an unnamed statement, or the Bind of a prepared one)
 * and, when armed, cuts both sockets at one step
 * of a commit. What it saw and where it cut are kept, so a test can prove
 * the cut landed where intended before it trusts the outcome. */
#ifndef TM_PG_TEST_PROXY_H
#define TM_PG_TEST_PROXY_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

/* What a client statement is, by its SQL text. */
typedef enum pgp_stmt {
    PGP_OTHER = 0,
    PGP_BEGIN,         /* BEGIN */
    PGP_LOCK,          /* SELECT ... tidemark_markers ... FOR UPDATE */
    PGP_COPY,          /* a query with COPY ... FROM STDIN */
    PGP_MARKER_UPDATE, /* UPDATE of tidemark_markers (maybe in a WITH) */
    PGP_COMMIT,        /* COMMIT */
    PGP_NSTMT
} pgp_stmt;

/* Where an armed proxy cuts (once; then it disarms itself). */
typedef enum pgp_cut {
    PGP_CUT_NONE = 0,
    PGP_CUT_BEFORE_BEGIN,  /* BEGIN never reaches the server */
    PGP_CUT_AFTER_LOCK,    /* the marker lock forwarded up to its Sync, then
                              FIN to the server: it locks, replies (read and
                              dropped); the sink never hears */
    PGP_CUT_MID_COPY,      /* COPY started, its first CopyData forwarded, cut
                              before CopyDone */
    PGP_CUT_BEFORE_UPDATE, /* the marker UPDATE never reaches the server */
    PGP_CUT_BEFORE_COMMIT, /* COMMIT never reaches the server */
    PGP_CUT_AFTER_COMMIT   /* COMMIT forwarded up to its Sync, then FIN; the
                              server's reply is read and dropped */
} pgp_cut;

#define PGP_MAXPAIRS 16

typedef struct pgp_buf {
    unsigned char *p;
    size_t len, cap;
} pgp_buf;

#define PGP_MAXNAMED 8

typedef struct pgp_named { /* a prepared statement of the session */
    char name[64];
    int kind; /* pgp_stmt */
} pgp_named;

typedef struct pgp_pair {
    int cfd, sfd;  /* -1: closed */
    int typed;     /* past the startup packet */
    int pending;   /* an armed cut waiting for its message (pgp_cut) */
    int draining;  /* cut after a statement: reading the server's reply */
    pgp_buf in;    /* client bytes not yet forwarded (whole messages) */
    pgp_buf reply; /* draining: the server's bytes, never forwarded */
    pgp_named named[PGP_MAXNAMED];
} pgp_pair;

typedef struct pgp_proxy {
    int lfd, port;
    struct sockaddr_in server;
    pthread_t th;
    atomic_int stop, arm;       /* arm: a pgp_cut */
    atomic_int cuts;            /* cuts done */
    atomic_int cut_kind;        /* the pgp_cut of the last cut */
    atomic_int seen[PGP_NSTMT]; /* statements seen, by kind */
    atomic_int copy_data;       /* CopyData messages forwarded */
    atomic_int copy_done;       /* CopyDone messages forwarded */
    atomic_int accepted;        /* client connections */
    atomic_int srv_reply; /* draining: the server answered the statement */
    char cut_text[128];   /* the statement text it cut at or after */
    pgp_pair pairs[PGP_MAXPAIRS];
} pgp_proxy;

/* Starts the proxy; sink_conninfo is TIDEMARK_PG_CONNINFO with the proxy's
 * host/port and no SSL/GSS (so the proxy can read the protocol). */
void pgp_start(pgp_proxy *x, char *sink_conninfo, size_t size);
void pgp_stop(pgp_proxy *x);
pgp_stmt pgp_classify(const char *sql);
const char *pgp_cut_name(pgp_cut c);

#endif
