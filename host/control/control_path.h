/* Where a connector's control socket is (docs/operations.md, Pause,
 * resume, restart): STATE_DIR/CONNECTOR/control.sock, served by the
 * process that holds the connector's host lock. One place for the server
 * and the CLI. */
#ifndef TM_CONTROL_PATH_H
#define TM_CONTROL_PATH_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#define TM_CONTROL_SOCKET "control.sock"

/* The address of CONN_DIR/control.sock. sun_path holds 108 bytes: a longer
 * path is reached through an O_PATH descriptor of CONN_DIR, as
 * /proc/self/fd/N/control.sock (*dirfd is then that descriptor, to close
 * after bind() or connect(); else -1). 0, or -1 with why. */
int tm_control_addr(const char *conn_dir, struct sockaddr_un *addr,
                    socklen_t *len, int *dirfd, char *why, size_t size);

/* The address of control.sock inside the directory open at DIR_FD, for
 * the server: /proc/self/fd/N/control.sock, resolved through the
 * descriptor (never through the directory's path again, as every write in
 * a state directory: status/state_dir.h), and short whatever the path. */
void tm_control_addr_fd(int dir_fd, struct sockaddr_un *addr, socklen_t *len);

/* Whether a peer of uid PEER may control a process running as euid OWN:
 * the same user, or root. */
int tm_control_peer_allowed(unsigned peer, unsigned own);

/* "NAME (uid N)" for uid, or "uid N" when it has no name. */
void tm_control_user(unsigned uid, char *out, size_t size);

#endif
