/* libFuzzer target: any bytes as a connector config, through
 * tm_config_load_string: the JSON, ${env:NAME} and ${file:PATH}
 * interpolation, every section's validation and its error lines, then
 * redaction of the resolved secrets.
 *
 * ${file:PATH} opens PATH as written, so inputs must not name real files:
 * when the JSON parses and a string value holds "${file:", every such
 * PATH is rewritten to a file name inside the target's temp directory
 * ('/' made '_', so no "..", no absolute path leaves it) and the tree is
 * serialized again for the loader; one such file exists (f-secret), so
 * both a resolved and a missing file are reached. Inputs without it, or
 * that are not JSON, go to the loader as they are. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/connector_config.h"
#include "fuzz_tmp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FILE_REF "${file:"

/* S with each ${file:PATH} made ${file:TMPDIR/f-PATH'}; NULL on memory. */
static char *confine(const char *s) {
    const char *dir = fuzz_tmpdir();
    size_t cap = strlen(s) * (strlen(dir) + 4) + 1, o = 0;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    while (*s) {
        if (strncmp(s, FILE_REF, strlen(FILE_REF)) != 0 ||
            s[strlen(FILE_REF)] == '}' || !s[strlen(FILE_REF)]) {
            out[o++] = *s++;
            continue;
        }
        o += (size_t)sprintf(out + o, "%s%s/f-", FILE_REF, dir);
        s += strlen(FILE_REF);
        for (; *s && *s != '}'; s++)
            out[o++] = *s == '/' ? '_' : *s;
    }
    out[o] = '\0';
    return out;
}

/* Rewrites the string values under V in place: how many were, or -1
 * (drop the input: memory, or not valid UTF-8 after the rewrite). */
static int confine_tree(json_t *v) {
    size_t i;
    const char *k;
    json_t *e;
    int n = 0, rc;
    if (json_is_string(v)) {
        if (!strstr(json_string_value(v), FILE_REF))
            return 0;
        char *s = confine(json_string_value(v));
        rc = s ? json_string_set(v, s) : -1;
        free(s);
        return rc == 0 ? 1 : -1;
    }
    if (json_is_array(v)) {
        json_array_foreach(v, i, e) {
            if ((rc = confine_tree(e)) < 0)
                return -1;
            n += rc;
        }
    }
    if (json_is_object(v)) {
        json_object_foreach(v, k, e) {
            if ((rc = confine_tree(e)) < 0)
                return -1;
            n += rc;
        }
    }
    return n;
}

static void setup(void) {
    static const uint8_t secret[] = "s3cr3t-from-a-file\n";
    char path[512];
    fuzz_path(path, sizeof path, "f-secret");
    fuzz_write(path, secret, sizeof secret - 1);
    setenv("TM_FUZZ_SECRET", "s3cr3t-from-env", 1);
    setenv("TM_FUZZ_EMPTY", "", 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int ready;
    if (!ready) {
        setup();
        ready = 1;
    }
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    /* The loader's own parse (same text, same flags): only a tree it
     * would accept reaches interpolation, and escapes ("\u0024{file:")
     * are decoded by then, so the check is on the tree, not the text. */
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    if (root) {
        int refs = confine_tree(root);
        char *again = refs > 0 ? json_dumps(root, JSON_COMPACT) : NULL;
        json_decref(root);
        if (refs != 0) {
            free(text);
            if (!again)
                return 0;
            text = again;
        }
    }
    tm_config_errors errs = TM_CONFIG_ERRORS_INIT;
    tm_connector_config *cfg = tm_config_load_string(text, "fuzz.json", &errs);
    if (cfg) {
        char out[256];
        tm_config_redact(cfg, "s3cr3t-from-env and s3cr3t-from-a-file", out,
                         sizeof out);
        tm_config_free(cfg);
    }
    tm_config_errors_free(&errs);
    free(text);
    return 0;
}
