/* numa.c - PLACEHOLDER: to be implemented. */
#include "collector.h"

static void numa_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    (void)ctx;
}

const mw_collector mw_collector_numa = {
    .name = "numa",
    .help = "placeholder",
    .collect = numa_collect,
};
