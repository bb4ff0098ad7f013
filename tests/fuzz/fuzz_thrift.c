/* libFuzzer target: any bytes as a Thrift compact struct (a Parquet footer
 * or page header). The first byte picks how: skipped whole with tr_skip,
 * or walked field by field the way parquet_reader.c reads (binaries read
 * byte by byte, nested structs walked, anything else skipped). */
#include <stddef.h>
#include <stdint.h>

#include "thrift_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

static void walk(tr_reader *t, int depth) {
    int16_t id;
    int type;
    tr_struct_begin(t);
    while (tr_field(t, &id, &type) == 1) {
        const uint8_t *p;
        size_t n;
        switch (type) {
        case TC_BINARY:
            tr_binary(t, &p, &n);
            for (size_t i = 0; i < n; i++)
                sink += p[i];
            break;
        case TC_I16:
        case TC_I32:
        case TC_I64: sink += (uint64_t)tr_int(t); break;
        case TC_TRUE:
        case TC_FALSE: sink += (uint64_t)tr_bool(t); break;
        case TC_STRUCT:
            if (depth < 8) {
                walk(t, depth + 1);
                break;
            }
            /* fall through */
        default: tr_skip(t, type);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    tr_reader t;
    tr_init(&t, data + 1, size - 1);
    if (data[0] & 1)
        tr_skip(&t, TC_STRUCT);
    else
        walk(&t, 0);
    return 0;
}
