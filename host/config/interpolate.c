/* ${env:NAME} and ${file:PATH} resolution, and the secret list it feeds:
 * every resolved value is remembered so that tm_config_redact() can hide
 * it from anything printed later. */
#include "config/interpolate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/json_path.h"
#include "services/redact.h"

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
    /* The one matcher every redaction shares (services/redact.h), against
     * this config's own secrets: a config error is printed before the
     * process-wide list holds them. */
    return tm_redact_list(cfg ? (const char *const *)cfg->secrets : NULL,
                          cfg ? cfg->nsecrets : 0, text, TM_REDACT_WHOLE, out,
                          size);
}

/* The whole file as a string, one trailing newline dropped (as secret
 * files usually end with one). NULL with errno set on failure. */
static char *read_file_value(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    tm_buf b = {0};
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (b.n + got > FILE_VALUE_MAX) {
            free(b.p);
            fclose(f);
            errno = EFBIG;
            return NULL;
        }
        tm_buf_add(&b, chunk, got);
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
    tm_buf b = {0};
    const char *p = in;
    while (*p) {
        if (p[0] == '$' && p[1] == '$' && p[2] == '{') { /* "$${" escape */
            tm_buf_add(&b, "${", 2);
            p += 3;
            continue;
        }
        if (!(p[0] == '$' && p[1] == '{')) {
            tm_buf_add(&b, p, 1);
            p++;
            continue;
        }
        const char *ref = p + 2, *end = strchr(ref, '}');
        if (!end) {
            cfg_fail(L, path,
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
                cfg_fail(L, path,
                         "expected ${env:NAME} with NAME of letters, digits "
                         "and '_', found \"${%.*s}\"",
                         (int)n, ref);
                goto bad;
            }
            char var[256];
            snprintf(var, sizeof var, "%.*s", (int)nn, name);
            const char *v = getenv(var);
            if (!v) {
                cfg_fail(L, path, "environment variable %s is not set", var);
                goto bad;
            }
            value = strdup(v);
        } else if (n >= 5 && strncmp(ref, "file:", 5) == 0) {
            char file[4096];
            if (n == 5 || n - 5 >= sizeof file) {
                cfg_fail(L, path, "expected ${file:PATH}, found \"${%.*s}\"",
                         (int)(n < 64 ? n : 64), ref);
                goto bad;
            }
            snprintf(file, sizeof file, "%.*s", (int)(n - 5), ref + 5);
            value = read_file_value(file);
            if (!value) {
                cfg_fail(L, path, "cannot read file %s: %s", file,
                         strerror(errno));
                goto bad;
            }
        } else {
            cfg_fail(L, path,
                     "unknown reference \"${%.*s}\": expected ${env:NAME} or "
                     "${file:PATH} (write $${ for a literal \"${\")",
                     (int)(n < 64 ? n : 64), ref);
            goto bad;
        }
        if (!value || add_secret(L->cfg, value) != 0) {
            free(value);
            cfg_fail(L, path, "out of memory");
            goto bad;
        }
        tm_buf_add(&b, value, strlen(value));
        free(value);
        p = end + 1;
    }
    if (b.oom) {
        cfg_fail(L, path, "out of memory");
        goto bad;
    }
    return b.p ? b.p : strdup("");
bad:
    free(b.p);
    *error = 1;
    return NULL;
}

/* Every string value of the tree (not keys), in place. */
void cfg_interpolate_tree(loader *L, json_t *v, const char *path) {
    char sub[PATH_MAX_LEN];
    if (json_is_object(v)) {
        const char *key;
        json_t *child;
        json_object_foreach(v, key, child) {
            tm_json_path_key(sub, sizeof sub, path, key);
            cfg_interpolate_tree(L, child, sub);
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *child;
        json_array_foreach(v, i, child) {
            tm_json_path_index(sub, sizeof sub, path, i);
            cfg_interpolate_tree(L, child, sub);
        }
    } else if (json_is_string(v)) {
        int error = 0;
        char *s = interpolate(L, path, json_string_value(v), &error);
        if (s) {
            if (json_string_set(v, s) != 0)
                cfg_fail(L, path, "resolved value is not valid UTF-8");
            free(s);
        }
    }
}
