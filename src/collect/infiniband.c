/* infiniband.c - PLACEHOLDER: to be implemented. */
#include "collector.h"

static void infiniband_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    (void)ctx;
}

const mw_collector mw_collector_infiniband = {
    .name = "infiniband",
    .help = "placeholder",
    .collect = infiniband_collect,
};
