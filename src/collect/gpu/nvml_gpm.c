/* nvml_gpm.c - GPU Performance Monitoring (GPM) through NVML.
 *
 * In MIG mode NVML answers NOT_SUPPORTED to nvmlDeviceGetUtilizationRates
 * for the GPU and for each MIG device, so without GPM nothing says whether
 * a MIG instance is used. GPM (Hopper and newer, driver R520 or later)
 * reads performance counters of the whole GPU (nvmlGpmSampleGet) or of one
 * GPU instance (nvmlGpmMigSampleGet, on the parent GPU's handle); a metric
 * is the rate between two samples (nvmlGpmMetricsGet). So each GPU and each
 * GPU instance keeps its previous sample: every slow poll takes a new one,
 * computes the metrics over the interval since the previous one (a true
 * mean over the whole interval, not a snapshot), and keeps the new sample as
 * the next "previous". A GPU or instance without a previous sample (the
 * first poll, a new instance, after an error) gets a first pair 0.1 s
 * apart, so the first cycle and a one-shot `mlwatch metrics` have values.
 *
 * Compute instances of one GPU instance share its counters: each MIG
 * device reports its GPU instance's values.
 *
 * The functions are resolved with dlsym: a driver without them, a GPU that
 * nvmlGpmQueryDeviceSupport says is not supported (before Hopper), a
 * NOT_SUPPORTED sample or metric switch that part off for good, logged once
 * (at info level on a GPU in MIG mode, where it means no MIG activity; at
 * debug level otherwise). GPU_IS_LOST marks the device lost; other errors
 * go to the sink and the pair starts over. Memory: two samples per GPU and
 * per GPU instance, allocated only for GPUs that support GPM. */
#include "nvml_gpm.h"
#include "../../core/log.h"
#include "../../core/util.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WHOLE_GPU 0xffffffffu
#define NSLOTS (1 + MW_GPU_MAX_MIG)
#define PRIME_NS 100000000L /* 0.1 s between the first two samples */

/* The metrics asked, in MW_GPM_* order. */
static const unsigned metric_ids[MW_GPM_COUNT] = {
    NVML_GPM_METRIC_GRAPHICS_UTIL,
    NVML_GPM_METRIC_SM_OCCUPANCY,
    NVML_GPM_METRIC_DRAM_BW_UTIL,
};

typedef struct slot {
    unsigned gi; /* WHOLE_GPU, or the GPU instance */
    int allocated, have_prev, seen;
    uint8_t off; /* metrics that answered NOT_SUPPORTED here: not asked again */
    nvmlGpmSample_t prev, cur;
} slot;

typedef struct gpm_dev {
    int mig_off;        /* nvmlGpmMigSampleGet answered NOT_SUPPORTED */
    slot slots[NSLOTS]; /* [0] the whole GPU */
} gpm_dev;

struct mw_nvml_gpm {
    nvmlGpmQueryDeviceSupport_fn query;
    nvmlGpmSampleAlloc_fn alloc;
    nvmlGpmSampleFree_fn free_sample;
    nvmlGpmSampleGet_fn sample;
    nvmlGpmMigSampleGet_fn mig_sample;
    nvmlGpmMetricsGet_fn metrics;
    nvmlErrorString_fn error_string;
    int absent;                        /* the library lacks GPM */
    uint64_t probed, unsupported;      /* bit per device (the first 64) */
    gpm_dev *devs[MW_GPU_MAX_DEVICES]; /* only for GPUs with GPM */
    nvmlGpmMetricsGet_t *mg;           /* 13 KB: allocated on first use */
};

mw_nvml_gpm *mw_nvml_gpm_open(void *lib, nvmlErrorString_fn error_string)
{
    mw_nvml_gpm *g = mw_xcalloc(1, sizeof(*g));
    g->error_string = error_string;
    void *p[6] = {
        dlsym(lib, "nvmlGpmQueryDeviceSupport"), dlsym(lib, "nvmlGpmSampleAlloc"),
        dlsym(lib, "nvmlGpmSampleFree"),         dlsym(lib, "nvmlGpmSampleGet"),
        dlsym(lib, "nvmlGpmMigSampleGet"),       dlsym(lib, "nvmlGpmMetricsGet"),
    };
    memcpy(&g->query, &p[0], sizeof(p[0]));
    memcpy(&g->alloc, &p[1], sizeof(p[1]));
    memcpy(&g->free_sample, &p[2], sizeof(p[2]));
    memcpy(&g->sample, &p[3], sizeof(p[3]));
    memcpy(&g->mig_sample, &p[4], sizeof(p[4]));
    memcpy(&g->metrics, &p[5], sizeof(p[5]));
    /* nvmlGpmMigSampleGet came later than the rest: without it, whole
     * GPUs only. */
    g->absent = !g->query || !g->alloc || !g->free_sample || !g->sample || !g->metrics;
    return g;
}

static const char *errstr(const mw_nvml_gpm *g, nvmlReturn_t rc)
{
    const char *s = g->error_string ? g->error_string(rc) : NULL;
    return s ? s : "unknown NVML error";
}

static void report(const mw_nvml_gpm *g, unsigned i, const mw_gpu_sink *sink, const char *call,
                   nvmlReturn_t rc)
{
    char what[160];
    snprintf(what, sizeof(what), "%s (NVML error %d)", errstr(g, rc), (int)rc);
    sink->error(sink->ctx, i, call, what);
}

static void off_note(unsigned i, const mw_gpu_dev *d, const char *what)
{
    char key[48];
    snprintf(key, sizeof(key), "gpm-%u-%.20s", i, what);
    mw_log_once(d->mig_enabled ? MW_LOG_INFO : MW_LOG_DEBUG, "gpu", key, "GPU %u: %s%s", i, what,
                d->mig_enabled ? ": MIG instances have no utilization (GPM needs a Hopper or newer "
                                 "GPU and driver R520 or later)"
                               : "");
}

static void free_slot(mw_nvml_gpm *g, slot *s)
{
    if (s->allocated) {
        g->free_sample(s->prev);
        g->free_sample(s->cur);
    }
    memset(s, 0, sizeof(*s));
}

void mw_nvml_gpm_forget(mw_nvml_gpm *g, unsigned i)
{
    if (!g || i >= MW_GPU_MAX_DEVICES) return;
    gpm_dev *gd = g->devs[i];
    if (gd) {
        for (int k = 0; k < NSLOTS; k++)
            free_slot(g, &gd->slots[k]);
        free(gd);
        g->devs[i] = NULL;
    }
    g->probed &= ~(UINT64_C(1) << i);
    g->unsupported &= ~(UINT64_C(1) << i);
}

/* The device's state, after asking once whether it has GPM; NULL if not. */
static gpm_dev *dev_of(mw_nvml_gpm *g, unsigned i, nvmlDevice_t h, mw_gpu_dev *d,
                       const mw_gpu_sink *sink)
{
    uint64_t bit = UINT64_C(1) << i;
    if (g->devs[i]) return g->devs[i];
    if (g->probed & bit) return NULL;
    nvmlGpmSupport_t sup;
    memset(&sup, 0, sizeof(sup));
    sup.version = NVML_GPM_SUPPORT_VERSION;
    nvmlReturn_t rc = g->query(h, &sup);
    if (rc == NVML_ERROR_GPU_IS_LOST) {
        d->lost = 1;
        return NULL;
    }
    if (rc != NVML_SUCCESS && rc != NVML_ERROR_NOT_SUPPORTED) {
        report(g, i, sink, "nvmlGpmQueryDeviceSupport", rc); /* asked again next poll */
        return NULL;
    }
    g->probed |= bit;
    if (rc != NVML_SUCCESS || !sup.isSupportedDevice) {
        g->unsupported |= bit;
        off_note(i, d, "no GPM support");
        return NULL;
    }
    if (!g->mg) g->mg = mw_xcalloc(1, sizeof(*g->mg));
    g->devs[i] = mw_xcalloc(1, sizeof(gpm_dev));
    return g->devs[i];
}

/* Sample slot s (the GPU, or one of its GPU instances) and, with a previous
 * sample, compute the metrics into out/have. Returns 0, or -1 when the
 * sample answered NOT_SUPPORTED. */
static int sample_slot(mw_nvml_gpm *g, unsigned i, nvmlDevice_t h, mw_gpu_dev *d, slot *s,
                       double *out, uint8_t *have, const mw_gpu_sink *sink)
{
    uint8_t *off = &s->off;
    if (!s->allocated) {
        nvmlReturn_t rc = g->alloc(&s->prev);
        if (rc == NVML_SUCCESS) {
            rc = g->alloc(&s->cur);
            if (rc != NVML_SUCCESS) g->free_sample(s->prev);
        }
        if (rc != NVML_SUCCESS) {
            report(g, i, sink, "nvmlGpmSampleAlloc", rc);
            return 0;
        }
        s->allocated = 1;
        s->have_prev = 0;
    }
    int whole = s->gi == WHOLE_GPU;
    nvmlReturn_t rc = whole ? g->sample(h, s->cur) : g->mig_sample(h, s->gi, s->cur);
    const char *call = whole ? "nvmlGpmSampleGet" : "nvmlGpmMigSampleGet";
    if (rc == NVML_ERROR_NOT_SUPPORTED) return -1;
    if (rc != NVML_SUCCESS) {
        s->have_prev = 0;
        if (rc == NVML_ERROR_GPU_IS_LOST)
            d->lost = 1;
        else
            report(g, i, sink, call, rc);
        return 0;
    }
    if (s->have_prev) {
        nvmlGpmMetricsGet_t *mg = g->mg;
        memset(mg, 0,
               offsetof(nvmlGpmMetricsGet_t, metrics) + MW_GPM_COUNT * sizeof(mg->metrics[0]));
        mg->version = NVML_GPM_METRICS_GET_VERSION;
        mg->sample1 = s->prev;
        mg->sample2 = s->cur;
        int which[MW_GPM_COUNT];
        unsigned n = 0;
        for (int m = 0; m < MW_GPM_COUNT; m++)
            if (!(*off & (1u << m))) {
                which[n] = m;
                mg->metrics[n++].metricId = metric_ids[m];
            }
        mg->numMetrics = n;
        rc = n ? g->metrics(mg) : NVML_SUCCESS;
        if (rc != NVML_SUCCESS) {
            report(g, i, sink, "nvmlGpmMetricsGet", rc);
        } else {
            for (unsigned k = 0; k < n; k++) {
                const nvmlGpmMetric_t *m = &mg->metrics[k];
                if (m->nvmlReturn == NVML_SUCCESS && m->value == m->value) { /* not NaN */
                    double v = m->value < 0 ? 0 : m->value > 100 ? 100 : m->value;
                    out[which[k]] = v;
                    *have |= (uint8_t)(1u << which[k]);
                } else if (m->nvmlReturn == NVML_ERROR_NOT_SUPPORTED) {
                    *off |= (uint8_t)(1u << which[k]);
                }
            }
        }
    }
    nvmlGpmSample_t t = s->prev; /* the new sample is the next one's "previous" */
    s->prev = s->cur;
    s->cur = t;
    s->have_prev = 1;
    return 0;
}

static slot *slot_for(gpm_dev *gd, unsigned gi)
{
    slot *free_one = NULL;
    for (int k = 1; k < NSLOTS; k++) {
        if (gd->slots[k].seen && gd->slots[k].gi == gi) return &gd->slots[k];
        if (!gd->slots[k].seen && !free_one) free_one = &gd->slots[k];
    }
    if (free_one) {
        free_one->gi = gi;
        free_one->seen = 1;
    }
    return free_one;
}

/* Whether some slot of the device (the GPU, or a GPU instance of d->mig)
 * has no previous sample. */
static int unprimed(const gpm_dev *gd, const mw_gpu_dev *d)
{
    if (!gd->slots[0].have_prev) return 1;
    if (!d->mig_enabled || gd->mig_off) return 0;
    for (uint32_t k = 0; k < d->nmig; k++) {
        int primed = d->mig[k].gpu_instance == MW_GPU_NONE;
        for (int j = 1; j < NSLOTS && !primed; j++)
            primed = gd->slots[j].seen && gd->slots[j].have_prev &&
                     gd->slots[j].gi == d->mig[k].gpu_instance;
        if (!primed) return 1;
    }
    return 0;
}

static void poll_once(mw_nvml_gpm *g, gpm_dev *gd, unsigned i, nvmlDevice_t h, mw_gpu_dev *d,
                      int prime, const mw_gpu_sink *sink);

void mw_nvml_gpm_poll(mw_nvml_gpm *g, unsigned i, nvmlDevice_t h, mw_gpu_dev *d,
                      const mw_gpu_sink *sink)
{
    d->gpm_have = 0;
    for (uint32_t k = 0; k < d->nmig; k++)
        d->mig[k].gpm_have = 0;
    if (!g || i >= MW_GPU_MAX_DEVICES || d->lost) return;
    if (g->absent) {
        off_note(i, d, "this NVIDIA library has no GPM functions (driver older than R520)");
        return;
    }
    gpm_dev *gd = dev_of(g, i, h, d, sink);
    if (!gd) return;
    if (unprimed(gd, d)) {
        /* A GPU or instance seen for the first time: a first pair 0.1 s
         * apart, so that a one-shot `mlwatch metrics` and the first cycle
         * have a value (later values cover the whole slow interval). */
        poll_once(g, gd, i, h, d, 1, sink);
        if (!g->devs[i] || d->lost) return;
        struct timespec ts = {0, PRIME_NS};
        nanosleep(&ts, NULL);
    }
    poll_once(g, gd, i, h, d, 0, sink);
}

/* One sample of every slot of the device, or (prime) only of those without
 * a previous sample. */
static void poll_once(mw_nvml_gpm *g, gpm_dev *gd, unsigned i, nvmlDevice_t h, mw_gpu_dev *d,
                      int prime, const mw_gpu_sink *sink)
{
    slot *whole = &gd->slots[0];
    whole->gi = WHOLE_GPU;
    whole->seen = 1;
    if ((!prime || !whole->have_prev) &&
        sample_slot(g, i, h, d, whole, d->gpm, &d->gpm_have, sink) < 0) {
        /* The GPU said it supports GPM, then refused a sample. */
        mw_nvml_gpm_forget(g, i);
        g->probed |= UINT64_C(1) << i;
        g->unsupported |= UINT64_C(1) << i;
        off_note(i, d, "nvmlGpmSampleGet answers NOT_SUPPORTED");
        return;
    }
    if (!d->mig_enabled)
        for (int k = 1; k < NSLOTS; k++)
            if (gd->slots[k].seen) free_slot(g, &gd->slots[k]);
    if (!d->mig_enabled || gd->mig_off || d->lost) return;
    if (!g->mig_sample) {
        gd->mig_off = 1;
        off_note(i, d, "this NVIDIA library has no nvmlGpmMigSampleGet");
        return;
    }
    /* Instances gone since the last poll give their samples back. */
    for (int k = 1; k < NSLOTS; k++) {
        slot *s = &gd->slots[k];
        int present = 0;
        for (uint32_t m = 0; m < d->nmig && !present; m++)
            present = d->mig[m].gpu_instance == s->gi;
        if (s->seen && !present) free_slot(g, s);
    }
    for (uint32_t k = 0; k < d->nmig && !d->lost; k++) {
        mw_gpu_mig *m = &d->mig[k];
        if (m->gpu_instance == MW_GPU_NONE) continue;
        int done = 0; /* another compute instance of this GPU instance, sampled already */
        for (uint32_t j = 0; j < k && !done; j++)
            if (d->mig[j].gpu_instance == m->gpu_instance) {
                memcpy(m->gpm, d->mig[j].gpm, sizeof(m->gpm));
                m->gpm_have = d->mig[j].gpm_have;
                done = 1;
            }
        if (done) continue;
        slot *s = slot_for(gd, m->gpu_instance);
        if (!s || (prime && s->have_prev)) continue;
        if (sample_slot(g, i, h, d, s, m->gpm, &m->gpm_have, sink) < 0) {
            gd->mig_off = 1;
            off_note(i, d, "nvmlGpmMigSampleGet answers NOT_SUPPORTED");
            return;
        }
    }
}

void mw_nvml_gpm_close(mw_nvml_gpm *g)
{
    if (!g) return;
    for (unsigned i = 0; i < MW_GPU_MAX_DEVICES; i++)
        if (g->devs[i]) mw_nvml_gpm_forget(g, i);
    free(g->mg);
    free(g);
}
