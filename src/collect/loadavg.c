/* loadavg.c - system load averages and runnable tasks from /proc/loadavg. */
#include "collector.h"
#include "loadavg.h"
#include "../core/parse.h"

/* clang-format off */
MW_METRIC(LOAD1, MW_GAUGE, "mlwatch_load1", "", "1-minute load average.");
MW_METRIC(LOAD5, MW_GAUGE, "mlwatch_load5", "", "5-minute load average.");
MW_METRIC(LOAD15, MW_GAUGE, "mlwatch_load15", "", "15-minute load average.");
MW_METRIC(RUNNABLE, MW_GAUGE, "mlwatch_tasks_runnable", "", "Tasks currently runnable (from /proc/loadavg).");
MW_METRIC(TASKS, MW_GAUGE, "mlwatch_tasks", "", "Tasks (threads) that exist on the host.");
/* clang-format on */

int mw_parse_loadavg(const char *text, mw_loadavg *out)
{
    /* "0.52 0.58 0.59 3/1054 123456\n" */
    const char *p = text;
    if (mw_parse_double(&p, &out->load1) < 0 || *p++ != ' ') return -1;
    if (mw_parse_double(&p, &out->load5) < 0 || *p++ != ' ') return -1;
    if (mw_parse_double(&p, &out->load15) < 0 || *p++ != ' ') return -1;
    if (mw_parse_u64(&p, &out->runnable) < 0 || *p++ != '/') return -1;
    if (mw_parse_u64(&p, &out->tasks) < 0) return -1;
    return 0;
}

static void loadavg_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    static const char path[] = "proc/loadavg";
    const char *text = mw_collect_read(ctx, path, 4096);
    if (!text) return;
    mw_loadavg l;
    if (mw_parse_loadavg(text, &l) < 0) {
        mw_collect_error(ctx, path, 0, "malformed content");
        return;
    }
    mw_emit(ctx->snap, &LOAD1, l.load1, MW_END);
    mw_emit(ctx->snap, &LOAD5, l.load5, MW_END);
    mw_emit(ctx->snap, &LOAD15, l.load15, MW_END);
    mw_emit(ctx->snap, &RUNNABLE, (double)l.runnable, MW_END);
    mw_emit(ctx->snap, &TASKS, (double)l.tasks, MW_END);
}

const mw_collector mw_collector_loadavg = {
    .name = "loadavg",
    .help = "Load averages and task counts from /proc/loadavg",
    .collect = loadavg_collect,
};
