#include "convert_diff.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/connector_config.h"
#include "convert/arena.h"
#include "convert/json_extract.h"
#include "convert/json_pointer.h"
#include "convert/json_value.h"
#include "convert/record_convert.h"

#define MAX_POINTERS 64
#define NTYPES       6

/* One config converted by both parsers. */
typedef struct diff_config {
    tm_connector_config *cfg;
    tm_converter *extractor, *jansson;
} diff_config;

struct tm_diff {
    const char *const *pointers;
    size_t npointers;
    diff_config *configs;
    size_t nconfigs;
    tm_arena arena_x, arena_j; /* one per path, emptied per document */
    size_t valid, invalid;
    char why[1024];
};

static const char *const TYPES[NTYPES] = {"text", "int",       "float",
                                          "bool", "timestamp", "json"};

/* Filter literals that meet every kind of value somewhere. */
static const char FILTER_LITERALS[] =
    "[0, -0, 1, x, \"\", true, false, null, 1.5, 1e2, \"a b\", é]";

static const char *differ(tm_diff *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static const char *differ(tm_diff *d, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->why, sizeof d->why, fmt, ap);
    va_end(ap);
    return d->why;
}

/* A config of columns c0.. (one per pointer, all of `type` when given,
 * else one text column of /a: the filter is what such a config tests),
 * and a filter when given. */
static tm_connector_config *make_config(tm_diff *d, const char *type,
                                        int required, const char *filter) {
    json_t *cols = json_array();
    for (size_t i = 0; cols && i < (type ? d->npointers : 1); i++) {
        char name[24];
        snprintf(name, sizeof name, "c%zu", i);
        json_t *col = json_pack("{s:s, s:s, s:s, s:b}", "name", name, "pointer",
                                type ? d->pointers[i] : "/a", "type",
                                type ? type : "text", "required", required);
        if (!col || json_array_append_new(cols, col) != 0) {
            json_decref(cols);
            cols = NULL;
        }
    }
    json_t *mapping = json_pack("{s:s, s:o}", "mode", "json", "columns", cols);
    if (mapping && filter &&
        json_object_set_new(mapping, "filter", json_string(filter)) != 0) {
        json_decref(mapping);
        mapping = NULL;
    }
    json_t *root =
        json_pack("{s:s, s:{s:s, s:[s]}, s:{s:s}, s:o}", "name", "diff",
                  "kafka", "bootstrap_servers", "k:9092", "topics", "t", "sink",
                  "plugin", "sqlite", "mapping", mapping);
    char *text = root ? json_dumps(root, 0) : NULL;
    json_decref(root);
    if (!text)
        return NULL;
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    tm_connector_config *cfg = tm_config_load_string(text, "diff.json", &errs);
    for (size_t i = 0; i < errs.count; i++)
        fprintf(stderr, "convert_diff config: %s\n", errs.lines[i]);
    tm_config_errors_free(&errs);
    free(text);
    return cfg;
}

static int add_config(tm_diff *d, tm_connector_config *cfg) {
    if (!cfg)
        return -1;
    diff_config *c = &d->configs[d->nconfigs++];
    c->cfg = cfg;
    c->extractor = tm_converter_new_with(cfg, TM_PARSER_EXTRACTOR);
    c->jansson = tm_converter_new_with(cfg, TM_PARSER_JANSSON);
    return c->extractor && c->jansson ? 0 : -1;
}

/* A filter can name a pointer without spaces or quotes only. */
static int filterable(const char *p) {
    return *p == '/' && !strpbrk(p, " \t\"[],");
}

tm_diff *tm_diff_new(const char *const *pointers, size_t npointers) {
    tm_diff *d = calloc(1, sizeof *d);
    if (!d || npointers == 0 || npointers > MAX_POINTERS) {
        free(d);
        return NULL;
    }
    d->pointers = pointers;
    d->npointers = npointers;
    tm_arena_init(&d->arena_x);
    tm_arena_init(&d->arena_j);
    /* Each type twice (required or not), then one filter per pointer. */
    d->configs = calloc(2 * NTYPES + npointers, sizeof *d->configs);
    int rc = d->configs ? 0 : -1;
    for (size_t t = 0; rc == 0 && t < 2 * NTYPES; t++)
        rc = add_config(d, make_config(d, TYPES[t / 2], (int)(t % 2), NULL));
    for (size_t i = 0; rc == 0 && i < npointers; i++) {
        if (!filterable(pointers[i]))
            continue;
        char filter[256];
        snprintf(filter, sizeof filter, "%s in %s", pointers[i],
                 FILTER_LITERALS);
        rc = add_config(d, make_config(d, NULL, 0, filter));
    }
    if (rc != 0) {
        fprintf(stderr, "convert_diff: cannot build the configs\n");
        tm_diff_free(d);
        return NULL;
    }
    return d;
}

void tm_diff_free(tm_diff *d) {
    if (!d)
        return;
    for (size_t i = 0; i < d->nconfigs; i++) {
        tm_converter_free(d->configs[i].extractor);
        tm_converter_free(d->configs[i].jansson);
        tm_config_free(d->configs[i].cfg);
    }
    free(d->configs);
    tm_arena_free(&d->arena_x);
    tm_arena_free(&d->arena_j);
    free(d);
}

void tm_diff_counts(const tm_diff *d, size_t *valid, size_t *invalid) {
    *valid = d->valid;
    *invalid = d->invalid;
}

/* ---- the values found ---- */

/* x (extractor) against j (jansson) for pointer p. */
static const char *compare_found(tm_diff *d, const char *p, const tm_jvalue *x,
                                 const tm_jvalue *j) {
    if (x->present != j->present)
        return differ(d, "pointer \"%s\": present %d vs %d", p, x->present,
                      j->present);
    if (!x->present)
        return NULL;
    if (x->kind != j->kind)
        return differ(d, "pointer \"%s\": kind %d vs %d", p, (int)x->kind,
                      (int)j->kind);
    if (x->kind == JSON_INTEGER && x->integer != j->integer)
        return differ(d, "pointer \"%s\": integer %lld vs %lld", p,
                      (long long)x->integer, (long long)j->integer);
    if (x->kind == JSON_REAL && memcmp(&x->real, &j->real, sizeof x->real))
        return differ(d, "pointer \"%s\": real %.17g vs %.17g", p, x->real,
                      j->real);
    if (x->kind == JSON_STRING) {
        const char *xs, *js;
        size_t xn, jn;
        if (tm_jvalue_string(x, &d->arena_x, &xs, &xn) != 0 ||
            tm_jvalue_string(j, &d->arena_j, &js, &jn) != 0)
            return differ(d, "pointer \"%s\": out of memory", p);
        if (xn != jn || memcmp(xs, js, xn) != 0)
            return differ(d, "pointer \"%s\": string of %zu vs %zu bytes", p,
                          xn, jn);
    }
    const char *xc, *jc;
    size_t xn, jn;
    if (tm_jvalue_canonical(x, &d->arena_x, &xc, &xn) != 0)
        return differ(d, "pointer \"%s\": no canonical text (extractor)", p);
    if (tm_jvalue_canonical(j, &d->arena_j, &jc, &jn) != 0)
        return differ(d, "pointer \"%s\": no canonical text (jansson)", p);
    if (xn != jn || memcmp(xc, jc, xn) != 0)
        return differ(d, "pointer \"%s\": canonical %.200s vs %.200s", p, xc,
                      jc);
    return NULL;
}

const char *tm_diff_check_pointers(tm_diff *d, const char *doc, size_t n,
                                   const char *const *pointers,
                                   size_t npointers) {
    if (npointers > MAX_POINTERS)
        return differ(d, "too many pointers");
    tm_json_pointer ptrs[MAX_POINTERS];
    tm_jvalue found_x[MAX_POINTERS], found_j[MAX_POINTERS];
    size_t compiled = 0;
    const char *why = NULL;
    for (; compiled < npointers; compiled++)
        if (tm_json_pointer_compile(pointers[compiled], &ptrs[compiled]) != 0) {
            why = differ(d, "pointer \"%s\" does not compile",
                         pointers[compiled]);
            break;
        }
    json_t *tree = NULL;
    if (!why) {
        tm_json_plan *plan = tm_json_plan_new(ptrs, npointers);
        int rc = plan ? tm_json_extract(plan, doc, n, found_x) : TM_EXTRACT_OOM;
        tm_json_plan_free(plan);
        tree = json_loadb(doc, n, JSON_DECODE_ANY, NULL);
        if (rc == TM_EXTRACT_OOM)
            why = differ(d, "extractor out of memory");
        else if ((rc == TM_EXTRACT_OK) != (tree != NULL))
            why = differ(d, "extractor says %s, jansson %s",
                         rc == TM_EXTRACT_OK ? "JSON" : "not JSON",
                         tree ? "JSON" : "not JSON");
    }
    for (size_t i = 0; !why && tree && i < npointers; i++) {
        tm_jvalue_from_node(tm_json_pointer_resolve(&ptrs[i], tree),
                            &found_j[i]);
        why = compare_found(d, pointers[i], &found_x[i], &found_j[i]);
    }
    json_decref(tree);
    for (size_t i = 0; i < compiled; i++)
        tm_json_pointer_clear(&ptrs[i]);
    tm_arena_reset(&d->arena_x);
    tm_arena_reset(&d->arena_j);
    return why;
}

/* Pointers to v and its descendants, in document order, into paths
 * (malloc'd; at most max; NULL entries where memory ran out). */
typedef struct path_list {
    char **paths;
    size_t n, max;
} path_list;

static void collect_paths(json_t *v, char *path, size_t len, size_t cap,
                          path_list *l) {
    if (l->n == l->max)
        return;
    l->paths[l->n++] = strndup(path, len);
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            int k = snprintf(path + len, cap - len, "/%zu", i);
            if (k > 0 && (size_t)k < cap - len)
                collect_paths(json_array_get(v, i), path, len + (size_t)k, cap,
                              l);
        }
    } else if (json_is_object(v)) {
        const char *key;
        json_t *member;
        json_object_foreach(v, key, member) {
            size_t k = len;
            if (k < cap)
                path[k++] = '/';
            for (const char *c = key; *c && k + 2 < cap; c++) {
                if (*c == '~' || *c == '/') { /* RFC 6901 escapes */
                    path[k++] = '~';
                    path[k++] = *c == '~' ? '0' : '1';
                } else {
                    path[k++] = *c;
                }
            }
            if (k + 2 < cap)
                collect_paths(member, path, k, cap, l);
        }
    }
}

const char *tm_diff_check_own_paths(tm_diff *d, const char *doc, size_t n,
                                    size_t max) {
    json_t *tree = json_loadb(doc, n, JSON_DECODE_ANY, NULL);
    if (!tree)
        return NULL;
    char path[512];
    path_list l = {calloc(max ? max : 1, sizeof(char *)), 0, max};
    const char *why = l.paths ? NULL : differ(d, "out of memory");
    if (!why)
        collect_paths(tree, path, 0, sizeof path, &l);
    for (size_t i = 0; !why && i < l.n; i++)
        if (!l.paths[i])
            why = differ(d, "out of memory");
    for (size_t i = 0; !why && i < l.n; i += MAX_POINTERS) {
        size_t k = l.n - i < MAX_POINTERS ? l.n - i : MAX_POINTERS;
        why = tm_diff_check_pointers(d, doc, n,
                                     (const char *const *)l.paths + i, k);
    }
    for (size_t i = 0; l.paths && i < l.n; i++)
        free(l.paths[i]);
    free(l.paths);
    json_decref(tree);
    return why;
}

/* ---- whole records ---- */

static const char *OUTCOMES[] = {"ROW", "DEAD_LETTER", "FILTERED"};

static const char *outcome_name(tm_conv_outcome o) {
    return o == TM_CONV_OOM ? "OOM" : OUTCOMES[o];
}

static const char *compare_value(tm_diff *d, const tm_column *col,
                                 const tm_value *x, const tm_value *j) {
    if (x->is_null != j->is_null)
        return differ(d, "column %s: null %d vs %d", col->name, x->is_null,
                      j->is_null);
    if (x->is_null)
        return NULL;
    switch (col->type) {
    case TM_TYPE_TEXT:
    case TM_TYPE_JSON:
    case TM_TYPE_BYTES:
        if (x->v.s.len != j->v.s.len ||
            memcmp(x->v.s.ptr, j->v.s.ptr, x->v.s.len) != 0)
            return differ(d, "column %s: text %.*s vs %.*s", col->name,
                          (int)(x->v.s.len > 200 ? 200 : x->v.s.len),
                          (const char *)x->v.s.ptr,
                          (int)(j->v.s.len > 200 ? 200 : j->v.s.len),
                          (const char *)j->v.s.ptr);
        return NULL;
    case TM_TYPE_FLOAT:
        if (memcmp(&x->v.f, &j->v.f, sizeof x->v.f) != 0)
            return differ(d, "column %s: float %.17g vs %.17g", col->name,
                          x->v.f, j->v.f);
        return NULL;
    case TM_TYPE_INT:
    case TM_TYPE_BOOL:
    case TM_TYPE_TIMESTAMP:
        if (x->v.i != j->v.i)
            return differ(d, "column %s: %lld vs %lld", col->name,
                          (long long)x->v.i, (long long)j->v.i);
        return NULL;
    }
    return differ(d, "column %s: unknown type", col->name);
}

static const char *compare_record(tm_diff *d, const diff_config *c,
                                  const char *doc, size_t n) {
    tm_conv_input in = {.topic = "t",
                        .offset = 1,
                        .timestamp_ms = -1,
                        .value = doc,
                        .value_len = n};
    tm_conv_result rx, rj;
    tm_conv_outcome ox = tm_convert(c->extractor, &d->arena_x, &in, &rx);
    tm_conv_outcome oj = tm_convert(c->jansson, &d->arena_j, &in, &rj);
    if (ox != oj)
        return differ(d, "outcome %s vs %s (jansson's detail: %s)",
                      outcome_name(ox), outcome_name(oj),
                      oj == TM_CONV_DEAD_LETTER ? rj.detail : "-");
    if (ox == TM_CONV_DEAD_LETTER &&
        (rx.reason != rj.reason || strcmp(rx.detail, rj.detail) != 0))
        return differ(d, "dead letter %d \"%s\" vs %d \"%s\"", (int)rx.reason,
                      rx.detail, (int)rj.reason, rj.detail);
    for (size_t i = 0; ox == TM_CONV_ROW && i < c->cfg->mapping.ncolumns; i++) {
        const char *why = compare_value(d, &c->cfg->mapping.columns[i],
                                        &rx.values[i], &rj.values[i]);
        if (why)
            return why;
    }
    return NULL;
}

const char *tm_diff_check(tm_diff *d, const char *doc, size_t n) {
    const char *why =
        tm_diff_check_pointers(d, doc, n, d->pointers, d->npointers);
    json_t *tree = json_loadb(doc, n, JSON_DECODE_ANY, NULL);
    if (tree)
        d->valid++;
    else
        d->invalid++;
    json_decref(tree);
    for (size_t i = 0; !why && i < d->nconfigs; i++) {
        why = compare_record(d, &d->configs[i], doc, n);
        if (why) {
            char first[sizeof d->why];
            snprintf(first, sizeof first, "config %zu: %s", i, why);
            why = differ(d, "%s", first);
        }
        tm_arena_reset(&d->arena_x);
        tm_arena_reset(&d->arena_j);
    }
    return why;
}
