/* For the fuzz targets whose reader takes a path, not bytes: one private
 * temp directory per fuzzing process (made on first use, removed at exit),
 * so no input makes a reader touch a file outside it. Any failure here is
 * the machine's, not the input's: it aborts. */
#ifndef TM_FUZZ_TMP_H
#define TM_FUZZ_TMP_H

#include <stddef.h>
#include <stdint.h>

/* The directory (absolute, no trailing slash). */
const char *fuzz_tmpdir(void);
/* DIR/REL into out (abort when it does not fit). */
void fuzz_path(char *out, size_t size, const char *rel);
/* Makes the directory DIR/REL (and no parents); fine when it exists. */
void fuzz_mkdir(const char *rel);
/* Replaces the file at PATH with data[0..size). */
void fuzz_write(const char *path, const uint8_t *data, size_t size);

#endif
