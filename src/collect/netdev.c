/* netdev.c - PLACEHOLDER: to be implemented. */
#include "collector.h"

static void netdev_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    (void)ctx;
}

const mw_collector mw_collector_netdev = {
    .name = "netdev",
    .help = "placeholder",
    .collect = netdev_collect,
};
