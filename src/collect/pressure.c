/* pressure.c - host pressure stall information from /proc/pressure.
 *
 * Kernels without PSI (before 4.20, CONFIG_PSI=n, or booted with psi=0) have
 * no /proc/pressure, or files that refuse to be read: the collector is then
 * absent. The percentages (avg10, ...) are left out on purpose: they are
 * derivable from the cumulative totals over any window. */
#include "collector.h"
#include "psi.h"
#include "../core/log.h"
#include "../core/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PSI_MAX 4096

/* clang-format off */
MW_METRIC(WAITING, MW_COUNTER, "mlwatch_pressure_waiting_seconds_total", "seconds", "Time at least one task was stalled on the resource (PSI \"some\" total).");
MW_METRIC(STALLED, MW_COUNTER, "mlwatch_pressure_stalled_seconds_total", "seconds", "Time all non-idle tasks were stalled on the resource at once (PSI \"full\" total).");
/* clang-format on */

static const char *const RESOURCES[] = {"cpu", "memory", "io"};

typedef struct pressure_state {
    int dirfd; /* proc/pressure */
} pressure_state;

static int pressure_init(const mw_env *env, void **state)
{
    int fd = mw_hostfs_opendirfd(env->host, "proc/pressure");
    if (fd == -ENOENT || fd == -ENOTDIR) {
        mw_log(MW_LOG_INFO, "pressure", "no proc/pressure: kernel without PSI, collector off");
        return MW_COLLECTOR_ABSENT;
    }
    if (fd < 0) return fd;
    /* psi=0 on the kernel command line: the files exist but refuse reads. */
    char probe[256];
    if (mw_read_lineat(fd, "cpu", probe, sizeof(probe)) == -EOPNOTSUPP) {
        close(fd);
        mw_log(MW_LOG_INFO, "pressure", "PSI disabled on this kernel (psi=0), collector off");
        return MW_COLLECTOR_ABSENT;
    }
    pressure_state *st = mw_xcalloc(1, sizeof(*st));
    st->dirfd = fd;
    *state = st;
    return 0;
}

static void pressure_collect(void *state, mw_collect_ctx *ctx)
{
    pressure_state *st = state;
    for (size_t i = 0; i < sizeof(RESOURCES) / sizeof(RESOURCES[0]); i++) {
        char path[64];
        int rc = mw_readat(st->dirfd, RESOURCES[i], ctx->scratch, PSI_MAX);
        const mw_buf *b = ctx->scratch;
        mw_psi psi;
        /* The kernel ends every line with '\n': without it the read was cut. */
        if (rc < 0 || b->len == 0 || b->data[b->len - 1] != '\n' ||
            mw_parse_psi(b->data, &psi) < 0 || !psi.has_some) {
            snprintf(path, sizeof(path), "proc/pressure/%s", RESOURCES[i]);
            mw_collect_error(ctx, path, rc < 0 ? rc : 0, rc < 0 ? NULL : "malformed content");
            continue;
        }
        mw_emit(ctx->snap, &WAITING, (double)psi.some_total_us / 1e6, "resource", RESOURCES[i],
                MW_END);
        if (psi.has_full)
            mw_emit(ctx->snap, &STALLED, (double)psi.full_total_us / 1e6, "resource", RESOURCES[i],
                    MW_END);
    }
}

static void pressure_destroy(void *state)
{
    pressure_state *st = state;
    if (!st) return;
    close(st->dirfd);
    free(st);
}

const mw_collector mw_collector_pressure = {
    .name = "pressure",
    .help = "CPU, memory and I/O pressure stall time from /proc/pressure",
    .init = pressure_init,
    .collect = pressure_collect,
    .destroy = pressure_destroy,
};
