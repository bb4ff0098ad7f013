/* tidemark pause|resume|restart [--state-dir DIR] CONNECTOR
 *
 * Asks the `tidemark run` process that runs CONNECTOR, through its control
 * socket in the state directory (control/control_server.h), to pause it,
 * resume it, or stop and start it again. */
#include "cli/commands.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli/cli_args.h"
#include "control/control_path.h"
#include "status/status_file.h"
#include "status/status_lock.h"

/* How long the CLI waits for the answer. */
#define CONTROL_ANSWER_S 10

#define EXIT_NOT_RUNNING 3

static void usage(FILE *out, const char *cmd) {
    const char *what =
        strcmp(cmd, "pause") == 0
            ? "Pauses the connector: its batch in flight is finished, then\n"
              "nothing more is committed; its partitions stay assigned to it,\n"
              "paused in Kafka, and it stays in its consumer group. The pause\n"
              "is kept in the state directory: a restart of the connector or\n"
              "of the process starts it paused. `tidemark status` shows\n"
              "PAUSED, by whom and since when.\n"
        : strcmp(cmd, "resume") == 0
            ? "Resumes a paused connector where it stopped.\n"
            : "Stops the connector as SIGTERM would (its batch finished or\n"
              "abandoned), then starts it again with the same config: a new\n"
              "sink instance, its partitions claimed again; the other\n"
              "connectors of the process are untouched. A FAILED connector\n"
              "is recovered this way once its cause is fixed.\n";
    fprintf(out,
            "usage: tidemark %s [--state-dir DIR] CONNECTOR\n"
            "\n"
            "%s"
            "Only the user the `tidemark run` process runs as, or root, may\n"
            "ask.\n"
            "Exit status: 0 done, 1 refused or failed, 2 usage error, 3 the\n"
            "connector is not running.\n"
            "\n"
            "  --state-dir DIR   where the connector's state is (default:\n"
            "                    $TIDEMARK_STATE_DIR, else\n"
            "                    $XDG_STATE_HOME/tidemark, else\n"
            "                    ~/.local/state/tidemark)\n",
            cmd, what);
}

/* Sends REQUEST on the socket of CONN_DIR and prints the answer. */
static int ask(const char *cmd, const char *conn_dir, const char *name,
               const char *request) {
    struct sockaddr_un addr;
    socklen_t len;
    int dirfd;
    char why[4400];
    if (tm_control_addr(conn_dir, &addr, &len, &dirfd, why, sizeof why) != 0) {
        fprintf(stderr, "tidemark %s: %s\n", cmd, why);
        return 1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc = fd >= 0 ? connect(fd, (struct sockaddr *)&addr, len) : -1;
    int err = errno;
    if (dirfd >= 0)
        close(dirfd);
    if (rc != 0) {
        if (fd >= 0)
            close(fd);
        if (err == EACCES || err == EPERM) {
            fprintf(stderr,
                    "tidemark %s: %s/%s: permission denied: only the user "
                    "that runs connector %s, or root, may control it\n",
                    cmd, conn_dir, TM_CONTROL_SOCKET, name);
            return 1;
        }
        fprintf(stderr,
                "tidemark %s: connector %s is not running: nothing listens "
                "on %s/%s (%s)\n",
                cmd, name, conn_dir, TM_CONTROL_SOCKET, strerror(err));
        return EXIT_NOT_RUNNING;
    }
    struct timeval tv = {CONTROL_ANSWER_S, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char line[1100];
    snprintf(line, sizeof line, "%s\n", request);
    size_t n = 0;
    int ok = write(fd, line, strlen(line)) == (ssize_t)strlen(line);
    while (ok && n < sizeof line - 1) {
        ssize_t r = read(fd, line + n, sizeof line - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
        if (memchr(line, '\n', n))
            break;
    }
    close(fd);
    line[n] = '\0';
    line[strcspn(line, "\n")] = '\0';
    if (strncmp(line, "ok: ", 4) == 0) {
        printf("%s\n", line + 4);
        return 0;
    }
    if (strncmp(line, "error: ", 7) == 0) {
        fprintf(stderr, "tidemark %s: %s\n", cmd, line + 7);
        return 1;
    }
    fprintf(stderr,
            "tidemark %s: connector %s: no answer from its process within "
            "%d s: the request may still be applied (see `tidemark "
            "status`)\n",
            cmd, name, CONTROL_ANSWER_S);
    return 1;
}

int tm_cmd_control(int argc, char **argv) {
    const char *cmd = argv[0];
    const char *state_dir = NULL, *name = NULL;
    for (int i = 1; i < argc; i++) {
        int m = tm_cli_opt(cmd, "--state-dir", argc, argv, &i, &state_dir);
        if (m < 0)
            return 2;
        if (m > 0)
            continue;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout, cmd);
            return 0;
        }
        if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "tidemark %s: unknown option '%s'\n", cmd, argv[i]);
            usage(stderr, cmd);
            return 2;
        }
        if (name) {
            fprintf(stderr, "tidemark %s: one CONNECTOR only\n", cmd);
            usage(stderr, cmd);
            return 2;
        }
        name = argv[i];
    }
    if (!name) {
        fprintf(stderr, "tidemark %s: no CONNECTOR given\n", cmd);
        usage(stderr, cmd);
        return 2;
    }
    char dir[4096], conn_dir[4400], lock[4400], why[512];
    if (state_dir)
        snprintf(dir, sizeof dir, "%s", state_dir);
    else
        tm_status_default_dir(dir, sizeof dir);
    if (tm_status_path(conn_dir, sizeof conn_dir, dir, name, NULL, why,
                       sizeof why) != 0 ||
        tm_status_path(lock, sizeof lock, dir, name, TM_STATUS_LOCK_FILE, why,
                       sizeof why) != 0) {
        fprintf(stderr, "tidemark %s: %s\n", cmd, why);
        return 2;
    }
    /* The host lock tells a live process from a socket a killed one left. */
    long pid = 0;
    int held = tm_status_lock_probe(lock, &pid, why, sizeof why);
    if (held < 0) {
        fprintf(stderr, "tidemark %s: %s\n", cmd, why);
        return 1;
    }
    if (held == 0) {
        fprintf(stderr,
                "tidemark %s: connector %s is not running (no process holds "
                "%s)\n",
                cmd, name, lock);
        return EXIT_NOT_RUNNING;
    }
    return ask(cmd, conn_dir, name, cmd);
}
