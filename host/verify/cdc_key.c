#include "verify/cdc_key.h"

#include "convert/canonical.h"

/* More key columns than this are not told apart (none is near it). */
#define KEY_MAX 64

char *tm_verify_cdc_key(const tm_column *columns, size_t ncolumns,
                        const tm_value *values) {
    tm_column cols[KEY_MAX];
    tm_value vals[KEY_MAX];
    size_t n = 0;
    for (size_t i = 0; i < ncolumns && n < KEY_MAX; i++) {
        if (!columns[i].key)
            continue;
        cols[n] = columns[i];
        vals[n] = values[i];
        if (cols[n].type == TM_TYPE_FLOAT && !vals[n].is_null &&
            vals[n].v.f == 0.0)
            vals[n].v.f = 0.0; /* -0.0 too */
        n++;
    }
    return tm_canonical_array(cols, vals, NULL, n);
}
