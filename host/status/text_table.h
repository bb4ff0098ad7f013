/* An aligned text table (kafka-consumer-groups' style): headers, rows of
 * cells, every column as wide as its widest cell. Cells are copied. */
#ifndef TM_TEXT_TABLE_H
#define TM_TEXT_TABLE_H

#include <stddef.h>
#include <stdio.h>

typedef struct tm_table tm_table;

/* NULL when memory ran out. headers[0..ncols) are copied. */
tm_table *tm_table_new(size_t ncols, const char *const *headers);

/* Appends one row of ncols cells (NULL prints as "-"). 0, -1 on OOM. */
int tm_table_add(tm_table *t, const char *const *cells);

/* Prints the headers and rows, each line starting with indent, columns
 * separated by two spaces, no trailing blanks. */
void tm_table_print(const tm_table *t, FILE *out, const char *indent);

void tm_table_free(tm_table *t);

#endif
