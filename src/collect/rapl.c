/* rapl.c - PLACEHOLDER: to be implemented. */
#include "collector.h"

static void rapl_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    (void)ctx;
}

const mw_collector mw_collector_rapl = {
    .name = "rapl",
    .help = "placeholder",
    .collect = rapl_collect,
};
