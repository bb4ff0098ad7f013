#include "kafka/kafka_conf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/json_path.h"
#include "kafka/fetch_sizing.h"
#include "services/log.h"
#include "services/redact.h"

tm_log_level tm_kafka_log_level(int level, const char *fac) {
    /* One config serves every role, so the properties a user sets for one
     * make librdkafka warn on the others (CONFWARN): expected, not news. */
    if (strcmp(fac, "CONFWARN") == 0)
        return TM_LOG_DEBUG;
    return level <= 3 ? TM_LOG_ERROR : level <= 4 ? TM_LOG_WARN : TM_LOG_DEBUG;
}

/* librdkafka's own lines into ours. */
static void log_cb(const rd_kafka_t *rk, int level, const char *fac,
                   const char *buf) {
    (void)rk;
    tm_log(tm_kafka_log_level(level, fac), NULL, "librdkafka %s: %s", fac, buf);
}

/* librdkafka's error buffers: large enough for its messages about any
 * value a config holds in practice; a longer one is cut, and a cut value
 * is redacted as cut (see refused()). */
#define WHY_SIZE 4096

/* Whether VALUE holds a resolved ${env:} or ${file:} value. */
static int holds_secret(const tm_connector_config *cfg, const char *value) {
    for (size_t i = 0; value && i < cfg->nsecrets; i++)
        if (strstr(value, cfg->secrets[i]))
            return 1;
    return 0;
}

/* The separators of the lists and key=value settings librdkafka takes
 * (ssl.curves.list "a:b", debug "a,b", sasl.oauthbearer.config "k=v k=v"):
 * it, or the library under it, may quote one element alone. */
#define PIECE_SEPS ",;:= \t\r\n"

/* The strings refused() hides; the pieces are copies it owns. */
typedef struct hide_list {
    const char **v;
    size_t n, cap;
    char **owned;
    size_t nowned;
} hide_list;

static int hide(hide_list *h, const char *s, char *owned) {
    if (h->n == h->cap) {
        size_t c = h->cap ? 2 * h->cap : 16;
        const char **v = realloc(h->v, c * sizeof *v);
        if (v)
            h->v = v;
        char **o = v ? realloc(h->owned, c * sizeof *o) : NULL;
        if (o)
            h->owned = o;
        if (!v || !o)
            return -1;
        h->cap = c;
    }
    h->v[h->n++] = s;
    if (owned)
        h->owned[h->nowned++] = owned;
    return 0;
}

/* VALUE and each of its elements of at least TM_REDACT_MIN_LEN bytes.
 * 0, or -1 when memory ran out. */
static int hide_value(hide_list *h, const char *value) {
    size_t len = strlen(value);
    if (hide(h, value, NULL) != 0)
        return -1;
    if (strcspn(value, PIECE_SEPS) == len)
        return 0; /* one element: the value itself */
    for (size_t i = strspn(value, PIECE_SEPS); i < len;
         i += strspn(value + i, PIECE_SEPS)) {
        size_t k = strcspn(value + i, PIECE_SEPS);
        if (k >= TM_REDACT_MIN_LEN) {
            char *piece = strndup(value + i, k);
            if (!piece || hide(h, piece, piece) != 0) {
                free(piece);
                return -1;
            }
        }
        i += k;
    }
    return 0;
}

/* "PREFIX: WHY" into errstr, WHY being librdkafka's text from a buffer of
 * WHY_SIZE bytes, which may quote a value it refused, whole, cut, or one
 * element of it. Hidden from it: every value of VALUES (those that hold a
 * secret: a secret with text around it shows whole) and each element of
 * them, the config's secrets, and the process's list, which also holds
 * each line and list part of a secret (a PEM key's lines). A full buffer
 * ends in a cut value: its tail is hidden as one. */
static void refused(const tm_connector_config *cfg, const char *const *values,
                    size_t nvalues, const char *prefix, const char *why,
                    char *errstr, size_t errsize) {
    tm_redact_tail tail =
        strlen(why) + 1 >= WHY_SIZE ? TM_REDACT_CUT : TM_REDACT_MAYBE_CUT;
    hide_list h = {0};
    size_t len = strlen(prefix) + strlen(why) + 3;
    char *line = malloc(len), *hidden = malloc(3 * len + 4);
    int oom = !line || !hidden;
    for (size_t i = 0; !oom && i < nvalues; i++)
        oom = hide_value(&h, values[i]) != 0;
    for (size_t i = 0; !oom && i < cfg->nsecrets; i++)
        oom = hide_value(&h, cfg->secrets[i]) != 0;
    if (oom) {
        snprintf(errstr, errsize,
                 "%s: (librdkafka's reason not shown: out of memory)", prefix);
    } else {
        snprintf(line, len, "%s: %s", prefix, why);
        tm_redact_list(h.v, h.n, line, tail, hidden, 3 * len + 4);
        tm_redact(hidden, tail, errstr, errsize);
    }
    for (size_t i = 0; i < h.nowned; i++)
        free(h.owned[i]);
    free(h.owned);
    free(h.v);
    free(line);
    free(hidden);
}

/* The values of $.kafka.properties that hold a secret (*n of them); NULL
 * when memory ran out. */
static const char **secret_values(const tm_connector_config *cfg, size_t *n) {
    const char **v = malloc((cfg->kafka.nproperties + 1) * sizeof *v);
    *n = 0;
    for (size_t i = 0; v && i < cfg->kafka.nproperties; i++)
        if (holds_secret(cfg, cfg->kafka.properties[i].value))
            v[(*n)++] = cfg->kafka.properties[i].value;
    return v;
}

static int set(rd_kafka_conf_t *conf, const tm_connector_config *cfg,
               const char *path, const char *key, const char *value,
               char *errstr, size_t errsize) {
    char why[WHY_SIZE];
    if (rd_kafka_conf_set(conf, key, value, why, sizeof why) ==
        RD_KAFKA_CONF_OK)
        return 0;
    char prefix[1024];
    /* librdkafka's text quotes the value: one that holds a secret is
     * never echoed, not even the start that fit its buffer. */
    if (holds_secret(cfg, value))
        snprintf(prefix, sizeof prefix,
                 "%s: librdkafka refused the value of \"%s\" (from a "
                 "${env:} or ${file:} reference, not shown)",
                 path, key);
    else
        snprintf(prefix, sizeof prefix, "%s: librdkafka refused \"%s\"", path,
                 key);
    refused(cfg, &value, holds_secret(cfg, value) ? 1 : 0, prefix, why, errstr,
            errsize);
    return -1;
}

/* The user's integer property KEY, or DFLT when not given or not a number
 * (librdkafka refuses the latter by its own path). */
static int64_t user_int(const tm_connector_config *cfg, const char *key,
                        int64_t dflt) {
    for (size_t i = 0; i < cfg->kafka.nproperties; i++)
        if (strcmp(cfg->kafka.properties[i].key, key) == 0) {
            char *end;
            long long v = strtoll(cfg->kafka.properties[i].value, &end, 10);
            if (end != cfg->kafka.properties[i].value && *end == '\0')
                return v;
        }
    return dflt;
}

static int64_t message_max_bytes(const tm_connector_config *cfg) {
    return user_int(cfg, "message.max.bytes", 1000000);
}

/* The consumer's fetch and queue sizes from the batch settings
 * (fetch_sizing.h); set before $.kafka.properties, so that a user's value,
 * under any of librdkafka's names for it, wins. */
static int set_fetch_sizes(rd_kafka_conf_t *conf,
                           const tm_connector_config *cfg, char *errstr,
                           size_t errsize) {
    tm_fetch_sizing z = tm_fetch_sizing_of(
        cfg->batch.max_records, cfg->batch.max_bytes, message_max_bytes(cfg));
    /* librdkafka lowers a fetch.max.bytes nobody set to the queue's byte
     * cap (never below message.max.bytes); set here, it would not, and a
     * user's small queued.max.messages.kbytes would no longer bound a
     * fetch (crash.*.broker_restart: the whole backlog fetched before the
     * outage). So the same rule here. */
    int64_t user_kbytes = user_int(cfg, "queued.max.messages.kbytes", -1);
    if (user_kbytes > 0 && user_kbytes * 1024 < z.fetch_max_bytes) {
        z.fetch_max_bytes = user_kbytes * 1024;
        if (z.fetch_max_bytes < message_max_bytes(cfg))
            z.fetch_max_bytes = message_max_bytes(cfg);
    }
    const struct {
        const char *path, *key;
        int64_t value;
    } SIZES[] = {
        {"$.batch.max_bytes", "fetch.max.bytes", z.fetch_max_bytes},
        {"$.batch.max_bytes", "max.partition.fetch.bytes",
         z.max_partition_fetch_bytes},
        {"$.batch.max_records", "queued.min.messages", z.queued_min_messages},
        {"$.batch.max_bytes", "queued.max.messages.kbytes",
         z.queued_max_kbytes},
    };
    for (size_t i = 0; i < sizeof SIZES / sizeof SIZES[0]; i++) {
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)SIZES[i].value);
        if (set(conf, cfg, SIZES[i].path, SIZES[i].key, v, errstr, errsize) !=
            0)
            return -1;
    }
    return 0;
}

static int set_role(rd_kafka_conf_t *conf, const tm_connector_config *cfg,
                    tm_kafka_role role, char *errstr, size_t errsize) {
    const char *P = "$.kafka";
    if (role == TM_KAFKA_CONSUMER) {
        /* The protocol's fixed settings: the sink's markers are the only
         * source of positions, offsets go to the group only after the
         * sink's commit, and aborted records never reach a batch. */
        static const char *const FIXED[][2] = {
            {"enable.auto.commit", "false"},
            {"enable.auto.offset.store", "false"},
            {"auto.offset.reset", "error"},
            {"isolation.level", "read_committed"},
            {"enable.partition.eof", "true"},
            {"partition.assignment.strategy", "cooperative-sticky"},
        };
        if (set(conf, cfg, "$.kafka.group_id", "group.id", cfg->kafka.group_id,
                errstr, errsize) != 0)
            return -1;
        for (size_t i = 0; i < sizeof FIXED / sizeof FIXED[0]; i++)
            if (set(conf, cfg, P, FIXED[i][0], FIXED[i][1], errstr, errsize) !=
                0)
                return -1;
        return set_fetch_sizes(conf, cfg, errstr, errsize);
    }
    if (role == TM_KAFKA_PRODUCER) {
        /* Dead letters: no duplicates from producer retries, and a
         * delivery report only once every in-sync replica has them. */
        if (set(conf, cfg, P, "enable.idempotence", "true", errstr, errsize) !=
                0 ||
            set(conf, cfg, P, "acks", "all", errstr, errsize) != 0 ||
            set(conf, cfg, P, "linger.ms", "5", errstr, errsize) != 0)
            return -1;
    }
    return 0;
}

/* Everything but $.kafka.properties: the connection (unless offline),
 * client.id and the role's own settings. */
static rd_kafka_conf_t *conf_base(const tm_connector_config *cfg,
                                  tm_kafka_role role, int offline, char *errstr,
                                  size_t errsize) {
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (!conf) {
        snprintf(errstr, errsize, "out of memory");
        return NULL;
    }
    rd_kafka_conf_set_log_cb(conf, log_cb);
    char client_id[300];
    snprintf(client_id, sizeof client_id, "tidemark-%s", cfg->name);
    if ((!offline &&
         set(conf, cfg, "$.kafka.bootstrap_servers", "bootstrap.servers",
             cfg->kafka.bootstrap_servers, errstr, errsize) != 0) ||
        set(conf, cfg, "$.name", "client.id", client_id, errstr, errsize) !=
            0 ||
        set_role(conf, cfg, role, errstr, errsize) != 0) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    return conf;
}

/* $.kafka.properties[i] onto conf. */
static int set_property(rd_kafka_conf_t *conf, const tm_connector_config *cfg,
                        size_t i, char *errstr, size_t errsize) {
    const tm_config_property *p = &cfg->kafka.properties[i];
    char path[512];
    tm_json_path_key(path, sizeof path, "$.kafka.properties", p->key);
    return set(conf, cfg, path, p->key, p->value, errstr, errsize);
}

static rd_kafka_conf_t *conf_new(const tm_connector_config *cfg,
                                 tm_kafka_role role, int offline, char *errstr,
                                 size_t errsize) {
    rd_kafka_conf_t *conf = conf_base(cfg, role, offline, errstr, errsize);
    if (!conf)
        return NULL;
    for (size_t i = 0; i < cfg->kafka.nproperties; i++)
        if (set_property(conf, cfg, i, errstr, errsize) != 0) {
            rd_kafka_conf_destroy(conf);
            return NULL;
        }
    return conf;
}

rd_kafka_conf_t *tm_kafka_conf_new(const tm_connector_config *cfg,
                                   tm_kafka_role role, char *errstr,
                                   size_t errsize) {
    return conf_new(cfg, role, 0, errstr, errsize);
}

/* The dead-letter producer's delivery guarantee as built, read back from
 * the conf: whatever property or alias set them, a dead letter is only
 * reported delivered once every in-sync replica has it, exactly once. 0,
 * or -1 with the line in errstr. */
static int producer_guarantees(const rd_kafka_conf_t *conf, char *errstr,
                               size_t errsize) {
    static const char *const WANT[][3] = {
        {"enable.idempotence", "true", "true"},
        {"acks", "-1", "all"}, /* librdkafka reads "all" back as -1 */
    };
    for (size_t i = 0; i < sizeof WANT / sizeof WANT[0]; i++) {
        char v[64];
        size_t n = sizeof v;
        if (rd_kafka_conf_get(conf, WANT[i][0], v, &n) != RD_KAFKA_CONF_OK)
            snprintf(v, sizeof v, "(unknown)");
        if (strcmp(v, WANT[i][1]) != 0 && strcmp(v, WANT[i][2]) != 0) {
            snprintf(errstr, errsize,
                     "$.kafka.properties: the dead-letter producer's %s is "
                     "%s, expected %s (a dead letter could be lost or "
                     "written twice)",
                     WANT[i][0], v, WANT[i][2]);
            return -1;
        }
    }
    return 0;
}

/* rd_kafka_new's refusal (of the client WHAT; NULL: the one run makes)
 * into errstr. It does not say which property it refused, so no value
 * holding a secret is echoed, whichever it was. */
static void client_refused(const tm_connector_config *cfg, const char *what,
                           const char *why, char *errstr, size_t errsize) {
    char prefix[256];
    if (what)
        snprintf(prefix, sizeof prefix,
                 "$.kafka.properties: librdkafka refused the %s's "
                 "configuration",
                 what);
    else
        snprintf(prefix, sizeof prefix, "cannot create the Kafka client");
    size_t n = 0;
    const char **values = secret_values(cfg, &n);
    if (values)
        refused(cfg, values, n, prefix, why, errstr, errsize);
    else
        snprintf(errstr, errsize,
                 "%s: (librdkafka's reason not shown: out of memory)", prefix);
    free(values);
}

/* rd_kafka_new checks what rd_kafka_conf_set cannot: properties against
 * each other (fetch.max.bytes >= message.max.bytes, acks=all with
 * idempotence) and the files they name. Without bootstrap.servers the
 * client connects nowhere; it is destroyed at once. 0, or -1 with the
 * line in errstr. */
static int try_client(const tm_connector_config *cfg, tm_kafka_role role,
                      const char *what, char *errstr, size_t errsize) {
    rd_kafka_conf_t *conf = conf_new(cfg, role, 1, errstr, errsize);
    if (!conf)
        return -1;
    if (role == TM_KAFKA_PRODUCER &&
        producer_guarantees(conf, errstr, errsize) != 0) {
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    char why[WHY_SIZE];
    rd_kafka_t *rk = rd_kafka_new(role == TM_KAFKA_CONSUMER ? RD_KAFKA_CONSUMER
                                                            : RD_KAFKA_PRODUCER,
                                  conf, why, sizeof why);
    if (rk) {
        rd_kafka_destroy(rk);
        return 0;
    }
    rd_kafka_conf_destroy(conf); /* rd_kafka_new owns it only on success */
    client_refused(cfg, what, why, errstr, errsize);
    return -1;
}

size_t tm_kafka_conf_check(const tm_connector_config *cfg,
                           void (*report)(void *ctx, const char *line),
                           void *ctx) {
    char errstr[2048];
    size_t bad = 0;
    /* The consumer's, with every property tried so that each refusal is
     * reported, not only the first. */
    rd_kafka_conf_t *conf =
        conf_base(cfg, TM_KAFKA_CONSUMER, 0, errstr, sizeof errstr);
    if (!conf) {
        report(ctx, errstr);
        return 1;
    }
    for (size_t i = 0; i < cfg->kafka.nproperties; i++)
        if (set_property(conf, cfg, i, errstr, sizeof errstr) != 0) {
            report(ctx, errstr);
            bad++;
        }
    rd_kafka_conf_destroy(conf);
    if (bad)
        return bad;
    /* Then the clients run makes: the consumer, and the dead-letter
     * producer when there is a topic. */
    if (try_client(cfg, TM_KAFKA_CONSUMER, "consumer", errstr, sizeof errstr) !=
        0) {
        report(ctx, errstr);
        bad++;
    }
    if (cfg->dead_letters.topic &&
        try_client(cfg, TM_KAFKA_PRODUCER, "dead-letter producer", errstr,
                   sizeof errstr) != 0) {
        report(ctx, errstr);
        bad++;
    }
    return bad;
}

long tm_kafka_session_timeout_ms(const tm_connector_config *cfg) {
    char errstr[512], v[32];
    size_t n = sizeof v;
    rd_kafka_conf_t *conf =
        conf_new(cfg, TM_KAFKA_CONSUMER, 1, errstr, sizeof errstr);
    if (!conf)
        return -1;
    long ms = -1;
    if (rd_kafka_conf_get(conf, "session.timeout.ms", v, &n) ==
        RD_KAFKA_CONF_OK)
        ms = strtol(v, NULL, 10);
    rd_kafka_conf_destroy(conf);
    return ms;
}

rd_kafka_t *tm_kafka_client_new(const tm_connector_config *cfg,
                                tm_kafka_role role, char *errstr,
                                size_t errsize) {
    rd_kafka_conf_t *conf = tm_kafka_conf_new(cfg, role, errstr, errsize);
    if (!conf)
        return NULL;
    char why[WHY_SIZE];
    rd_kafka_t *rk = rd_kafka_new(role == TM_KAFKA_CONSUMER ? RD_KAFKA_CONSUMER
                                                            : RD_KAFKA_PRODUCER,
                                  conf, why, sizeof why);
    if (!rk) {
        rd_kafka_conf_destroy(conf); /* rd_kafka_new owns it only on success */
        client_refused(cfg, NULL, why, errstr, errsize);
    }
    return rk;
}
