#include "convert/headers_json.h"

#include <string.h>

#include "convert/bytes_json.h"

json_t *tm_headers_json(const tm_header_view *h, size_t n) {
    json_t *arr = json_array();
    if (!arr)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        const char *name = h[i].name ? h[i].name : "";
        json_t *pair = json_array();
        /* The append_new calls take the reference even on failure. */
        if (!pair || json_array_append_new(arr, pair) != 0 ||
            json_array_append_new(pair, tm_bytes_json(name, strlen(name))) !=
                0 ||
            json_array_append_new(
                pair, h[i].value ? tm_bytes_json(h[i].value, h[i].len)
                                 : json_null()) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

int tm_headers_json_text(const tm_header_view *h, size_t n, char **out) {
    *out = NULL;
    if (n == 0)
        return 0;
    json_t *arr = tm_headers_json(h, n);
    if (!arr)
        return -1;
    *out = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    return *out ? 0 : -1;
}
