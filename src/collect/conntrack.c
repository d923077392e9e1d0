/* conntrack.c - netfilter connection tracking table use against its limit,
 * from /proc/sys/net/netfilter/nf_conntrack_{count,max}. A full table drops
 * new connections ("nf_conntrack: table full"), a classic failure of busy
 * Kubernetes nodes (kube-proxy in iptables mode tracks every flow).
 *
 * The files are plain numbers read with mw_read_u64at (hostfs.c, whose
 * parser is covered by its tests); the directory is opened once. */
#include "collector.h"
#include "../core/log.h"
#include "../core/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CT_DIR "proc/sys/net/netfilter"

/* clang-format off */
MW_METRIC(ENTRIES, MW_GAUGE, "mlwatch_conntrack_entries", "", "Connections in the conntrack table (nf_conntrack_count).");
MW_METRIC(LIMIT, MW_GAUGE, "mlwatch_conntrack_entries_limit", "", "Size limit of the conntrack table (nf_conntrack_max).");
/* clang-format on */

typedef struct ct_state {
    int fd;
} ct_state;

static int ct_init(const mw_env *env, void **state)
{
    int fd = mw_hostfs_opendirfd(env->host, CT_DIR);
    if (fd >= 0 && faccessat(fd, "nf_conntrack_count", R_OK, 0) < 0) {
        int err = errno;
        close(fd);
        fd = -err;
    }
    if (fd < 0) {
        mw_log(MW_LOG_INFO, "conntrack",
               "no %s/nf_conntrack_count (%s): netfilter conntrack "
               "not loaded",
               CT_DIR, strerror(-fd));
        return MW_COLLECTOR_ABSENT;
    }
    ct_state *st = mw_xcalloc(1, sizeof(*st));
    st->fd = fd;
    *state = st;
    return 0;
}

static void read_value(mw_collect_ctx *ctx, int fd, const char *name, const mw_metric_desc *d)
{
    uint64_t v;
    int rc = mw_read_u64at(fd, name, &v);
    if (rc == 0) {
        mw_emit(ctx->snap, d, (double)v, MW_END);
        return;
    }
    char path[128];
    strcpy(path, CT_DIR "/");
    strcat(path, name);
    mw_collect_error(ctx, path, rc == -EINVAL ? 0 : rc, rc == -EINVAL ? "malformed content" : NULL);
}

static void ct_collect(void *state, mw_collect_ctx *ctx)
{
    const ct_state *st = state;
    read_value(ctx, st->fd, "nf_conntrack_count", &ENTRIES);
    read_value(ctx, st->fd, "nf_conntrack_max", &LIMIT);
}

static void ct_destroy(void *state)
{
    ct_state *st = state;
    if (!st) return;
    close(st->fd);
    free(st);
}

const mw_collector mw_collector_conntrack = {
    .name = "conntrack",
    .help = "Connection tracking table entries and limit from /proc/sys/net/netfilter",
    .init = ct_init,
    .collect = ct_collect,
    .destroy = ct_destroy,
};
