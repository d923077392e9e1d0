/* gpu_collector.c - the "gpu" collector: NVIDIA (NVML) and AMD (ROCm SMI)
 * GPUs, per device, per MIG instance and per container.
 *
 * Vendor libraries take a driver-wide lock and some calls are slow (a
 * process listing costs milliseconds; a wedged GPU can hang a call), so no
 * library call runs in the collection cycle. A thread of our own polls every
 * device: cheap readings every --interval, slow ones (process lists, MIG,
 * ECC, NVLink, PCIe) every --gpu-process-interval, and publishes a copy of
 * the devices after each poll. collect() only copies the latest published
 * state into the snapshot and attributes processes to containers through
 * the process map (gpu_emit.c); it waits only on its very first run, for at
 * most a few seconds, so that `mlwatch metrics` shows GPUs. Readings older
 * than 3 slow intervals (10 s at least) are not reported: a hung driver
 * shows as errors and missing GPU samples, not as frozen values. The thread
 * is an mw_worker (core/worker.h), whose mutex guards the published state. */
#include "gpu.h"
#include "gpu_emit.h"
#include "gpu_health.h"
#include "xid.h"
#include "../collector.h"
#include "../../core/log.h"
#include "../../core/sources.h"
#include "../../core/util.h"
#include "../../core/worker.h"

#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OPEN_WAIT_S 10 /* init() waits this long for the libraries to answer */
#define FIRST_WAIT_S 3 /* the first collect() waits this long for a first poll */
#define MAX_PENDING 32 /* errors queued between two collections */
#define SYNC_WAIT_S 30
#define STOP_WAIT_S 5        /* destroy() waits this long for the thread */
#define KMSG_PER_POLL 200000 /* kernel log records read per poll at most (a flood waits) */

typedef struct pending_error {
    char path[96];
    char what[160];
} pending_error;

typedef struct gpu_state gpu_state;

typedef struct backend_slot {
    mw_gpu_backend b;
    gpu_state *st;
    unsigned base; /* index of its first device in the state's arrays */
    mw_gpu_sink sink;
} backend_slot;

struct gpu_state {
    const mw_env *env;
    int64_t interval_ns, slow_interval_ns;
    backend_slot slots[2];
    unsigned nslots, n;
    mw_gpu_dev *work;   /* owned by the thread */
    mw_gpu_dev *latest; /* published, under poller.mu */
    uint64_t *energy_base, *energy_last;
    mw_gpu_emitter *emitter;
    mw_worker poller;    /* the polling thread; kicked by a sync request */
    pthread_cond_t done; /* a publication, or the libraries' answer */
    int opened;          /* 0 pending, 1 devices found, -1 nothing */
    char why[768];
    uint64_t sync_req, sync_done, published;
    int64_t published_ns;
    pending_error errs[MAX_PENDING];
    unsigned nerrs;
    uint64_t dropped_errs;
    int collected_once, absent_logged;
    /* Health (gpu_health.c): the engine, fed on the thread; the kernel log. */
    mw_gpu_health_engine *health;
    mw_kmsg_reader kmsg;
    int kmsg_on;
    int64_t stale_ns;
};

/* Running collectors, for mw_gpu_collector_sync(). */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static gpu_state *registry[8];

static void on_error(void *ctx, unsigned dev, const char *call, const char *what)
{
    backend_slot *s = ctx;
    gpu_state *st = s->st;
    pthread_mutex_lock(&st->poller.mu);
    if (st->nerrs < MAX_PENDING) {
        pending_error *e = &st->errs[st->nerrs++];
        if (dev == MW_GPU_NONE)
            snprintf(e->path, sizeof(e->path), "%s/%s", s->b.name, call);
        else
            snprintf(e->path, sizeof(e->path), "%s/gpu%u/%s", s->b.name, dev, call);
        mw_strlcpy(e->what, what, sizeof(e->what));
    } else {
        st->dropped_errs++;
    }
    pthread_mutex_unlock(&st->poller.mu);
}

static void on_xid(void *ctx, unsigned dev, uint64_t xid)
{
    backend_slot *s = ctx;
    if (dev >= s->b.ndevices || xid > UINT32_MAX) return;
    mw_gpu_dev *d = &s->st->work[s->base + dev];
    /* The kernel log has the same XIDs with more said (pid, process,
     * message, those from before the start): when it is read, NVML's only
     * count in mlwatch_gpu_xid_errors_total. */
    if (s->st->health && !s->st->kmsg_on)
        mw_gpu_health_nvml_xid(s->st->health, s->base + dev, (uint32_t)xid, mw_mono_ns() / 1000,
                               mw_now_ms());
    for (uint32_t k = 0; k < d->nxids; k++) {
        if (d->xids[k].xid == xid) {
            d->xids[k].count++;
            return;
        }
    }
    if (d->nxids < MW_GPU_MAX_XIDS) {
        d->xids[d->nxids].xid = (uint32_t)xid;
        d->xids[d->nxids].count = 1;
        d->nxids++;
    }
}

static void deadline_after(struct timespec *ts, int64_t ns)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += (time_t)(ns / 1000000000);
    ts->tv_nsec += (long)(ns % 1000000000);
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000;
    }
}

/* Open the backends and identify their devices (on the thread). */
static void open_backends(gpu_state *st)
{
    const mw_gpu_settings *cfg = mw_config_group(st->env->cfg, &mw_gpu_options);
    char why_nvml[320], why_rocm[320];
    why_nvml[0] = why_rocm[0] = '\0';
    backend_slot *s = &st->slots[0];
    if (mw_gpu_nvml_open(&s->b, cfg->nvml_library, st->env->host, why_nvml, sizeof(why_nvml)) ==
        0) {
        if (s->b.ndevices)
            st->nslots++;
        else {
            snprintf(why_nvml, sizeof(why_nvml), "driver %s reports no GPUs",
                     s->b.driver_version[0] ? s->b.driver_version : "(unknown version)");
            s->b.close(s->b.impl);
        }
    }
    s = &st->slots[st->nslots];
    if (mw_gpu_rocm_open(&s->b, cfg->rocm_library, st->env->host, why_rocm, sizeof(why_rocm)) ==
        0) {
        if (s->b.ndevices)
            st->nslots++;
        else {
            snprintf(why_rocm, sizeof(why_rocm), "no AMD GPUs");
            s->b.close(s->b.impl);
        }
    }
    unsigned n = 0;
    for (unsigned k = 0; k < st->nslots; k++) {
        st->slots[k].base = n;
        n += st->slots[k].b.ndevices;
    }
    st->n = n;
    st->work = mw_xcalloc(n ? n : 1, sizeof(mw_gpu_dev));
    st->latest = mw_xcalloc(n ? n : 1, sizeof(mw_gpu_dev));
    st->energy_base = mw_xcalloc(n ? n : 1, sizeof(uint64_t));
    st->energy_last = mw_xcalloc(n ? n : 1, sizeof(uint64_t));
    for (unsigned k = 0; k < st->nslots; k++) {
        s = &st->slots[k];
        s->st = st;
        s->sink = (mw_gpu_sink){s, on_error, on_xid};
        for (unsigned i = 0; i < s->b.ndevices; i++) {
            mw_gpu_dev *d = &st->work[s->base + i];
            d->numa_node = -1;
            d->driver_version = s->b.driver_version;
            s->b.identify(s->b.impl, i, d, &s->sink);
        }
    }
    if (n) {
        char *p = st->why;
        size_t room = sizeof(st->why);
        for (unsigned k = 0; k < st->nslots; k++) {
            int w = snprintf(
                p, room, "%s%s %s: %u GPU%s", k ? "; " : "",
                strcmp(st->slots[k].b.name, "nvml") == 0 ? "NVML, driver" : "ROCm SMI, driver",
                st->slots[k].b.driver_version[0] ? st->slots[k].b.driver_version : "(unknown)",
                st->slots[k].b.ndevices, st->slots[k].b.ndevices == 1 ? "" : "s");
            if (w < 0 || (size_t)w >= room) break;
            p += w;
            room -= (size_t)w;
        }
    } else {
        snprintf(st->why, sizeof(st->why), "NVML: %s; ROCm SMI: %s", why_nvml, why_rocm);
    }
}

/* Keep the energy counter monotonic: a value below the last one means the
 * driver was reloaded (the counter restarts at 0), so what was counted
 * before is carried over. */
static void fix_energy(gpu_state *st, unsigned i)
{
    mw_gpu_dev *d = &st->work[i];
    if (!(d->have & MW_GF_BIT(MW_GF_ENERGY))) return;
    if (d->energy_mj < st->energy_last[i]) st->energy_base[i] += st->energy_last[i];
    st->energy_last[i] = d->energy_mj;
    d->energy_j = (double)(st->energy_base[i] + d->energy_mj) / 1000.0;
}

/* Copy a device's readings without the unused tails of its fixed arrays:
 * a device is 10 KB, 6 KB of it 256 process slots that are mostly empty;
 * copied whole, 8 GPUs moved 80 KB under the lock at every poll. */
static void copy_dev(mw_gpu_dev *dst, const mw_gpu_dev *src)
{
    memcpy(dst, src, offsetof(mw_gpu_dev, links));
    memcpy(dst->links, src->links, src->nlinks * sizeof(src->links[0]));
    memcpy(dst->mig, src->mig, src->nmig * sizeof(src->mig[0]));
    memcpy(dst->procs, src->procs, src->nprocs * sizeof(src->procs[0]));
    memcpy(dst->xids, src->xids, src->nxids * sizeof(src->xids[0]));
    memcpy(dst->gpm, src->gpm, sizeof(*dst) - offsetof(mw_gpu_dev, gpm));
}

/* The health engine and the kernel log, once the devices are known. */
static void open_health(gpu_state *st)
{
    const mw_gpu_settings *cfg = mw_config_group(st->env->cfg, &mw_gpu_options);
    mw_xid_catalog *cat = mw_xmalloc(sizeof(*cat));
    char why[400];
    if (mw_xid_catalog_load(cat, cfg->xid_catalog, why, sizeof(why)) < 0) {
        /* Validated with the configuration; a file changed since then. */
        mw_log(MW_LOG_WARN, "gpu", "%s; using the built-in XID catalog", why);
        mw_xid_catalog_load(cat, NULL, why, sizeof(why));
    }
    mw_gpu_health_engine *h = mw_gpu_health_new(cat);
    free(cat);
    mw_gpu_health_devices(h, st->work, st->n);
    pthread_mutex_lock(&st->poller.mu); /* read by the published functions */
    st->health = h;
    pthread_mutex_unlock(&st->poller.mu);
    if (strcmp(cfg->kernel_log, "none") != 0 && cfg->kernel_log[0]) {
        if (mw_kmsg_open(&st->kmsg, st->env->host, cfg->kernel_log, why, sizeof(why)) == 0) {
            st->kmsg_on = 1;
            size_t used = strlen(st->why);
            snprintf(st->why + used, sizeof(st->why) - used, "; XIDs from the kernel log (%s)",
                     cfg->kernel_log);
        } else {
            /* Said in the collector's one line (gpu_init). */
            size_t used = strlen(st->why);
            snprintf(st->why + used, sizeof(st->why) - used,
                     "; XIDs from NVML only (no process, no message, none from before the "
                     "start): %.300s",
                     why);
        }
    }
}

static void on_kmsg(void *ctx, const mw_kmsg_record *rec, int before_start)
{
    gpu_state *st = ctx;
    mw_gpu_health_kmsg(st->health, rec, before_start, mw_mono_ns() / 1000, mw_now_ms());
}

static void read_kmsg(gpu_state *st)
{
    if (!st->kmsg_on) return;
    char why[160];
    if (mw_kmsg_drain(&st->kmsg, KMSG_PER_POLL, on_kmsg, st, why, sizeof(why)) < 0) {
        mw_log(MW_LOG_WARN, "gpu", "%s; the kernel log is not read any more", why);
        mw_kmsg_close(&st->kmsg);
        st->kmsg_on = 0;
    }
    mw_gpu_health_kmsg_stats(st->health, st->kmsg_on, st->kmsg.records, st->kmsg.lost);
}

static void *poll_thread(void *arg)
{
    gpu_state *st = arg;
    open_backends(st);
    if (st->n) open_health(st);
    pthread_mutex_lock(&st->poller.mu);
    st->opened = st->n ? 1 : -1;
    pthread_cond_broadcast(&st->done);
    pthread_mutex_unlock(&st->poller.mu);
    if (st->opened < 0) return NULL;
    int64_t next_fast = mw_mono_ns(), next_slow = next_fast;
    for (;;) {
        pthread_mutex_lock(&st->poller.mu);
        for (;;) {
            if (st->poller.stop || st->sync_req > st->sync_done) break;
            int64_t now = mw_mono_ns();
            if (now >= next_fast) break;
            mw_worker_wait_locked(&st->poller, (next_fast - now + 999999) / 1000000);
        }
        uint64_t req = st->sync_req;
        int stop = st->poller.stop;
        pthread_mutex_unlock(&st->poller.mu);
        if (stop) break;
        int64_t now = mw_mono_ns();
        unsigned what = MW_GPU_FAST;
        if (now >= next_slow || req > st->sync_done) {
            what |= MW_GPU_SLOW;
            next_slow = now + st->slow_interval_ns;
        }
        for (unsigned k = 0; k < st->nslots; k++)
            st->slots[k].b.events(st->slots[k].b.impl, &st->slots[k].sink);
        read_kmsg(st);
        for (unsigned k = 0; k < st->nslots; k++) {
            backend_slot *s = &st->slots[k];
            for (unsigned i = 0; i < s->b.ndevices; i++) {
                int64_t t0 = mw_mono_ns();
                s->b.poll(s->b.impl, i, &st->work[s->base + i], what, &s->sink);
                st->work[s->base + i].poll_ns = mw_mono_ns() - t0;
                fix_energy(st, s->base + i);
            }
        }
        {
            mw_gpu_health h[MW_GPU_MAX_DEVICES];
            unsigned nh = st->n < MW_GPU_MAX_DEVICES ? st->n : MW_GPU_MAX_DEVICES;
            mw_gpu_health_devices(st->health, st->work, nh); /* a GPU back from lost */
            mw_gpu_health_evaluate(st->health, st->work, nh, (what & MW_GPU_SLOW) != 0,
                                   mw_mono_ns() / 1000, mw_now_ms(), h);
            for (unsigned i = 0; i < nh; i++)
                st->work[i].health = h[i];
        }
        next_fast += st->interval_ns;
        if (next_fast < mw_mono_ns()) next_fast = mw_mono_ns() + st->interval_ns;
        pthread_mutex_lock(&st->poller.mu);
        for (size_t i = 0; i < st->n; i++)
            copy_dev(&st->latest[i], &st->work[i]);
        st->published++;
        st->published_ns = mw_mono_ns();
        if (req > st->sync_done) st->sync_done = req;
        pthread_cond_broadcast(&st->done);
        pthread_mutex_unlock(&st->poller.mu);
    }
    return NULL;
}

static void free_state(gpu_state *st)
{
    for (unsigned k = 0; k < st->nslots; k++)
        st->slots[k].b.close(st->slots[k].b.impl);
    mw_gpu_emitter_free(st->emitter);
    mw_kmsg_close(&st->kmsg);
    mw_gpu_health_free(st->health);
    free(st->work);
    free(st->latest);
    free(st->energy_base);
    free(st->energy_last);
    mw_worker_destroy(&st->poller);
    pthread_cond_destroy(&st->done);
    free(st);
}

static int gpu_init(const mw_env *env, void **state)
{
    gpu_state *st = mw_xcalloc(1, sizeof(*st));
    st->env = env;
    st->interval_ns = env->cfg->interval_ms * 1000000;
    st->slow_interval_ns = ((const mw_gpu_settings *)mw_config_group(env->cfg, &mw_gpu_options))
                               ->gpu_process_interval_ms *
                           1000000;
    if (st->slow_interval_ns < st->interval_ns) st->slow_interval_ns = st->interval_ns;
    st->kmsg.fd = -1;
    st->stale_ns = 3 * st->slow_interval_ns;
    if (st->stale_ns < 10000000000LL) st->stale_ns = 10000000000LL;
    mw_worker_init(&st->poller);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&st->done, &ca);
    pthread_condattr_destroy(&ca);
    if (mw_worker_start(&st->poller, poll_thread, st) < 0) {
        free_state(st);
        return -EAGAIN;
    }
    struct timespec ts;
    deadline_after(&ts, (int64_t)OPEN_WAIT_S * 1000000000);
    pthread_mutex_lock(&st->poller.mu);
    while (st->opened == 0)
        if (pthread_cond_timedwait(&st->done, &st->poller.mu, &ts) == ETIMEDOUT) break;
    int opened = st->opened;
    pthread_mutex_unlock(&st->poller.mu);
    if (opened < 0) {
        mw_worker_stop(&st->poller); /* the thread has ended or is ending */
        mw_log(MW_LOG_INFO, "gpu", "no GPU telemetry (%s)", st->why);
        mw_source_note("gpu", MW_SOURCE_ABSENT, "no GPU telemetry: %s", st->why);
        free_state(st);
        return MW_COLLECTOR_ABSENT;
    }
    if (opened == 0) {
        mw_log(MW_LOG_WARN, "gpu",
               "the GPU libraries have not answered within %d s; GPU metrics will appear "
               "when they do",
               OPEN_WAIT_S);
        mw_source_note("gpu", MW_SOURCE_ABSENT,
                       "the GPU libraries have not answered within %d s of the agent's start",
                       OPEN_WAIT_S);
    } else {
        mw_log(MW_LOG_INFO, "gpu", "GPU telemetry: %s", st->why);
        mw_source_note("gpu", MW_SOURCE_SEEN, "%s", st->why);
    }
    st->emitter = mw_gpu_emitter_new();
    pthread_mutex_lock(&registry_lock);
    for (size_t k = 0; k < MW_ARRAY_LEN(registry); k++) {
        if (!registry[k]) {
            registry[k] = st;
            break;
        }
    }
    pthread_mutex_unlock(&registry_lock);
    *state = st;
    return 0;
}

/* The node's verdict for whoever acts on it (the GPUHealthy Node
 * condition, kube/node_condition.c), every cycle: the collector is the
 * judge, so a stack that stops answering turns the condition Unknown. */
static void publish_verdict(mw_node_health *out, const mw_gpu_node_health *node, int fresh)
{
    if (!out) return;
    mw_gpu_node_health h = *node;
    if (!fresh) { /* as mlwatch_gpu_node_health says it */
        h.state = MW_HEALTH_UNKNOWN;
        mw_strlcpy(h.reason, "no_reading", sizeof(h.reason));
        h.gpu[0] = '\0';
    }
    mw_node_gpu_state state;
    char reason[64], message[512];
    mw_gpu_node_verdict(&h, &state, reason, sizeof(reason), message, sizeof(message));
    mw_node_health_publish(out, state, reason, message);
}

static void gpu_collect(void *state, mw_collect_ctx *ctx)
{
    gpu_state *st = state;
    pthread_mutex_lock(&st->poller.mu);
    if (!st->collected_once) {
        /* The very first cycle (and `mlwatch metrics`) waits for a poll. */
        st->collected_once = 1;
        struct timespec ts;
        deadline_after(&ts, (int64_t)FIRST_WAIT_S * 1000000000);
        while (st->published == 0 && st->opened >= 0)
            if (pthread_cond_timedwait(&st->done, &st->poller.mu, &ts) == ETIMEDOUT) break;
    }
    if (st->opened < 0) {
        /* The libraries answered after init() had given up waiting. */
        pthread_mutex_unlock(&st->poller.mu);
        if (!st->absent_logged) mw_log(MW_LOG_INFO, "gpu", "no GPU telemetry (%s)", st->why);
        st->absent_logged = 1;
        return;
    }
    unsigned n = st->opened > 0 ? st->n : 0;
    uint64_t published = st->published;
    int64_t age = mw_mono_ns() - st->published_ns;
    pending_error errs[MAX_PENDING];
    unsigned nerrs = st->nerrs;
    uint64_t dropped = st->dropped_errs;
    memcpy(errs, st->errs, nerrs * sizeof(errs[0]));
    st->nerrs = 0;
    st->dropped_errs = 0;
    int64_t stale_ns = st->stale_ns;
    /* Emitting from the published copy under the lock costs the poller at
     * most this long a wait before its next publication; no copy needed. */
    int fresh = published && age <= stale_ns;
    if (fresh) mw_gpu_emit(st->emitter, ctx, st->latest, n);
    /* Health is reported stale or not: unknown when nothing answers. */
    mw_gpu_node_health node;
    mw_gpu_event_stats est = {0};
    if (st->health) {
        mw_gpu_health_node(st->health, &node);
        mw_gpu_health_events(st->health, NULL, 0, &est);
    }
    mw_gpu_emit_health(ctx, st->latest, n, fresh, st->health ? &node : NULL, &est);
    int judged = st->health != NULL; /* set by the thread under the lock */
    pthread_mutex_unlock(&st->poller.mu);
    if (judged) publish_verdict(st->env->node_health, &node, fresh);

    for (unsigned k = 0; k < nerrs; k++)
        mw_collect_error(ctx, errs[k].path, 0, errs[k].what);
    ctx->errors += dropped;
    if (!published) {
        mw_collect_error(ctx, "gpu", 0, "no GPU poll has completed yet (a driver call hangs?)");
    } else if (age > stale_ns) {
        /* Old readings would look current: the hang is reported instead. */
        char what[128];
        snprintf(what, sizeof(what), "no GPU poll has completed for %.0f s (a driver call hangs?)",
                 (double)age / 1e9);
        mw_collect_error(ctx, "gpu", 0, what);
    }
}

static void gpu_destroy(void *state)
{
    gpu_state *st = state;
    if (!st) return;
    pthread_mutex_lock(&registry_lock);
    for (size_t k = 0; k < MW_ARRAY_LEN(registry); k++)
        if (registry[k] == st) registry[k] = NULL;
    pthread_mutex_unlock(&registry_lock);
    /* A driver call can hang for good: then the agent stops without it
     * (the thread and what it uses are left to the exiting process). */
    if (mw_worker_stop_within(&st->poller, (int64_t)STOP_WAIT_S * 1000) < 0) {
        mw_log(MW_LOG_WARN, "gpu", "the GPU poller is stuck in a driver call; not waiting for it");
        return;
    }
    free_state(st);
}

int mw_gpu_collector_sync(void)
{
    int rc = 0;
    pthread_mutex_lock(&registry_lock);
    for (size_t k = 0; k < MW_ARRAY_LEN(registry); k++) {
        gpu_state *st = registry[k];
        if (!st) continue;
        struct timespec ts;
        deadline_after(&ts, (int64_t)SYNC_WAIT_S * 1000000000);
        pthread_mutex_lock(&st->poller.mu);
        uint64_t req = ++st->sync_req;
        mw_worker_kick_locked(&st->poller);
        while (st->sync_done < req && st->opened >= 0)
            if (pthread_cond_timedwait(&st->done, &st->poller.mu, &ts) == ETIMEDOUT) {
                rc = -1;
                break;
            }
        pthread_mutex_unlock(&st->poller.mu);
    }
    pthread_mutex_unlock(&registry_lock);
    return rc;
}

/* The first running collector (an agent runs one). Call with registry_lock. */
static gpu_state *running(void)
{
    for (size_t k = 0; k < MW_ARRAY_LEN(registry); k++) {
        if (!registry[k]) continue;
        pthread_mutex_lock(&registry[k]->poller.mu);
        int has = registry[k]->health != NULL;
        pthread_mutex_unlock(&registry[k]->poller.mu);
        if (has) return registry[k];
    }
    return NULL;
}

/* -1 with why when st has published nothing for its stale limit. */
static int stale_why(gpu_state *st, char *why, size_t size)
{
    pthread_mutex_lock(&st->poller.mu);
    uint64_t published = st->published;
    int64_t age = mw_mono_ns() - st->published_ns;
    pthread_mutex_unlock(&st->poller.mu);
    if (published && age <= st->stale_ns) return 0;
    if (published)
        snprintf(why, size, "no GPU poll has completed for %.0f s (a driver call hangs?)",
                 (double)age / 1e9);
    else
        snprintf(why, size, "no GPU poll has completed yet (a driver call hangs?)");
    return -1;
}

int mw_gpu_node_health_get(mw_gpu_node_health *out)
{
    pthread_mutex_lock(&registry_lock);
    gpu_state *st = running();
    int rc = -1;
    if (st) {
        char why[160];
        mw_gpu_health_node(st->health, out);
        if (stale_why(st, why, sizeof(why)) < 0) { /* nothing fresh: not known */
            out->state = MW_HEALTH_UNKNOWN;
            mw_strlcpy(out->reason, "no_reading", sizeof(out->reason));
            out->gpu[0] = '\0';
        }
        rc = 0;
    }
    pthread_mutex_unlock(&registry_lock);
    return rc;
}

mw_gpu_event *mw_gpu_events_get(size_t *n, mw_gpu_event_stats *stats)
{
    *n = 0;
    if (stats) memset(stats, 0, sizeof(*stats));
    pthread_mutex_lock(&registry_lock);
    gpu_state *st = running();
    mw_gpu_event *out = NULL;
    if (st) {
        out = mw_xcalloc(MW_GPU_EVENTS_MAX, sizeof(*out));
        *n = mw_gpu_health_events(st->health, out, MW_GPU_EVENTS_MAX, stats);
    }
    pthread_mutex_unlock(&registry_lock);
    return out;
}

int mw_gpu_answering(char *why, size_t size)
{
    int rc = 0;
    pthread_mutex_lock(&registry_lock);
    for (size_t k = 0; k < MW_ARRAY_LEN(registry) && rc == 0; k++)
        if (registry[k]) rc = stale_why(registry[k], why, size);
    pthread_mutex_unlock(&registry_lock);
    return rc;
}

/* --gpu-xid-catalog: loaded (over the built-in one) when the configuration
 * is, so that an error stops the start with file:line:col. */
static int valid_catalog(const char *value, char *why, size_t whysize)
{
    if (!value || !*value) return 0;
    mw_xid_catalog *cat = mw_xmalloc(sizeof(*cat));
    int rc = mw_xid_catalog_load(cat, value, why, whysize);
    free(cat);
    return rc;
}

#define OPT(n, t, f, d, v, h) MW_OPT(mw_gpu_settings, n, t, f, d, v, h)
/* clang-format off */
static const mw_option gpu_rows[] = {
    OPT("nvml-library", MW_OPT_PATH, nvml_library, "libnvidia-ml.so.1", NULL, "NVIDIA NVML library to load for GPU metrics (none: no NVIDIA GPUs)"),
    OPT("rocm-library", MW_OPT_PATH, rocm_library, "auto", NULL, "AMD ROCm SMI library for GPU metrics; auto tries librocm_smi64.so.7, .6, .5, .1 when the amdgpu driver is loaded (none: no AMD GPUs)"),
    OPT("gpu-process-interval", MW_OPT_DURATION, gpu_process_interval_ms, "5s", NULL, "Interval of slow GPU calls: process lists, MIG, ECC, NVLink, PCIe"),
    OPT("gpu-kernel-log", MW_OPT_PATH, kernel_log, "/dev/kmsg", NULL, "Kernel log read for XID and SXID lines, under --root (none: XIDs from NVML only)"),
    OPT("gpu-xid-catalog", MW_OPT_PATH, xid_catalog, "", valid_catalog, "YAML file merged over the built-in XID catalog (data/xid-catalog.yaml): meanings, classes, actions, escalation, health thresholds"),
};
/* clang-format on */
#undef OPT
const mw_option_group mw_gpu_options = MW_OPTION_GROUP(
    "gpu collector", "src/collect/gpu/gpu_collector.c", mw_gpu_settings, gpu_rows, NULL);

const mw_collector mw_collector_gpu = {
    .name = "gpu",
    .help = "NVIDIA (NVML) and AMD (ROCm SMI) GPUs, MIG instances, per-container shares",
    .options = &mw_gpu_options,
    .init = gpu_init,
    .collect = gpu_collect,
    .destroy = gpu_destroy,
};
