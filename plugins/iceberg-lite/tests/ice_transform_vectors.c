/* The plugin's partition transforms on values given on stdin, for
 * judge_partition.py to compare with pyiceberg's own transforms. One line
 * a value: TYPE TRANSFORM VALUE, TYPE long, timestamptz, string or binary,
 * VALUE decimal (long, timestamptz) or hex bytes (string, binary, "-" for
 * none). Prints the partition value: decimal for an int or long result,
 * hex for string and binary results. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pspec.h"

static uint64_t get_varint(const uint8_t **p, const uint8_t *end) {
    uint64_t u = 0;
    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t c = *(*p)++;
        u |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            break;
    }
    return u;
}

static int64_t get_long(const uint8_t **p, const uint8_t *end) {
    uint64_t u = get_varint(p, end);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static int unhex(const char *s, uint8_t *out, size_t *n) {
    size_t len = strcmp(s, "-") == 0 ? 0 : strlen(s);
    if (len % 2)
        return -1;
    for (size_t i = 0; i < len / 2; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return -1;
        out[i] = (uint8_t)v;
    }
    *n = len / 2;
    return 0;
}

int main(void) {
    char type[32], tr[64], value[4096];
    static uint8_t bytes[2048];
    while (scanf("%31s %63s %4095s", type, tr, value) == 3) {
        json_t *schema = json_pack("[{s:i, s:s, s:s, s:b}]", "id", 1, "name",
                                   "c", "type", type, "required", 1);
        json_t *fields =
            json_pack("[{s:i, s:i, s:s, s:s}]", "source-id", 1, "field-id",
                      1000, "name", "p", "transform", tr);
        ice_pspec spec;
        char why[512];
        if (!schema || !fields ||
            ice_pspec_build(schema, fields, &spec, why, sizeof why) != 0) {
            fprintf(stderr, "%s %s: %s\n", type, tr, why);
            return 1;
        }
        pq_cell cell = {0};
        size_t n = 0;
        if (strcmp(type, "long") == 0 || strcmp(type, "timestamptz") == 0) {
            cell.i = strtoll(value, NULL, 10);
        } else if (unhex(value, bytes, &n) == 0) {
            cell.p = bytes;
            cell.n = n;
        } else {
            fprintf(stderr, "bad hex %s\n", value);
            return 1;
        }
        ib_buf out = {0};
        ice_partition_encode(&spec, &cell, &out);
        const uint8_t *p = out.p, *end = out.p + out.len;
        (void)get_long(&p, end); /* the union branch: 1, a value */
        if (strncmp(tr, "truncate", 8) == 0 && strcmp(type, "long") != 0) {
            int64_t len = get_long(&p, end);
            for (int64_t i = 0; i < len; i++)
                printf("%02x", p[i]);
            printf("\n");
        } else {
            printf("%lld\n", (long long)get_long(&p, end));
        }
        ib_buf_free(&out);
        ice_pspec_free(&spec);
        json_decref(schema);
        json_decref(fields);
    }
    return 0;
}
