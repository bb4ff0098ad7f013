/* Thrift compact protocol writer (see thrift_compact.h). */
#include <string.h>

#include "thrift_compact.h"

void tc_init(tc_writer *w, ib_buf *out) {
    memset(w, 0, sizeof *w);
    w->out = out;
}

void tc_struct_begin(tc_writer *w) {
    if (w->depth >= TC_MAX_DEPTH) {
        w->err = 1;
        return;
    }
    w->last[w->depth++] = 0;
}

void tc_struct_end(tc_writer *w) {
    if (w->depth <= 0) {
        w->err = 1;
        return;
    }
    ib_buf_byte(w->out, TC_STOP);
    w->depth--;
}

/* The field header: a delta of 1..15 from the previous id shares the byte
 * with the type; anything else is the type byte then the id as i16. */
static void field_header(tc_writer *w, int16_t id, int type) {
    if (w->depth <= 0) {
        w->err = 1;
        return;
    }
    int16_t *last = &w->last[w->depth - 1];
    int delta = id - *last;
    if (delta > 0 && delta <= 15) {
        ib_buf_byte(w->out, (uint8_t)(delta << 4 | type));
    } else {
        ib_buf_byte(w->out, (uint8_t)type);
        ib_buf_zigzag(w->out, id);
    }
    *last = id;
}

void tc_field_i32(tc_writer *w, int16_t id, int32_t v) {
    field_header(w, id, TC_I32);
    ib_buf_zigzag(w->out, v);
}

void tc_field_i64(tc_writer *w, int16_t id, int64_t v) {
    field_header(w, id, TC_I64);
    ib_buf_zigzag(w->out, v);
}

void tc_field_bool(tc_writer *w, int16_t id, int v) {
    /* A bool field's value is its type code. */
    field_header(w, id, v ? TC_TRUE : TC_FALSE);
}

void tc_field_binary(tc_writer *w, int16_t id, const void *p, size_t n) {
    field_header(w, id, TC_BINARY);
    ib_buf_uvarint(w->out, n);
    ib_buf_add(w->out, p, n);
}

void tc_field_string(tc_writer *w, int16_t id, const char *s) {
    tc_field_binary(w, id, s, strlen(s));
}

void tc_field_struct(tc_writer *w, int16_t id) {
    field_header(w, id, TC_STRUCT);
    tc_struct_begin(w);
}

void tc_field_list(tc_writer *w, int16_t id, int elem, size_t n) {
    field_header(w, id, TC_LIST);
    if (n < 15) {
        ib_buf_byte(w->out, (uint8_t)(n << 4 | (size_t)elem));
    } else {
        ib_buf_byte(w->out, (uint8_t)(0xf0 | elem));
        ib_buf_uvarint(w->out, n);
    }
}

void tc_i32(tc_writer *w, int32_t v) {
    ib_buf_zigzag(w->out, v);
}

void tc_string(tc_writer *w, const char *s) {
    ib_buf_uvarint(w->out, strlen(s));
    ib_buf_str(w->out, s);
}
