/* The kit's --config file: {"settings": {...}, "columns": [...]}. Without
 * one: settings {"path": "${tmpdir}"} and columns id int, body text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"
#include "kit_config.h"

static const struct {
    const char *name;
    tm_type type;
} TYPES[] = {{"text", TM_TYPE_TEXT},           {"int", TM_TYPE_INT},
             {"float", TM_TYPE_FLOAT},         {"bool", TM_TYPE_BOOL},
             {"timestamp", TM_TYPE_TIMESTAMP}, {"json", TM_TYPE_JSON},
             {"bytes", TM_TYPE_BYTES}};

static int add_column(kit_run *run, const char *name, const char *type,
                      int required, int key, char *errbuf, size_t size) {
    size_t t;
    for (t = 0; t < sizeof TYPES / sizeof TYPES[0]; t++)
        if (strcmp(TYPES[t].name, type) == 0)
            break;
    if (t == sizeof TYPES / sizeof TYPES[0]) {
        snprintf(errbuf, size, "column \"%s\": unknown type \"%s\"", name,
                 type);
        return -1;
    }
    tm_column *c = realloc(run->columns, (run->ncolumns + 1) * sizeof *c);
    if (c)
        run->columns = c;
    char **n =
        c ? realloc(run->column_names, (run->ncolumns + 1) * sizeof *n) : NULL;
    if (n)
        run->column_names = n;
    char *copy = n ? strdup(name) : NULL;
    if (!copy) {
        snprintf(errbuf, size, "out of memory");
        return -1;
    }
    run->column_names[run->ncolumns] = copy;
    run->columns[run->ncolumns++] =
        (tm_column){.struct_size = sizeof(tm_column),
                    .name = copy,
                    .type = TYPES[t].type,
                    .required = (uint8_t)required,
                    .key = (uint8_t)key};
    return 0;
}

int kit_config_load(kit_run *run, const char *file, char *errbuf, size_t size) {
    json_t *root = NULL, *cols = NULL;
    if (file) {
        json_error_t je;
        root = json_load_file(file, 0, &je);
        if (!root) {
            snprintf(errbuf, size, "%s:%d: %s", file, je.line, je.text);
            return -1;
        }
        json_t *s = json_object_get(root, "settings");
        cols = json_object_get(root, "columns");
        if (!json_is_object(root) || (s && !json_is_object(s)) ||
            (cols && !json_is_array(cols))) {
            snprintf(errbuf, size,
                     "%s: expected {\"settings\": {...}, "
                     "\"columns\": [...]}",
                     file);
            json_decref(root);
            return -1;
        }
        run->settings = s ? json_incref(s) : json_object();
    } else {
        run->settings = json_pack("{s:s}", "path", "${tmpdir}");
    }
    int rc = run->settings ? 0 : -1;
    if (rc != 0)
        snprintf(errbuf, size, "out of memory");
    size_t i;
    json_t *c;
    json_array_foreach(cols, i, c) {
        const char *name = NULL, *type = NULL;
        int req = 0, key = 0;
        if (rc == 0 &&
            json_unpack(c, "{s:s,s:s,s?b,s?b}", "name", &name, "type", &type,
                        "required", &req, "key", &key) != 0) {
            snprintf(errbuf, size,
                     "%s: columns[%zu]: expected {\"name\": "
                     "text, \"type\": text, \"required\"?: bool, \"key\"?: "
                     "bool}",
                     file, i);
            rc = -1;
        }
        if (rc == 0)
            rc = add_column(run, name, type, req, key, errbuf, size);
    }
    if (rc == 0 && run->ncolumns == 0)
        rc = add_column(run, "id", "int", 1, 1, errbuf, size) ||
             add_column(run, "body", "text", 0, 0, errbuf, size);
    json_decref(root);
    return rc;
}

void kit_config_free(kit_run *run) {
    for (size_t i = 0; i < run->ncolumns; i++)
        free(run->column_names[i]);
    free(run->column_names);
    free(run->columns);
    json_decref(run->settings);
}
