#include "metrics/prom_text.h"

#include <inttypes.h>
#include <math.h>

void tm_prom_family(FILE *out, const char *name, const char *type,
                    const char *help) {
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void tm_prom_label_value(FILE *out, const char *value) {
    fputc('"', out);
    for (const char *p = value; *p; p++) {
        if (*p == '\\')
            fputs("\\\\", out);
        else if (*p == '"')
            fputs("\\\"", out);
        else if (*p == '\n')
            fputs("\\n", out);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static void labels_out(FILE *out, const char *name, const char *const *labels,
                       int nlabels) {
    fputs(name, out);
    if (nlabels <= 0)
        return;
    fputc('{', out);
    for (int i = 0; i < nlabels; i++) {
        fprintf(out, "%s%s=", i ? "," : "", labels[2 * i]);
        tm_prom_label_value(out, labels[2 * i + 1]);
    }
    fputc('}', out);
}

void tm_prom_sample(FILE *out, const char *name, const char *const *labels,
                    int nlabels, double value) {
    labels_out(out, name, labels, nlabels);
    if (isinf(value))
        fputs(value > 0 ? " +Inf\n" : " -Inf\n", out);
    else if (isnan(value))
        fputs(" NaN\n", out);
    else
        fprintf(out, " %.15g\n", value);
}

void tm_prom_sample_u64(FILE *out, const char *name, const char *const *labels,
                        int nlabels, uint64_t value) {
    labels_out(out, name, labels, nlabels);
    fprintf(out, " %" PRIu64 "\n", value);
}
