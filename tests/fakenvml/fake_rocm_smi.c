/* fake_rocm_smi.c - a fake librocm_smi64.so.7 for the tests: the ROCm SMI
 * functions mlwatch resolves (signatures as in rocm_smi.h, see
 * src/collect/gpu/rocm.c), answering from the same scenario files as the
 * fake NVML ($FAKE_NVML_SCENARIO, tests/fakenvml/README.md). Units are
 * converted to ROCm's: power in microwatts, temperature in millidegrees,
 * energy as a counter of 15.259 uJ ticks. ROCm SMI lists processes for the
 * whole machine; a process's GPUs are the GPUs of its "proc" lines. */
#include "scenario.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define API __attribute__((visibility("default")))
#define OK 0
#define INVALID_ARGS 1
#define NOT_SUPPORTED 2
#define PERMISSION 4
#define NOT_YET_IMPLEMENTED 9
#define INIT_ERROR 8
#define INSUFFICIENT_SIZE 11
#define RESOLUTION_UJ 15.259f

typedef struct {
    uint32_t process_id, pasid;
    uint64_t vram_usage, sdma_usage;
    uint32_t cu_occupancy;
} rsmi_process_info_t;

/* rsmi_error_count_t (rocm_smi.h). */
typedef struct {
    uint64_t correctable_err, uncorrectable_err;
} rsmi_error_count_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int initialised;
static unsigned long ecc_calls[FK_MAX_GPUS][FK_RAS_BLOCKS]; /* since rsmi_init */

static int code_of(const char *name)
{
    if (strcmp(name, "NOT_SUPPORTED") == 0) return NOT_SUPPORTED;
    if (strcmp(name, "INIT_ERROR") == 0) return INIT_ERROR;
    if (strcmp(name, "PERMISSION") == 0) return PERMISSION;
    if (strcmp(name, "NOT_YET_IMPLEMENTED") == 0) return NOT_YET_IMPLEMENTED;
    if (strcmp(name, "UNKNOWN") == 0) return 0x7fffffff;
    return -1;
}

/* Lock, and the GPU at dv unless it fails for field (returns the status). */
static int enter(uint32_t dv, int field, const fk_gpu **g)
{
    pthread_mutex_lock(&lock);
    if (!initialised) return INIT_ERROR;
    const fk_world *w = fk_world_get(code_of, NOT_SUPPORTED);
    if (dv >= w->ngpus || !w->gpus[dv].present) return INVALID_ARGS;
    *g = &w->gpus[dv];
    if (field >= 0 && (*g)->fail[field]) return (*g)->fail[field];
    return OK;
}

#define ENTER(field)                                                                               \
    const fk_gpu *g = NULL;                                                                        \
    int st = enter(dv, field, &g);                                                                 \
    if (st != OK) {                                                                                \
        pthread_mutex_unlock(&lock);                                                               \
        return st;                                                                                 \
    }
#define LEAVE(v)                                                                                   \
    do {                                                                                           \
        pthread_mutex_unlock(&lock);                                                               \
        return (v);                                                                                \
    } while (0)

API int rsmi_init(uint64_t flags)
{
    (void)flags;
    pthread_mutex_lock(&lock);
    fk_world_release();
    const fk_world *w = fk_world_get(code_of, NOT_SUPPORTED);
    int rc = w->init_rc;
    initialised = rc == 0;
    memset(ecc_calls, 0, sizeof(ecc_calls));
    if (rc) fk_world_release(); /* no rsmi_shut_down follows a failed init */
    LEAVE(rc);
}

API int rsmi_shut_down(void)
{
    pthread_mutex_lock(&lock);
    initialised = 0;
    fk_world_release();
    LEAVE(OK);
}

API int rsmi_status_string(int status, const char **s)
{
    *s = status == NOT_SUPPORTED ? "RSMI_STATUS_NOT_SUPPORTED" : "RSMI_STATUS_UNKNOWN_ERROR";
    return OK;
}

API int rsmi_num_monitor_devices(uint32_t *n)
{
    pthread_mutex_lock(&lock);
    if (!initialised) LEAVE(INIT_ERROR);
    *n = fk_world_get(code_of, NOT_SUPPORTED)->ngpus;
    LEAVE(OK);
}

API int rsmi_version_str_get(int component, char *buf, uint32_t len)
{
    (void)component;
    pthread_mutex_lock(&lock);
    snprintf(buf, len, "%s", fk_world_get(code_of, NOT_SUPPORTED)->driver);
    LEAVE(OK);
}

API int rsmi_dev_name_get(uint32_t dv, char *buf, size_t len)
{
    ENTER(FK_NAME);
    snprintf(buf, len, "%s", g->name);
    LEAVE(OK);
}

API int rsmi_dev_unique_id_get(uint32_t dv, uint64_t *id)
{
    ENTER(FK_UUID);
    *id = 0x1000000000000000ull + dv;
    LEAVE(OK);
}

API int rsmi_dev_pci_id_get(uint32_t dv, uint64_t *bdfid)
{
    ENTER(FK_PCI);
    unsigned domain = 0, bus = 0, device = 0;
    sscanf(g->bus, "%x:%x:%x", &domain, &bus, &device);
    *bdfid = (uint64_t)domain << 32 | bus << 8 | device << 3;
    LEAVE(OK);
}

API int rsmi_dev_busy_percent_get(uint32_t dv, uint32_t *pct)
{
    ENTER(FK_UTIL);
    *pct = g->util;
    LEAVE(OK);
}

API int rsmi_dev_memory_busy_percent_get(uint32_t dv, uint32_t *pct)
{
    ENTER(FK_UTIL);
    *pct = g->memutil;
    LEAVE(OK);
}

API int rsmi_dev_memory_total_get(uint32_t dv, int type, uint64_t *bytes)
{
    ENTER(FK_MEMORY);
    *bytes = type == 0 ? g->memtotal : 0;
    LEAVE(OK);
}

API int rsmi_dev_memory_usage_get(uint32_t dv, int type, uint64_t *bytes)
{
    ENTER(FK_MEMORY);
    *bytes = type == 0 ? g->memused : 0;
    LEAVE(OK);
}

/* Like MI300: no average power, socket power only. */
API int rsmi_dev_power_ave_get(uint32_t dv, uint32_t sensor, uint64_t *uw)
{
    (void)sensor;
    (void)uw;
    ENTER(FK_POWER);
    LEAVE(NOT_SUPPORTED);
}

API int rsmi_dev_current_socket_power_get(uint32_t dv, uint64_t *uw)
{
    ENTER(FK_POWER);
    *uw = (uint64_t)g->power_mw * 1000;
    LEAVE(OK);
}

API int rsmi_dev_power_cap_get(uint32_t dv, uint32_t sensor, uint64_t *uw)
{
    (void)sensor;
    ENTER(FK_LIMIT);
    *uw = (uint64_t)g->limit_mw * 1000;
    LEAVE(OK);
}

API int rsmi_dev_energy_count_get(uint32_t dv, uint64_t *count, float *res, uint64_t *ts)
{
    ENTER(FK_ENERGY);
    *res = RESOLUTION_UJ;
    *count = (uint64_t)((double)g->energy_mj * 1000.0 / RESOLUTION_UJ);
    *ts = 0;
    LEAVE(OK);
}

/* Like MI200/MI300: no edge sensor, a junction one. */
API int rsmi_dev_temp_metric_get(uint32_t dv, uint32_t sensor, int metric, int64_t *millic)
{
    ENTER(FK_TEMP);
    if (sensor != 1 || metric != 0) LEAVE(NOT_SUPPORTED);
    *millic = (int64_t)g->temp * 1000;
    LEAVE(OK);
}

API int rsmi_topo_get_numa_node_number(uint32_t dv, uint32_t *node)
{
    ENTER(FK_NUMA);
    if (g->numa < 0) LEAVE(NOT_SUPPORTED);
    *node = (uint32_t)g->numa;
    LEAVE(OK);
}

API int rsmi_compute_process_info_get(rsmi_process_info_t *procs, uint32_t *n)
{
    pthread_mutex_lock(&lock);
    if (!initialised) LEAVE(INIT_ERROR);
    const fk_world *w = fk_world_get(code_of, NOT_SUPPORTED);
    uint32_t found = 0;
    for (unsigned k = 0; k < w->nprocs; k++) {
        unsigned j;
        for (j = 0; j < k; j++) /* one entry per PID */
            if (w->procs[j].pid == w->procs[k].pid) break;
        if (j < k) continue;
        if (procs && found < *n) {
            memset(&procs[found], 0, sizeof(procs[found]));
            procs[found].process_id = w->procs[k].pid;
            for (j = 0; j < w->nprocs; j++)
                if (w->procs[j].pid == w->procs[k].pid) procs[found].vram_usage += w->procs[j].mem;
        }
        found++;
    }
    int rc = procs && found > *n ? INSUFFICIENT_SIZE : OK;
    *n = found;
    LEAVE(rc);
}

API int rsmi_compute_process_gpus_get(uint32_t pid, uint32_t *dv, uint32_t *n)
{
    pthread_mutex_lock(&lock);
    const fk_world *w = fk_world_get(code_of, NOT_SUPPORTED);
    uint32_t found = 0;
    for (unsigned k = 0; k < w->nprocs; k++)
        if (w->procs[k].pid == pid) {
            if (found < *n) dv[found] = w->procs[k].gpu;
            found++;
        }
    *n = found;
    LEAVE(found ? OK : 10 /* NOT_FOUND */);
}

/* rsmi_gpu_block_t is an enum with a 64-bit value (RSMI_GPU_BLOCK_RESERVED
 * = 1 << 63), so it is passed as 64 bits. One block (one bit) per call;
 * a block the scenario does not list answers NOT_SUPPORTED, as blocks
 * without RAS do. */
API int rsmi_dev_ecc_count_get(uint32_t dv, uint64_t block, rsmi_error_count_t *ec)
{
    ENTER(FK_ECC);
    int b = 0;
    while (b < FK_RAS_BLOCKS && block != 1ull << b)
        b++;
    if (!ec || b == FK_RAS_BLOCKS) LEAVE(INVALID_ARGS);
    ecc_calls[dv][b]++;
    if (g->ras_rc[b] < 0) LEAVE(NOT_SUPPORTED);
    if (g->ras_rc[b] > 0) LEAVE(g->ras_rc[b]);
    ec->correctable_err = g->ras[b][0];
    ec->uncorrectable_err = g->ras[b][1];
    LEAVE(OK);
}

/* Test hook: rsmi_dev_ecc_count_get calls for a GPU and block since rsmi_init. */
API unsigned long fake_rocm_ecc_calls(uint32_t dv, uint64_t block)
{
    pthread_mutex_lock(&lock);
    unsigned long n = 0;
    for (int b = 0; b < FK_RAS_BLOCKS; b++)
        if (dv < FK_MAX_GPUS && block == 1ull << b) n = ecc_calls[dv][b];
    LEAVE(n);
}
