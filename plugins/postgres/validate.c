/* validate(): settings, the connection and the table's shape, checked
 * without changing anything (a read-only transaction). */
#include <stdlib.h>
#include <string.h>

#include "pg_sink.h"

tm_status pg_validate(const tm_host_api *host, const tm_sink_config *config,
                      tm_error *err) {
    pg_sink s = {.host = host, .config = config};
    atomic_init(&s.interrupted, 0);
    atomic_flag_clear(&s.cancel_busy);
    tm_status r = pg_settings_load(host, config, &s.set, err);
    if (r != TM_OK)
        return r;
    if ((r = pg_connect(&s, err)) == TM_OK &&
        (r = pg_exec(&s, "BEGIN READ ONLY", "validate: BEGIN", err)) == TM_OK) {
        int exists = 0;
        if ((r = pg_table_exists(&s, &exists, err)) != TM_OK)
            ; /* err says why */
        else if (exists)
            r = pg_shape_check(&s, err);
        else if (!s.set.create) {
            host->set_error(err,
                            "setting \"table\": no table %s and \"create\" "
                            "is false",
                            s.q_table);
            r = TM_INVALID;
        }
        pg_rollback(&s);
    }
    pg_disconnect(&s);
    PQfreemem(s.q_schema);
    free(s.q_table);
    free(s.q_markers);
    free(s.q_dls);
    free(s.q_keys);
    return r == TM_FATAL ? TM_INVALID : r;
}
