/* The pointers are compiled into a tree (a plan): one node per distinct
 * path prefix, its children the distinct next tokens. walk_value follows
 * the plan: inside a container, each member's key (or element's index)
 * is looked up among the children of the container's node, so a record
 * is read once whatever the number of pointers, and a value no pointer
 * leads into is only checked. skip_value checks such a value without
 * recursion (its open containers on a small stack), which keeps a
 * 2048-deep document from costing 2048 C frames; walk_value recurses only
 * as deep as the longest pointer. */
#include "convert/json_extract.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "convert/json_lex.h"

/* One path prefix of the plan. The pointers are kept sorted by their
 * tokens, so those through a node are the contiguous order[lo..hi), and
 * the ones that end there come first (order[lo..lo + nend)). */
typedef struct plan_node {
    const char *token; /* the token leading here from the parent */
    size_t len;
    long long index;
    size_t lo, hi, nend;
    size_t first_child, nchildren; /* children are contiguous in nodes */
    uint64_t len_mask;             /* bit (len % 64) for each child's token */
} plan_node;

struct tm_json_plan {
    const tm_json_pointer *ptrs;
    size_t *order;
    plan_node *nodes;
    size_t nnodes;
};

typedef struct walker {
    const char *p, *end;
    const tm_json_plan *plan;
    tm_jvalue *found;
} walker;

static void skip_ws(walker *w) {
    while (w->p < w->end &&
           (*w->p == ' ' || *w->p == '\t' || *w->p == '\n' || *w->p == '\r'))
        w->p++;
}

/* Whether the next byte is c (then consumed). */
static int eat(walker *w, char c) {
    if (w->p < w->end && *w->p == c) {
        w->p++;
        return 1;
    }
    return 0;
}

/* jansson reads one byte past a number or a true/false/null to see where
 * it ends, and puts it back; a NUL byte put back is lost (its stream
 * takes a 0 in its buffer for "empty" and reads on). So exactly one NUL
 * right after such a token is skipped, and "1\0" is JSON to jansson:
 * skipped here too, or the two would disagree on such records. */
static void skip_lost_nul(walker *w) {
    if (w->p < w->end && *w->p == '\0')
        w->p++;
}

typedef struct literal_word {
    const char *word;
    size_t len;
    json_type kind;
} literal_word;

/* true, false or null by the byte it starts with; NULL for another. */
static const literal_word *literal_at(char c) {
    static const literal_word WORDS[] = {{"true", 4, JSON_TRUE},
                                         {"false", 5, JSON_FALSE},
                                         {"null", 4, JSON_NULL}};
    for (size_t i = 0; i < sizeof WORDS / sizeof WORDS[0]; i++)
        if (WORDS[i].word[0] == c)
            return &WORDS[i];
    return NULL;
}

static int literal(walker *w, const literal_word *lit) {
    if ((size_t)(w->end - w->p) < lit->len ||
        memcmp(w->p, lit->word, lit->len) != 0)
        return TM_EXTRACT_INVALID;
    w->p += lit->len;
    skip_lost_nul(w);
    return TM_EXTRACT_OK;
}

/* A string, number, true, false or null at w->p; when f is set, the
 * value found there (a string's span without its quotes). */
static int scalar(walker *w, tm_jvalue *f) {
    int escaped;
    tm_json_number num;
    const char *start = w->p, *q;
    const literal_word *lit = literal_at(*w->p);
    if (lit) {
        int rc = literal(w, lit);
        if (f && rc == TM_EXTRACT_OK)
            *f = (tm_jvalue){.present = 1,
                             .kind = lit->kind,
                             .text = start,
                             .len = lit->len};
        return rc;
    }
    switch (*w->p) {
    case '"':
        if (!(q = tm_json_scan_string(w->p + 1, w->end, &escaped)))
            return TM_EXTRACT_INVALID;
        w->p = q;
        if (f)
            *f = (tm_jvalue){.present = 1,
                             .kind = JSON_STRING,
                             .text = start + 1,
                             .len = (size_t)(q - start - 2),
                             .escaped = escaped};
        return TM_EXTRACT_OK;
    default:
        if (*w->p != '-' && (*w->p < '0' || *w->p > '9'))
            return TM_EXTRACT_INVALID;
        if (!(q = tm_json_scan_number(w->p, w->end, &num)))
            return TM_EXTRACT_INVALID;
        double real = 0;
        if (num.is_real && (f || num.may_overflow)) {
            int rc = tm_json_real_value(w->p, (size_t)(q - w->p), &real);
            if (rc != 0)
                return rc < 0 ? TM_EXTRACT_OOM : TM_EXTRACT_INVALID;
        }
        if (f)
            *f = (tm_jvalue){.present = 1,
                             .kind = num.is_real ? JSON_REAL : JSON_INTEGER,
                             .integer = num.integer,
                             .real = real,
                             .text = start,
                             .len = (size_t)(q - start)};
        w->p = q;
        skip_lost_nul(w);
        return TM_EXTRACT_OK;
    }
}

/* An object member's key and its ':' (whitespace after it skipped). *key
 * and *len: the key's text between the quotes. */
static int member_key(walker *w, const char **key, size_t *len, int *escaped) {
    if (!eat(w, '"'))
        return TM_EXTRACT_INVALID;
    const char *q = tm_json_scan_string(w->p, w->end, escaped);
    if (!q)
        return TM_EXTRACT_INVALID;
    *key = w->p;
    *len = (size_t)(q - 1 - w->p);
    w->p = q;
    skip_ws(w);
    if (!eat(w, ':'))
        return TM_EXTRACT_INVALID;
    skip_ws(w);
    return TM_EXTRACT_OK;
}

/* The value at w->p, at depth `depth` (the top level is 1). */
static int skip_value(walker *w, size_t depth) {
    char open[JSON_PARSER_MAX_DEPTH + 1]; /* '{' or '[' per open container */
    size_t top = 0;
    const char *key;
    size_t len;
    int escaped, rc;
value:
    if (depth + top > JSON_PARSER_MAX_DEPTH || w->p == w->end)
        return TM_EXTRACT_INVALID;
    if (*w->p == '{' || *w->p == '[') {
        char c = *w->p++;
        skip_ws(w);
        if (eat(w, c == '{' ? '}' : ']'))
            goto after;
        open[top++] = c;
        if (c == '[')
            goto value;
        goto key;
    }
    if ((rc = scalar(w, NULL)) != TM_EXTRACT_OK)
        return rc;
    goto after;
key:
    if ((rc = member_key(w, &key, &len, &escaped)) != TM_EXTRACT_OK)
        return rc;
    goto value;
after:
    if (top == 0)
        return TM_EXTRACT_OK;
    skip_ws(w);
    if (eat(w, ',')) {
        skip_ws(w);
        if (open[top - 1] == '{')
            goto key;
        goto value;
    }
    if (!eat(w, open[top - 1] == '{' ? '}' : ']'))
        return TM_EXTRACT_INVALID;
    top--;
    goto after;
}

/* found for the value at text[start..end) the extractor accepted (end
 * may be past a lost NUL, which is not part of the value). */
static int capture(tm_jvalue *f, const char *start, const char *end) {
    if (*start == '{' || *start == '[') {
        *f = (tm_jvalue){.present = 1,
                         .kind = *start == '{' ? JSON_OBJECT : JSON_ARRAY,
                         .text = start,
                         .len = (size_t)(end - start)};
        return TM_EXTRACT_OK;
    }
    walker again = {.p = start, .end = end};
    return scalar(&again, f);
}

/* The child of node whose token is the key key[0..len) (escaped as
 * scan said) or, in an array (key NULL), the index; NULL when none.
 * *hint: where the search starts, the child after the one found last, so
 * members in the order of the config's columns are found at once. */
static const plan_node *find_child(const tm_json_plan *plan,
                                   const plan_node *node, const char *key,
                                   size_t len, int escaped, long long index,
                                   size_t *hint) {
    if (key && !escaped && !(node->len_mask >> (len % 64) & 1))
        return NULL;
    size_t at = *hint < node->nchildren ? *hint : 0;
    for (size_t k = 0; k < node->nchildren; k++, at++) {
        if (at == node->nchildren)
            at = 0; /* wrapped around: no division in the loop */
        const plan_node *c = &plan->nodes[node->first_child + at];
        int same;
        if (!key)
            same = c->index == index;
        else if (!escaped)
            same = c->len == len && (!len || c->token[0] == key[0]) &&
                   memcmp(c->token, key, len) == 0;
        else
            same = tm_json_string_equals(key, len, 1, c->token, c->len);
        if (same) {
            *hint = at + 1;
            return c;
        }
    }
    return NULL;
}

static int walk_value(walker *w, const plan_node *node, size_t depth);

/* The child value at w->p (depth + 1) that node c names: what was found
 * under an earlier member of the same key is forgotten (the last one
 * counts), the value is walked, and the pointers ending at c take it. */
static int child(walker *w, const plan_node *c, size_t depth) {
    const tm_json_plan *plan = w->plan;
    for (size_t k = c->lo; k < c->hi; k++)
        w->found[plan->order[k]].present = 0;
    const char *start = w->p;
    if (c->nend && depth < JSON_PARSER_MAX_DEPTH && w->p < w->end &&
        *w->p != '{' && *w->p != '[') {
        /* A scalar some pointer names: read once, given to each. */
        tm_jvalue *first = &w->found[plan->order[c->lo]];
        int rc = scalar(w, first);
        for (size_t k = c->lo + 1; rc == TM_EXTRACT_OK && k < c->lo + c->nend;
             k++)
            w->found[plan->order[k]] = *first;
        return rc;
    }
    int rc = walk_value(w, c, depth + 1);
    for (size_t k = c->lo; rc == TM_EXTRACT_OK && k < c->lo + c->nend; k++)
        rc = capture(&w->found[plan->order[k]], start, w->p);
    return rc;
}

/* The object or array at w->p, at depth `depth`, whose plan node is
 * node: its members (by key) or elements (by index) one by one. */
static int walk_container(walker *w, const plan_node *node, size_t depth) {
    char close = *w->p++ == '{' ? '}' : ']';
    skip_ws(w);
    if (eat(w, close))
        return TM_EXTRACT_OK;
    size_t hint = 0;
    for (long long index = 0;; index++) {
        const char *key = NULL;
        size_t len = 0;
        int escaped = 0, rc = TM_EXTRACT_OK;
        if (close == '}')
            rc = member_key(w, &key, &len, &escaped);
        if (rc == TM_EXTRACT_OK) {
            const plan_node *c =
                find_child(w->plan, node, key, len, escaped, index, &hint);
            rc = c ? child(w, c, depth) : skip_value(w, depth + 1);
        }
        if (rc != TM_EXTRACT_OK)
            return rc;
        skip_ws(w);
        if (eat(w, close))
            return TM_EXTRACT_OK;
        if (!eat(w, ','))
            return TM_EXTRACT_INVALID;
        skip_ws(w);
    }
}

/* The value at w->p at depth `depth`, following the plan from node into
 * its children. */
static int walk_value(walker *w, const plan_node *node, size_t depth) {
    if (node->nchildren == 0 || w->p == w->end ||
        depth > JSON_PARSER_MAX_DEPTH || (*w->p != '{' && *w->p != '['))
        return skip_value(w, depth);
    return walk_container(w, node, depth);
}

int tm_json_extract(const tm_json_plan *plan, const char *text, size_t n,
                    tm_jvalue *found) {
    walker w = {text, text + n, plan, found};
    for (size_t i = 0; i < plan->nodes[0].hi; i++)
        found[i].present = 0;
    skip_ws(&w);
    const char *start = w.p;
    int rc = walk_value(&w, &plan->nodes[0], 1);
    for (size_t k = 0; rc == TM_EXTRACT_OK && k < plan->nodes[0].nend; k++)
        rc = capture(&found[plan->order[k]], start, w.p);
    if (rc != TM_EXTRACT_OK)
        return rc;
    skip_ws(&w);
    return w.p == w.end ? TM_EXTRACT_OK : TM_EXTRACT_INVALID;
}

/* ---- the plan ---- */

/* Token t of a against token t of b: bytewise, the shorter first when
 * one is the other's start. */
static int token_cmp(const tm_json_pointer *a, const tm_json_pointer *b,
                     size_t t) {
    size_t n = a->lens[t] < b->lens[t] ? a->lens[t] : b->lens[t];
    int d = memcmp(a->tokens[t], b->tokens[t], n);
    if (d)
        return d;
    return (a->lens[t] > b->lens[t]) - (a->lens[t] < b->lens[t]);
}

/* Pointers in token order, a prefix before what it leads to. */
static int pointer_less(const tm_json_pointer *a, const tm_json_pointer *b) {
    for (size_t t = 0; t < a->ntokens && t < b->ntokens; t++) {
        int d = token_cmp(a, b, t);
        if (d)
            return d < 0;
    }
    return a->ntokens < b->ntokens;
}

/* Fills node (its lo, hi and depth set) and, below it, its children,
 * appended to plan->nodes together so that they are contiguous. */
static void build_node(tm_json_plan *plan, size_t at, size_t depth) {
    plan_node *node = &plan->nodes[at];
    const tm_json_pointer *ptrs = plan->ptrs;
    size_t k = node->lo;
    while (k < node->hi && ptrs[plan->order[k]].ntokens == depth)
        k++;
    node->nend = k - node->lo;
    node->first_child = plan->nnodes;
    node->nchildren = 0;
    node->len_mask = 0;
    while (k < node->hi) {
        const tm_json_pointer *p = &ptrs[plan->order[k]];
        size_t run = k + 1;
        while (run < node->hi &&
               token_cmp(p, &ptrs[plan->order[run]], depth) == 0)
            run++;
        plan_node *c = &plan->nodes[plan->nnodes++];
        *c = (plan_node){.token = p->tokens[depth],
                         .len = p->lens[depth],
                         .index = p->indexes[depth],
                         .lo = k,
                         .hi = run};
        node->len_mask |= (uint64_t)1 << (c->len % 64);
        node->nchildren++;
        k = run;
    }
    for (size_t i = 0; i < node->nchildren; i++)
        build_node(plan, node->first_child + i, depth + 1);
}

tm_json_plan *tm_json_plan_new(const tm_json_pointer *ptrs, size_t nptrs) {
    size_t tokens = 0;
    for (size_t i = 0; i < nptrs; i++)
        tokens += ptrs[i].ntokens;
    tm_json_plan *plan = calloc(1, sizeof *plan);
    if (!plan)
        return NULL;
    plan->ptrs = ptrs;
    plan->order = malloc((nptrs + 1) * sizeof *plan->order);
    plan->nodes = malloc((tokens + 1) * sizeof *plan->nodes);
    if (!plan->order || !plan->nodes) {
        tm_json_plan_free(plan);
        return NULL;
    }
    /* Insertion sort: a config has a few dozen pointers at most. */
    for (size_t i = 0; i < nptrs; i++) {
        size_t j = i;
        for (; j > 0 && pointer_less(&ptrs[i], &ptrs[plan->order[j - 1]]); j--)
            plan->order[j] = plan->order[j - 1];
        plan->order[j] = i;
    }
    plan->nodes[0] = (plan_node){.lo = 0, .hi = nptrs};
    plan->nnodes = 1;
    build_node(plan, 0, 0);
    return plan;
}

void tm_json_plan_free(tm_json_plan *plan) {
    if (!plan)
        return;
    free(plan->order);
    free(plan->nodes);
    free(plan);
}
