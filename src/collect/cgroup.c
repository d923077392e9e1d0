/* cgroup.c - PLACEHOLDER: to be implemented. */
#include "collector.h"

static void cgroup_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    (void)ctx;
}

const mw_collector mw_collector_cgroup = {
    .name = "cgroup",
    .help = "placeholder",
    .collect = cgroup_collect,
};
