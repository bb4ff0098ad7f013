/* Compiled with -std=c11 -pedantic and nothing but the SDK's include path:
 * proves the public header stands alone (no jansson, no librdkafka, no host
 * header) and that TM_SINK_DEFINE expands cleanly. Built, never run. */
#include <tidemark/sink.h>

static tm_status h_open(const tm_host_api *host, const tm_sink_config *config,
                        void **sink, tm_error *err) {
    (void)host;
    (void)config;
    (void)err;
    *sink = 0;
    return TM_OK;
}

static void h_close(void *sink) {
    (void)sink;
}

TM_SINK_DEFINE(.name = "header_alone", .version = "0", .open = h_open,
               .close = h_close)
