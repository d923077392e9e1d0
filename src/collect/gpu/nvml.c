/* nvml.c - the NVIDIA backend: libnvidia-ml.so.1 loaded with dlopen, the
 * versioned symbols resolved by name, declarations from nvml_abi.h.
 *
 * Every call goes through check(): NOT_SUPPORTED (or a symbol this driver
 * lacks) switches that reading off for the device for good, NO_PERMISSION
 * too after one report; GPU_IS_LOST marks the device lost (the next poll
 * probes it again); anything else is reported and retried next time. */
#include "gpu.h"
#include "nvml_abi.h"
#include "nvml_gpm.h"
#include "../../core/parse.h"
#include "../../core/util.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct nvml_fns {
    nvmlInit_v2_fn init;
    nvmlShutdown_fn shutdown;
    nvmlErrorString_fn error_string;
    nvmlSystemGetDriverVersion_fn driver_version;
    nvmlDeviceGetCount_v2_fn count;
    nvmlDeviceGetHandleByIndex_v2_fn handle;
    nvmlDeviceGetStr_fn uuid, name;
    nvmlDeviceGetPciInfo_v3_fn pci;
    nvmlDeviceGetUtilizationRates_fn util;
    nvmlDeviceGetMemoryInfo_fn memory;
    nvmlDeviceGetUint_fn power, power_limit, pcie_gen, pcie_gen_max, pcie_width, pcie_width_max;
    nvmlDeviceGetUint_fn pcie_replay, numa, gi_id, ci_id, max_mig;
    nvmlDeviceGetUll_fn energy, clock_events;
    nvmlDeviceGetTemperature_fn temp;
    nvmlDeviceGetClockInfo_fn clock, max_clock;
    nvmlDeviceGetPerformanceState_fn pstate;
    nvmlDeviceGetTotalEccErrors_fn ecc;
    nvmlDeviceGetRemappedRows_fn remapped;
    nvmlDeviceGetRetiredPages_fn retired;
    nvmlDeviceGetNvLinkState_fn link_state;
    nvmlDeviceGetNvLinkErrorCounter_fn link_errors;
    nvmlDeviceGetCpuAffinity_fn affinity;
    nvmlDeviceGetComputeRunningProcesses_fn procs;
    nvmlDeviceGetProcessUtilization_fn proc_util;
    nvmlDeviceGetMigMode_fn mig_mode;
    nvmlDeviceGetMigDeviceHandleByIndex_fn mig_handle;
    nvmlDeviceGetAttributes_v2_fn attributes;
    nvmlEventSetCreate_fn event_set_create;
    nvmlEventSetFree_fn event_set_free;
    nvmlDeviceRegisterEvents_fn register_events;
    nvmlEventSetWait_v2_fn event_wait;
} nvml_fns;

/* Symbol name (and an older name with the same signature, or NULL). */
static const struct sym {
    size_t offset;
    const char *name, *fallback;
    int required; /* 1: required; 0: optional; */
    int field;    /* the reading that needs it (MW_GF_*), or -1 */
} syms[] = {
#define S(f, n, fb, req)                                                                           \
    {                                                                                              \
        offsetof(nvml_fns, f), n, fb, req, -1                                                      \
    }
#define F(f, n, fb, field)                                                                         \
    {                                                                                              \
        offsetof(nvml_fns, f), n, fb, 0, field                                                     \
    }
    /* clang-format off */
    S(init, "nvmlInit_v2", NULL, 1),
    S(shutdown, "nvmlShutdown", NULL, 1),
    S(error_string, "nvmlErrorString", NULL, 0),
    S(driver_version, "nvmlSystemGetDriverVersion", NULL, 0),
    S(count, "nvmlDeviceGetCount_v2", NULL, 1),
    S(handle, "nvmlDeviceGetHandleByIndex_v2", NULL, 1),
    S(uuid, "nvmlDeviceGetUUID", NULL, 0),
    S(name, "nvmlDeviceGetName", NULL, 0),
    S(pci, "nvmlDeviceGetPciInfo_v3", NULL, 0),
    F(util, "nvmlDeviceGetUtilizationRates", NULL, MW_GF_UTIL),
    F(memory, "nvmlDeviceGetMemoryInfo", NULL, MW_GF_MEMORY),
    F(power, "nvmlDeviceGetPowerUsage", NULL, MW_GF_POWER),
    F(power_limit, "nvmlDeviceGetEnforcedPowerLimit", NULL, MW_GF_POWER_LIMIT),
    F(pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration", NULL, MW_GF_PCIE_GEN),
    F(pcie_gen_max, "nvmlDeviceGetMaxPcieLinkGeneration", NULL, MW_GF_PCIE_GEN_MAX),
    F(pcie_width, "nvmlDeviceGetCurrPcieLinkWidth", NULL, MW_GF_PCIE_WIDTH),
    F(pcie_width_max, "nvmlDeviceGetMaxPcieLinkWidth", NULL, MW_GF_PCIE_WIDTH_MAX),
    F(pcie_replay, "nvmlDeviceGetPcieReplayCounter", NULL, MW_GF_PCIE_REPLAY),
    S(numa, "nvmlDeviceGetNumaNodeId", NULL, 0),
    S(gi_id, "nvmlDeviceGetGpuInstanceId", NULL, 0),
    S(ci_id, "nvmlDeviceGetComputeInstanceId", NULL, 0),
    S(max_mig, "nvmlDeviceGetMaxMigDeviceCount", NULL, 0),
    F(energy, "nvmlDeviceGetTotalEnergyConsumption", NULL, MW_GF_ENERGY),
    F(clock_events, "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons", MW_GF_CLOCK_EVENTS),
    F(temp, "nvmlDeviceGetTemperature", NULL, MW_GF_TEMP),
    S(clock, "nvmlDeviceGetClockInfo", NULL, 0),
    S(max_clock, "nvmlDeviceGetMaxClockInfo", NULL, 0),
    F(pstate, "nvmlDeviceGetPerformanceState", NULL, MW_GF_PSTATE),
    F(ecc, "nvmlDeviceGetTotalEccErrors", NULL, MW_GF_ECC),
    F(remapped, "nvmlDeviceGetRemappedRows", NULL, MW_GF_REMAPPED),
    F(retired, "nvmlDeviceGetRetiredPages", NULL, MW_GF_RETIRED),
    F(link_state, "nvmlDeviceGetNvLinkState", NULL, MW_GF_NVLINK),
    F(link_errors, "nvmlDeviceGetNvLinkErrorCounter", NULL, MW_GF_NVLINK),
    S(affinity, "nvmlDeviceGetCpuAffinity", NULL, 0),
    F(procs, "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2", MW_GF_PROCS),
    F(proc_util, "nvmlDeviceGetProcessUtilization", NULL, MW_GF_PROC_UTIL),
    F(mig_mode, "nvmlDeviceGetMigMode", NULL, MW_GF_MIG),
    S(mig_handle, "nvmlDeviceGetMigDeviceHandleByIndex", NULL, 0),
    S(attributes, "nvmlDeviceGetAttributes_v2", NULL, 0),
    S(event_set_create, "nvmlEventSetCreate", NULL, 0),
    S(event_set_free, "nvmlEventSetFree", NULL, 0),
    S(register_events, "nvmlDeviceRegisterEvents", NULL, 0),
    S(event_wait, "nvmlEventSetWait_v2", NULL, 0),
/* clang-format on */
#undef S
#undef F
};

#define MAX_SAMPLES 4096

typedef struct nvml_dev {
    nvmlDevice_t h;
    uint64_t unsupported;     /* MW_GF bits not asked again */
    uint64_t mig_unsupported; /* same, for readings of MIG devices */
    unsigned long long last_sample_us;
    unsigned nlinks; /* links that answered at discovery (probe once) */
    int links_probed;
} nvml_dev;

typedef struct nvml {
    void *lib;
    nvml_fns f;
    const mw_hostfs *host;
    nvmlEventSet_t events;
    uint64_t absent; /* readings whose function this library lacks */
    unsigned n;
    nvml_dev devs[MW_GPU_MAX_DEVICES];
    nvmlProcessInfo_t procbuf[MW_GPU_MAX_PROCS];
    nvmlProcessUtilizationSample_t *samples;
    unsigned samples_cap;
    mw_nvml_gpm *gpm; /* per-GPU and per-MIG-instance activity (nvml_gpm.c) */
} nvml;

static const char *errstr(nvml *x, nvmlReturn_t rc)
{
    const char *s = x->f.error_string ? x->f.error_string(rc) : NULL;
    return s ? s : "unknown NVML error";
}

/* 1 when rc is success; otherwise files the failure as described above. */
static int check(nvml *x, unsigned i, mw_gpu_dev *d, uint64_t *unsupported, int field,
                 nvmlReturn_t rc, const char *call, const mw_gpu_sink *sink)
{
    if (rc == NVML_SUCCESS) return 1;
    switch (rc) {
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
        if (field >= 0) *unsupported |= MW_GF_BIT(field);
        return 0;
    case NVML_ERROR_NO_PERMISSION:
        if (field >= 0) *unsupported |= MW_GF_BIT(field);
        sink->error(sink->ctx, i, call, "no permission (not asked again)");
        return 0;
    case NVML_ERROR_GPU_IS_LOST:
        d->lost = 1;
        return 0;
    default: {
        char what[160];
        snprintf(what, sizeof(what), "%s (NVML error %d)", errstr(x, rc), (int)rc);
        sink->error(sink->ctx, i, call, what);
        return 0;
    }
    }
}

#define ASK(x, nd, field) ((nd)->unsupported & MW_GF_BIT(field) ? 0 : 1)
#define OK(field, expr, call) check(x, i, d, &nd->unsupported, field, (expr), call, sink)
#define NOFN NVML_ERROR_FUNCTION_NOT_FOUND

static void read_string(nvml *x, unsigned i, mw_gpu_dev *d, nvmlDeviceGetStr_fn fn,
                        const char *call, char *out, size_t size, const mw_gpu_sink *sink)
{
    char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE + 1];
    memset(buf, 0, sizeof(buf));
    nvml_dev *nd = &x->devs[i];
    uint64_t ignored = 0;
    nvmlReturn_t rc = fn ? fn(nd->h, buf, NVML_DEVICE_NAME_V2_BUFFER_SIZE) : NOFN;
    if (check(x, i, d, &ignored, -1, rc, call, sink))
        mw_gpu_clean_string(out, size, buf, NVML_DEVICE_NAME_V2_BUFFER_SIZE);
}

static void read_numa_and_affinity(nvml *x, unsigned i, mw_gpu_dev *d, const mw_gpu_sink *sink)
{
    nvml_dev *nd = &x->devs[i];
    unsigned node;
    nvmlReturn_t rc = x->f.numa ? x->f.numa(nd->h, &node) : NOFN;
    if (check(x, i, d, &nd->unsupported, -1, rc, "nvmlDeviceGetNumaNodeId", sink)) {
        d->numa_node = (int32_t)node;
        d->have |= MW_GF_BIT(MW_GF_NUMA);
    }
    unsigned long set[16];
    memset(set, 0, sizeof(set));
    rc = x->f.affinity ? x->f.affinity(nd->h, 16, set) : NOFN;
    if (check(x, i, d, &nd->unsupported, -1, rc, "nvmlDeviceGetCpuAffinity", sink)) {
        uint64_t bits[16];
        for (int k = 0; k < 16; k++)
            bits[k] = (uint64_t)set[k];
        mw_gpu_format_cpulist(bits, sizeof(unsigned long) == 8 ? 16 : 8, d->cpu_affinity,
                              sizeof(d->cpu_affinity));
        if (d->cpu_affinity[0]) d->have |= MW_GF_BIT(MW_GF_CPU_AFFINITY);
    }
    if (!d->pci_bus_id[0] || !x->host) return;
    /* The kernel knows both as well; NVML drivers older than R525 lack the
     * NUMA call, and the sysfs files work in a container given --root. */
    char dir[96];
    snprintf(dir, sizeof(dir), "sys/bus/pci/devices/%s", d->pci_bus_id);
    int fd = mw_hostfs_opendirfd(x->host, dir);
    if (fd < 0) return;
    char line[256];
    if (!(d->have & MW_GF_BIT(MW_GF_NUMA)) && mw_read_lineat(fd, "numa_node", line, 16) == 0) {
        const char *p = line;
        int64_t v;
        if (mw_parse_i64(&p, &v) == 0 && !*p && v >= 0 && v < 65536) {
            d->numa_node = (int32_t)v;
            d->have |= MW_GF_BIT(MW_GF_NUMA);
        }
    }
    if (!(d->have & MW_GF_BIT(MW_GF_CPU_AFFINITY)) &&
        mw_read_lineat(fd, "local_cpulist", line, sizeof(line)) == 0) {
        uint64_t bits[16];
        if (mw_parse_cpulist(line, bits, 1024) > 0) {
            mw_gpu_format_cpulist(bits, 16, d->cpu_affinity, sizeof(d->cpu_affinity));
            if (d->cpu_affinity[0]) d->have |= MW_GF_BIT(MW_GF_CPU_AFFINITY);
        }
    }
    close(fd);
}

static void nvml_identify(void *impl, unsigned i, mw_gpu_dev *d, const mw_gpu_sink *sink)
{
    nvml *x = impl;
    nvml_dev *nd = &x->devs[i];
    snprintf(d->index, sizeof(d->index), "%u", i);
    nd->unsupported |= x->absent;
    nd->mig_unsupported |= x->absent;
    if (!nd->h) {
        d->lost = 1; /* could not be opened: probed again every poll */
        return;
    }
    read_string(x, i, d, x->f.uuid, "nvmlDeviceGetUUID", d->uuid, sizeof(d->uuid), sink);
    read_string(x, i, d, x->f.name, "nvmlDeviceGetName", d->model, sizeof(d->model), sink);
    nvmlPciInfo_t pci;
    memset(&pci, 0, sizeof(pci));
    uint64_t ignored = 0;
    nvmlReturn_t rc = x->f.pci ? x->f.pci(nd->h, &pci) : NOFN;
    if (check(x, i, d, &ignored, -1, rc, "nvmlDeviceGetPciInfo_v3", sink)) {
        char bus[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE + 1];
        mw_gpu_clean_string(bus, sizeof(bus), pci.busId, sizeof(pci.busId));
        if (mw_gpu_parse_pci_bus_id(bus, d->pci_bus_id, sizeof(d->pci_bus_id)) < 0) {
            sink->error(sink->ctx, i, "nvmlDeviceGetPciInfo_v3", "malformed PCI bus ID");
            d->pci_bus_id[0] = '\0';
        }
    }
    read_numa_and_affinity(x, i, d, sink);
    if (x->events && x->f.register_events)
        x->f.register_events(nd->h, nvmlEventTypeXidCriticalError, x->events);
}

/* A lost device: is it back? Same index, a UUID that answers. */
static int probe_lost(nvml *x, unsigned i, mw_gpu_dev *d, const mw_gpu_sink *sink)
{
    nvml_dev *nd = &x->devs[i];
    nvmlDevice_t h;
    if (x->f.handle(i, &h) != NVML_SUCCESS) return 0;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    if (!x->f.uuid || x->f.uuid(h, uuid, sizeof(uuid)) != NVML_SUCCESS) return 0;
    nd->h = h;
    nd->unsupported = nd->mig_unsupported = 0; /* a reset GPU may differ: ask again */
    nd->links_probed = 0;
    nd->last_sample_us = 0;
    mw_nvml_gpm_forget(x->gpm, i);
    d->lost = 0;
    d->have = 0;
    nvml_identify(x, i, d, sink);
    return !d->lost;
}

static void read_fast(nvml *x, unsigned i, mw_gpu_dev *d, const mw_gpu_sink *sink)
{
    nvml_dev *nd = &x->devs[i];
    nvmlDevice_t h = nd->h;
    if (ASK(x, nd, MW_GF_UTIL)) {
        nvmlUtilization_t u;
        if (OK(MW_GF_UTIL, x->f.util(h, &u), "nvmlDeviceGetUtilizationRates")) {
            d->util_pct = u.gpu > 100 ? 100 : u.gpu;
            d->mem_util_pct = u.memory > 100 ? 100 : u.memory;
            d->have |= MW_GF_BIT(MW_GF_UTIL) | MW_GF_BIT(MW_GF_MEM_UTIL);
        }
    }
    if (d->lost) return;
    if (ASK(x, nd, MW_GF_MEMORY)) {
        nvmlMemory_t m;
        if (OK(MW_GF_MEMORY, x->f.memory(h, &m), "nvmlDeviceGetMemoryInfo")) {
            d->mem_used = m.used;
            d->mem_total = m.total;
            d->have |= MW_GF_BIT(MW_GF_MEMORY);
        }
    }
    unsigned v;
    if (!d->lost && ASK(x, nd, MW_GF_POWER) &&
        OK(MW_GF_POWER, x->f.power(h, &v), "nvmlDeviceGetPowerUsage")) {
        d->power_mw = v;
        d->have |= MW_GF_BIT(MW_GF_POWER);
    }
    unsigned long long e;
    if (!d->lost && ASK(x, nd, MW_GF_ENERGY) &&
        OK(MW_GF_ENERGY, x->f.energy(h, &e), "nvmlDeviceGetTotalEnergyConsumption")) {
        d->energy_mj = e;
        d->have |= MW_GF_BIT(MW_GF_ENERGY);
    }
    if (!d->lost && ASK(x, nd, MW_GF_TEMP) &&
        OK(MW_GF_TEMP, x->f.temp(h, NVML_TEMPERATURE_GPU, &v), "nvmlDeviceGetTemperature")) {
        d->temp_c = (int32_t)v;
        d->have |= MW_GF_BIT(MW_GF_TEMP);
    }
    if (!d->lost && ASK(x, nd, MW_GF_SM_CLOCK) &&
        OK(MW_GF_SM_CLOCK, x->f.clock(h, NVML_CLOCK_SM, &v), "nvmlDeviceGetClockInfo")) {
        d->sm_mhz = v;
        d->have |= MW_GF_BIT(MW_GF_SM_CLOCK);
    }
    if (!d->lost && ASK(x, nd, MW_GF_MEM_CLOCK) &&
        OK(MW_GF_MEM_CLOCK, x->f.clock(h, NVML_CLOCK_MEM, &v), "nvmlDeviceGetClockInfo")) {
        d->mem_mhz = v;
        d->have |= MW_GF_BIT(MW_GF_MEM_CLOCK);
    }
    if (!d->lost && ASK(x, nd, MW_GF_CLOCK_EVENTS) &&
        OK(MW_GF_CLOCK_EVENTS, x->f.clock_events(h, &e),
           "nvmlDeviceGetCurrentClocksEventReasons")) {
        d->clock_events = e;
        d->have |= MW_GF_BIT(MW_GF_CLOCK_EVENTS);
    }
    nvmlPstates_t ps;
    if (!d->lost && ASK(x, nd, MW_GF_PSTATE) &&
        OK(MW_GF_PSTATE, x->f.pstate(h, &ps), "nvmlDeviceGetPerformanceState") &&
        (unsigned)ps <= 15) {
        d->pstate = (uint32_t)ps;
        d->have |= MW_GF_BIT(MW_GF_PSTATE);
    }
}

static void read_uint(nvml *x, unsigned i, mw_gpu_dev *d, int field, nvmlDeviceGetUint_fn fn,
                      const char *call, uint32_t *out, const mw_gpu_sink *sink)
{
    nvml_dev *nd = &x->devs[i];
    unsigned v;
    if (d->lost || !ASK(x, nd, field)) return;
    if (OK(field, fn(nd->h, &v), call)) {
        *out = v;
        d->have |= MW_GF_BIT(field);
    }
}

static void read_health(nvml *x, unsigned i, mw_gpu_dev *d, const mw_gpu_sink *sink)
{
    nvml_dev *nd = &x->devs[i];
    nvmlDevice_t h = nd->h;
    unsigned v;
    read_uint(x, i, d, MW_GF_POWER_LIMIT, x->f.power_limit, "nvmlDeviceGetEnforcedPowerLimit",
              &d->power_limit_mw, sink);
    if (!d->lost && ASK(x, nd, MW_GF_SM_CLOCK_MAX) &&
        OK(MW_GF_SM_CLOCK_MAX, x->f.max_clock(h, NVML_CLOCK_SM, &v), "nvmlDeviceGetMaxClockInfo")) {
        d->sm_max_mhz = v;
        d->have |= MW_GF_BIT(MW_GF_SM_CLOCK_MAX);
    }
    if (!d->lost && ASK(x, nd, MW_GF_MEM_CLOCK_MAX) &&
        OK(MW_GF_MEM_CLOCK_MAX, x->f.max_clock(h, NVML_CLOCK_MEM, &v),
           "nvmlDeviceGetMaxClockInfo")) {
        d->mem_max_mhz = v;
        d->have |= MW_GF_BIT(MW_GF_MEM_CLOCK_MAX);
    }
    unsigned long long c, u;
    if (!d->lost && ASK(x, nd, MW_GF_ECC) &&
        OK(MW_GF_ECC, x->f.ecc(h, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &c),
           "nvmlDeviceGetTotalEccErrors") &&
        OK(MW_GF_ECC, x->f.ecc(h, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &u),
           "nvmlDeviceGetTotalEccErrors")) {
        d->ecc_corrected = c;
        d->ecc_uncorrected = u;
        d->have |= MW_GF_BIT(MW_GF_ECC);
    }
    unsigned r[4];
    if (!d->lost && ASK(x, nd, MW_GF_REMAPPED) &&
        OK(MW_GF_REMAPPED, x->f.remapped(h, &r[0], &r[1], &r[2], &r[3]),
           "nvmlDeviceGetRemappedRows")) {
        for (int k = 0; k < 4; k++)
            d->remapped[k] = r[k];
        d->have |= MW_GF_BIT(MW_GF_REMAPPED);
    }
    if (!d->lost && ASK(x, nd, MW_GF_RETIRED)) {
        int ok = 1;
        for (int cause = 0; cause < 2 && ok; cause++) {
            unsigned count = 0;
            nvmlReturn_t rc = x->f.retired(h, (nvmlPageRetirementCause_t)cause, &count, NULL);
            if (rc == NVML_ERROR_INSUFFICIENT_SIZE) rc = NVML_SUCCESS; /* count is set */
            ok = OK(MW_GF_RETIRED, rc, "nvmlDeviceGetRetiredPages");
            d->retired[cause] = count;
        }
        if (ok) d->have |= MW_GF_BIT(MW_GF_RETIRED);
    }
    read_uint(x, i, d, MW_GF_PCIE_GEN, x->f.pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration",
              &d->pcie_gen, sink);
    read_uint(x, i, d, MW_GF_PCIE_GEN_MAX, x->f.pcie_gen_max, "nvmlDeviceGetMaxPcieLinkGeneration",
              &d->pcie_gen_max, sink);
    read_uint(x, i, d, MW_GF_PCIE_WIDTH, x->f.pcie_width, "nvmlDeviceGetCurrPcieLinkWidth",
              &d->pcie_width, sink);
    read_uint(x, i, d, MW_GF_PCIE_WIDTH_MAX, x->f.pcie_width_max, "nvmlDeviceGetMaxPcieLinkWidth",
              &d->pcie_width_max, sink);
    uint32_t replay = 0;
    read_uint(x, i, d, MW_GF_PCIE_REPLAY, x->f.pcie_replay, "nvmlDeviceGetPcieReplayCounter",
              &replay, sink);
    if (d->have & MW_GF_BIT(MW_GF_PCIE_REPLAY)) d->pcie_replay = replay;
}

static void read_links(nvml *x, unsigned i, mw_gpu_dev *d, const mw_gpu_sink *sink)
{
    nvml_dev *nd = &x->devs[i];
    if (d->lost || !ASK(x, nd, MW_GF_NVLINK)) {
        d->nlinks = 0;
        return;
    }
    if (!nd->links_probed) {
        /* Links answer up to the first index this GPU does not have. */
        nd->links_probed = 1;
        nd->nlinks = 0;
        for (unsigned l = 0; l < MW_GPU_MAX_LINKS; l++) {
            nvmlEnableState_t st;
            if (x->f.link_state(nd->h, l, &st) != NVML_SUCCESS) break;
            nd->nlinks = l + 1;
        }
        if (nd->nlinks == 0) nd->unsupported |= MW_GF_BIT(MW_GF_NVLINK);
    }
    uint32_t n = 0;
    for (unsigned l = 0; l < nd->nlinks && !d->lost; l++) {
        nvmlEnableState_t st;
        if (!OK(-1, x->f.link_state(nd->h, l, &st), "nvmlDeviceGetNvLinkState") ||
            st != NVML_FEATURE_ENABLED)
            continue;
        mw_gpu_link *k = &d->links[n];
        memset(k, 0, sizeof(*k));
        k->link = l;
        for (int c = 0; c < 5; c++) {
            unsigned long long v;
            nvmlReturn_t rc = x->f.link_errors(nd->h, l, (nvmlNvLinkErrorCounter_t)c, &v);
            if (rc == NVML_SUCCESS) {
                k->errors[c] = v;
                k->have |= (uint8_t)(1u << c);
            } else if (rc != NVML_ERROR_NOT_SUPPORTED) {
                OK(-1, rc, "nvmlDeviceGetNvLinkErrorCounter");
            }
        }
        if (k->have) n++;
    }
    d->nlinks = n;
    if (n) d->have |= MW_GF_BIT(MW_GF_NVLINK);
}

/* Append the compute processes of handle h (a GPU or a MIG device). */
static int list_procs(nvml *x, unsigned i, mw_gpu_dev *d, nvmlDevice_t h, uint32_t gi, uint32_t ci,
                      uint64_t *unsupported, const mw_gpu_sink *sink)
{
    unsigned count = MW_GPU_MAX_PROCS - d->nprocs;
    nvmlReturn_t rc = x->f.procs(h, &count, x->procbuf);
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
        sink->error(sink->ctx, i, "nvmlDeviceGetComputeRunningProcesses_v3",
                    "more processes than mlwatch keeps per GPU (256): not listed");
        return -1;
    }
    if (!check(x, i, d, unsupported, MW_GF_PROCS, rc, "nvmlDeviceGetComputeRunningProcesses_v3",
               sink))
        return -1;
    for (unsigned k = 0; k < count && d->nprocs < MW_GPU_MAX_PROCS; k++) {
        mw_gpu_proc *p = &d->procs[d->nprocs++];
        memset(p, 0, sizeof(*p));
        p->pid = x->procbuf[k].pid;
        p->mem_bytes = x->procbuf[k].usedGpuMemory == MW_NVML_VALUE_NOT_AVAILABLE_ULL
                           ? UINT64_MAX
                           : x->procbuf[k].usedGpuMemory;
        p->gpu_instance = gi != MW_GPU_NONE ? gi : x->procbuf[k].gpuInstanceId;
        p->compute_instance = ci != MW_GPU_NONE ? ci : x->procbuf[k].computeInstanceId;
    }
    return 0;
}

/* Mean SM utilization per process over the samples since the last poll. */
static void read_proc_util(nvml *x, unsigned i, mw_gpu_dev *d, const mw_gpu_sink *sink)
{
    nvml_dev *nd = &x->devs[i];
    if (!ASK(x, nd, MW_GF_PROC_UTIL) || !d->nprocs) return;
    unsigned count = x->samples_cap;
    nvmlReturn_t rc = x->f.proc_util(nd->h, x->samples, &count, nd->last_sample_us);
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE && count > x->samples_cap && count <= MAX_SAMPLES) {
        x->samples = mw_xrealloc(x->samples, count * sizeof(*x->samples));
        x->samples_cap = count;
        rc = x->f.proc_util(nd->h, x->samples, &count, nd->last_sample_us);
    }
    if (rc == NVML_ERROR_NOT_FOUND)
        count = 0; /* no sample since the last poll */
    else if (!OK(MW_GF_PROC_UTIL, rc, "nvmlDeviceGetProcessUtilization"))
        return;
    if (count > x->samples_cap) count = x->samples_cap;
    for (uint32_t p = 0; p < d->nprocs; p++) {
        uint64_t sum = 0, n = 0;
        for (unsigned s = 0; s < count; s++) {
            if (x->samples[s].pid != d->procs[p].pid) continue;
            sum += x->samples[s].smUtil > 100 ? 100 : x->samples[s].smUtil;
            n++;
        }
        if (n) {
            d->procs[p].sm_permille = (uint16_t)((sum * 10 + n / 2) / n);
            d->procs[p].has_sm = 1;
        }
    }
    for (unsigned s = 0; s < count; s++)
        if (x->samples[s].timeStamp > nd->last_sample_us)
            nd->last_sample_us = x->samples[s].timeStamp;
    d->have |= MW_GF_BIT(MW_GF_PROC_UTIL);
}

static void read_mig_device(nvml *x, unsigned i, mw_gpu_dev *d, nvmlDevice_t mh,
                            const mw_gpu_sink *sink)
{
    nvml_dev *nd = &x->devs[i];
    mw_gpu_mig *m = &d->mig[d->nmig];
    memset(m, 0, sizeof(*m));
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE + 1], clean[NVML_DEVICE_NAME_V2_BUFFER_SIZE + 1];
    memset(name, 0, sizeof(name));
    uint64_t ignored = 0;
    if (x->f.uuid &&
        check(x, i, d, &ignored, -1, x->f.uuid(mh, name, NVML_DEVICE_UUID_V2_BUFFER_SIZE),
              "nvmlDeviceGetUUID", sink))
        mw_gpu_clean_string(m->uuid, sizeof(m->uuid), name, NVML_DEVICE_UUID_V2_BUFFER_SIZE);
    memset(name, 0, sizeof(name));
    if (x->f.name && x->f.name(mh, name, NVML_DEVICE_NAME_V2_BUFFER_SIZE) == NVML_SUCCESS)
        mw_gpu_clean_string(clean, sizeof(clean), name, NVML_DEVICE_NAME_V2_BUFFER_SIZE);
    else
        clean[0] = '\0';
    if (mw_gpu_parse_mig_profile(clean, m->profile, sizeof(m->profile)) < 0) {
        nvmlDeviceAttributes_t a;
        if (x->f.attributes && x->f.attributes(mh, &a) == NVML_SUCCESS)
            snprintf(m->profile, sizeof(m->profile), "%ug.%llugb", a.gpuInstanceSliceCount,
                     (a.memorySizeMB + 1023) / 1024);
    }
    unsigned gi = MW_GPU_NONE, ci = MW_GPU_NONE;
    if (!x->f.gi_id || x->f.gi_id(mh, &gi) != NVML_SUCCESS) gi = MW_GPU_NONE;
    if (!x->f.ci_id || x->f.ci_id(mh, &ci) != NVML_SUCCESS) ci = MW_GPU_NONE;
    m->gpu_instance = gi;
    m->compute_instance = ci;
    nvmlMemory_t mem;
    if (!(nd->mig_unsupported & MW_GF_BIT(MW_GF_MEMORY)) &&
        check(x, i, d, &nd->mig_unsupported, MW_GF_MEMORY, x->f.memory(mh, &mem),
              "nvmlDeviceGetMemoryInfo", sink)) {
        m->mem_used = mem.used;
        m->mem_total = mem.total;
        m->have |= MW_GF_BIT(MW_GF_MEMORY);
    }
    nvmlUtilization_t u;
    if (!d->lost && !(nd->mig_unsupported & MW_GF_BIT(MW_GF_UTIL)) &&
        check(x, i, d, &nd->mig_unsupported, MW_GF_UTIL, x->f.util(mh, &u),
              "nvmlDeviceGetUtilizationRates", sink)) {
        m->util_pct = u.gpu > 100 ? 100 : u.gpu;
        m->have |= MW_GF_BIT(MW_GF_UTIL);
    }
    d->nmig++;
    if (!d->lost && !(nd->mig_unsupported & MW_GF_BIT(MW_GF_PROCS)))
        list_procs(x, i, d, mh, gi, ci, &nd->mig_unsupported, sink);
}

static void read_procs_and_mig(nvml *x, unsigned i, mw_gpu_dev *d, const mw_gpu_sink *sink)
{
    nvml_dev *nd = &x->devs[i];
    d->nprocs = 0;
    d->nmig = 0;
    unsigned cur = 0, pending = 0;
    d->mig_enabled = 0;
    if (ASK(x, nd, MW_GF_MIG) &&
        OK(MW_GF_MIG, x->f.mig_mode(nd->h, &cur, &pending), "nvmlDeviceGetMigMode")) {
        d->mig_enabled = cur == NVML_DEVICE_MIG_ENABLE;
        d->have |= MW_GF_BIT(MW_GF_MIG);
    }
    if (d->lost) return;
    if (d->mig_enabled) {
        unsigned max = 0;
        if (!OK(-1, x->f.max_mig(nd->h, &max), "nvmlDeviceGetMaxMigDeviceCount")) return;
        for (unsigned k = 0; k < max && d->nmig < MW_GPU_MAX_MIG && !d->lost; k++) {
            nvmlDevice_t mh;
            nvmlReturn_t rc = x->f.mig_handle(nd->h, k, &mh);
            if (rc == NVML_ERROR_NOT_FOUND || rc == NVML_ERROR_INVALID_ARGUMENT) continue;
            if (!OK(-1, rc, "nvmlDeviceGetMigDeviceHandleByIndex")) continue;
            read_mig_device(x, i, d, mh, sink);
        }
        d->have |= MW_GF_BIT(MW_GF_PROCS);
        return;
    }
    if (ASK(x, nd, MW_GF_PROCS) &&
        list_procs(x, i, d, nd->h, MW_GPU_NONE, MW_GPU_NONE, &nd->unsupported, sink) == 0) {
        d->have |= MW_GF_BIT(MW_GF_PROCS);
        if (!d->lost) read_proc_util(x, i, d, sink);
    }
}

static void nvml_poll(void *impl, unsigned i, mw_gpu_dev *d, unsigned what, const mw_gpu_sink *sink)
{
    nvml *x = impl;
    if (d->lost && !probe_lost(x, i, d, sink)) return;
    /* Readings of the kind being refreshed are dropped first; the others
     * keep their last values. */
    static const uint64_t slow_bits =
        MW_GF_BIT(MW_GF_POWER_LIMIT) | MW_GF_BIT(MW_GF_SM_CLOCK_MAX) |
        MW_GF_BIT(MW_GF_MEM_CLOCK_MAX) | MW_GF_BIT(MW_GF_ECC) | MW_GF_BIT(MW_GF_REMAPPED) |
        MW_GF_BIT(MW_GF_RETIRED) | MW_GF_BIT(MW_GF_PCIE_GEN) | MW_GF_BIT(MW_GF_PCIE_GEN_MAX) |
        MW_GF_BIT(MW_GF_PCIE_WIDTH) | MW_GF_BIT(MW_GF_PCIE_WIDTH_MAX) |
        MW_GF_BIT(MW_GF_PCIE_REPLAY) | MW_GF_BIT(MW_GF_NVLINK) | MW_GF_BIT(MW_GF_PROCS) |
        MW_GF_BIT(MW_GF_PROC_UTIL) | MW_GF_BIT(MW_GF_MIG);
    static const uint64_t static_bits = MW_GF_BIT(MW_GF_NUMA) | MW_GF_BIT(MW_GF_CPU_AFFINITY);
    uint64_t keep = static_bits | (what & MW_GPU_SLOW ? 0 : slow_bits);
    if (!(what & MW_GPU_FAST)) keep |= ~(slow_bits | static_bits);
    d->have &= keep;
    if (what & MW_GPU_FAST) read_fast(x, i, d, sink);
    if ((what & MW_GPU_SLOW) && !d->lost) read_health(x, i, d, sink);
    if ((what & MW_GPU_SLOW) && !d->lost) read_links(x, i, d, sink);
    if ((what & MW_GPU_SLOW) && !d->lost) read_procs_and_mig(x, i, d, sink);
    if ((what & MW_GPU_SLOW) && !d->lost) mw_nvml_gpm_poll(x->gpm, i, x->devs[i].h, d, sink);
}

static void nvml_events(void *impl, const mw_gpu_sink *sink)
{
    nvml *x = impl;
    if (!x->events || !x->f.event_wait) return;
    for (int k = 0; k < 256; k++) {
        nvmlEventData_t ev;
        memset(&ev, 0, sizeof(ev));
        nvmlReturn_t rc = x->f.event_wait(x->events, &ev, 0);
        if (rc == NVML_ERROR_TIMEOUT) return;
        if (rc != NVML_SUCCESS) {
            if (rc != NVML_ERROR_GPU_IS_LOST) {
                char what[160];
                snprintf(what, sizeof(what), "%s (NVML error %d)", errstr(x, rc), (int)rc);
                sink->error(sink->ctx, MW_GPU_NONE, "nvmlEventSetWait_v2", what);
            }
            return;
        }
        if (!(ev.eventType & nvmlEventTypeXidCriticalError)) continue;
        for (unsigned i = 0; i < x->n; i++)
            if (x->devs[i].h == ev.device) sink->xid(sink->ctx, i, ev.eventData);
    }
}

static void nvml_close(void *impl)
{
    nvml *x = impl;
    if (!x) return;
    if (x->events && x->f.event_set_free) x->f.event_set_free(x->events);
    mw_nvml_gpm_close(x->gpm);
    x->f.shutdown();
    dlclose(x->lib);
    free(x->samples);
    free(x);
}

static const char *init_hint(nvmlReturn_t rc)
{
    switch (rc) {
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return ": the NVIDIA kernel module and libnvidia-ml are from different driver versions "
               "(reload the nvidia module or reboot after a driver upgrade)";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return ": the NVIDIA kernel module is not loaded";
    case NVML_ERROR_NO_PERMISSION:
        return ": no permission to open /dev/nvidia*";
    default:
        return "";
    }
}

int mw_gpu_nvml_open(mw_gpu_backend *b, const char *lib, const mw_hostfs *host, char *why,
                     size_t whysize)
{
    memset(b, 0, sizeof(*b));
    if (!lib[0] || strcmp(lib, "none") == 0) {
        snprintf(why, whysize, "switched off (--nvml-library none)");
        return -1;
    }
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, whysize, "%s", e ? e : lib);
        return -1;
    }
    nvml *x = mw_xcalloc(1, sizeof(*x));
    x->lib = h;
    x->host = host;
    for (size_t k = 0; k < MW_ARRAY_LEN(syms); k++) {
        void *p = dlsym(h, syms[k].name);
        if (!p && syms[k].fallback) p = dlsym(h, syms[k].fallback);
        if (!p && syms[k].required) {
            snprintf(why, whysize, "%s: no symbol %s (not an NVML library, or older than R450?)",
                     lib, syms[k].name);
            dlclose(h);
            free(x);
            return -1;
        }
        memcpy((char *)&x->f + syms[k].offset, &p, sizeof(p));
        if (!p && syms[k].field >= 0) x->absent |= MW_GF_BIT(syms[k].field);
    }
    if (!x->f.clock) x->absent |= MW_GF_BIT(MW_GF_SM_CLOCK) | MW_GF_BIT(MW_GF_MEM_CLOCK);
    if (!x->f.max_clock)
        x->absent |= MW_GF_BIT(MW_GF_SM_CLOCK_MAX) | MW_GF_BIT(MW_GF_MEM_CLOCK_MAX);
    if (!x->f.max_mig || !x->f.mig_handle) x->absent |= MW_GF_BIT(MW_GF_MIG);
    nvmlReturn_t rc = x->f.init();
    if (rc != NVML_SUCCESS) {
        snprintf(why, whysize, "%s: nvmlInit_v2 failed: %s (NVML error %d)%s", lib, errstr(x, rc),
                 (int)rc, init_hint(rc));
        dlclose(h);
        free(x);
        return -1;
    }
    unsigned n = 0;
    rc = x->f.count(&n);
    if (rc != NVML_SUCCESS) {
        snprintf(why, whysize, "%s: nvmlDeviceGetCount_v2 failed: %s (NVML error %d)", lib,
                 errstr(x, rc), (int)rc);
        nvml_close(x);
        return -1;
    }
    if (n > MW_GPU_MAX_DEVICES) n = MW_GPU_MAX_DEVICES;
    for (unsigned i = 0; i < n; i++) {
        /* A device that cannot be opened now is kept as lost: it is probed
         * again every poll. */
        if (x->f.handle(i, &x->devs[i].h) != NVML_SUCCESS) x->devs[i].h = NULL;
    }
    x->n = n;
    x->gpm = mw_nvml_gpm_open(h, x->f.error_string);
    x->samples_cap = 512;
    x->samples = mw_xcalloc(x->samples_cap, sizeof(*x->samples));
    if (x->f.event_set_create && x->f.event_set_create(&x->events) != NVML_SUCCESS)
        x->events = NULL;
    b->name = "nvml";
    b->impl = x;
    b->ndevices = n;
    char ver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE + 1];
    memset(ver, 0, sizeof(ver));
    unsigned maj, min, pat;
    if (x->f.driver_version &&
        x->f.driver_version(ver, NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE) == NVML_SUCCESS) {
        mw_gpu_clean_string(b->driver_version, sizeof(b->driver_version), ver,
                            NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE);
        if (mw_gpu_parse_driver_version(b->driver_version, &maj, &min, &pat) < 0)
            snprintf(why, whysize, "unusual driver version '%s'", b->driver_version);
    }
    b->identify = nvml_identify;
    b->poll = nvml_poll;
    b->events = nvml_events;
    b->close = nvml_close;
    return 0;
}
