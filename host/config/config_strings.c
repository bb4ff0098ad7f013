/* String vectors, shared by interpolation (which builds resolved values)
 * and the section loaders (which collect names). */
#include "config/config_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int cfg_str_push(char ***v, size_t *n, const char *s, size_t len) {
    char **nv = *v;
    /* The capacity is implied by *n (the next power of two): the vector
     * doubles when *n is 0 or a power of two, so that n pushes copy O(n)
     * pointers, not O(n^2) (30 000 dedup keys cost seconds that way). */
    if ((*n & (*n - 1)) == 0) {
        size_t cap = *n ? *n * 2 : 1;
        if (cap > SIZE_MAX / sizeof *nv ||
            !(nv = realloc(*v, cap * sizeof *nv)))
            return -1;
        *v = nv;
    }
    char *c = malloc(len + 1);
    if (!c)
        return -1;
    memcpy(c, s, len);
    c[len] = '\0';
    nv[(*n)++] = c;
    return 0;
}
