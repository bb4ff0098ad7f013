/* The words and the count of stopped partitions (part_stop.h). */
#include "commit/part_stop.h"

#include <stdio.h>
#include <string.h>

#include "convert/bytes_json.h"

void tm_part_stop_words(char *out, size_t size, const char *words) {
    snprintf(out, size, "%s", words ? words : "?");
    /* Cut to its buffer maybe inside a character. */
    size_t n = strlen(out);
    for (int k = 0; k < 4 && n > 0 && !tm_utf8_valid(out, n); k++)
        out[--n] = '\0';
}

void tm_part_stop_clear(tm_part *p) {
    p->stopped = p->stop_held = 0;
    p->stop_at = 0;
    p->stop_wall_ms = 0;
    p->stop_why[0] = '\0';
}

const tm_part *tm_part_stop_first(const tm_connector *c, size_t *count) {
    const tm_part *first = NULL;
    *count = 0;
    for (size_t i = 0; i < c->nparts; i++)
        if (c->parts[i].stopped) {
            if (!first)
                first = &c->parts[i];
            ++*count;
        }
    return first;
}
