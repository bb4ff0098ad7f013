/* Internals of libtidemark-store shared by its files. */
#ifndef TMS_INTERNAL_H
#define TMS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <tidemark/store.h>

/* fsyncs the directory that holds PATH (a new or renamed name is durable
 * only then). 0 or -1 with errno. */
int tms_sync_dir_of(const char *path);
/* CRC-32 (IEEE 802.3, the zlib one) of buf. */
uint32_t tms_crc32(const void *buf, size_t len);
/* An I/O failure on PATH as TM_RETRY, with strerror(errno). */
tm_status tms_io_error(const tm_host_api *host, const char *what,
                       const char *path, tm_error *err);

/* Appends an absent marker of (topic, partition) to the set; NULL on
 * memory exhaustion or a topic of TMS_TOPIC_MAX bytes or more. */
tm_marker *tms_add_marker(tms_markers *ms, const char *topic,
                          int32_t partition);

#endif
