/* memory.c - PLACEHOLDER: to be implemented. */
#include "collector.h"

static void memory_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    (void)ctx;
}

const mw_collector mw_collector_memory = {
    .name = "memory",
    .help = "placeholder",
    .collect = memory_collect,
};
