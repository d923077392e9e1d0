/* fake_nvml.c - a fake libnvidia-ml.so.1 for the tests.
 *
 * It exports the versioned NVML symbols mlwatch resolves, with the ABI of
 * the real library (types from src/collect/gpu/nvml_abi.h, whose layouts
 * are checked against nvml.h there), and answers from the scenario file
 * named by $FAKE_NVML_SCENARIO (tests/fakenvml/README.md), re-read whenever
 * the file changes so a test can change the world between cycles.
 *
 * Besides NVML it exports fake_nvml_calls(NAME), how many times NAME was
 * called since the last nvmlInit_v2 (tests check that unsupported readings
 * are not asked again every interval). */
#include "fake_nvml_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

struct nvmlEventSet_st {
    int dummy;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int refcount;
static struct nvmlDevice_st handles[FK_MAX_GPUS];
static struct nvmlDevice_st mig_handles[FK_MAX_GPUS][FK_MAX_MIG];
static struct nvmlEventSet_st the_set;
static unsigned long long registered; /* bit per GPU */
static unsigned delivered_id;         /* highest event id delivered */

/* Call counters by function name. */
#define MAX_COUNTERS 96
static struct {
    const char *name;
    unsigned long n;
} counters[MAX_COUNTERS];

static void count(const char *fn)
{
    for (int k = 0; k < MAX_COUNTERS; k++) {
        if (counters[k].name == fn || (counters[k].name && strcmp(counters[k].name, fn) == 0)) {
            counters[k].n++;
            return;
        }
        if (!counters[k].name) {
            counters[k].name = fn;
            counters[k].n = 1;
            return;
        }
    }
}

API unsigned long fake_nvml_calls(const char *fn)
{
    unsigned long n = 0;
    pthread_mutex_lock(&lock);
    for (int k = 0; k < MAX_COUNTERS && counters[k].name; k++)
        if (strcmp(counters[k].name, fn) == 0) n = counters[k].n;
    pthread_mutex_unlock(&lock);
    return n;
}

static int code_of(const char *name)
{
    static const struct {
        const char *name;
        int code;
    } codes[] = {
        {"UNINITIALIZED", 1},     {"INVALID_ARGUMENT", 2},
        {"NOT_SUPPORTED", 3},     {"NO_PERMISSION", 4},
        {"NOT_FOUND", 6},         {"INSUFFICIENT_SIZE", 7},
        {"DRIVER_NOT_LOADED", 9}, {"TIMEOUT", 10},
        {"GPU_IS_LOST", 15},      {"LIB_RM_VERSION_MISMATCH", 18},
        {"UNKNOWN", 999},
    };
    for (size_t k = 0; k < sizeof(codes) / sizeof(codes[0]); k++)
        if (strcmp(codes[k].name, name) == 0) return codes[k].code;
    return -1;
}

static const fk_world *world(void)
{
    return fk_world_get(code_of, NVML_ERROR_NOT_SUPPORTED);
}

/* Enter a device call: lock, count, resolve the handle. Returns an error
 * code for a bad/lost handle or a failing field, else NVML_SUCCESS with *g
 * (and *m for a MIG handle) set. The lock is held until LEAVE. */
static nvmlReturn_t enter(const char *fn, nvmlDevice_t dev, int field, const fk_gpu **g,
                          const fk_mig **m)
{
    pthread_mutex_lock(&lock);
    count(fn);
    if (!refcount) return NVML_ERROR_UNINITIALIZED;
    const fk_world *w = world();
    if (!dev || dev->gpu >= w->ngpus || !w->gpus[dev->gpu].present)
        return NVML_ERROR_INVALID_ARGUMENT;
    *g = &w->gpus[dev->gpu];
    if ((*g)->lost) return NVML_ERROR_GPU_IS_LOST;
    if (m) *m = NULL;
    if (dev->mig >= 0) {
        if (!(*g)->mig || !(*g)->migs[dev->mig].present) return NVML_ERROR_INVALID_ARGUMENT;
        if (!m) return NVML_ERROR_NOT_SUPPORTED; /* a reading MIG devices lack */
        *m = &(*g)->migs[dev->mig];
    }
    if (field >= 0 && (*g)->fail[field]) return (nvmlReturn_t)(*g)->fail[field];
    return NVML_SUCCESS;
}

nvmlReturn_t fk_enter(const char *fn, nvmlDevice_t dev, int field, const fk_gpu **g,
                      const fk_mig **m)
{
    return enter(fn, dev, field, g, m);
}

nvmlReturn_t fk_enter_plain(const char *fn)
{
    pthread_mutex_lock(&lock);
    count(fn);
    return refcount ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

const fk_world *fk_world_now(void)
{
    return world();
}

void fk_leave(void)
{
    pthread_mutex_unlock(&lock);
}

#define ENTER(field)                                                                               \
    const fk_gpu *g = NULL;                                                                        \
    nvmlReturn_t rc = enter(__func__, dev, field, &g, NULL);                                       \
    if (rc != NVML_SUCCESS) {                                                                      \
        pthread_mutex_unlock(&lock);                                                               \
        return rc;                                                                                 \
    }
#define ENTER_MIG(field)                                                                           \
    const fk_gpu *g = NULL;                                                                        \
    const fk_mig *m = NULL;                                                                        \
    nvmlReturn_t rc = enter(__func__, dev, field, &g, &m);                                         \
    if (rc != NVML_SUCCESS) {                                                                      \
        pthread_mutex_unlock(&lock);                                                               \
        return rc;                                                                                 \
    }
#define LEAVE(rcv)                                                                                 \
    do {                                                                                           \
        pthread_mutex_unlock(&lock);                                                               \
        return (rcv);                                                                              \
    } while (0)

API nvmlReturn_t nvmlInit_v2(void)
{
    pthread_mutex_lock(&lock);
    count(__func__);
    if (refcount == 0) {
        fk_world_release();
        delivered_id = 0;
        registered = 0;
        memset(counters, 0, sizeof(counters));
        count(__func__);
    }
    const fk_world *w = world();
    if (w->init_rc) {
        nvmlReturn_t rc = (nvmlReturn_t)w->init_rc;
        if (refcount == 0) fk_world_release();
        LEAVE(rc);
    }
    refcount++;
    for (unsigned i = 0; i < FK_MAX_GPUS; i++) {
        handles[i] = (struct nvmlDevice_st){i, -1};
        for (int k = 0; k < FK_MAX_MIG; k++)
            mig_handles[i][k] = (struct nvmlDevice_st){i, k};
    }
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&lock);
    count(__func__);
    if (!refcount) LEAVE(NVML_ERROR_UNINITIALIZED);
    if (--refcount == 0) fk_world_release();
    LEAVE(NVML_SUCCESS);
}

API const char *nvmlErrorString(nvmlReturn_t rc)
{
    switch (rc) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
        return "Insufficient Permissions";
    case NVML_ERROR_TIMEOUT:
        return "Timeout";
    case NVML_ERROR_GPU_IS_LOST:
        return "GPU is lost";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return "Driver/library version mismatch";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded";
    default:
        return "Unknown Error";
    }
}

API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    pthread_mutex_lock(&lock);
    count(__func__);
    if (!refcount) LEAVE(NVML_ERROR_UNINITIALIZED);
    const fk_world *w = world();
    if (strlen(w->driver) + 1 > length) LEAVE(NVML_ERROR_INSUFFICIENT_SIZE);
    snprintf(version, length, "%s", w->driver);
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n)
{
    pthread_mutex_lock(&lock);
    count(__func__);
    if (!refcount) LEAVE(NVML_ERROR_UNINITIALIZED);
    *n = world()->ngpus;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *dev)
{
    pthread_mutex_lock(&lock);
    count(__func__);
    if (!refcount) LEAVE(NVML_ERROR_UNINITIALIZED);
    const fk_world *w = world();
    if (index >= w->ngpus) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *dev = &handles[index];
    LEAVE(NVML_SUCCESS);
}

static nvmlReturn_t copy_str(char *dst, unsigned len, const char *src)
{
    if (strlen(src) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(dst, len, "%s", src);
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int length)
{
    ENTER_MIG(FK_UUID);
    LEAVE(copy_str(uuid, length, m ? m->uuid : g->uuid));
}

API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int length)
{
    ENTER_MIG(FK_NAME);
    LEAVE(copy_str(name, length, m ? m->name : g->name));
}

API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci)
{
    ENTER(FK_PCI);
    memset(pci, 0, sizeof(*pci));
    snprintf(pci->busId, sizeof(pci->busId), "%s", g->bus);
    unsigned domain = 0, bus = 0, device = 0;
    sscanf(g->bus, "%x:%x:%x", &domain, &bus, &device);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = device;
    pci->pciDeviceId = 0x233010de;
    snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0", domain & 0xffff, bus,
             device);
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *u)
{
    ENTER_MIG(FK_UTIL);
    if (m) {
        if (g->fail[FK_MIGUTIL] || !m->has_util)
            LEAVE(g->fail[FK_MIGUTIL] ? (nvmlReturn_t)g->fail[FK_MIGUTIL]
                                      : NVML_ERROR_NOT_SUPPORTED);
        u->gpu = m->util;
        u->memory = 0;
        LEAVE(NVML_SUCCESS);
    }
    if (g->mig) LEAVE(NVML_ERROR_NOT_SUPPORTED); /* as on real GPUs in MIG mode */
    u->gpu = g->util;
    u->memory = g->memutil;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *mem)
{
    ENTER_MIG(FK_MEMORY);
    if (m) {
        if (g->fail[FK_MIGMEMORY]) LEAVE((nvmlReturn_t)g->fail[FK_MIGMEMORY]);
        mem->total = m->memtotal;
        mem->used = m->memused;
    } else {
        mem->total = g->memtotal;
        mem->used = g->memused;
    }
    mem->free = mem->total > mem->used ? mem->total - mem->used : 0;
    LEAVE(NVML_SUCCESS);
}

#define GET_UINT(fn, field, expr)                                                                  \
    API nvmlReturn_t fn(nvmlDevice_t dev, unsigned int *v)                                         \
    {                                                                                              \
        ENTER(field);                                                                              \
        *v = (expr);                                                                               \
        LEAVE(NVML_SUCCESS);                                                                       \
    }
GET_UINT(nvmlDeviceGetPowerUsage, FK_POWER, g->power_mw)
GET_UINT(nvmlDeviceGetEnforcedPowerLimit, FK_LIMIT, g->limit_mw)
GET_UINT(nvmlDeviceGetCurrPcieLinkGeneration, FK_PCIE_GEN, g->pcie_gen)
GET_UINT(nvmlDeviceGetMaxPcieLinkGeneration, FK_PCIE_GEN_MAX, g->pcie_gen_max)
GET_UINT(nvmlDeviceGetCurrPcieLinkWidth, FK_PCIE_WIDTH, g->pcie_width)
GET_UINT(nvmlDeviceGetMaxPcieLinkWidth, FK_PCIE_WIDTH_MAX, g->pcie_width_max)
GET_UINT(nvmlDeviceGetPcieReplayCounter, FK_REPLAY, g->replay)

API nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t dev, unsigned int *node)
{
    ENTER(FK_NUMA);
    if (g->numa < 0) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    *node = (unsigned)g->numa;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t dev, unsigned long long *e)
{
    ENTER(FK_ENERGY);
    *e = g->energy_mj;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t dev, unsigned long long *r)
{
    ENTER(FK_REASONS);
    *r = g->reasons;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t dev, unsigned long long *r)
{
    return nvmlDeviceGetCurrentClocksEventReasons(dev, r);
}

API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, nvmlTemperatureSensors_t sensor,
                                          unsigned int *t)
{
    ENTER(FK_TEMP);
    if (sensor != NVML_TEMPERATURE_GPU) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *t = (unsigned)g->temp;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t dev, nvmlClockType_t type, unsigned int *c)
{
    ENTER(FK_CLOCK);
    if (type == NVML_CLOCK_SM || type == NVML_CLOCK_GRAPHICS)
        *c = g->sm_mhz;
    else if (type == NVML_CLOCK_MEM)
        *c = g->mem_mhz;
    else
        LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t dev, nvmlClockType_t type, unsigned int *c)
{
    ENTER(FK_MAXCLOCK);
    if (type == NVML_CLOCK_SM || type == NVML_CLOCK_GRAPHICS)
        *c = g->sm_max_mhz;
    else if (type == NVML_CLOCK_MEM)
        *c = g->mem_max_mhz;
    else
        LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t dev, nvmlPstates_t *p)
{
    ENTER(FK_PSTATE);
    *p = (nvmlPstates_t)g->pstate;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t dev, nvmlMemoryErrorType_t type,
                                             nvmlEccCounterType_t counter, unsigned long long *n)
{
    ENTER(FK_ECC);
    if ((unsigned)type > 1 || (unsigned)counter > 1) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *n = g->ecc[type];
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t dev, unsigned int *corr, unsigned int *unc,
                                           unsigned int *pending, unsigned int *failure)
{
    ENTER(FK_REMAPPED);
    *corr = g->remapped[0];
    *unc = g->remapped[1];
    *pending = g->remapped[2];
    *failure = g->remapped[3];
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t dev, nvmlPageRetirementCause_t cause,
                                           unsigned int *count_, unsigned long long *addresses)
{
    ENTER(FK_RETIRED);
    if ((unsigned)cause > 1) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    unsigned n = g->retired[cause];
    if (*count_ < n) {
        *count_ = n;
        LEAVE(n && !addresses ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS);
    }
    for (unsigned k = 0; k < n && addresses; k++)
        addresses[k] = 0x1000ULL * (k + 1);
    *count_ = n;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t dev, unsigned int link,
                                          nvmlEnableState_t *active)
{
    ENTER(FK_NVLINK);
    if (link >= FK_MAX_LINKS || !g->links[link].present) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *active = g->links[link].active ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t dev, unsigned int link,
                                                 nvmlNvLinkErrorCounter_t counter,
                                                 unsigned long long *v)
{
    ENTER(FK_NVLINK);
    if (link >= FK_MAX_LINKS || !g->links[link].present || (unsigned)counter > 4)
        LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *v = g->links[link].err[counter];
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t dev, unsigned int size, unsigned long *set)
{
    ENTER(FK_AFFINITY);
    int any = 0;
    for (unsigned k = 0; k < 16; k++)
        any |= g->cpus[k] != 0;
    if (!any) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    for (unsigned k = 0; k < size; k++)
        set[k] = k < 16 ? (unsigned long)g->cpus[k] : 0;
    LEAVE(NVML_SUCCESS);
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static nvmlReturn_t procs_impl(const char *fn, nvmlDevice_t dev, unsigned int *n,
                               nvmlProcessInfo_t *infos)
{
    const fk_gpu *g = NULL;
    const fk_mig *m = NULL;
    nvmlReturn_t rc = enter(fn, dev, FK_PROCS, &g, &m);
    if (rc != NVML_SUCCESS) LEAVE(rc);
    unsigned delay = g->procs_delay_ms;
    const fk_world *w = world();
    unsigned gpu = dev->gpu, found = 0;
    for (unsigned k = 0; k < w->nprocs; k++) {
        const fk_proc *p = &w->procs[k];
        if (p->gpu != gpu || (m && (p->gi != m->gi || p->ci != m->ci))) continue;
        if (found < *n) {
            infos[found].pid = p->pid;
            infos[found].usedGpuMemory = p->mem;
            infos[found].gpuInstanceId = p->gi;
            infos[found].computeInstanceId = p->ci;
        }
        found++;
    }
    rc = found > *n ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
    *n = found;
    pthread_mutex_unlock(&lock);
    if (delay) sleep_ms(delay); /* a slow driver, outside the lock like NVML's */
    return rc;
}

API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t dev, unsigned int *n,
                                                         nvmlProcessInfo_t *infos)
{
    return procs_impl(__func__, dev, n, infos);
}

API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t dev, unsigned int *n,
                                                         nvmlProcessInfo_t *infos)
{
    return procs_impl(__func__, dev, n, infos);
}

API nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t dev,
                                                 nvmlProcessUtilizationSample_t *samples,
                                                 unsigned int *n, unsigned long long last_seen)
{
    ENTER(FK_PROCUTIL);
    const fk_world *w = world();
    struct timeval tv;
    gettimeofday(&tv, NULL);
    unsigned long long now = (unsigned long long)tv.tv_sec * 1000000ULL + (unsigned)tv.tv_usec;
    if (now <= last_seen) now = last_seen + 1;
    unsigned found = 0;
    for (unsigned k = 0; k < w->nprocs; k++) {
        const fk_proc *p = &w->procs[k];
        if (p->gpu != dev->gpu || !p->has_sm) continue;
        if (samples && found < *n) {
            memset(&samples[found], 0, sizeof(samples[found]));
            samples[found].pid = p->pid;
            samples[found].timeStamp = now;
            samples[found].smUtil = p->sm;
        }
        found++;
    }
    if (!found) LEAVE(NVML_ERROR_NOT_FOUND);
    nvmlReturn_t ret = !samples || found > *n ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
    *n = found;
    LEAVE(ret);
}

API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned int *cur, unsigned int *pending)
{
    ENTER(FK_MIG);
    *cur = *pending = g->mig ? NVML_DEVICE_MIG_ENABLE : 0;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t dev, unsigned int *n)
{
    ENTER(FK_MIG);
    *n = g->mig ? 7 : 0;
    for (unsigned k = 7; k < FK_MAX_MIG; k++)
        if (g->migs[k].present) *n = k + 1;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t dev, unsigned int index,
                                                     nvmlDevice_t *mig)
{
    ENTER(FK_MIG);
    if (!g->mig) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    if (index >= FK_MAX_MIG || !g->migs[index].present) LEAVE(NVML_ERROR_NOT_FOUND);
    *mig = &mig_handles[dev->gpu][index];
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t dev, unsigned int *id)
{
    ENTER_MIG(-1);
    if (!m) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *id = m->gi;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t dev, unsigned int *id)
{
    ENTER_MIG(-1);
    if (!m) LEAVE(NVML_ERROR_INVALID_ARGUMENT);
    *id = m->ci;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t dev, nvmlDeviceAttributes_t *a)
{
    ENTER_MIG(-1);
    if (!m) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    memset(a, 0, sizeof(*a));
    a->gpuInstanceSliceCount = 1;
    a->memorySizeMB = m->memtotal >> 20;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    pthread_mutex_lock(&lock);
    count(__func__);
    *set = &the_set;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    (void)set;
    pthread_mutex_lock(&lock);
    count(__func__);
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t dev, unsigned long long types,
                                          nvmlEventSet_t set)
{
    ENTER(FK_EVENTS);
    (void)set;
    if (!(types & nvmlEventTypeXidCriticalError)) LEAVE(NVML_ERROR_NOT_SUPPORTED);
    if (dev->gpu < FK_MAX_GPUS) registered |= 1ULL << dev->gpu;
    LEAVE(NVML_SUCCESS);
}

API nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data,
                                     unsigned int timeout_ms)
{
    (void)set;
    (void)timeout_ms; /* never waits: mlwatch asks with 0 */
    pthread_mutex_lock(&lock);
    count(__func__);
    if (!refcount) LEAVE(NVML_ERROR_UNINITIALIZED);
    const fk_world *w = world();
    for (;;) {
        const fk_event *next = NULL;
        for (unsigned k = 0; k < w->nevents; k++)
            if (w->events[k].id > delivered_id && (!next || w->events[k].id < next->id))
                next = &w->events[k];
        if (!next) LEAVE(NVML_ERROR_TIMEOUT);
        delivered_id = next->id;
        if (next->gpu >= FK_MAX_GPUS || !(registered >> next->gpu & 1)) continue;
        memset(data, 0, sizeof(*data));
        data->device = &handles[next->gpu];
        data->eventType = nvmlEventTypeXidCriticalError;
        data->eventData = next->xid;
        data->gpuInstanceId = data->computeInstanceId = 0xffffffffu;
        LEAVE(NVML_SUCCESS);
    }
}
