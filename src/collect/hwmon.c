/* hwmon.c - PLACEHOLDER: to be implemented. */
#include "collector.h"

static void hwmon_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    (void)ctx;
}

const mw_collector mw_collector_hwmon = {
    .name = "hwmon",
    .help = "placeholder",
    .collect = hwmon_collect,
};
