/* cpu.c - per-CPU times and scheduler counters from /proc/stat. */
#include "collector.h"
#include "cpu.h"
#include "../core/parse.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* /proc/stat has one line per CPU plus an "intr" line with one number per
 * interrupt: ~100 KB on a host with hundreds of CPUs. */
#define PROCSTAT_MAX (4u << 20)

/* clang-format off */
MW_METRIC(CPU_SECONDS, MW_COUNTER, "mlwatch_cpu_seconds_total", "seconds", "Time each CPU spent in each mode (from /proc/stat). User time includes guest time.");
MW_METRIC(CPU_GUEST_SECONDS, MW_COUNTER, "mlwatch_cpu_guest_seconds_total", "seconds", "Time each CPU spent running virtual machine guests (already counted in mode user/nice of mlwatch_cpu_seconds_total).");
MW_METRIC(CONTEXT_SWITCHES, MW_COUNTER, "mlwatch_context_switches_total", "", "Context switches since boot.");
MW_METRIC(INTERRUPTS, MW_COUNTER, "mlwatch_interrupts_total", "", "Interrupts serviced since boot.");
MW_METRIC(FORKS, MW_COUNTER, "mlwatch_forks_total", "", "Processes and threads created since boot.");
MW_METRIC(BOOT_TIME, MW_GAUGE, "mlwatch_boot_time_seconds", "seconds", "When the host booted, seconds since the epoch.");
MW_METRIC(PROCS_RUNNING, MW_GAUGE, "mlwatch_procs_running", "", "Threads currently runnable (from /proc/stat).");
MW_METRIC(PROCS_BLOCKED, MW_GAUGE, "mlwatch_procs_blocked", "", "Threads currently blocked waiting for I/O.");
/* clang-format on */

static const char *const MODES[MW_CPU_GUEST] = {"user",   "nice", "system",  "idle",
                                                "iowait", "irq",  "softirq", "steal"};

/* ---- parser ---- */

static int ends_line(const char *p)
{
    mw_skip_blanks(&p);
    return *p == '\n';
}

/* p points after "cpu" of a "cpuN ..." line ending at a '\n'. */
static int parse_cpu_line(const char *p, mw_cpu_times *t)
{
    uint64_t id;
    if (mw_parse_u64(&p, &id) < 0 || id > UINT32_MAX) return -1;
    if (*p != ' ' && *p != '\t') return -1;
    t->cpu = (uint32_t)id;
    t->ncols = 0;
    for (;;) {
        mw_skip_blanks(&p);
        if (*p == '\n') break;
        uint64_t v;
        if (mw_parse_u64(&p, &v) < 0) return -1;
        if (*p != ' ' && *p != '\t' && *p != '\n') return -1;
        if (t->ncols < MW_CPU_NCOLS) t->ticks[t->ncols++] = v;
    }
    if (t->ncols < MW_CPU_MINCOLS) return -1;
    for (unsigned i = t->ncols; i < MW_CPU_NCOLS; i++)
        t->ticks[i] = 0;
    return 0;
}

typedef struct stat_key {
    const char *key;
    unsigned bit;
    size_t off;
    int rest_ok; /* more numbers may follow on the line ("intr") */
} stat_key;

static const stat_key KEYS[] = {
    {"ctxt", MW_STAT_CTXT, offsetof(mw_procstat, ctxt), 0},
    {"intr", MW_STAT_INTR, offsetof(mw_procstat, intr), 1},
    {"processes", MW_STAT_PROCESSES, offsetof(mw_procstat, processes), 0},
    {"btime", MW_STAT_BTIME, offsetof(mw_procstat, btime), 0},
    {"procs_running", MW_STAT_PROCS_RUNNING, offsetof(mw_procstat, procs_running), 0},
    {"procs_blocked", MW_STAT_PROCS_BLOCKED, offsetof(mw_procstat, procs_blocked), 0},
};

/* Returns 0 parsed, 1 not one of KEYS, -1 malformed. */
static int parse_key_line(const char *p, mw_procstat *out)
{
    for (size_t i = 0; i < sizeof(KEYS) / sizeof(KEYS[0]); i++) {
        size_t n = strlen(KEYS[i].key);
        if (strncmp(p, KEYS[i].key, n) != 0 || (p[n] != ' ' && p[n] != '\t' && p[n] != '\n'))
            continue;
        if (out->present & KEYS[i].bit) return -1;
        p += n;
        mw_skip_blanks(&p);
        uint64_t v;
        if (mw_parse_u64(&p, &v) < 0) return -1;
        if (KEYS[i].rest_ok ? (*p != ' ' && *p != '\t' && *p != '\n') : !ends_line(p)) return -1;
        memcpy((char *)out + KEYS[i].off, &v, sizeof(v));
        out->present |= KEYS[i].bit;
        return 0;
    }
    return 1;
}

int mw_parse_procstat(const char *text, mw_procstat *out, mw_procstat_cpu_fn fn, void *arg)
{
    memset(out, 0, sizeof(*out));
    int seen_cpu = 0, have_prev = 0;
    uint32_t prev = 0;
    const char *p = text, *line, *nl;
    while (mw_next_whole_line(&p, &line, &nl, &out->malformed)) {
        if (strncmp(line, "cpu", 3) == 0 && (line[3] == ' ' || line[3] == '\t')) {
            seen_cpu = 1; /* the aggregate line: not reported */
        } else if (strncmp(line, "cpu", 3) == 0 && line[3] >= '0' && line[3] <= '9') {
            seen_cpu = 1;
            mw_cpu_times t;
            if (parse_cpu_line(line + 3, &t) < 0 || (have_prev && t.cpu <= prev)) {
                out->malformed++;
            } else {
                prev = t.cpu;
                have_prev = 1;
                out->ncpus++;
                if (fn) fn(arg, &t);
            }
        } else if (parse_key_line(line, out) < 0) {
            out->malformed++;
        }
    }
    return seen_cpu ? 0 : -1;
}

/* ---- collector ---- */

static void emit_cpu(void *arg, const mw_cpu_times *t)
{
    mw_snapshot *snap = arg;
    char id[16];
    snprintf(id, sizeof(id), "%u", (unsigned)t->cpu);
    for (unsigned i = 0; i < t->ncols && i < MW_CPU_GUEST; i++)
        mw_emit(snap, &CPU_SECONDS, (double)t->ticks[i] / MW_USER_HZ, "cpu", id, "mode", MODES[i],
                MW_END);
    if (t->ncols > MW_CPU_GUEST)
        mw_emit(snap, &CPU_GUEST_SECONDS, (double)t->ticks[MW_CPU_GUEST] / MW_USER_HZ, "cpu", id,
                "mode", "user", MW_END);
    if (t->ncols > MW_CPU_GUEST_NICE)
        mw_emit(snap, &CPU_GUEST_SECONDS, (double)t->ticks[MW_CPU_GUEST_NICE] / MW_USER_HZ, "cpu",
                id, "mode", "nice", MW_END);
}

static void cpu_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    static const char path[] = "proc/stat";
    const char *text = mw_collect_read(ctx, path, PROCSTAT_MAX);
    if (!text) return;
    mw_procstat st;
    if (mw_parse_procstat(text, &st, emit_cpu, ctx->snap) < 0) {
        mw_collect_error(ctx, path, 0, "malformed content");
        return;
    }
    if (st.present & MW_STAT_CTXT) mw_emit(ctx->snap, &CONTEXT_SWITCHES, (double)st.ctxt, MW_END);
    if (st.present & MW_STAT_INTR) mw_emit(ctx->snap, &INTERRUPTS, (double)st.intr, MW_END);
    if (st.present & MW_STAT_PROCESSES) mw_emit(ctx->snap, &FORKS, (double)st.processes, MW_END);
    if (st.present & MW_STAT_BTIME) mw_emit(ctx->snap, &BOOT_TIME, (double)st.btime, MW_END);
    if (st.present & MW_STAT_PROCS_RUNNING)
        mw_emit(ctx->snap, &PROCS_RUNNING, (double)st.procs_running, MW_END);
    if (st.present & MW_STAT_PROCS_BLOCKED)
        mw_emit(ctx->snap, &PROCS_BLOCKED, (double)st.procs_blocked, MW_END);
    /* One error per cycle for the file, whatever is wrong with it. */
    if (st.malformed)
        mw_collect_error(ctx, path, 0, "malformed or truncated lines skipped");
    else if (st.present != MW_STAT_ALL || st.ncpus == 0)
        mw_collect_error(ctx, path, 0, "expected lines missing");
}

const mw_collector mw_collector_cpu = {
    .name = "cpu",
    .help = "Per-CPU times, context switches, interrupts, forks and boot time from /proc/stat",
    .collect = cpu_collect,
};
