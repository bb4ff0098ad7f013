#include "kafka/member_id.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "status/state_dir.h"

#define TMP_FILE         TM_MEMBER_ID_FILE ".tmp"
#define HEX_DIGITS       16
#define SUBSCRIPTION_KEY "subscription "

int tm_member_id_wanted(const tm_connector_config *cfg) {
    if (!cfg->kafka.static_membership)
        return 0;
    for (size_t i = 0; i < cfg->kafka.nproperties; i++)
        if (strcmp(cfg->kafka.properties[i].key, "group.instance.id") == 0)
            return 0;
    return 1;
}

static int all_hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] == '\0' || !strchr("0123456789abcdef", s[i]))
            return 0;
    return 1;
}

/* 1 when text (len bytes) is "tidemark-CONNECTOR-<16 hex>\n", then
 * optionally "subscription <16 hex>\n" (files written before the
 * subscription was kept have the first line only); *id_len is the id's
 * length and fp (TM_SUBSCRIPTION_HEX + 1 bytes) the subscription's
 * fingerprint, "" when the file has none. */
static int well_formed(const char *text, size_t len, const char *connector,
                       size_t *id_len, char *fp) {
    char prefix[300];
    int n = snprintf(prefix, sizeof prefix, "tidemark-%s-", connector);
    size_t line = (size_t)n + HEX_DIGITS + 1;
    if (n < 0 || (size_t)n >= sizeof prefix || len < line ||
        memcmp(text, prefix, (size_t)n) != 0 || text[line - 1] != '\n' ||
        !all_hex(text + n, HEX_DIGITS))
        return 0;
    *id_len = line - 1;
    fp[0] = '\0';
    if (len == line)
        return 1;
    const char *rest = text + line;
    size_t key = strlen(SUBSCRIPTION_KEY);
    if (len - line != key + TM_SUBSCRIPTION_HEX + 1 ||
        memcmp(rest, SUBSCRIPTION_KEY, key) != 0 ||
        !all_hex(rest + key, TM_SUBSCRIPTION_HEX) || text[len - 1] != '\n')
        return 0;
    memcpy(fp, rest + key, TM_SUBSCRIPTION_HEX);
    fp[TM_SUBSCRIPTION_HEX] = '\0';
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

/* Reads the file: 1 with the id in out and the stored fingerprint in fp
 * ("" when none), 0 missing, -1 with errstr. */
static int read_id(int dir_fd, const char *shown, const char *connector,
                   char *out, size_t size, char *fp, char *errstr,
                   size_t errsize) {
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
    size_t id_len = 0;
    if (!well_formed(buf, len, connector, &id_len, fp)) {
        snprintf(errstr, errsize,
                 "%s is corrupt: expected one line \"tidemark-%s-\" and %d "
                 "hex digits (this host's group.instance.id), then "
                 "optionally one line \"" SUBSCRIPTION_KEY "\" and %d hex "
                 "digits; restore it, "
                 "or remove it and wait the group's session.timeout.ms "
                 "before starting (a new id leaves the old member holding "
                 "the partitions until then)",
                 path, connector, HEX_DIGITS, TM_SUBSCRIPTION_HEX);
        return -1;
    }
    if (id_len >= size) {
        snprintf(errstr, errsize, "%s: the id does not fit", path);
        return -1;
    }
    memcpy(out, buf, id_len);
    out[id_len] = '\0';
    return 1;
}

/* A new random id (and the fingerprint fp when not NULL), written
 * atomically over any file there: a crash leaves either the old file or
 * the whole new one, never a part that a restart would call corrupt. */
static int create_id(int dir_fd, const char *shown, const char *connector,
                     const char *fp, char *errstr, size_t errsize) {
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
    if (fp && len > 0 && (size_t)len < sizeof text)
        len += snprintf(text + len, sizeof text - (size_t)len,
                        SUBSCRIPTION_KEY "%s\n", fp);
    if (len < 0 || (size_t)len >= sizeof text) {
        snprintf(errstr, errsize,
                 "cannot make a group.instance.id: "
                 "connector name too long");
        return -1;
    }
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
    char fp[TM_SUBSCRIPTION_HEX + 1];
    int rc = read_id(dir_fd, shown, connector, out, size, fp, errstr, errsize);
    if (rc != 0 || !create)
        return rc;
    if (create_id(dir_fd, shown, connector, NULL, errstr, errsize) != 0)
        return -1;
    rc = read_id(dir_fd, shown, connector, out, size, fp, errstr, errsize);
    if (rc == 0)
        snprintf(errstr, errsize, "%s/%s vanished after it was created", shown,
                 TM_MEMBER_ID_FILE);
    return rc == 1 ? 1 : -1;
}

int tm_member_id_for(int dir_fd, const char *shown, const char *connector,
                     const char *subscription, char *out, size_t size,
                     int *rotated, char *errstr, size_t errsize) {
    char fp[TM_SUBSCRIPTION_HEX + 1];
    *rotated = 0;
    int rc = read_id(dir_fd, shown, connector, out, size, fp, errstr, errsize);
    if (rc < 0)
        return -1;
    if (rc == 1 && subscription && strcmp(fp, subscription) == 0)
        return 1;
    /* No file, or one kept under another subscription (or an unknown one:
     * written before fingerprints, or the metadata unreadable now): a new
     * id, which makes the group rebalance with this subscription. */
    if (create_id(dir_fd, shown, connector, subscription, errstr, errsize) != 0)
        return -1;
    *rotated = rc == 1;
    rc = read_id(dir_fd, shown, connector, out, size, fp, errstr, errsize);
    if (rc == 0)
        snprintf(errstr, errsize, "%s/%s vanished after it was created", shown,
                 TM_MEMBER_ID_FILE);
    return rc == 1 ? 1 : -1;
}

int tm_member_id_forget_subscription(int dir_fd, const char *shown,
                                     const char *connector,
                                     const char *subscription, char *errstr,
                                     size_t errsize) {
    char id[300], fp[TM_SUBSCRIPTION_HEX + 1];
    int rc =
        read_id(dir_fd, shown, connector, id, sizeof id, fp, errstr, errsize);
    if (rc <= 0)
        return rc;
    /* A new id, with the subscription it is for: the next consumer joins
     * under it as a new member (tm_member_id_for keeps it while the
     * subscription is the same) instead of rotating once more. */
    return create_id(dir_fd, shown, connector, subscription, errstr, errsize);
}

int tm_member_id_apply(rd_kafka_conf_t *conf, const tm_connector_config *cfg,
                       int dir_fd, const char *shown, const char *subscription,
                       char *id_out, size_t id_size, int *rotated, char *errstr,
                       size_t errsize) {
    id_out[0] = '\0';
    *rotated = 0;
    if (!tm_member_id_wanted(cfg))
        return 0;
    if (dir_fd < 0) {
        snprintf(errstr, errsize,
                 "no state directory to keep the group.instance.id in");
        return -1;
    }
    if (tm_member_id_for(dir_fd, shown, cfg->name, subscription, id_out,
                         id_size, rotated, errstr, errsize) != 1)
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
