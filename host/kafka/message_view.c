#include "kafka/message_view.h"

void tm_kafka_message_view(const rd_kafka_message_t *m, const char *topic,
                           int32_t partition, tm_header_view *hv,
                           tm_msg_view *out, int *truncated) {
    size_t nh = 0;
    *truncated = 0;
    rd_kafka_headers_t *hdrs = NULL;
    if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const char *name;
        const void *val;
        size_t len;
        while (rd_kafka_header_get_all(hdrs, nh, &name, &val, &len) ==
               RD_KAFKA_RESP_ERR_NO_ERROR) {
            if (nh == TM_MAX_HEADERS) {
                *truncated = 1;
                break;
            }
            hv[nh] = (tm_header_view){name, val, len};
            nh++;
        }
    }
    rd_kafka_timestamp_type_t tstype;
    int64_t ts = rd_kafka_message_timestamp(m, &tstype);
    *out = (tm_msg_view){
        .topic = topic,
        .partition = partition,
        .offset = m->offset,
        .timestamp_ms = tstype == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? -1 : ts,
        .key = m->key,
        .key_len = m->key_len,
        .value = m->payload,
        .value_len = m->len,
        .headers = nh ? hv : NULL,
        .nheaders = nh,
    };
}
