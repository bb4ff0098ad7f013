/* The settings schema of a loaded plugin, for `tidemark plugins --json`:
 * built by the host from the declared table (ABI 1.3), so that no plugin
 * writes JSON by hand; the plugin's own describe() text for a plugin
 * without one. */
#include "plugin/loader.h"

#include "config/settings_table.h"

json_t *tm_plugin_settings_schema(const tm_sink_api *api) {
    if (TM_SINK_API_HAS_SETTINGS(api) && api->settings != NULL)
        return tm_setting_table_schema(api->settings);
    const char *text = api->describe != NULL ? api->describe() : NULL;
    if (text == NULL)
        return json_null();
    json_error_t jerr;
    json_t *schema = json_loads(text, 0, &jerr);
    /* Text that is no JSON is shown as the plugin gave it: the reader
     * still learns something, and sees the plugin's mistake. */
    return schema != NULL ? schema : json_string(text);
}
