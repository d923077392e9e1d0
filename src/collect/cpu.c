/* cpu.c - PLACEHOLDER: to be implemented. */
#include "collector.h"

static void cpu_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    (void)ctx;
}

const mw_collector mw_collector_cpu = {
    .name = "cpu",
    .help = "placeholder",
    .collect = cpu_collect,
};
