/* libFuzzer target: any bytes as an Avro container file of the
 * iceberg-lite sink: the header's metadata, then the records decoded as a
 * manifest list and as a manifest (manifest.c, what scan and every commit
 * read back), and generically (long, bytes, bool, double in turn). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "avro_reader.h"
#include "manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

static void generic(const uint8_t *data, size_t size) {
    av_reader r;
    if (av_read_open(&r, data, size) != 0)
        return;
    static const char *const KEYS[] = {"avro.schema", "avro.codec", "schema",
                                       "content", "format-version"};
    const uint8_t *v;
    size_t n;
    for (size_t k = 0; k < sizeof KEYS / sizeof KEYS[0]; k++)
        if (av_read_meta(&r, KEYS[k], &v, &n) == 0)
            for (size_t i = 0; i < n; i++)
                sink += v[i];
    for (int i = 0; av_read_next(&r) == 1; i++) {
        sink += (uint64_t)av_get_long(&r);
        av_get_bytes(&r, &v, &n);
        for (size_t j = 0; j < n; j++)
            sink += v[j];
        sink += (uint64_t)av_get_bool(&r);
        double d = av_get_double(&r);
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits); /* NaN has no integer value */
        sink += bits;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    generic(data, size);
    ice_mfile *mf;
    size_t nmf;
    if (ice_manifest_list_decode(data, size, &mf, &nmf) == 0)
        ice_mfiles_free(mf, nmf);
    ice_mfile list_entry = {.seq = 3, .min_seq = 1, .added_snapshot_id = 42};
    ice_datafile *files = NULL;
    size_t n = 0, cap = 0;
    (void)ice_manifest_decode(data, size, &list_entry, &files, &n, &cap);
    ice_datafiles_free(files, n);
    return 0;
}
