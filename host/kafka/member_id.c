#include "kafka/member_id.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "status/state_dir.h"

#define TMP_FILE   TM_MEMBER_ID_FILE ".tmp"
#define HEX_DIGITS 16

int tm_member_id_wanted(const tm_connector_config *cfg) {
    if (!cfg->kafka.static_membership)
        return 0;
    for (size_t i = 0; i < cfg->kafka.nproperties; i++)
        if (strcmp(cfg->kafka.properties[i].key, "group.instance.id") == 0)
            return 0;
    return 1;
}

/* 1 when text (len bytes) is exactly "tidemark-CONNECTOR-<16 hex>\n". */
static int well_formed(const char *text, size_t len, const char *connector) {
    char prefix[300];
    int n = snprintf(prefix, sizeof prefix, "tidemark-%s-", connector);
    if (n < 0 || (size_t)n >= sizeof prefix ||
        len != (size_t)n + HEX_DIGITS + 1 ||
        memcmp(text, prefix, (size_t)n) != 0 || text[len - 1] != '\n')
        return 0;
    for (size_t i = (size_t)n; i < len - 1; i++)
        if (!strchr("0123456789abcdef", text[i]))
            return 0;
    return 1;
}

static int read_all(int fd, char *buf, size_t size, size_t *len) {
    *len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + *len, size - *len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0 || (*len += (size_t)n) == size)
            return 0;
    }
}

static int write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads the file: 1 with the id in out, 0 missing, -1 with errstr. */
static int read_id(int dir_fd, const char *shown, const char *connector,
                   char *out, size_t size, char *errstr, size_t errsize) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", shown, TM_MEMBER_ID_FILE);
    int fd = tm_state_file_openat(dir_fd, TM_MEMBER_ID_FILE, path, O_RDONLY,
                                  "open", errstr, errsize);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    char buf[512];
    size_t len = 0;
    int rc = read_all(fd, buf, sizeof buf, &len);
    int e = errno;
    close(fd);
    if (rc != 0) {
        snprintf(errstr, errsize, "cannot read %s: %s", path, strerror(e));
        return -1;
    }
    if (!well_formed(buf, len, connector)) {
        snprintf(errstr, errsize,
                 "%s is corrupt: expected one line \"tidemark-%s-\" and %d "
                 "hex digits (this host's group.instance.id); restore it, "
                 "or remove it and wait the group's session.timeout.ms "
                 "before starting (a new id leaves the old member holding "
                 "the partitions until then)",
                 path, connector, HEX_DIGITS);
        return -1;
    }
    if (len > size) {
        snprintf(errstr, errsize, "%s: the id does not fit", path);
        return -1;
    }
    memcpy(out, buf, len - 1);
    out[len - 1] = '\0';
    return 1;
}

/* A new random id, written atomically: a crash leaves either no file or
 * the whole id, never a part that a restart would call corrupt. */
static int create_id(int dir_fd, const char *shown, const char *connector,
                     char *errstr, size_t errsize) {
    unsigned char rnd[HEX_DIGITS / 2];
    size_t got = 0;
    while (got < sizeof rnd) {
        ssize_t n = getrandom(rnd + got, sizeof rnd - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            snprintf(errstr, errsize,
                     "cannot make a group.instance.id: getrandom: %s",
                     strerror(errno));
            return -1;
        }
        got += (size_t)n;
    }
    char text[300];
    int len = snprintf(text, sizeof text, "tidemark-%s-", connector);
    for (size_t i = 0;
         i < sizeof rnd && len > 0 && (size_t)len + 3 < sizeof text; i++)
        len += snprintf(text + len, sizeof text - (size_t)len, "%02x", rnd[i]);
    len += snprintf(text + len, sizeof text - (size_t)len, "\n");
    char tmp[4096], path[4096];
    snprintf(tmp, sizeof tmp, "%s/%s", shown, TMP_FILE);
    snprintf(path, sizeof path, "%s/%s", shown, TM_MEMBER_ID_FILE);
    int fd = tm_state_file_openat(dir_fd, TMP_FILE, tmp,
                                  O_WRONLY | O_CREAT | O_TRUNC, "create",
                                  errstr, errsize);
    if (fd < 0)
        return -1;
    const char *step = "write";
    int ok = write_all(fd, text, (size_t)len) == 0 &&
             (step = "fsync", fsync(fd) == 0);
    int e = errno;
    if (close(fd) != 0 && ok) {
        ok = 0;
        e = errno;
        step = "close";
    }
    if (ok && renameat(dir_fd, TMP_FILE, dir_fd, TM_MEMBER_ID_FILE) != 0) {
        ok = 0;
        e = errno;
        step = "rename";
    }
    if (!ok) {
        (void)unlinkat(dir_fd, TMP_FILE, 0);
        snprintf(errstr, errsize, "cannot create %s: %s: %s", path, step,
                 strerror(e));
        return -1;
    }
    /* The rename itself must survive a power loss, or a restart would make
     * another id while the broker still knows this one. */
    if (fsync(dir_fd) != 0) {
        snprintf(errstr, errsize, "cannot create %s: fsync of %s: %s", path,
                 shown, strerror(errno));
        return -1;
    }
    return 0;
}

int tm_member_id_get(int dir_fd, const char *shown, const char *connector,
                     int create, char *out, size_t size, char *errstr,
                     size_t errsize) {
    int rc = read_id(dir_fd, shown, connector, out, size, errstr, errsize);
    if (rc != 0 || !create)
        return rc;
    if (create_id(dir_fd, shown, connector, errstr, errsize) != 0)
        return -1;
    rc = read_id(dir_fd, shown, connector, out, size, errstr, errsize);
    if (rc == 0)
        snprintf(errstr, errsize, "%s/%s vanished after it was created", shown,
                 TM_MEMBER_ID_FILE);
    return rc == 1 ? 1 : -1;
}

int tm_member_id_apply(rd_kafka_conf_t *conf, const tm_connector_config *cfg,
                       int dir_fd, const char *shown, char *id_out,
                       size_t id_size, char *errstr, size_t errsize) {
    id_out[0] = '\0';
    if (!tm_member_id_wanted(cfg))
        return 0;
    if (dir_fd < 0) {
        snprintf(errstr, errsize,
                 "no state directory to keep the group.instance.id in");
        return -1;
    }
    if (tm_member_id_get(dir_fd, shown, cfg->name, 1, id_out, id_size, errstr,
                         errsize) != 1)
        return -1;
    char why[512];
    if (rd_kafka_conf_set(conf, "group.instance.id", id_out, why, sizeof why) !=
        RD_KAFKA_CONF_OK) {
        snprintf(errstr, errsize,
                 "$.kafka.static_membership: librdkafka refused "
                 "group.instance.id \"%s\": %s",
                 id_out, why);
        return -1;
    }
    return 0;
}
