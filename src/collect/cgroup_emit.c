/* cgroup_emit.c - the cgroup collector's metric families and its samples,
 * emitted after the walk family by family, cgroups sorted by path. */
#include "cgroup_int.h"
#include "psi.h"

#include <stdlib.h>
#include <string.h>

/* --- metric families ----------------------------------------------------- */

/* clang-format off */
MW_METRIC(CPU, MW_COUNTER, "mlwatch_container_cpu_seconds_total", "seconds", "CPU time consumed by the container's cgroup (v2 cpu.stat usage_usec, v1 cpuacct.usage).");
MW_METRIC(THROTTLED, MW_COUNTER, "mlwatch_container_cpu_throttled_seconds_total", "seconds", "Time the container's cgroup was throttled by its CPU quota.");
MW_METRIC(THROTTLED_PERIODS, MW_COUNTER, "mlwatch_container_cpu_throttled_periods_total", "", "CPU quota enforcement periods in which the container's cgroup was throttled.");
MW_METRIC(PERIODS, MW_COUNTER, "mlwatch_container_cpu_periods_total", "", "CPU quota enforcement periods that elapsed while the container's cgroup was runnable.");
MW_METRIC(QUOTA, MW_GAUGE, "mlwatch_container_cpu_quota_seconds", "seconds", "CPU time the container's cgroup may use per period (cpu.max); absent when unlimited.");
MW_METRIC(PERIOD, MW_GAUGE, "mlwatch_container_cpu_period_seconds", "seconds", "Length of the CPU quota enforcement period.");
MW_METRIC(MEM_USAGE, MW_GAUGE, "mlwatch_container_memory_usage_bytes", "bytes", "Memory charged to the container's cgroup, page cache included (memory.current).");
MW_METRIC(MEM_WS, MW_GAUGE, "mlwatch_container_memory_working_set_bytes", "bytes", "Memory usage minus inactive file cache, the figure the kubelet evicts on.");
MW_METRIC(MEM_RSS, MW_GAUGE, "mlwatch_container_memory_rss_bytes", "bytes", "Anonymous memory of the container's cgroup (v2 anon, v1 total_rss).");
MW_METRIC(MEM_LIMIT, MW_GAUGE, "mlwatch_container_memory_limit_bytes", "bytes", "Memory limit of the container's cgroup (memory.max); absent when unlimited.");
MW_METRIC(PROCESSES, MW_GAUGE, "mlwatch_container_processes", "", "Processes in the container's cgroup (cgroup.procs).");
MW_METRIC(PSI_WAITING, MW_COUNTER, "mlwatch_container_pressure_waiting_seconds_total", "seconds", "Time some tasks of the container's cgroup waited for the resource (PSI some).");
MW_METRIC(PSI_STALLED, MW_COUNTER, "mlwatch_container_pressure_stalled_seconds_total", "seconds", "Time all non-idle tasks of the container's cgroup stalled on the resource (PSI full).");
MW_METRIC(INFO, MW_INFO, "mlwatch_container_info", "", "A reported cgroup and what its path and the kubelet's logs tell about it; value 1.");
/* clang-format on */

static const char *const PSI_RESOURCES[3] = {"cpu", "memory", "io"};

/* --- emitting -------------------------------------------------------------- */

typedef enum {
    V_CPU,
    V_THROTTLED,
    V_THROTTLED_PERIODS,
    V_PERIODS,
    V_QUOTA,
    V_PERIOD,
    V_MEM_USAGE,
    V_MEM_WS,
    V_MEM_RSS,
    V_MEM_LIMIT,
    V_PROCESSES,
    NVALUES
} cg_value;

static const mw_metric_desc *const VALUE_DESC[NVALUES] = {
    [V_CPU] = &CPU,
    [V_THROTTLED] = &THROTTLED,
    [V_THROTTLED_PERIODS] = &THROTTLED_PERIODS,
    [V_PERIODS] = &PERIODS,
    [V_QUOTA] = &QUOTA,
    [V_PERIOD] = &PERIOD,
    [V_MEM_USAGE] = &MEM_USAGE,
    [V_MEM_WS] = &MEM_WS,
    [V_MEM_RSS] = &MEM_RSS,
    [V_MEM_LIMIT] = &MEM_LIMIT,
    [V_PROCESSES] = &PROCESSES,
};

/* Value number V of e, 0 when e has none. */
static int value_of(const cg_entry *e, cg_value v, double *out)
{
    /* Throttling exists only under a CPU quota: the kernel counts periods
     * only while one is set. Cgroups that never had one get no such series. */
    int throttling = e->cpu.has_throttling && (e->has_quota || e->cpu.nr_periods > 0);
    switch (v) {
    case V_CPU:
        *out = (double)e->cpu.usage_ns / 1e9;
        return 1;
    case V_THROTTLED:
        *out = (double)e->cpu.throttled_ns / 1e9;
        return throttling;
    case V_THROTTLED_PERIODS:
        *out = (double)e->cpu.nr_throttled;
        return throttling;
    case V_PERIODS:
        *out = (double)e->cpu.nr_periods;
        return throttling;
    case V_QUOTA:
        *out = e->quota_s;
        return e->has_quota;
    case V_PERIOD:
        *out = e->period_s;
        return e->has_quota;
    case V_MEM_USAGE:
        *out = (double)e->mem_usage;
        return e->has_mem;
    case V_MEM_WS:
        /* cAdvisor's working set: usage minus inactive file cache, at least 0. */
        *out = e->mem_usage > e->memstat.inactive_file
                   ? (double)(e->mem_usage - e->memstat.inactive_file)
                   : 0;
        return e->has_mem && e->has_memstat;
    case V_MEM_RSS:
        *out = (double)e->memstat.rss;
        return e->has_mem && e->has_memstat && e->memstat.has_rss;
    case V_MEM_LIMIT:
        *out = e->mem_limit;
        return e->has_mem_limit;
    case V_PROCESSES:
        *out = e->nprocs;
        return e->nprocs >= 0;
    default:
        return 0;
    }
}

/* A resource's waiting and stalled samples one after the other, from one
 * label array: the snapshot gives both the same copy of the labels (each
 * family's samples keep their order). */
static void emit_psi(mw_collect_ctx *ctx, const cg_entry *e)
{
    for (int i = 0; i < 3; i++) {
        if (!e->psi_some[i] && !e->psi_full[i]) continue;
        mw_label l[5];
        memcpy(l, e->labels, e->nlabels * sizeof(mw_label));
        l[e->nlabels] = (mw_label){"resource", PSI_RESOURCES[i]};
        if (e->psi_some[i])
            mw_emitv(ctx->snap, &PSI_WAITING, (double)e->psi_some_us[i] / 1e6, e->nlabels + 1, l);
        if (e->psi_full[i])
            mw_emitv(ctx->snap, &PSI_STALLED, (double)e->psi_full_us[i] / 1e6, e->nlabels + 1, l);
    }
}

static void emit_info(mw_collect_ctx *ctx, const cg_entry *e)
{
    mw_label l[8];
    size_t n = 0;
    for (size_t i = 0; i < e->nlabels; i++)
        l[n++] = e->labels[i];
    if (e->node.kind == MW_CG_K8S_CONTAINER) {
        l[n++] = (mw_label){"pod_uid", e->node.pod_uid};
        l[n++] = (mw_label){"qos", mw_cg_qos_name(e->node.qos)};
        l[n++] = (mw_label){"runtime", mw_cg_runtime_name(e->node.runtime)};
        l[n++] = (mw_label){"cgroup", e->cgroup};
    } else if (e->node.runtime != MW_RT_NONE) {
        l[n++] = (mw_label){"runtime", mw_cg_runtime_name(e->node.runtime)};
    }
    mw_emitv(ctx->snap, &INFO, 1, n, l);
}

static int by_path(const void *a, const void *b)
{
    return strcmp((*(cg_entry *const *)a)->cgroup, (*(cg_entry *const *)b)->cgroup);
}

/* Family by family, cgroups by path: the order does not depend on the order
 * of directory entries (which on ext4 depends on the file system's hash
 * seed), and is sorted again only when cgroups appeared. */
void mw_cgroup_emit_all(cg_state *st, mw_collect_ctx *ctx)
{
    if (st->unsorted) {
        qsort(st->entries, st->nentries, sizeof(*st->entries), by_path);
        st->unsorted = 0;
    }
    for (int v = 0; v < NVALUES; v++)
        for (size_t i = 0; i < st->nentries; i++) {
            const cg_entry *e = st->entries[i];
            double x;
            if (e->ok && value_of(e, (cg_value)v, &x))
                mw_emitv(ctx->snap, VALUE_DESC[v], x, e->nlabels, e->labels);
        }
    for (size_t i = 0; i < st->nentries; i++)
        if (st->entries[i]->ok) emit_psi(ctx, st->entries[i]);
    for (size_t i = 0; i < st->nentries; i++)
        if (st->entries[i]->ok) emit_info(ctx, st->entries[i]);
}
