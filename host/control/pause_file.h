/* A connector's pause, kept in its state directory
 * (STATE_DIR/CONNECTOR/paused.json: {"by": "...", "since_ms": N}) so that
 * it survives a restart of the connector or of the process, as Kafka
 * Connect keeps a pause in its config topic. Written by the control
 * server, read by the connector when it starts. Every access is relative
 * to the connector directory's descriptor (status/state_dir.h: never a
 * link followed); SHOWN is that directory's path, for messages. */
#ifndef TM_PAUSE_FILE_H
#define TM_PAUSE_FILE_H

#include <stddef.h>
#include <stdint.h>

#define TM_PAUSE_FILE "paused.json"

/* Writes it (a temporary file renamed over it). 0, or -1 with why. */
int tm_pause_file_write(int dir_fd, const char *shown, const char *by,
                        int64_t since_ms, char *why, size_t size);

/* 1 paused (by and *since_ms filled; "unknown", 0 when the file cannot be
 * parsed: a pause is kept rather than lost, and why says so, with the
 * path and the parser's message; why "" when it parsed), 0 not paused, -1
 * with why when the file cannot be read. */
int tm_pause_file_read(int dir_fd, const char *shown, char *by, size_t by_size,
                       int64_t *since_ms, char *why, size_t size);

/* Removes it (none is fine). 0, or -1 with why. */
int tm_pause_file_remove(int dir_fd, const char *shown, char *why, size_t size);

#endif
