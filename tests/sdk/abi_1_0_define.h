/* Force-included (-include) into a plugin's source to build it as a
 * plugin of ABI 1.0: TM_SINK_DEFINE makes the frozen 1.0 table
 * (tests/abi/fixtures/sink_api_1_0.h). The kit must pass such a plugin. */
#ifndef TM_ABI_1_0_DEFINE_H
#define TM_ABI_1_0_DEFINE_H

#include <tidemark/sink.h>

#include "sink_api_1_0.h"

#undef TM_SINK_DEFINE
#define TM_SINK_DEFINE(...) TM_SINK_DEFINE_1_0(__VA_ARGS__)

#endif
