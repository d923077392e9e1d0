/* pressure.c - PLACEHOLDER: to be implemented. */
#include "collector.h"

static void pressure_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    (void)ctx;
}

const mw_collector mw_collector_pressure = {
    .name = "pressure",
    .help = "placeholder",
    .collect = pressure_collect,
};
