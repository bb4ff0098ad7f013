/* The connector config: load, interpolate, validate strictly, collect every
 * error. Paths come from json_path.c, "did you mean" from did_you_mean.c:
 * this file only decides what is valid. */
#include "config/connector_config.h"

#include <errno.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/did_you_mean.h"
#include "config/json_path.h"

#define PATH_MAX_LEN   512
#define LINE_MAX_LEN   1024
#define FOUND_MAX_LEN  64 /* characters of a found string shown */
#define FILE_VALUE_MAX (1024 * 1024)

#define N(a) (sizeof(a) / sizeof((a)[0]))

typedef struct loader {
    tm_connector_config *cfg;
    tm_config_errors *errs;
    int failed;
} loader;

/* ---- error lines ------------------------------------------------------- */

void tm_config_errors_free(tm_config_errors *errs) {
    if (!errs)
        return;
    for (size_t i = 0; i < errs->count; i++)
        free(errs->lines[i]);
    free(errs->lines);
    errs->lines = NULL;
    errs->count = errs->cap = 0;
}

static void errs_push(tm_config_errors *errs, const char *line) {
    if (!errs)
        return;
    if (errs->count == errs->cap) {
        size_t cap = errs->cap ? errs->cap * 2 : 8;
        char **v = realloc(errs->lines, cap * sizeof *v);
        if (!v) {
            errs->oom = 1;
            return;
        }
        errs->lines = v;
        errs->cap = cap;
    }
    char *copy = strdup(line);
    if (!copy) {
        errs->oom = 1;
        return;
    }
    errs->lines[errs->count++] = copy;
}

/* "PATH: message", redacted, appended to the list. */
static void fail(loader *L, const char *path, const char *fmt, ...)
    TM_PRINTF(3, 4);
static void fail(loader *L, const char *path, const char *fmt, ...) {
    char msg[LINE_MAX_LEN], line[LINE_MAX_LEN + PATH_MAX_LEN + 2];
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(msg, sizeof msg, fmt, ap) < 0)
        snprintf(msg, sizeof msg, "(unformattable error)");
    va_end(ap);
    snprintf(line, sizeof line, "%s: %s", path, msg);
    char red[sizeof line];
    tm_config_redact(L->cfg, line, red, sizeof red);
    errs_push(L->errs, red);
    L->failed = 1;
}

/* ---- secrets and redaction ------------------------------------------- */

static int add_secret(tm_connector_config *cfg, const char *value) {
    if (!*value)
        return 0;
    for (size_t i = 0; i < cfg->nsecrets; i++)
        if (strcmp(cfg->secrets[i], value) == 0)
            return 0;
    char **v = realloc(cfg->secrets, (cfg->nsecrets + 1) * sizeof *v);
    if (!v)
        return -1;
    cfg->secrets = v;
    if (!(v[cfg->nsecrets] = strdup(value)))
        return -1;
    cfg->nsecrets++;
    return 0;
}

char *tm_config_redact(const tm_connector_config *cfg, const char *text,
                       char *out, size_t size) {
    if (size == 0)
        return out;
    size_t o = 0;
    for (const char *p = text; *p && o + 1 < size;) {
        size_t best = 0;
        for (size_t i = 0; cfg && i < cfg->nsecrets; i++) {
            size_t n = strlen(cfg->secrets[i]);
            if (n > best && strncmp(p, cfg->secrets[i], n) == 0)
                best = n;
        }
        if (best) {
            for (const char *s = "***"; *s && o + 1 < size; s++)
                out[o++] = *s;
            p += best;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
    return out;
}

/* "string \"ten\"", "integer -5", "object": what was found, for messages.
 * Strings are redacted before they are shortened, so that no part of a
 * secret survives the cut. */
static const char *found(loader *L, const json_t *v, char *buf, size_t size) {
    if (!v) {
        snprintf(buf, size, "nothing");
    } else if (json_is_string(v)) {
        char red[LINE_MAX_LEN];
        tm_config_redact(L->cfg, json_string_value(v), red, sizeof red);
        size_t n = strlen(red);
        for (size_t i = 0; i < n; i++)
            if ((unsigned char)red[i] < 0x20)
                red[i] = '?';
        if (n > FOUND_MAX_LEN)
            snprintf(buf, size, "string \"%.*s...\"", FOUND_MAX_LEN, red);
        else
            snprintf(buf, size, "string \"%s\"", red);
    } else if (json_is_integer(v)) {
        snprintf(buf, size, "integer %" JSON_INTEGER_FORMAT,
                 json_integer_value(v));
    } else if (json_is_real(v)) {
        snprintf(buf, size, "number %g", json_real_value(v));
    } else if (json_is_boolean(v)) {
        snprintf(buf, size, "boolean %s", json_is_true(v) ? "true" : "false");
    } else {
        snprintf(buf, size, "%s", tm_json_type_name(v));
    }
    return buf;
}

static void fail_type(loader *L, const char *path, const char *expected,
                      const json_t *v) {
    char f[FOUND_MAX_LEN + 64];
    fail(L, path, "expected %s, found %s", expected, found(L, v, f, sizeof f));
}

/* ---- interpolation ------------------------------------------------------ */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

/* The whole file as a string, one trailing newline dropped (as secret
 * files usually end with one). NULL with errno set on failure. */
static char *read_file_value(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    sbuf b = {0};
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (b.n + got > FILE_VALUE_MAX) {
            free(b.p);
            fclose(f);
            errno = EFBIG;
            return NULL;
        }
        sb_add(&b, chunk, got);
    }
    int bad = ferror(f);
    fclose(f);
    if (bad || b.oom) {
        free(b.p);
        errno = bad ? EIO : ENOMEM;
        return NULL;
    }
    if (!b.p)
        return strdup("");
    if (memchr(b.p, '\0', b.n)) {
        free(b.p);
        errno = EINVAL;
        return NULL;
    }
    if (b.n && b.p[b.n - 1] == '\n')
        b.p[--b.n] = '\0';
    if (b.n && b.p[b.n - 1] == '\r')
        b.p[--b.n] = '\0';
    return b.p;
}

static int env_name_ok(const char *s, size_t n) {
    if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              (c >= '0' && c <= '9') || c == '_'))
            return 0;
    }
    return 1;
}

/* Resolves the references of one string value. Returns a new string, or
 * NULL when there were none (*error set when one could not be resolved). */
static char *interpolate(loader *L, const char *path, const char *in,
                         int *error) {
    if (!strstr(in, "${"))
        return NULL;
    sbuf b = {0};
    const char *p = in;
    while (*p) {
        if (p[0] == '$' && p[1] == '$' && p[2] == '{') { /* "$${" escape */
            sb_add(&b, "${", 2);
            p += 3;
            continue;
        }
        if (!(p[0] == '$' && p[1] == '{')) {
            sb_add(&b, p, 1);
            p++;
            continue;
        }
        const char *ref = p + 2, *end = strchr(ref, '}');
        if (!end) {
            fail(L, path,
                 "unterminated \"${\": expected ${env:NAME} or "
                 "${file:PATH} (write $${ for a literal \"${\")");
            goto bad;
        }
        size_t n = (size_t)(end - ref);
        char *value = NULL;
        if (n >= 4 && strncmp(ref, "env:", 4) == 0) {
            const char *name = ref + 4;
            size_t nn = n - 4;
            if (!env_name_ok(name, nn)) {
                fail(L, path,
                     "expected ${env:NAME} with NAME of letters, digits "
                     "and '_', found \"${%.*s}\"",
                     (int)n, ref);
                goto bad;
            }
            char var[256];
            snprintf(var, sizeof var, "%.*s", (int)nn, name);
            const char *v = getenv(var);
            if (!v) {
                fail(L, path, "environment variable %s is not set", var);
                goto bad;
            }
            value = strdup(v);
        } else if (n >= 5 && strncmp(ref, "file:", 5) == 0) {
            char file[4096];
            if (n == 5 || n - 5 >= sizeof file) {
                fail(L, path, "expected ${file:PATH}, found \"${%.*s}\"",
                     (int)(n < 64 ? n : 64), ref);
                goto bad;
            }
            snprintf(file, sizeof file, "%.*s", (int)(n - 5), ref + 5);
            value = read_file_value(file);
            if (!value) {
                fail(L, path, "cannot read file %s: %s", file, strerror(errno));
                goto bad;
            }
        } else {
            fail(L, path,
                 "unknown reference \"${%.*s}\": expected ${env:NAME} or "
                 "${file:PATH} (write $${ for a literal \"${\")",
                 (int)(n < 64 ? n : 64), ref);
            goto bad;
        }
        if (!value || add_secret(L->cfg, value) != 0) {
            free(value);
            fail(L, path, "out of memory");
            goto bad;
        }
        sb_add(&b, value, strlen(value));
        free(value);
        p = end + 1;
    }
    if (b.oom) {
        fail(L, path, "out of memory");
        goto bad;
    }
    return b.p ? b.p : strdup("");
bad:
    free(b.p);
    *error = 1;
    return NULL;
}

/* Every string value of the tree (not keys), in place. */
static void interpolate_tree(loader *L, json_t *v, const char *path) {
    char sub[PATH_MAX_LEN];
    if (json_is_object(v)) {
        const char *key;
        json_t *child;
        json_object_foreach(v, key, child) {
            tm_json_path_key(sub, sizeof sub, path, key);
            interpolate_tree(L, child, sub);
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *child;
        json_array_foreach(v, i, child) {
            tm_json_path_index(sub, sizeof sub, path, i);
            interpolate_tree(L, child, sub);
        }
    } else if (json_is_string(v)) {
        int error = 0;
        char *s = interpolate(L, path, json_string_value(v), &error);
        if (s) {
            if (json_string_set(v, s) != 0)
                fail(L, path, "resolved value is not valid UTF-8");
            free(s);
        }
    }
}

/* ---- typed getters ------------------------------------------------------ */

static void check_keys(loader *L, json_t *obj, const char *path,
                       const char *const *known, size_t n) {
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        size_t i;
        for (i = 0; i < n; i++)
            if (strcmp(known[i], key) == 0)
                break;
        if (i < n)
            continue;
        char sub[PATH_MAX_LEN];
        tm_json_path_key(sub, sizeof sub, path, key);
        const char *hint = tm_did_you_mean(key, known, n);
        if (hint)
            fail(L, sub, "unknown setting (did you mean \"%s\"?)", hint);
        else
            fail(L, sub, "unknown setting");
    }
}

/* The value at obj.key when it has the wanted JSON type: 1 found, 0 absent
 * (an error when required), -1 wrong type (error added). */
static int get_typed(loader *L, json_t *obj, const char *parent,
                     const char *key, int required, json_type want,
                     const char *expected, json_t **out) {
    char path[PATH_MAX_LEN];
    tm_json_path_key(path, sizeof path, parent, key);
    json_t *v = obj ? json_object_get(obj, key) : NULL;
    if (!v) {
        if (required)
            fail(L, path, "missing required setting (expected %s)", expected);
        return 0;
    }
    int ok =
        json_typeof(v) == want || (want == JSON_TRUE && json_is_boolean(v));
    if (!ok) {
        fail_type(L, path, expected, v);
        return -1;
    }
    *out = v;
    return 1;
}

static char *xstrdup(loader *L, const char *s) {
    char *c = strdup(s);
    if (!c)
        fail(L, "$", "out of memory");
    return c;
}

/* A non-empty string; *out untouched unless found. */
static int get_string(loader *L, json_t *obj, const char *parent,
                      const char *key, int required, char **out) {
    json_t *v;
    int rc = get_typed(L, obj, parent, key, required, JSON_STRING,
                       "a non-empty string", &v);
    if (rc != 1)
        return rc;
    if (!*json_string_value(v)) {
        char path[PATH_MAX_LEN];
        tm_json_path_key(path, sizeof path, parent, key);
        fail_type(L, path, "a non-empty string", v);
        return -1;
    }
    char *s = xstrdup(L, json_string_value(v));
    if (!s)
        return -1;
    free(*out);
    *out = s;
    return 1;
}

static int get_object(loader *L, json_t *obj, const char *parent,
                      const char *key, int required, json_t **out) {
    return get_typed(L, obj, parent, key, required, JSON_OBJECT, "an object",
                     out);
}

static int get_bool(loader *L, json_t *obj, const char *parent, const char *key,
                    int *out) {
    json_t *v;
    int rc = get_typed(L, obj, parent, key, 0, JSON_TRUE, "a boolean", &v);
    if (rc == 1)
        *out = json_is_true(v);
    return rc;
}

static void get_positive(loader *L, json_t *obj, const char *parent,
                         const char *key, int64_t *out) {
    json_t *v = json_object_get(obj, key);
    if (!v)
        return;
    if (!json_is_integer(v) || json_integer_value(v) <= 0) {
        char path[PATH_MAX_LEN];
        tm_json_path_key(path, sizeof path, parent, key);
        fail_type(L, path, "a positive integer", v);
        return;
    }
    *out = (int64_t)json_integer_value(v);
}

/* One of words; *out is its index. */
static int get_enum(loader *L, json_t *obj, const char *parent, const char *key,
                    int required, const char *const *words, size_t n,
                    size_t *out) {
    char expected[128] = "";
    for (size_t i = 0; i < n; i++) {
        size_t used = strlen(expected);
        snprintf(expected + used, sizeof expected - used, "%s\"%s\"",
                 i == 0 ? "" : (i + 1 == n ? " or " : ", "), words[i]);
    }
    json_t *v;
    int rc =
        get_typed(L, obj, parent, key, required, JSON_STRING, expected, &v);
    if (rc != 1)
        return rc;
    for (size_t i = 0; i < n; i++)
        if (strcmp(json_string_value(v), words[i]) == 0) {
            *out = i;
            return 1;
        }
    char path[PATH_MAX_LEN];
    tm_json_path_key(path, sizeof path, parent, key);
    fail_type(L, path, expected, v);
    return -1;
}

/* ---- RFC 6901 pointers and filters -------------------------------------- */

/* NULL when p is a valid JSON pointer, else why not. */
static const char *pointer_problem(const char *p) {
    if (!*p)
        return NULL; /* the whole document */
    if (*p != '/')
        return "a JSON pointer starts with '/'";
    for (; *p; p++)
        if (*p == '~' && p[1] != '0' && p[1] != '1')
            return "'~' must be followed by 0 or 1 (~0 is '~', ~1 is '/')";
    return NULL;
}

static int str_push(char ***v, size_t *n, const char *s, size_t len) {
    char **nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv)
        return -1;
    *v = nv;
    char *c = malloc(len + 1);
    if (!c)
        return -1;
    memcpy(c, s, len);
    c[len] = '\0';
    nv[(*n)++] = c;
    return 0;
}

static void filter_clear(tm_filter *f) {
    free(f->pointer);
    for (size_t i = 0; i < f->nvalues; i++)
        free(f->values[i]);
    free(f->values);
    memset(f, 0, sizeof *f);
}

static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* One value at *pp: a double-quoted string (\" and \\ escapes) or a bare
 * word up to a space, ',' or ']'. NULL when fine, else why not. */
static const char *filter_value(const char **pp, tm_filter *f, int in_list) {
    const char *p = skip_ws(*pp);
    sbuf b = {0};
    if (*p == '"') {
        for (p++; *p && *p != '"'; p++) {
            if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
                p++;
            sb_add(&b, p, 1);
        }
        if (*p != '"') {
            free(b.p);
            return "unterminated quoted value";
        }
        p++;
        if (!b.p)
            sb_add(&b, "", 0);
    } else {
        const char *s = p;
        while (*p && *p != ' ' && *p != '\t' && *p != ',' &&
               (!in_list || *p != ']') && *p != '"' && *p != '[')
            p++;
        if (p == s) {
            free(b.p);
            return "a value is missing";
        }
        sb_add(&b, s, (size_t)(p - s));
    }
    if (b.oom || str_push(&f->values, &f->nvalues, b.p, b.n) != 0) {
        free(b.p);
        return "out of memory";
    }
    free(b.p);
    *pp = p;
    return NULL;
}

/* Parses "/pointer in [a, b]" or "/pointer == value". NULL when fine. */
static const char *filter_parse(const char *text, tm_filter *f) {
    const char *p = skip_ws(text);
    if (*p != '/')
        return "it must start with a JSON pointer (\"/field\")";
    const char *s = p;
    while (*p && *p != ' ' && *p != '\t')
        p++;
    if (!(f->pointer = malloc((size_t)(p - s) + 1)))
        return "out of memory";
    memcpy(f->pointer, s, (size_t)(p - s));
    f->pointer[p - s] = '\0';
    const char *why = pointer_problem(f->pointer);
    if (why)
        return why;
    p = skip_ws(p);
    if (strncmp(p, "==", 2) == 0) {
        f->op = TM_FILTER_EQ;
        p += 2;
        if ((why = filter_value(&p, f, 0)))
            return why;
    } else if (strncmp(p, "in", 2) == 0 &&
               (p[2] == ' ' || p[2] == '\t' || p[2] == '[')) {
        f->op = TM_FILTER_IN;
        p = skip_ws(p + 2);
        if (*p != '[')
            return "\"in\" needs a list in brackets";
        p++;
        if (*skip_ws(p) == ']')
            return "the list is empty";
        for (;;) {
            if ((why = filter_value(&p, f, 1)))
                return why;
            p = skip_ws(p);
            if (*p == ',') {
                p++;
                continue;
            }
            if (*p == ']') {
                p++;
                break;
            }
            return *p ? "expected ',' or ']' in the list"
                      : "the list is not closed with ']'";
        }
    } else {
        return "the operator must be \"==\" or \"in\"";
    }
    if (*skip_ws(p))
        return "unexpected text after the filter";
    return NULL;
}

/* ---- sections ----------------------------------------------------------- */

static int name_ok(const char *s) {
    if (!*s)
        return 0;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* librdkafka properties tidemark sets itself, and why. */
static const struct {
    const char *key, *why;
} RESERVED[] = {
    {"enable.auto.commit",
     "offsets are committed to the group by tidemark, only after the sink's "
     "commit"},
    {"enable.auto.offset.store",
     "offsets are stored by tidemark, only after the sink's commit"},
    {"auto.offset.reset",
     "the start position comes from the sink's markers (set $.kafka.start "
     "for partitions without one)"},
    {"group.id", "set $.kafka.group_id instead"},
    {"bootstrap.servers", "set $.kafka.bootstrap_servers instead"},
    {"isolation.level",
     "tidemark reads committed records only (read_committed)"},
};

static void load_kafka(loader *L, json_t *root) {
    static const char *const KNOWN[] = {
        "bootstrap_servers", "topics", "topic_regex",
        "group_id",          "start",  "properties"};
    static const char *const STARTS[] = {"earliest", "latest"};
    const char *P = "$.kafka";
    tm_connector_config *c = L->cfg;
    json_t *k = NULL;
    if (get_object(L, root, "$", "kafka", 1, &k) != 1)
        return;
    check_keys(L, k, P, KNOWN, N(KNOWN));
    get_string(L, k, P, "bootstrap_servers", 1, &c->kafka.bootstrap_servers);

    json_t *topics = NULL;
    int has_topics = get_typed(L, k, P, "topics", 0, JSON_ARRAY,
                               "an array of topic names", &topics);
    int has_regex =
        get_string(L, k, P, "topic_regex", 0, &c->kafka.topic_regex);
    if (has_topics == 1) {
        size_t i;
        json_t *t;
        if (json_array_size(topics) == 0)
            fail_type(L, "$.kafka.topics", "an array of topic names", topics);
        json_array_foreach(topics, i, t) {
            char path[PATH_MAX_LEN];
            tm_json_path_index(path, sizeof path, "$.kafka.topics", i);
            if (!json_is_string(t) || !*json_string_value(t)) {
                fail_type(L, path, "a topic name (non-empty string)", t);
                continue;
            }
            const char *s = json_string_value(t);
            if (str_push(&c->kafka.topics, &c->kafka.ntopics, s, strlen(s)))
                fail(L, path, "out of memory");
        }
    }
    if (has_regex == 1) {
        regex_t re;
        int rc = regcomp(&re, c->kafka.topic_regex, REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            char why[128];
            regerror(rc, &re, why, sizeof why);
            fail(L, "$.kafka.topic_regex",
                 "expected a regular expression (POSIX extended), found "
                 "string \"%s\" (%s)",
                 c->kafka.topic_regex, why);
        } else {
            regfree(&re);
        }
    }
    if (has_topics != 0 && has_regex != 0)
        fail(L, P,
             "expected exactly one of \"topics\" or \"topic_regex\", found "
             "both");
    else if (has_topics == 0 && has_regex == 0)
        fail(L, P,
             "expected exactly one of \"topics\" or \"topic_regex\", found "
             "neither");

    get_string(L, k, P, "group_id", 0, &c->kafka.group_id);
    size_t start = 0;
    if (get_enum(L, k, P, "start", 0, STARTS, N(STARTS), &start) == 1)
        c->kafka.start = start == 0 ? TM_START_EARLIEST : TM_START_LATEST;

    json_t *props = NULL;
    if (get_object(L, k, P, "properties", 0, &props) != 1)
        return;
    const char *key;
    json_t *v;
    json_object_foreach(props, key, v) {
        char path[PATH_MAX_LEN];
        tm_json_path_key(path, sizeof path, "$.kafka.properties", key);
        size_t r;
        for (r = 0; r < N(RESERVED); r++)
            if (strcmp(RESERVED[r].key, key) == 0)
                break;
        if (r < N(RESERVED)) {
            fail(L, path, "reserved: tidemark sets \"%s\" itself (%s)", key,
                 RESERVED[r].why);
            continue;
        }
        if (!json_is_string(v)) {
            fail_type(L, path, "a string (librdkafka takes string values)", v);
            continue;
        }
        tm_config_property *np = realloc(
            c->kafka.properties, (c->kafka.nproperties + 1) * sizeof *np);
        if (!np) {
            fail(L, path, "out of memory");
            return;
        }
        c->kafka.properties = np;
        tm_config_property *pr = &np[c->kafka.nproperties];
        pr->key = strdup(key);
        pr->value = strdup(json_string_value(v));
        c->kafka.nproperties++;
        if (!pr->key || !pr->value)
            fail(L, path, "out of memory");
    }
}

static void load_batch(loader *L, json_t *root) {
    static const char *const KNOWN[] = {"max_records", "max_bytes",
                                        "max_wait_ms"};
    json_t *b = NULL;
    if (get_object(L, root, "$", "batch", 0, &b) != 1)
        return;
    check_keys(L, b, "$.batch", KNOWN, N(KNOWN));
    get_positive(L, b, "$.batch", "max_records", &L->cfg->batch.max_records);
    get_positive(L, b, "$.batch", "max_bytes", &L->cfg->batch.max_bytes);
    get_positive(L, b, "$.batch", "max_wait_ms", &L->cfg->batch.max_wait_ms);
}

static void load_sink(loader *L, json_t *root) {
    static const char *const KNOWN[] = {"plugin", "settings"};
    json_t *s = NULL, *set = NULL;
    if (get_object(L, root, "$", "sink", 1, &s) != 1)
        return;
    check_keys(L, s, "$.sink", KNOWN, N(KNOWN));
    get_string(L, s, "$.sink", "plugin", 1, &L->cfg->sink.plugin);
    if (get_object(L, s, "$.sink", "settings", 0, &set) == 1) {
        json_decref(L->cfg->sink.settings);
        L->cfg->sink.settings = json_incref(set);
    }
}

/* The seven columns of raw mode. */
static const tm_column RAW_COLUMNS[] = {
    {sizeof(tm_column), "key", TM_TYPE_BYTES, 0, 0},
    {sizeof(tm_column), "value", TM_TYPE_BYTES, 0, 0},
    {sizeof(tm_column), "headers", TM_TYPE_JSON, 0, 0},
    {sizeof(tm_column), "topic", TM_TYPE_TEXT, 1, 0},
    {sizeof(tm_column), "partition", TM_TYPE_INT, 1, 0},
    {sizeof(tm_column), "offset", TM_TYPE_INT, 1, 0},
    {sizeof(tm_column), "timestamp", TM_TYPE_TIMESTAMP, 0, 0},
};

static const char *const TYPE_NAMES[] = {"text", "int",       "float",
                                         "bool", "timestamp", "json"};
static const tm_type TYPES[] = {TM_TYPE_TEXT, TM_TYPE_INT,       TM_TYPE_FLOAT,
                                TM_TYPE_BOOL, TM_TYPE_TIMESTAMP, TM_TYPE_JSON};

const char *tm_config_type_name(tm_type type) {
    if (type == TM_TYPE_BYTES)
        return "bytes";
    for (size_t i = 0; i < N(TYPES); i++)
        if (TYPES[i] == type)
            return TYPE_NAMES[i];
    return NULL;
}

static void load_raw_columns(loader *L) {
    tm_connector_config *c = L->cfg;
    c->mapping.columns = calloc(N(RAW_COLUMNS), sizeof(tm_column));
    if (!c->mapping.columns) {
        fail(L, "$.mapping", "out of memory");
        return;
    }
    for (size_t i = 0; i < N(RAW_COLUMNS); i++) {
        c->mapping.columns[i] = RAW_COLUMNS[i];
        c->mapping.columns[i].name = strdup(RAW_COLUMNS[i].name);
        c->mapping.ncolumns = i + 1;
        if (!c->mapping.columns[i].name) {
            fail(L, "$.mapping", "out of memory");
            return;
        }
    }
}

static void load_json_column(loader *L, json_t *col, const char *path,
                             size_t i) {
    static const char *const KNOWN[] = {"name", "pointer", "type", "required",
                                        "key"};
    tm_connector_config *c = L->cfg;
    tm_column *out = &c->mapping.columns[i];
    out->struct_size = (uint32_t)sizeof(tm_column);
    if (!json_is_object(col)) {
        fail_type(L, path, "an object (name, pointer, type)", col);
        return;
    }
    check_keys(L, col, path, KNOWN, N(KNOWN));
    char *name = NULL;
    if (get_string(L, col, path, "name", 1, &name) == 1) {
        out->name = name;
        for (size_t j = 0; j < i; j++)
            if (c->mapping.columns[j].name &&
                strcmp(c->mapping.columns[j].name, name) == 0) {
                char sub[PATH_MAX_LEN];
                tm_json_path_key(sub, sizeof sub, path, "name");
                fail(L, sub,
                     "expected a unique column name, found string \"%s\" "
                     "(also $.mapping.columns[%zu])",
                     name, j);
                break;
            }
    }
    json_t *ptr = NULL;
    if (get_typed(L, col, path, "pointer", 1, JSON_STRING,
                  "a JSON pointer (RFC 6901)", &ptr) == 1) {
        const char *why = pointer_problem(json_string_value(ptr));
        char sub[PATH_MAX_LEN];
        tm_json_path_key(sub, sizeof sub, path, "pointer");
        if (why) {
            char f[FOUND_MAX_LEN + 64];
            fail(L, sub, "expected a JSON pointer (RFC 6901), found %s: %s",
                 found(L, ptr, f, sizeof f), why);
        } else if (!(c->mapping.pointers[i] = strdup(json_string_value(ptr)))) {
            fail(L, sub, "out of memory");
        }
    }
    size_t t = 0;
    if (get_enum(L, col, path, "type", 1, TYPE_NAMES, N(TYPE_NAMES), &t) == 1)
        out->type = TYPES[t];
    int b = 0;
    if (get_bool(L, col, path, "required", &b) == 1)
        out->required = (uint8_t)b;
    b = 0;
    if (get_bool(L, col, path, "key", &b) == 1)
        out->key = (uint8_t)b;
}

static void load_mapping(loader *L, json_t *root) {
    static const char *const KNOWN[] = {"mode", "columns", "filter"};
    static const char *const MODES[] = {"raw", "json"};
    const char *P = "$.mapping";
    tm_connector_config *c = L->cfg;
    json_t *m = NULL;
    if (get_object(L, root, "$", "mapping", 1, &m) != 1)
        return;
    check_keys(L, m, P, KNOWN, N(KNOWN));
    size_t mode = 0;
    int has_mode = get_enum(L, m, P, "mode", 1, MODES, N(MODES), &mode);
    json_t *cols = json_object_get(m, "columns");
    json_t *filter = json_object_get(m, "filter");
    if (has_mode == 1 && mode == 0) {
        c->mapping.mode = TM_MAPPING_RAW;
        if (cols)
            fail(L, "$.mapping.columns",
                 "not allowed with mode \"raw\" (its columns are fixed: key, "
                 "value, headers, topic, partition, offset, timestamp)");
        if (filter)
            fail(L, "$.mapping.filter",
                 "not allowed with mode \"raw\" (record values are not "
                 "parsed)");
        load_raw_columns(L);
        return;
    }
    if (has_mode != 1)
        return;
    c->mapping.mode = TM_MAPPING_JSON;
    if (get_typed(L, m, P, "columns", 1, JSON_ARRAY,
                  "a non-empty array of columns", &cols) != 1)
        return;
    size_t n = json_array_size(cols);
    if (n == 0) {
        fail_type(L, "$.mapping.columns", "a non-empty array of columns", cols);
        return;
    }
    c->mapping.columns = calloc(n, sizeof(tm_column));
    c->mapping.pointers = calloc(n, sizeof(char *));
    if (!c->mapping.columns || !c->mapping.pointers) {
        fail(L, "$.mapping.columns", "out of memory");
        return;
    }
    c->mapping.ncolumns = n;
    for (size_t i = 0; i < n; i++) {
        char path[PATH_MAX_LEN];
        tm_json_path_index(path, sizeof path, "$.mapping.columns", i);
        load_json_column(L, json_array_get(cols, i), path, i);
    }
    if (!filter)
        return;
    if (!json_is_string(filter)) {
        fail_type(L, "$.mapping.filter",
                  "a string \"/pointer in [a, b]\" or \"/pointer == value\"",
                  filter);
        return;
    }
    const char *why =
        filter_parse(json_string_value(filter), &c->mapping.filter);
    if (why) {
        char f[FOUND_MAX_LEN + 64];
        fail(L, "$.mapping.filter",
             "expected \"/pointer in [a, b, ...]\" or \"/pointer == value\", "
             "found %s: %s",
             found(L, filter, f, sizeof f), why);
        filter_clear(&c->mapping.filter);
    }
}

static void load_dedup(loader *L, json_t *root) {
    static const char *const KNOWN[] = {"key"};
    tm_connector_config *c = L->cfg;
    json_t *d = NULL, *keys = NULL;
    if (get_object(L, root, "$", "dedup", 0, &d) != 1)
        return;
    c->dedup.enabled = 1;
    check_keys(L, d, "$.dedup", KNOWN, N(KNOWN));
    if (get_typed(L, d, "$.dedup", "key", 1, JSON_ARRAY,
                  "a non-empty array of column names", &keys) != 1)
        return;
    size_t n = json_array_size(keys);
    if (n == 0) {
        fail_type(L, "$.dedup.key", "a non-empty array of column names", keys);
        return;
    }
    if (!(c->dedup.key_columns = calloc(n, sizeof(size_t)))) {
        fail(L, "$.dedup.key", "out of memory");
        return;
    }
    /* Column names, for "did you mean". */
    const char **names = calloc(c->mapping.ncolumns + 1, sizeof *names);
    size_t nnames = 0;
    for (size_t j = 0; names && j < c->mapping.ncolumns; j++)
        if (c->mapping.columns[j].name)
            names[nnames++] = c->mapping.columns[j].name;
    size_t i;
    json_t *k;
    json_array_foreach(keys, i, k) {
        char path[PATH_MAX_LEN];
        tm_json_path_index(path, sizeof path, "$.dedup.key", i);
        if (!json_is_string(k)) {
            fail_type(L, path, "a column name (string)", k);
            continue;
        }
        const char *s = json_string_value(k);
        size_t j;
        for (j = 0; j < c->mapping.ncolumns; j++)
            if (c->mapping.columns[j].name &&
                strcmp(c->mapping.columns[j].name, s) == 0)
                break;
        if (j == c->mapping.ncolumns) {
            if (c->mapping.ncolumns == 0)
                continue; /* the mapping itself is in error */
            const char *hint = names ? tm_did_you_mean(s, names, nnames) : NULL;
            char f[FOUND_MAX_LEN + 64];
            found(L, k, f, sizeof f);
            if (hint)
                fail(L, path,
                     "expected a column of $.mapping.columns, found %s (did "
                     "you mean \"%s\"?)",
                     f, hint);
            else
                fail(L, path,
                     "expected a column of $.mapping.columns, found %s", f);
            continue;
        }
        c->dedup.key_columns[c->dedup.nkey] = j;
        if (str_push(&c->dedup.key, &c->dedup.nkey, s, strlen(s)) != 0)
            fail(L, path, "out of memory");
    }
    free(names);
}

static void load_dead_letters(loader *L, json_t *root) {
    static const char *const KNOWN[] = {"sink", "topic"};
    json_t *d = NULL;
    if (get_object(L, root, "$", "dead_letters", 0, &d) != 1)
        return;
    check_keys(L, d, "$.dead_letters", KNOWN, N(KNOWN));
    get_bool(L, d, "$.dead_letters", "sink", &L->cfg->dead_letters.sink);
    get_string(L, d, "$.dead_letters", "topic", 0, &L->cfg->dead_letters.topic);
}

static void load_root(loader *L, json_t *root) {
    static const char *const KNOWN[] = {"name",         "kafka",    "batch",
                                        "sink",         "mapping",  "dedup",
                                        "dead_letters", "state_dir"};
    tm_connector_config *c = L->cfg;
    check_keys(L, root, "$", KNOWN, N(KNOWN));
    json_t *name = NULL;
    if (get_typed(L, root, "$", "name", 1, JSON_STRING,
                  "a name of letters, digits, '.', '_' or '-'", &name) == 1) {
        if (!name_ok(json_string_value(name)))
            fail_type(L, "$.name", "a name of letters, digits, '.', '_' or '-'",
                      name);
        else
            c->name = xstrdup(L, json_string_value(name));
    }
    load_kafka(L, root);
    load_batch(L, root);
    load_sink(L, root);
    load_mapping(L, root);
    load_dedup(L, root);
    load_dead_letters(L, root);
    get_string(L, root, "$", "state_dir", 0, &c->state_dir);

    if (!c->kafka.group_id && c->name) {
        size_t n = strlen("tidemark-") + strlen(c->name) + 1;
        if ((c->kafka.group_id = malloc(n)))
            snprintf(c->kafka.group_id, n, "tidemark-%s", c->name);
        else
            fail(L, "$.kafka.group_id", "out of memory");
    }
    if (!c->sink.settings && !(c->sink.settings = json_object()))
        fail(L, "$.sink.settings", "out of memory");
}

/* ---- entry points ------------------------------------------------------- */

static tm_connector_config *config_new(const char *file) {
    tm_connector_config *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->file = file ? strdup(file) : NULL;
    c->batch.max_records = 10000;
    c->batch.max_bytes = 16 * 1024 * 1024;
    c->batch.max_wait_ms = 500;
    c->kafka.start = TM_START_EARLIEST;
    c->dead_letters.sink = 1;
    if (file && !c->file) {
        free(c);
        return NULL;
    }
    return c;
}

static tm_connector_config *load_json(json_t *root, const char *file,
                                      tm_config_errors *errs) {
    tm_connector_config *c = config_new(file);
    if (!c) {
        errs_push(errs, "$: out of memory");
        json_decref(root);
        return NULL;
    }
    loader L = {c, errs, 0};
    if (!json_is_object(root)) {
        fail_type(&L, "$", "an object (one connector)", root);
    } else {
        interpolate_tree(&L, root, "$");
        load_root(&L, root);
    }
    json_decref(root);
    if (L.failed) {
        tm_config_free(c);
        return NULL;
    }
    return c;
}

tm_connector_config *tm_config_load_string(const char *text, const char *file,
                                           tm_config_errors *errs) {
    json_error_t jerr;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        char line[LINE_MAX_LEN];
        snprintf(line, sizeof line,
                 "$: expected JSON, found a syntax error at line %d, column "
                 "%d: %s",
                 jerr.line, jerr.column, jerr.text);
        errs_push(errs, line);
        return NULL;
    }
    return load_json(root, file, errs);
}

tm_connector_config *tm_config_load(const char *path, tm_config_errors *errs) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        char line[LINE_MAX_LEN];
        snprintf(line, sizeof line, "$: cannot read the file: %s",
                 strerror(errno));
        errs_push(errs, line);
        return NULL;
    }
    json_error_t jerr;
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
    fclose(f);
    if (!root) {
        char line[LINE_MAX_LEN];
        snprintf(line, sizeof line,
                 "$: expected JSON, found a syntax error at line %d, column "
                 "%d: %s",
                 jerr.line, jerr.column, jerr.text);
        errs_push(errs, line);
        return NULL;
    }
    return load_json(root, path, errs);
}

static void strv_free(char **v, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void tm_config_free(tm_connector_config *c) {
    if (!c)
        return;
    free(c->file);
    free(c->name);
    free(c->kafka.bootstrap_servers);
    strv_free(c->kafka.topics, c->kafka.ntopics);
    free(c->kafka.topic_regex);
    free(c->kafka.group_id);
    for (size_t i = 0; i < c->kafka.nproperties; i++) {
        free(c->kafka.properties[i].key);
        free(c->kafka.properties[i].value);
    }
    free(c->kafka.properties);
    free(c->sink.plugin);
    json_decref(c->sink.settings);
    for (size_t i = 0; i < c->mapping.ncolumns; i++) {
        free((char *)(uintptr_t)c->mapping.columns[i].name);
        if (c->mapping.pointers)
            free(c->mapping.pointers[i]);
    }
    free(c->mapping.columns);
    free(c->mapping.pointers);
    filter_clear(&c->mapping.filter);
    strv_free(c->dedup.key, c->dedup.nkey);
    free(c->dedup.key_columns);
    free(c->dead_letters.topic);
    free(c->state_dir);
    strv_free(c->secrets, c->nsecrets);
    free(c);
}

void tm_config_sink_config(const tm_connector_config *cfg,
                           const tm_settings *settings, void *host_ctx,
                           tm_sink_config *out) {
    memset(out, 0, sizeof *out);
    out->struct_size = (uint32_t)sizeof *out;
    out->connector = cfg->name;
    out->settings = settings;
    out->columns = cfg->mapping.columns;
    out->ncolumns = cfg->mapping.ncolumns;
    out->flags = (cfg->mapping.mode == TM_MAPPING_RAW ? TM_CONFIG_RAW : 0u) |
                 (cfg->dedup.enabled ? TM_CONFIG_DEDUP : 0u);
    out->state_dir = cfg->state_dir;
    out->host_ctx = host_ctx;
}
