/* A connector's control socket (docs/operations.md, Pause, resume,
 * restart): STATE_DIR/CONNECTOR/control.sock, mode 0600, served by a
 * thread of the process that holds the connector's host lock, for
 * `tidemark pause|resume|restart`. A request is one line ("pause",
 * "resume", "restart"), the answer one line ("ok: ..." or "error: ...").
 * Only a peer of the process's own user, or root, is obeyed (SO_PEERCRED):
 * the socket's mode keeps the others out already, the check holds if the
 * mode or the directory's is loosened. */
#ifndef TM_CONTROL_SERVER_H
#define TM_CONTROL_SERVER_H

#include <stddef.h>

#include "runtime/connector.h"

typedef struct tm_control_server tm_control_server;

/* Starts serving control.sock in the connector directory open at DIR_FD
 * (SHOWN its path, for messages; the descriptor must stay open until
 * tm_control_stop) for connector NAME, acting on ctl. The caller holds the
 * connector's host lock: a socket left there by a process that died is
 * replaced. NULL with why. */
tm_control_server *tm_control_start(int dir_fd, const char *shown,
                                    const char *name, tm_run_ctl *ctl,
                                    char *why, size_t size);

/* Stops serving and removes the socket (before the host lock is let go).
 * NULL is ignored. */
void tm_control_stop(tm_control_server *s);

/* What the server answers to request LINE from a peer of uid PEER, acting
 * on ctl (and the pause file in the directory open at DIR_FD, SHOWN its
 * path): "ok: ..." or "error: ...". OWN is the server's euid, NOW_MS the
 * wall clock. For the server and its tests. */
void tm_control_handle(int dir_fd, const char *shown, const char *name,
                       tm_run_ctl *ctl, const char *line, unsigned peer,
                       unsigned own, long long now_ms, char *answer,
                       size_t size);

/* How long a client has to send its whole request line (one deadline
 * for the request, not per read). */
#define TM_CONTROL_REQUEST_MS 2000

/* Serves one client connected on FD: its request line read within
 * TM_CONTROL_REQUEST_MS (or until WAKE_FD, -1 for none, is readable: the
 * server stops), applied by tm_control_handle unless the client hung up
 * meanwhile (it gave up waiting: it must not be applied behind its back),
 * and answered. 0 when applied and answered, -1 otherwise. For the server
 * and its tests. */
int tm_control_serve(int dir_fd, const char *shown, const char *name,
                     tm_run_ctl *ctl, int fd, int wake_fd);

#endif
