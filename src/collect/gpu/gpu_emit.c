/* gpu_emit.c - GPU metric families and per-container attribution.
 *
 * Attribution (docs/gpu.md, "Shared GPUs"): every process of a device is
 * mapped to its container through the process map; processes outside any
 * container go to one bucket with empty namespace, pod and container.
 *   memory: a container's bytes are the sum of its processes' bytes; what
 *     the device reports beyond the processes (driver reservation, contexts)
 *     goes to the empty bucket, so the buckets sum to the device's used
 *     memory. (If the processes add up to more than the device, which
 *     sampling skew can cause, the device figure is split in proportion.)
 *   utilization: the device's utilization, held as an integer count of
 *     0.0001 units, is split among the buckets in proportion to their
 *     processes' SM utilization samples (nvmlDeviceGetProcessUtilization),
 *     else their memory, else equally, by the largest-remainder rule
 *     (mw_gpu_split): the shares sum to the device's value exactly. */
#include "gpu_emit.h"
#include "../procmap.h"
#include "../../core/util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define G(name, help, unit, type)                                                                  \
    {                                                                                              \
        name, help, unit, type                                                                     \
    }
/* clang-format off */
MW_METRIC(INFO, MW_INFO, "mlwatch_gpu_info", "", "GPU identity: driver version and the CPUs close to the GPU; the value is always 1.");
MW_METRIC(LOST, MW_GAUGE, "mlwatch_gpu_lost", "", "1 while the GPU does not answer (fallen off the bus, GPU_IS_LOST); it is probed every poll.");
MW_METRIC(UTIL, MW_GAUGE, "mlwatch_gpu_utilization_ratio", "ratio", "Fraction of the last sample period during which a kernel ran on the GPU.");
MW_METRIC(MEM_UTIL, MW_GAUGE, "mlwatch_gpu_memory_utilization_ratio", "ratio", "Fraction of the last sample period during which device memory was read or written.");
MW_METRIC(MEM_USED, MW_GAUGE, "mlwatch_gpu_memory_used_bytes", "bytes", "Device memory in use, including the driver's reserve.");
MW_METRIC(MEM_TOTAL, MW_GAUGE, "mlwatch_gpu_memory_total_bytes", "bytes", "Device memory installed.");
MW_METRIC(POWER, MW_GAUGE, "mlwatch_gpu_power_watts", "watts", "Power drawn by the GPU board.");
MW_METRIC(POWER_LIMIT, MW_GAUGE, "mlwatch_gpu_power_limit_watts", "watts", "Power limit the driver enforces.");
MW_METRIC(ENERGY, MW_COUNTER, "mlwatch_gpu_energy_joules_total", "joules", "Energy used by the GPU since the agent started counting, kept monotonic across driver reloads.");
MW_METRIC(TEMP, MW_GAUGE, "mlwatch_gpu_temperature_celsius", "celsius", "GPU core temperature.");
MW_METRIC(SM_CLOCK, MW_GAUGE, "mlwatch_gpu_sm_clock_hertz", "hertz", "Current SM clock.");
MW_METRIC(SM_CLOCK_MAX, MW_GAUGE, "mlwatch_gpu_sm_clock_max_hertz", "hertz", "Maximum SM clock.");
MW_METRIC(MEM_CLOCK, MW_GAUGE, "mlwatch_gpu_memory_clock_hertz", "hertz", "Current memory clock.");
MW_METRIC(MEM_CLOCK_MAX, MW_GAUGE, "mlwatch_gpu_memory_clock_max_hertz", "hertz", "Maximum memory clock.");
MW_METRIC(CLOCK_EVENT, MW_GAUGE, "mlwatch_gpu_clock_event_active", "", "1 while the reason holds the clocks down (throttling: power cap, thermal, idle, ...).");
MW_METRIC(PSTATE, MW_GAUGE, "mlwatch_gpu_performance_state", "", "Performance state, 0 (fastest) to 15 (slowest).");
MW_METRIC(ECC, MW_COUNTER, "mlwatch_gpu_ecc_errors_total", "", "Memory ECC errors since the driver loaded (volatile count).");
MW_METRIC(REMAPPED, MW_GAUGE, "mlwatch_gpu_remapped_rows", "", "Rows remapped for correctable and uncorrectable errors; pending and failure are 0 or 1.");
MW_METRIC(RETIRED, MW_GAUGE, "mlwatch_gpu_retired_pages", "", "Memory pages retired, by cause.");
MW_METRIC(PCIE_GEN, MW_GAUGE, "mlwatch_gpu_pcie_link_generation", "", "Current PCIe link generation.");
MW_METRIC(PCIE_GEN_MAX, MW_GAUGE, "mlwatch_gpu_pcie_link_max_generation", "", "Highest PCIe link generation of the GPU and system.");
MW_METRIC(PCIE_WIDTH, MW_GAUGE, "mlwatch_gpu_pcie_link_width", "", "Current PCIe link width (lanes).");
MW_METRIC(PCIE_WIDTH_MAX, MW_GAUGE, "mlwatch_gpu_pcie_link_max_width", "", "Widest PCIe link possible (lanes).");
MW_METRIC(PCIE_REPLAY, MW_COUNTER, "mlwatch_gpu_pcie_replay_errors_total", "", "PCIe replays (retransmissions) since reset.");
MW_METRIC(NVLINK, MW_COUNTER, "mlwatch_gpu_nvlink_errors_total", "", "NVLink errors per active link, by type.");
MW_METRIC(XID, MW_COUNTER, "mlwatch_gpu_xid_errors_total", "", "XID errors reported by the driver since the agent started.");
MW_METRIC(NUMA, MW_GAUGE, "mlwatch_gpu_numa_node", "", "NUMA node the GPU is attached to.");
MW_METRIC(PROCESSES, MW_GAUGE, "mlwatch_gpu_processes", "", "Compute processes running on the GPU.");
MW_METRIC(MIG_MODE, MW_GAUGE, "mlwatch_gpu_mig_enabled", "", "1 when the GPU is in MIG mode.");
MW_METRIC(MIG_USED, MW_GAUGE, "mlwatch_mig_memory_used_bytes", "bytes", "Memory in use in the MIG instance.");
MW_METRIC(MIG_TOTAL, MW_GAUGE, "mlwatch_mig_memory_total_bytes", "bytes", "Memory of the MIG instance.");
MW_METRIC(MIG_UTIL, MW_GAUGE, "mlwatch_mig_utilization_ratio", "ratio", "Activity of the MIG instance: the share of time its GPU instance's graphics/compute engine was busy over the last slow interval (NVML GPM, Hopper and newer).");
/* GPM (nvml_gpm.c), in MW_GPM_* order: the whole GPU's, and the MIG
 * instance's (its graphics activity is MIG_UTIL). */
static const mw_metric_desc GPU_GPM[MW_GPM_COUNT] = {
    G("mlwatch_gpu_graphics_activity_ratio", "Share of time the GPU's graphics/compute engine was busy over the last slow interval (NVML GPM, Hopper and newer; also in MIG mode, where mlwatch_gpu_utilization_ratio is absent).", "ratio", MW_GAUGE),
    G("mlwatch_gpu_sm_occupancy_ratio", "Resident warps versus the SMs' maximum over the last slow interval (NVML GPM).", "ratio", MW_GAUGE),
    G("mlwatch_gpu_dram_bandwidth_utilization_ratio", "DRAM bandwidth used versus the maximum over the last slow interval (NVML GPM).", "ratio", MW_GAUGE),
};
MW_METRIC(MIG_OCC, MW_GAUGE, "mlwatch_mig_sm_occupancy_ratio", "ratio", "Resident warps versus the maximum of the MIG instance's SMs over the last slow interval (NVML GPM, per GPU instance).");
MW_METRIC(MIG_DRAM, MW_GAUGE, "mlwatch_mig_dram_bandwidth_utilization_ratio", "ratio", "DRAM bandwidth used by the MIG instance's GPU instance versus its maximum over the last slow interval (NVML GPM).");
static const mw_metric_desc *const MIG_GPM[MW_GPM_COUNT] = {&MIG_UTIL, &MIG_OCC, &MIG_DRAM};
MW_METRIC(C_MEM, MW_GAUGE, "mlwatch_container_gpu_memory_used_bytes", "bytes", "GPU memory used by the container's processes; the sample with empty namespace, pod and container holds the rest, so a GPU's samples sum to mlwatch_gpu_memory_used_bytes.");
MW_METRIC(C_UTIL, MW_GAUGE, "mlwatch_container_gpu_utilization_ratio", "ratio", "The container's share of the GPU's utilization; a GPU's samples sum to mlwatch_gpu_utilization_ratio.");
MW_METRIC(C_MIG_MEM, MW_GAUGE, "mlwatch_container_mig_memory_used_bytes", "bytes", "Memory used by the container's processes in a MIG instance; a MIG instance's samples sum to mlwatch_mig_memory_used_bytes.");
MW_METRIC(DURATION, MW_GAUGE, "mlwatch_collector_duration_seconds", "seconds", "Wall-clock time the collector took in the last collection cycle.");
/* clang-format on */
#undef G

static const char *const reason_names[] = {
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "display_clock_setting",
};
static const char *const link_error_names[] = {"replay", "recovery", "crc_flit", "crc_data",
                                               "ecc_data"};

typedef struct bucket {
    char ns[128], pod[256], container[128];
    uint64_t mem, weight;
    int nprocs;
} bucket;

struct mw_gpu_emitter {
    bucket *b;  /* MW_GPU_MAX_PROCS + 1 */
    size_t *pb; /* bucket of each process */
    uint64_t *w, *out;
};

mw_gpu_emitter *mw_gpu_emitter_new(void)
{
    mw_gpu_emitter *e = mw_xcalloc(1, sizeof(*e));
    e->b = mw_xcalloc(MW_GPU_MAX_PROCS + 1, sizeof(bucket));
    e->pb = mw_xcalloc(MW_GPU_MAX_PROCS, sizeof(size_t));
    e->w = mw_xcalloc(MW_GPU_MAX_PROCS + 1, sizeof(uint64_t));
    e->out = mw_xcalloc(MW_GPU_MAX_PROCS + 1, sizeof(uint64_t));
    return e;
}

void mw_gpu_emitter_free(mw_gpu_emitter *e)
{
    if (!e) return;
    free(e->b);
    free(e->pb);
    free(e->w);
    free(e->out);
    free(e);
}

/* The GPU's identity labels followed by extra pairs. */
static size_t gpu_labels(const mw_gpu_dev *d, mw_label *l)
{
    l[0] = (mw_label){"gpu", d->index};
    l[1] = (mw_label){"uuid", d->uuid};
    l[2] = (mw_label){"model", d->model};
    l[3] = (mw_label){"pci_bus_id", d->pci_bus_id};
    return 4;
}

static void emit1(mw_collect_ctx *ctx, const mw_metric_desc *m, const mw_gpu_dev *d, double v,
                  const char *k1, const char *v1, const char *k2, const char *v2)
{
    mw_label l[8];
    size_t n = gpu_labels(d, l);
    if (k1) l[n++] = (mw_label){k1, v1};
    if (k2) l[n++] = (mw_label){k2, v2};
    mw_emitv(ctx->snap, m, v, n, l);
}

#define HAVE(d, f) ((d)->have & MW_GF_BIT(f))

static void emit_device(mw_collect_ctx *ctx, const mw_gpu_dev *d)
{
    mw_label l[8];
    size_t n = gpu_labels(d, l);
    l[n++] = (mw_label){"driver_version", d->driver_version ? d->driver_version : ""};
    l[n++] = (mw_label){"cpu_affinity", d->cpu_affinity};
    mw_emitv(ctx->snap, &INFO, 1, n, l);
    emit1(ctx, &LOST, d, d->lost ? 1 : 0, NULL, NULL, NULL, NULL);
    if (d->lost) return;
    if (HAVE(d, MW_GF_UTIL)) emit1(ctx, &UTIL, d, d->util_pct / 100.0, 0, 0, 0, 0);
    if (HAVE(d, MW_GF_MEM_UTIL)) emit1(ctx, &MEM_UTIL, d, d->mem_util_pct / 100.0, 0, 0, 0, 0);
    for (int g = 0; g < MW_GPM_COUNT; g++)
        if (d->gpm_have & (1u << g)) emit1(ctx, &GPU_GPM[g], d, d->gpm[g] / 100.0, 0, 0, 0, 0);
    if (HAVE(d, MW_GF_MEMORY)) {
        emit1(ctx, &MEM_USED, d, (double)d->mem_used, 0, 0, 0, 0);
        emit1(ctx, &MEM_TOTAL, d, (double)d->mem_total, 0, 0, 0, 0);
    }
    if (HAVE(d, MW_GF_POWER)) emit1(ctx, &POWER, d, d->power_mw / 1000.0, 0, 0, 0, 0);
    if (HAVE(d, MW_GF_POWER_LIMIT))
        emit1(ctx, &POWER_LIMIT, d, d->power_limit_mw / 1000.0, 0, 0, 0, 0);
    if (HAVE(d, MW_GF_ENERGY)) emit1(ctx, &ENERGY, d, d->energy_j, 0, 0, 0, 0);
    if (HAVE(d, MW_GF_TEMP)) emit1(ctx, &TEMP, d, d->temp_c, 0, 0, 0, 0);
    if (HAVE(d, MW_GF_SM_CLOCK)) emit1(ctx, &SM_CLOCK, d, d->sm_mhz * 1e6, 0, 0, 0, 0);
    if (HAVE(d, MW_GF_SM_CLOCK_MAX)) emit1(ctx, &SM_CLOCK_MAX, d, d->sm_max_mhz * 1e6, 0, 0, 0, 0);
    if (HAVE(d, MW_GF_MEM_CLOCK)) emit1(ctx, &MEM_CLOCK, d, d->mem_mhz * 1e6, 0, 0, 0, 0);
    if (HAVE(d, MW_GF_MEM_CLOCK_MAX))
        emit1(ctx, &MEM_CLOCK_MAX, d, d->mem_max_mhz * 1e6, 0, 0, 0, 0);
    if (HAVE(d, MW_GF_CLOCK_EVENTS))
        for (unsigned r = 0; r < MW_ARRAY_LEN(reason_names); r++)
            emit1(ctx, &CLOCK_EVENT, d, (double)(d->clock_events >> r & 1), "reason",
                  reason_names[r], 0, 0);
    if (HAVE(d, MW_GF_PSTATE)) emit1(ctx, &PSTATE, d, d->pstate, 0, 0, 0, 0);
    if (HAVE(d, MW_GF_ECC)) {
        emit1(ctx, &ECC, d, (double)d->ecc_corrected, "type", "corrected", 0, 0);
        emit1(ctx, &ECC, d, (double)d->ecc_uncorrected, "type", "uncorrected", 0, 0);
    }
    if (HAVE(d, MW_GF_REMAPPED)) {
        static const char *const t[] = {"correctable", "uncorrectable", "pending", "failure"};
        for (int k = 0; k < 4; k++)
            emit1(ctx, &REMAPPED, d, d->remapped[k], "type", t[k], 0, 0);
    }
    if (HAVE(d, MW_GF_RETIRED)) {
        emit1(ctx, &RETIRED, d, d->retired[0], "cause", "multiple_single_bit_ecc", 0, 0);
        emit1(ctx, &RETIRED, d, d->retired[1], "cause", "double_bit_ecc", 0, 0);
    }
    if (HAVE(d, MW_GF_PCIE_GEN)) emit1(ctx, &PCIE_GEN, d, d->pcie_gen, 0, 0, 0, 0);
    if (HAVE(d, MW_GF_PCIE_GEN_MAX)) emit1(ctx, &PCIE_GEN_MAX, d, d->pcie_gen_max, 0, 0, 0, 0);
    if (HAVE(d, MW_GF_PCIE_WIDTH)) emit1(ctx, &PCIE_WIDTH, d, d->pcie_width, 0, 0, 0, 0);
    if (HAVE(d, MW_GF_PCIE_WIDTH_MAX))
        emit1(ctx, &PCIE_WIDTH_MAX, d, d->pcie_width_max, 0, 0, 0, 0);
    if (HAVE(d, MW_GF_PCIE_REPLAY)) emit1(ctx, &PCIE_REPLAY, d, (double)d->pcie_replay, 0, 0, 0, 0);
    for (uint32_t k = 0; HAVE(d, MW_GF_NVLINK) && k < d->nlinks; k++) {
        char link[12];
        snprintf(link, sizeof(link), "%u", d->links[k].link);
        for (int c = 0; c < 5; c++)
            if (d->links[k].have >> c & 1)
                emit1(ctx, &NVLINK, d, (double)d->links[k].errors[c], "link", link, "type",
                      link_error_names[c]);
    }
    for (uint32_t k = 0; k < d->nxids; k++) {
        char xid[12];
        snprintf(xid, sizeof(xid), "%u", d->xids[k].xid);
        emit1(ctx, &XID, d, (double)d->xids[k].count, "xid", xid, 0, 0);
    }
    if (HAVE(d, MW_GF_NUMA)) emit1(ctx, &NUMA, d, d->numa_node, 0, 0, 0, 0);
    if (HAVE(d, MW_GF_MIG)) emit1(ctx, &MIG_MODE, d, d->mig_enabled, 0, 0, 0, 0);
    if (HAVE(d, MW_GF_PROCS)) emit1(ctx, &PROCESSES, d, d->nprocs, 0, 0, 0, 0);
}

static void mig_labels(const mw_gpu_dev *d, const mw_gpu_mig *m, char gi[12], char ci[12],
                       mw_label *l)
{
    snprintf(gi, 12, "%u", m->gpu_instance);
    snprintf(ci, 12, "%u", m->compute_instance);
    l[0] = (mw_label){"gpu", d->index};
    l[1] = (mw_label){"uuid", m->uuid};
    l[2] = (mw_label){"mig_profile", m->profile};
    l[3] = (mw_label){"gpu_instance", gi};
    l[4] = (mw_label){"compute_instance", ci};
}

static void emit_mig(mw_collect_ctx *ctx, const mw_gpu_dev *d)
{
    for (uint32_t k = 0; k < d->nmig; k++) {
        const mw_gpu_mig *m = &d->mig[k];
        char gi[12], ci[12];
        mw_label l[5];
        mig_labels(d, m, gi, ci, l);
        if (m->have & MW_GF_BIT(MW_GF_MEMORY)) {
            mw_emitv(ctx->snap, &MIG_USED, (double)m->mem_used, 5, l);
            mw_emitv(ctx->snap, &MIG_TOTAL, (double)m->mem_total, 5, l);
        }
        if (m->gpm_have & (1u << MW_GPM_GRAPHICS)) /* GPM first: a mean, not a snapshot */
            mw_emitv(ctx->snap, &MIG_UTIL, m->gpm[MW_GPM_GRAPHICS] / 100.0, 5, l);
        else if (m->have & MW_GF_BIT(MW_GF_UTIL))
            mw_emitv(ctx->snap, &MIG_UTIL, m->util_pct / 100.0, 5, l);
        for (int g = MW_GPM_SM_OCCUPANCY; g < MW_GPM_COUNT; g++)
            if (m->gpm_have & (1u << g)) mw_emitv(ctx->snap, MIG_GPM[g], m->gpm[g] / 100.0, 5, l);
    }
}

/* Group processes (those of one MIG instance when m is given) into
 * container buckets, remembering each process's bucket in e->pb; returns
 * the bucket count. */
static size_t group(mw_gpu_emitter *e, mw_collect_ctx *ctx, const mw_gpu_dev *d,
                    const mw_gpu_mig *m)
{
    size_t nb = 0;
    mw_container_ref ref;
    for (uint32_t p = 0; p < d->nprocs; p++) {
        const mw_gpu_proc *pr = &d->procs[p];
        e->pb[p] = SIZE_MAX;
        if (m &&
            (pr->gpu_instance != m->gpu_instance || pr->compute_instance != m->compute_instance))
            continue;
        if (!ctx->env->procmap || mw_procmap_lookup(ctx->env->procmap, (int)pr->pid, &ref) < 0)
            memset(&ref, 0, sizeof(ref));
        if (!ref.id[0] && !ref.pod[0]) /* not a container: the unattributed bucket */
            ref.namespace_[0] = ref.pod[0] = ref.container[0] = '\0';
        size_t b;
        for (b = 0; b < nb; b++)
            if (strcmp(e->b[b].ns, ref.namespace_) == 0 && strcmp(e->b[b].pod, ref.pod) == 0 &&
                strcmp(e->b[b].container, ref.container) == 0)
                break;
        if (b == nb) {
            bucket *nbk = &e->b[nb++];
            memset(nbk, 0, sizeof(*nbk));
            mw_strlcpy(nbk->ns, ref.namespace_, sizeof(nbk->ns));
            mw_strlcpy(nbk->pod, ref.pod, sizeof(nbk->pod));
            mw_strlcpy(nbk->container, ref.container, sizeof(nbk->container));
        }
        e->pb[p] = b;
        e->b[b].nprocs++;
        if (pr->mem_bytes != UINT64_MAX) e->b[b].mem += pr->mem_bytes;
    }
    return nb;
}

/* Index of the unattributed bucket, added when missing. */
static size_t rest_bucket(mw_gpu_emitter *e, size_t *nb)
{
    for (size_t b = 0; b < *nb; b++)
        if (!e->b[b].ns[0] && !e->b[b].pod[0] && !e->b[b].container[0]) return b;
    memset(&e->b[*nb], 0, sizeof(bucket));
    return (*nb)++;
}

/* Make the buckets' memory sum to used exactly (see the top of the file). */
static void balance_memory(mw_gpu_emitter *e, size_t *nb, uint64_t used)
{
    uint64_t sum = 0;
    for (size_t b = 0; b < *nb; b++)
        sum += e->b[b].mem;
    if (sum <= used) {
        if (used > sum) e->b[rest_bucket(e, nb)].mem += used - sum;
        return;
    }
    for (size_t b = 0; b < *nb; b++)
        e->w[b] = e->b[b].mem;
    mw_gpu_split(used, e->w, *nb, e->out);
    for (size_t b = 0; b < *nb; b++)
        e->b[b].mem = e->out[b];
}

static void container_labels(const mw_gpu_dev *d, const bucket *b, mw_label *l)
{
    l[0] = (mw_label){"namespace", b->ns};
    l[1] = (mw_label){"pod", b->pod};
    l[2] = (mw_label){"container", b->container};
    l[3] = (mw_label){"gpu", d->index};
}

static void emit_containers(mw_gpu_emitter *e, mw_collect_ctx *ctx, const mw_gpu_dev *d)
{
    if (!HAVE(d, MW_GF_PROCS)) return;
    size_t nb = group(e, ctx, d, NULL);
    if (HAVE(d, MW_GF_MEMORY)) balance_memory(e, &nb, d->mem_used);
    mw_label l[8];
    for (size_t b = 0; b < nb; b++) {
        container_labels(d, &e->b[b], l);
        mw_emitv(ctx->snap, &C_MEM, (double)e->b[b].mem, 4, l);
    }
    if (HAVE(d, MW_GF_UTIL) && d->nprocs) {
        /* Weights: SM samples when any process has a non-zero one, else
         * memory, else one per process. */
        int by_sm = 0, by_mem = 0;
        for (uint32_t p = 0; p < d->nprocs; p++) {
            by_sm |= d->procs[p].has_sm && d->procs[p].sm_permille > 0;
            by_mem |= d->procs[p].mem_bytes != UINT64_MAX && d->procs[p].mem_bytes > 0;
        }
        memset(e->w, 0, nb * sizeof(uint64_t));
        for (uint32_t p = 0; p < d->nprocs; p++) {
            const mw_gpu_proc *pr = &d->procs[p];
            if (e->pb[p] == SIZE_MAX) continue;
            e->w[e->pb[p]] += by_sm    ? pr->sm_permille
                              : by_mem ? (pr->mem_bytes != UINT64_MAX ? pr->mem_bytes : 0)
                                       : 1;
        }
        mw_gpu_split((uint64_t)d->util_pct * 100, e->w, nb, e->out);
        for (size_t b = 0; b < nb; b++) {
            if (!e->b[b].nprocs) continue; /* the memory-only rest bucket: always 0 */
            container_labels(d, &e->b[b], l);
            mw_emitv(ctx->snap, &C_UTIL, (double)e->out[b] / 10000.0, 4, l);
        }
    }
    for (uint32_t k = 0; k < d->nmig; k++) {
        const mw_gpu_mig *m = &d->mig[k];
        nb = group(e, ctx, d, m);
        if (m->have & MW_GF_BIT(MW_GF_MEMORY)) balance_memory(e, &nb, m->mem_used);
        char gi[12], ci[12];
        mw_label ml[5];
        mig_labels(d, m, gi, ci, ml);
        for (size_t b = 0; b < nb; b++) {
            container_labels(d, &e->b[b], l);
            l[4] = ml[2];
            l[5] = ml[3];
            l[6] = ml[4];
            mw_emitv(ctx->snap, &C_MIG_MEM, (double)e->b[b].mem, 7, l);
        }
    }
}

void mw_gpu_emit(mw_gpu_emitter *e, mw_collect_ctx *ctx, const mw_gpu_dev *devs, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        emit_device(ctx, &devs[i]);
    for (unsigned i = 0; i < n; i++)
        if (!devs[i].lost) emit_mig(ctx, &devs[i]);
    for (unsigned i = 0; i < n; i++)
        if (!devs[i].lost) emit_containers(e, ctx, &devs[i]);
    for (unsigned i = 0; i < n; i++)
        mw_emit(ctx->snap, &DURATION, (double)devs[i].poll_ns / 1e9, "collector", "gpu", "gpu",
                devs[i].index, MW_END);
}

/* clang-format off */
MW_METRIC(HEALTH, MW_GAUGE, "mlwatch_gpu_health", "", "The GPU's health, one sample per state (healthy, degraded, unhealthy, unknown), 1 for the current one; reason and action say why and what to do (docs/gpu.md, Health).");
MW_METRIC(NODE_HEALTH, MW_GAUGE, "mlwatch_gpu_node_health", "", "The node's GPU health, one sample per state, 1 for the current one: its worst GPU's, or its own (NVSwitch SXIDs, XIDs of PCI devices the collector does not read).");
MW_METRIC(RECENT_HW, MW_GAUGE, "mlwatch_gpu_recent_hardware_events", "", "XID records of a non-application class (hardware, memory, bus, NVLink, driver, thermal) on the GPU within the catalog's recent_hardware_window.");
MW_METRIC(XID_RECORDS, MW_COUNTER, "mlwatch_gpu_error_records_total", "", "XID and SXID records seen (kernel log, else NVML), before deduplication into events.");
MW_METRIC(XID_EVENTS, MW_COUNTER, "mlwatch_gpu_error_events_total", "", "Deduplicated GPU error events (one per GPU, code and window) created.");
MW_METRIC(KMSG_LOST, MW_COUNTER, "mlwatch_gpu_kernel_log_lost_records_total", "", "Kernel log records the ring overwrote before the agent read them (sequence gaps).");
/* clang-format on */

static void health_samples(mw_collect_ctx *ctx, const mw_metric_desc *m, const mw_gpu_dev *d,
                           int state, const char *reason, const char *action)
{
    for (int s = 0; s < MW_HEALTH_NSTATES; s++) {
        mw_label l[8];
        size_t n = 0;
        if (d) {
            l[n++] = (mw_label){"gpu", d->index};
            l[n++] = (mw_label){"uuid", d->uuid};
        }
        l[n++] = (mw_label){"state", mw_health_state_name(s)};
        l[n++] = (mw_label){"reason", reason};
        l[n++] = (mw_label){"action", action};
        mw_emitv(ctx->snap, m, s == state ? 1 : 0, n, l);
    }
}

void mw_gpu_emit_health(mw_collect_ctx *ctx, const mw_gpu_dev *devs, unsigned n, int fresh,
                        const mw_gpu_node_health *node, const mw_gpu_event_stats *st)
{
    for (unsigned i = 0; i < n; i++) {
        const mw_gpu_dev *d = &devs[i];
        if (!fresh) {
            health_samples(ctx, &HEALTH, d, MW_HEALTH_UNKNOWN, "no_reading", "none");
            continue;
        }
        health_samples(ctx, &HEALTH, d, d->health.state, d->health.reason,
                       mw_health_action_name(d->health.action));
        emit1(ctx, &RECENT_HW, d, d->health.recent_hardware_events, 0, 0, 0, 0);
    }
    if (!node) return;
    if (fresh)
        health_samples(ctx, &NODE_HEALTH, NULL, node->state, node->reason,
                       mw_health_action_name(node->action));
    else
        health_samples(ctx, &NODE_HEALTH, NULL, MW_HEALTH_UNKNOWN, "no_reading", "none");
    mw_emit(ctx->snap, &XID_RECORDS, (double)st->records, MW_END);
    mw_emit(ctx->snap, &XID_EVENTS, (double)st->events, MW_END);
    if (st->kmsg_on) mw_emit(ctx->snap, &KMSG_LOST, (double)st->kmsg_lost, MW_END);
}
