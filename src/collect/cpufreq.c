/* cpufreq.c - PLACEHOLDER: to be implemented. */
#include "collector.h"

static void cpufreq_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    (void)ctx;
}

const mw_collector mw_collector_cpufreq = {
    .name = "cpufreq",
    .help = "placeholder",
    .collect = cpufreq_collect,
};
