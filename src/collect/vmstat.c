/* vmstat.c - PLACEHOLDER: to be implemented. */
#include "collector.h"

static void vmstat_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    (void)ctx;
}

const mw_collector mw_collector_vmstat = {
    .name = "vmstat",
    .help = "placeholder",
    .collect = vmstat_collect,
};
