/* Two walkers share the grammar. walk_value follows the pointers: it
 * recurses into a container only while some pointer's tokens match the
 * path so far, so its depth is bounded by the longest pointer.
 * skip_value checks a value no pointer leads into without recursion (its
 * open containers on a small stack), which keeps a 2048-deep document from
 * costing 2048 C frames. matched[i] is how many of pointer i's tokens the
 * current path matches; the path of a value at depth d has d - 1 steps, so
 * pointer i leads through it while matched[i] == d - 1. */
#include "convert/json_extract.h"

#include <string.h>

#include "convert/json_lex.h"

typedef struct walker {
    const char *p, *end;
    const tm_json_pointer *ptrs;
    size_t nptrs;
    size_t *matched;
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

/* A string, number, true, false or null at w->p. */
static int scalar(walker *w) {
    int escaped;
    tm_json_number num;
    const char *q;
    const literal_word *lit = literal_at(*w->p);
    if (lit)
        return literal(w, lit);
    switch (*w->p) {
    case '"':
        if (!(q = tm_json_scan_string(w->p + 1, w->end, &escaped)))
            return TM_EXTRACT_INVALID;
        w->p = q;
        return TM_EXTRACT_OK;
    default:
        if (*w->p != '-' && (*w->p < '0' || *w->p > '9'))
            return TM_EXTRACT_INVALID;
        if (!(q = tm_json_scan_number(w->p, w->end, &num)))
            return TM_EXTRACT_INVALID;
        if (num.is_real && num.may_overflow) {
            double unused;
            int rc = tm_json_real_value(w->p, (size_t)(q - w->p), &unused);
            if (rc != 0)
                return rc < 0 ? TM_EXTRACT_OOM : TM_EXTRACT_INVALID;
        }
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
    if ((rc = scalar(w)) != TM_EXTRACT_OK)
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
    *f = (tm_jvalue){.present = 1, .text = start, .len = (size_t)(end - start)};
    tm_json_number num;
    const literal_word *lit = literal_at(*start);
    if (lit) {
        f->kind = lit->kind;
        f->len = lit->len;
        return TM_EXTRACT_OK;
    }
    switch (*start) {
    case '{': f->kind = JSON_OBJECT; return TM_EXTRACT_OK;
    case '[': f->kind = JSON_ARRAY; return TM_EXTRACT_OK;
    case '"':
        f->kind = JSON_STRING;
        f->text = start + 1;
        f->len -= 2;
        f->escaped = memchr(f->text, '\\', f->len) != NULL;
        return TM_EXTRACT_OK;
    default:
        f->len = (size_t)(tm_json_scan_number(start, end, &num) - start);
        if (!num.is_real) {
            f->kind = JSON_INTEGER;
            f->integer = num.integer;
            return TM_EXTRACT_OK;
        }
        f->kind = JSON_REAL;
        return tm_json_real_value(start, f->len, &f->real) == 0
                   ? TM_EXTRACT_OK
                   : TM_EXTRACT_OOM; /* an overflow was refused before */
    }
}

/* Pointers that lead through the current path and name a child at depth
 * `depth` + 1 (by key when key is set, else by index) move one token on;
 * a child found again (a duplicate key) forgets what was found in the
 * earlier one. Whether any did. */
static int enter_child(walker *w, size_t depth, const char *key, size_t len,
                       int escaped, long long index) {
    int any = 0;
    for (size_t i = 0; i < w->nptrs; i++) {
        const tm_json_pointer *ptr = &w->ptrs[i];
        if (w->matched[i] != depth - 1 || ptr->ntokens < depth)
            continue;
        size_t t = depth - 1;
        if (key ? !tm_json_string_equals(key, len, escaped, ptr->tokens[t],
                                         ptr->lens[t])
                : ptr->indexes[t] != index)
            continue;
        w->matched[i] = depth;
        w->found[i].present = 0;
        any = 1;
    }
    return any;
}

/* After the child text[start..w->p): pointers that named it take it, and
 * every pointer that entered it steps back out. */
static int leave_child(walker *w, size_t depth, const char *start) {
    for (size_t i = 0; i < w->nptrs; i++) {
        if (w->matched[i] != depth)
            continue;
        w->matched[i] = depth - 1;
        if (w->ptrs[i].ntokens == depth) {
            int rc = capture(&w->found[i], start, w->p);
            if (rc != TM_EXTRACT_OK)
                return rc;
        }
    }
    return TM_EXTRACT_OK;
}

static int walk_value(walker *w, size_t depth);

/* A child value at depth + 1, walked when a pointer entered it. */
static int child(walker *w, size_t depth, int entered) {
    const char *start = w->p;
    int rc = entered ? walk_value(w, depth + 1) : skip_value(w, depth + 1);
    if (rc == TM_EXTRACT_OK && entered)
        rc = leave_child(w, depth, start);
    return rc;
}

/* The object or array at w->p, at depth `depth`: its members (by key) or
 * elements (by index) one by one. */
static int walk_container(walker *w, size_t depth) {
    char close = *w->p++ == '{' ? '}' : ']';
    skip_ws(w);
    if (eat(w, close))
        return TM_EXTRACT_OK;
    for (long long index = 0;; index++) {
        const char *key = NULL;
        size_t len = 0;
        int escaped = 0, rc = TM_EXTRACT_OK;
        if (close == '}')
            rc = member_key(w, &key, &len, &escaped);
        if (rc == TM_EXTRACT_OK)
            rc = child(w, depth,
                       enter_child(w, depth, key, len, escaped, index));
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

/* The value at w->p at depth `depth`, following the pointers that lead
 * through it into its children. */
static int walk_value(walker *w, size_t depth) {
    int leads_in = 0;
    for (size_t i = 0; i < w->nptrs && !leads_in; i++)
        leads_in = w->matched[i] == depth - 1 && w->ptrs[i].ntokens >= depth;
    if (!leads_in || w->p == w->end || depth > JSON_PARSER_MAX_DEPTH)
        return skip_value(w, depth);
    if (*w->p == '{' || *w->p == '[')
        return walk_container(w, depth);
    return skip_value(w, depth);
}

int tm_json_extract(const char *text, size_t n, const tm_json_pointer *ptrs,
                    size_t nptrs, size_t *matched, tm_jvalue *found) {
    walker w = {text, text + n, ptrs, nptrs, matched, found};
    for (size_t i = 0; i < nptrs; i++) {
        matched[i] = 0;
        found[i].present = 0;
    }
    skip_ws(&w);
    const char *start = w.p;
    int rc = walk_value(&w, 1);
    for (size_t i = 0; rc == TM_EXTRACT_OK && i < nptrs; i++)
        if (ptrs[i].ntokens == 0)
            rc = capture(&found[i], start, w.p);
    if (rc != TM_EXTRACT_OK)
        return rc;
    skip_ws(&w);
    return w.p == w.end ? TM_EXTRACT_OK : TM_EXTRACT_INVALID;
}
