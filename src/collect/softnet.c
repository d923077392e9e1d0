/* softnet.c - per-CPU packet processing from /proc/net/softnet_stat: drops
 * when the backlog queue is full (net.core.netdev_max_backlog) and
 * time-squeezes when the softirq budget runs out, both signs of a receive
 * path that cannot keep up with the NIC. */
#include "collector.h"
#include "softnet.h"
#include "../core/log.h"
#include "../core/parse.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define SOFTNET_MAX_CPUS 8192
#define SOFTNET_MAX_COLS 32

/* clang-format off */
MW_METRIC(PROCESSED, MW_COUNTER, "mlwatch_softnet_processed_total", "", "Packets taken from the CPU's backlog queue.");
MW_METRIC(DROPPED, MW_COUNTER, "mlwatch_softnet_dropped_total", "", "Packets dropped because the CPU's backlog queue was full (netdev_max_backlog).");
MW_METRIC(SQUEEZED, MW_COUNTER, "mlwatch_softnet_times_squeezed_total", "", "Times the receive softirq stopped with work left (budget or time used up).");
MW_METRIC(RPS, MW_COUNTER, "mlwatch_softnet_received_rps_total", "", "Times the CPU was woken to process packets steered by RPS.");
MW_METRIC(FLOW_LIMIT, MW_COUNTER, "mlwatch_softnet_flow_limit_total", "", "Packets dropped by the RPS flow limit.");
/* clang-format on */

/* --- parser ---------------------------------------------------------- */

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int mw_parse_softnet_line(const char **p, mw_softnet *out)
{
    const char *s = *p;
    for (;;) {
        if (!*s) {
            *p = s;
            return 0;
        }
        const char *nl = strchr(s, '\n');
        const char *end = nl ? nl : s + strlen(s);
        *p = nl ? nl + 1 : end;
        const char *q = s;
        mw_skip_blanks(&q);
        if (q == end) {
            s = *p;
            continue;
        }
        uint64_t v[SOFTNET_MAX_COLS];
        int n = 0;
        while (q < end) {
            int digits = 0;
            uint64_t x = 0;
            int h;
            while (q < end && (h = hexval(*q)) >= 0) {
                if (++digits > 16) return -1;
                x = x << 4 | (uint64_t)h;
                q++;
            }
            if (digits == 0 || n == SOFTNET_MAX_COLS) return -1;
            v[n++] = x;
            if (q < end && *q != ' ' && *q != '\t') return -1;
            mw_skip_blanks(&q);
        }
        if (n < 3) return -1;
        out->processed = v[0];
        out->dropped = v[1];
        out->time_squeeze = v[2];
        out->has_rps = n > 9;
        out->received_rps = n > 9 ? v[9] : 0;
        out->has_flow_limit = n > 10;
        out->flow_limit = n > 10 ? v[10] : 0;
        out->cpu = -1;
        if (n > 12) {
            if (v[12] >= SOFTNET_MAX_CPUS) return -1;
            out->cpu = (long)v[12];
        }
        return 1;
    }
}

/* --- collection ----------------------------------------------------- */

static int softnet_init(const mw_env *env, void **state)
{
    (void)state;
    if (faccessat(env->host->rootfd, "proc/net/softnet_stat", R_OK, 0) < 0) {
        mw_log(MW_LOG_INFO, "softnet", "no proc/net/softnet_stat (%s)", strerror(errno));
        return MW_COLLECTOR_ABSENT;
    }
    return 0;
}

static void softnet_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    static const char path[] = "proc/net/softnet_stat";
    const char *text = mw_collect_read(ctx, path, 0);
    if (!text) return;
    int rc;
    const char *p = text;
    long row = 0;
    mw_softnet s;
    while ((rc = mw_parse_softnet_line(&p, &s)) != 0) {
        if (rc < 0) {
            /* Still a row: the next CPU keeps its position. */
            row++;
            mw_collect_error(ctx, path, 0, "malformed line");
            continue;
        }
        if (row == SOFTNET_MAX_CPUS) {
            mw_collect_error(ctx, path, 0, "more than 8192 CPUs; the rest are not reported");
            break;
        }
        char cpu[24];
        snprintf(cpu, sizeof(cpu), "%ld", s.cpu >= 0 ? s.cpu : row);
        row++;
        mw_emit(ctx->snap, &PROCESSED, (double)s.processed, "cpu", cpu, MW_END);
        mw_emit(ctx->snap, &DROPPED, (double)s.dropped, "cpu", cpu, MW_END);
        mw_emit(ctx->snap, &SQUEEZED, (double)s.time_squeeze, "cpu", cpu, MW_END);
        if (s.has_rps) mw_emit(ctx->snap, &RPS, (double)s.received_rps, "cpu", cpu, MW_END);
        if (s.has_flow_limit)
            mw_emit(ctx->snap, &FLOW_LIMIT, (double)s.flow_limit, "cpu", cpu, MW_END);
    }
}

const mw_collector mw_collector_softnet = {
    .name = "softnet",
    .help = "Per-CPU backlog drops and softirq squeezes from /proc/net/softnet_stat",
    .init = softnet_init,
    .collect = softnet_collect,
};
