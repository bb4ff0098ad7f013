/* jansson's dump with TM_CANONICAL_FLAGS, from the text: whitespace goes,
 * strings are written with the escapes jansson writes (\" \\ \b \f \n \r
 * \t, \u00XX in capitals for other control characters, nothing else
 * escaped), integers as their 64-bit value, reals as canonical.c writes
 * a double, and each object's members sorted by key (bytewise, the
 * content not the text), the last of a repeated key kept (jansson
 * replaces a member set twice).
 *
 * An object's members are written in document order, each noting where
 * its "key":value text lies, then copied back in key order: one pass
 * over the text however deep the objects nest. The scratch room starts
 * on the stack, so a record of ordinary size allocates only its result. */
#include "convert/canonical_span.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "convert/canonical.h"
#include "convert/json_lex.h"
#include "services/buf.h"

#define STACK_BYTES   1024
#define STACK_MEMBERS 32
#define SORT_BY_HAND  16 /* members sorted by insertion below this */

/* One member of the object being written. */
typedef struct member {
    const char *key; /* its content: in the text, or (set when sorting)
                        in the decoded keys */
    size_t key_off;  /* in keys, when the key has escapes */
    size_t key_len;
    int decoded;
    size_t ordinal; /* in the object: the later of equal keys wins */
    size_t at, len; /* its "key":value text in out */
} member;

typedef struct canon {
    const char *p, *end;
    tm_buf out;     /* the text written */
    tm_buf keys;    /* escaped keys' contents, for sorting */
    tm_buf members; /* member entries of the open objects */
    tm_buf tmp;     /* an object's members while they are put in order */
} canon;

static void skip_ws(canon *c) {
    while (c->p < c->end &&
           (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* A NUL right after a number or a literal is not part of the text
 * (json_extract.c, skip_lost_nul, says why jansson skips it). */
static void skip_lost_nul(canon *c) {
    if (c->p < c->end && *c->p == '\0')
        c->p++;
}

/* content[0..n) as a JSON string, escaped as jansson escapes it. */
static int put_escaped(tm_buf *g, const char *content, size_t n) {
    static const char HEX[] = "0123456789ABCDEF";
    if (n > (SIZE_MAX - 2) / 6 || tm_buf_reserve(g, 6 * n + 2) != 0)
        return -1;
    char *o = g->p + g->n;
    *o++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)content[i];
        if (b >= 0x20 && b != '"' && b != '\\') {
            *o++ = (char)b;
            continue;
        }
        *o++ = '\\';
        switch (b) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\b': *o++ = 'b'; break;
        case '\f': *o++ = 'f'; break;
        case '\n': *o++ = 'n'; break;
        case '\r': *o++ = 'r'; break;
        case '\t': *o++ = 't'; break;
        default:
            memcpy(o, "u00", 3);
            o[3] = HEX[b >> 4];
            o[4] = HEX[b & 0xF];
            o += 5;
        }
    }
    *o++ = '"';
    g->n = (size_t)(o - g->p);
    return 0;
}

/* raw[0..n) (a string's text between its quotes) decoded onto the end of
 * keys: its offset there. */
static int decode_onto(tm_buf *keys, const char *raw, size_t n, size_t *off) {
    if (tm_buf_reserve(keys, n) != 0)
        return -1;
    *off = keys->n;
    keys->n += tm_json_decode_string(raw, n, keys->p + keys->n);
    return 0;
}

/* The string whose text (between the quotes) is raw[0..n). Without
 * escapes the text has no byte jansson would escape: it is its own
 * canonical form. */
static int put_string(canon *c, const char *raw, size_t n, int escaped) {
    if (!escaped) {
        if (tm_buf_reserve(&c->out, n + 2) != 0)
            return -1;
        c->out.p[c->out.n++] = '"';
        memcpy(c->out.p + c->out.n, raw, n);
        c->out.n += n;
        c->out.p[c->out.n++] = '"';
        return 0;
    }
    size_t mark = c->keys.n, off;
    if (decode_onto(&c->keys, raw, n, &off) != 0)
        return -1;
    int rc = put_escaped(&c->out, c->keys.p + off, c->keys.n - off);
    c->keys.n = mark;
    return rc;
}

/* The string at c->p (its opening quote): *raw, *n its text. */
static int scan_string(canon *c, const char **raw, size_t *n, int *escaped) {
    const char *q = tm_json_scan_string(c->p + 1, c->end, escaped);
    if (!q)
        return -1; /* the extractor accepted it: not reached */
    *raw = c->p + 1;
    *n = (size_t)(q - 1 - *raw);
    c->p = q;
    return 0;
}

static int put_number(canon *c) {
    tm_json_number num;
    const char *q = tm_json_scan_number(c->p, c->end, &num);
    if (!q)
        return -1; /* the extractor accepted it: not reached */
    char text[TM_CANONICAL_NUMBER_MAX];
    size_t len;
    if (!num.is_real) {
        len = tm_canonical_integer(num.integer, text);
    } else {
        double d;
        if (tm_json_real_value(c->p, (size_t)(q - c->p), &d) != 0)
            return -1; /* OOM; an overflow was refused before */
        len = tm_canonical_real(d, text);
        if (!len)
            return -1;
    }
    c->p = q;
    skip_lost_nul(c);
    return tm_buf_put(&c->out, text, len);
}

static int put_value(canon *c);

static int member_less(const member *x, const member *y) {
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int d = memcmp(x->key, y->key, n);
    if (d != 0)
        return d < 0;
    if (x->key_len != y->key_len)
        return x->key_len < y->key_len;
    return x->ordinal < y->ordinal;
}

static int member_cmp(const void *a, const void *b) {
    return member_less(a, b) ? -1 : member_less(b, a) ? 1 : 0;
}

static void sort_members(member *m, size_t n) {
    if (n >= SORT_BY_HAND) {
        qsort(m, n, sizeof *m, member_cmp);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        member x = m[i];
        size_t j = i;
        for (; j > 0 && member_less(&x, &m[j - 1]); j--)
            m[j] = m[j - 1];
        m[j] = x;
    }
}

/* The object's members m[0..n), written after its '{' at out[start..),
 * written again in key order, comma-separated, one per key. */
static int order_members(canon *c, member *m, size_t n, size_t start) {
    for (size_t i = 0; i < n; i++)
        if (m[i].decoded)
            m[i].key = c->keys.p + m[i].key_off;
    sort_members(m, n);
    c->tmp.n = 0;
    if (tm_buf_put(&c->tmp, c->out.p + start, c->out.n - start) != 0)
        return -1;
    c->out.n = start;
    for (size_t i = 0, k = 0; i < n; i++) {
        if (i + 1 < n && m[i].key_len == m[i + 1].key_len &&
            memcmp(m[i].key, m[i + 1].key, m[i].key_len) == 0)
            continue; /* a later member has this key */
        if (k++ && tm_buf_put(&c->out, ",", 1) != 0)
            return -1;
        if (tm_buf_put(&c->out, c->tmp.p + (m[i].at - start), m[i].len) != 0)
            return -1;
    }
    return 0;
}

/* One member at c->p (its key's opening quote) as "key":value, noted in
 * members. */
static int put_member(canon *c, size_t ordinal) {
    member m = {.ordinal = ordinal, .at = c->out.n};
    const char *raw;
    size_t n;
    int escaped;
    if (scan_string(c, &raw, &n, &escaped) != 0 ||
        put_string(c, raw, n, escaped) != 0 || tm_buf_put(&c->out, ":", 1) != 0)
        return -1;
    if (escaped) {
        m.decoded = 1;
        if (decode_onto(&c->keys, raw, n, &m.key_off) != 0)
            return -1;
        m.key_len = c->keys.n - m.key_off;
    } else {
        m.key = raw;
        m.key_len = n;
    }
    skip_ws(c);
    c->p++; /* ':' */
    skip_ws(c);
    if (put_value(c) != 0)
        return -1;
    m.len = c->out.n - m.at;
    return tm_buf_put(&c->members, (const char *)&m, sizeof m);
}

static int put_object(canon *c) {
    size_t members_mark = c->members.n, keys_mark = c->keys.n;
    c->p++;
    if (tm_buf_put(&c->out, "{", 1) != 0)
        return -1;
    size_t start = c->out.n, n = 0;
    skip_ws(c);
    while (c->p < c->end && *c->p == '"') {
        if (put_member(c, n++) != 0)
            return -1;
        skip_ws(c);
        if (c->p < c->end && *c->p == ',')
            c->p++;
        skip_ws(c);
    }
    c->p++; /* '}' */
    member *m = (member *)(void *)(c->members.p + members_mark);
    if (n > 1 && order_members(c, m, n, start) != 0)
        return -1;
    c->members.n = members_mark;
    c->keys.n = keys_mark;
    return tm_buf_put(&c->out, "}", 1);
}

static int put_array(canon *c) {
    c->p++;
    if (tm_buf_put(&c->out, "[", 1) != 0)
        return -1;
    skip_ws(c);
    for (size_t k = 0; c->p < c->end && *c->p != ']'; k++) {
        if ((k && tm_buf_put(&c->out, ",", 1) != 0) || put_value(c) != 0)
            return -1;
        skip_ws(c);
        if (c->p < c->end && *c->p == ',')
            c->p++;
        skip_ws(c);
    }
    c->p++; /* ']' */
    return tm_buf_put(&c->out, "]", 1);
}

static int put_literal(canon *c, const char *word, size_t len) {
    c->p += len;
    skip_lost_nul(c);
    return tm_buf_put(&c->out, word, len);
}

static int put_value(canon *c) {
    const char *raw;
    size_t n;
    int escaped;
    if (c->p == c->end)
        return -1; /* the extractor accepted the text: not reached */
    switch (*c->p) {
    case '{': return put_object(c);
    case '[': return put_array(c);
    case '"':
        return scan_string(c, &raw, &n, &escaped) != 0
                   ? -1
                   : put_string(c, raw, n, escaped);
    case 't': return put_literal(c, "true", 4);
    case 'f': return put_literal(c, "false", 5);
    case 'n': return put_literal(c, "null", 4);
    default: return put_number(c);
    }
}

int tm_canonical_span(const char *text, size_t n, tm_arena *a, const char **out,
                      size_t *len) {
    char out_room[STACK_BYTES], keys_room[STACK_BYTES], tmp_room[STACK_BYTES];
    member members_room[STACK_MEMBERS];
    canon c = {.p = text,
               .end = text + n,
               .out = TM_BUF_ON(out_room),
               .keys = TM_BUF_ON(keys_room),
               .members = TM_BUF_ON(members_room),
               .tmp = TM_BUF_ON(tmp_room)};
    skip_ws(&c);
    int rc = put_value(&c);
    if (rc == 0) {
        *len = c.out.n;
        *out = tm_arena_strndup(a, c.out.p, c.out.n);
        rc = *out ? 0 : -1;
    }
    tm_buf_free(&c.out);
    tm_buf_free(&c.keys);
    tm_buf_free(&c.members);
    tm_buf_free(&c.tmp);
    return rc;
}
