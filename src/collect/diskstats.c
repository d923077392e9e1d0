/* diskstats.c - PLACEHOLDER: to be implemented. */
#include "collector.h"

static void diskstats_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    (void)ctx;
}

const mw_collector mw_collector_diskstats = {
    .name = "diskstats",
    .help = "placeholder",
    .collect = diskstats_collect,
};
