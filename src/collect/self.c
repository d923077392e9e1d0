/* self.c - PLACEHOLDER: to be implemented. */
#include "collector.h"

static void self_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    (void)ctx;
}

const mw_collector mw_collector_self = {
    .name = "self",
    .help = "placeholder",
    .collect = self_collect,
};
