/* fake_nvml_gpm.c - the GPM functions of the fake NVML library (test code).
 *
 * Like the real GPM, a sample is a snapshot of counters and a metric is the
 * rate between two samples. Each GPU and each GPU instance has an
 * integrator per metric: counter += value x elapsed time, where value is the
 * scenario's percent when the sample is taken (so it covers the time since
 * the previous sample of that GPU or GPU instance). nvmlGpmMetricsGet gives
 * (counter2 - counter1) / (t2 - t1): with an unchanged scenario, exactly
 * the scenario's value. As on real drivers:
 *   - a GPU without `gpm=1` (before Hopper) says isSupportedDevice = 0 and
 *     answers NOT_SUPPORTED to samples;
 *   - nvmlGpmMigSampleGet takes the parent GPU's handle and a GPU instance
 *     ID; a MIG device handle or an unknown instance is refused;
 *   - versioned structs of another version give ARGUMENT_VERSION_MISMATCH;
 *   - two samples of different GPUs or instances, or in the wrong order
 *     (sample2 not newer than sample1), or never filled, are refused;
 *   - a metric whose value is "na" answers NOT_SUPPORTED in its own
 *     nvmlReturn; unknown metric IDs too. */
#include "fake_nvml_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAGIC 0x47504d53u /* "GPMS" */
#define WHOLE 0xffffffffu
#define MAX_GI 64
#define OLDEST_METRIC_MAX 98 /* NVML_GPM_METRIC_MAX of the first GPM header */

struct nvmlGpmSample_st {
    unsigned magic;
    int filled;
    unsigned gpu, gi;
    uint64_t t_us;
    uint64_t acc[3];
};

typedef struct integ {
    int started;
    uint64_t last_us;
    uint64_t acc[3]; /* milli-percent x microseconds */
} integ;

static integ whole[FK_MAX_GPUS];
static integ per_gi[FK_MAX_GPUS][MAX_GI];

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Advance the integrator to now at values v (percent, < 0 = none) and copy
 * it into sample s. */
static void take(integ *it, const double *v, unsigned gpu, unsigned gi, nvmlGpmSample_t s)
{
    uint64_t t = now_us();
    if (it->started && t <= it->last_us) t = it->last_us + 1; /* strictly increasing */
    for (int k = 0; k < 3; k++)
        if (it->started && v[k] > 0)
            it->acc[k] += (uint64_t)llround(v[k] * 1000.0) * (t - it->last_us);
    it->started = 1;
    it->last_us = t;
    s.handle->filled = 1;
    s.handle->gpu = gpu;
    s.handle->gi = gi;
    s.handle->t_us = t;
    memcpy(s.handle->acc, it->acc, sizeof(it->acc));
}

static int valid(nvmlGpmSample_t s)
{
    return s.handle && s.handle->magic == MAGIC;
}

API nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t dev, nvmlGpmSupport_t *sup)
{
    const fk_gpu *g = NULL;
    const fk_mig *m = NULL;
    nvmlReturn_t rc = fk_enter(__func__, dev, -1, &g, &m);
    if (rc == NVML_SUCCESS && !sup) rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS && sup->version != NVML_GPM_SUPPORT_VERSION)
        rc = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (rc == NVML_SUCCESS) sup->isSupportedDevice = g->gpm ? 1 : 0;
    fk_leave();
    return rc;
}

API nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *s)
{
    nvmlReturn_t rc = fk_enter_plain(__func__);
    fk_leave();
    if (rc != NVML_SUCCESS) return rc;
    if (!s) return NVML_ERROR_INVALID_ARGUMENT;
    s->handle = calloc(1, sizeof(*s->handle));
    if (!s->handle) return NVML_ERROR_MEMORY;
    s->handle->magic = MAGIC;
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t s)
{
    nvmlReturn_t rc = fk_enter_plain(__func__);
    fk_leave();
    if (rc != NVML_SUCCESS) return rc;
    if (!valid(s)) return NVML_ERROR_INVALID_ARGUMENT;
    s.handle->magic = 0;
    free(s.handle);
    return NVML_SUCCESS;
}

API nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t dev, nvmlGpmSample_t s)
{
    const fk_gpu *g = NULL;
    const fk_mig *m = NULL;
    nvmlReturn_t rc = fk_enter(__func__, dev, FK_GPM, &g, &m);
    if (rc == NVML_SUCCESS && (m || !valid(s))) rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS && !g->gpm) rc = NVML_ERROR_NOT_SUPPORTED;
    if (rc == NVML_SUCCESS) take(&whole[dev->gpu], g->gpm_v, dev->gpu, WHOLE, s);
    fk_leave();
    return rc;
}

API nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t dev, unsigned int gi, nvmlGpmSample_t s)
{
    const fk_gpu *g = NULL;
    const fk_mig *m = NULL;
    nvmlReturn_t rc = fk_enter(__func__, dev, FK_GPMMIG, &g, &m);
    if (rc == NVML_SUCCESS && (m || !valid(s) || gi >= MAX_GI)) rc = NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS && !g->gpm) rc = NVML_ERROR_NOT_SUPPORTED;
    if (rc == NVML_SUCCESS && !g->mig) rc = NVML_ERROR_INVALID_ARGUMENT;
    const fk_mig *inst = NULL;
    for (int k = 0; rc == NVML_SUCCESS && k < FK_MAX_MIG && !inst; k++)
        if (g->migs[k].present && g->migs[k].gi == gi) inst = &g->migs[k];
    if (rc == NVML_SUCCESS && !inst) rc = NVML_ERROR_NOT_FOUND;
    if (rc == NVML_SUCCESS) take(&per_gi[dev->gpu][gi], inst->gpm, dev->gpu, gi, s);
    fk_leave();
    return rc;
}

static const fk_gpu *gpu_of(const fk_world *w, unsigned gpu)
{
    return gpu < w->ngpus && w->gpus[gpu].present ? &w->gpus[gpu] : NULL;
}

/* The scenario's value of metric k for a sample's GPU or GPU instance now
 * (< 0: NOT_SUPPORTED), to tell "na" metrics. */
static double current(unsigned gpu, unsigned gi, int k);

API nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *mg)
{
    nvmlReturn_t rc = fk_enter_plain(__func__);
    if (rc != NVML_SUCCESS) {
        fk_leave();
        return rc;
    }
    const struct nvmlGpmSample_st *a = mg && valid(mg->sample1) ? mg->sample1.handle : NULL;
    const struct nvmlGpmSample_st *b = mg && valid(mg->sample2) ? mg->sample2.handle : NULL;
    if (!mg)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    else if (mg->version != NVML_GPM_METRICS_GET_VERSION)
        rc = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    else if (mg->numMetrics > OLDEST_METRIC_MAX || !a || !b || !a->filled || !b->filled ||
             a->gpu != b->gpu || a->gi != b->gi || b->t_us <= a->t_us)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned k = 0; rc == NVML_SUCCESS && k < mg->numMetrics; k++) {
        nvmlGpmMetric_t *m = &mg->metrics[k];
        int idx = m->metricId == NVML_GPM_METRIC_GRAPHICS_UTIL  ? 0
                  : m->metricId == NVML_GPM_METRIC_SM_OCCUPANCY ? 1
                  : m->metricId == NVML_GPM_METRIC_DRAM_BW_UTIL ? 2
                                                                : -1;
        static char *const names[3][3] = {{"GRACT", "Graphics activity", "%"},
                                          {"SMOCC", "SM occupancy", "%"},
                                          {"DRAMBW", "DRAM bandwidth utilization", "%"}};
        m->value = 0;
        if (idx < 0 || current(a->gpu, a->gi, idx) < 0) {
            m->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            continue;
        }
        m->nvmlReturn = NVML_SUCCESS;
        m->value = (double)((b->acc[idx] - a->acc[idx]) / (b->t_us - a->t_us)) / 1000.0;
        m->metricInfo.shortName = names[idx][0];
        m->metricInfo.longName = names[idx][1];
        m->metricInfo.unit = names[idx][2];
    }
    fk_leave();
    return rc;
}

static double current(unsigned gpu, unsigned gi, int k)
{
    const fk_world *w = fk_world_now();
    const fk_gpu *g = gpu_of(w, gpu);
    if (!g) return 0;
    if (gi == WHOLE) return g->gpm_v[k];
    for (int i = 0; i < FK_MAX_MIG; i++)
        if (g->migs[i].present && g->migs[i].gi == gi) return g->migs[i].gpm[k];
    return 0;
}
