/* Loading the kit's --config file into the run. */
#ifndef TM_SINKCHECK_KIT_CONFIG_H
#define TM_SINKCHECK_KIT_CONFIG_H

#include "kit.h"

/* Fills run->settings and run->columns from FILE (NULL: defaults). 0, or
 * -1 with a message in errbuf. */
int kit_config_load(kit_run *run, const char *file, char *errbuf, size_t size);
void kit_config_free(kit_run *run);

#endif
