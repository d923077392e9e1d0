/* filesystem.c - PLACEHOLDER: to be implemented. */
#include "collector.h"

static void filesystem_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    (void)ctx;
}

const mw_collector mw_collector_filesystem = {
    .name = "filesystem",
    .help = "placeholder",
    .collect = filesystem_collect,
};
