/* idle.c - the "idle" module: GPUs held by pods and not used.
 *
 * Each cycle (derive) it reads what the gpu and cgroup collectors put in the
 * snapshot: a session is a container with GPU memory on a GPU
 * (mlwatch_container_gpu_memory_used_bytes > 0); its utilization is the
 * container's share of the GPU (mlwatch_container_gpu_utilization_ratio).
 * On a GPU in MIG mode a session is a container on one MIG instance
 * (mlwatch_container_mig_memory_used_bytes > 0), judged by that instance's
 * own activity (mlwatch_mig_utilization_ratio, from NVML's GPM on Hopper
 * and newer); where the driver reports none the session is listed but not
 * judged. So an idle slice opens its own episode while a busy slice of the
 * same GPU does not. The rule with hysteresis is in idle.h. It exports
 *
 *   mlwatch_gpu_idle_seconds{namespace,pod,container,gpu,workload_kind,workload,owner}
 *       how long the open episode has lasted (0 while not idle); MIG
 *       sessions add mig_profile, gpu_instance, compute_instance as the
 *       MIG families do
 *   mlwatch_idle_gpu_sessions{namespace}            open episodes
 *   mlwatch_idle_gpu_seconds_total{namespace}       reclaimable GPU-seconds
 *   mlwatch_idle_gpu_energy_joules_total{namespace} GPU energy spent idle
 *   mlwatch_idle_gpu_co2_grams_total{namespace}     its CO2 (with carbon data)
 *
 * and offers its open and ended episodes to the notifier (idle.h; the agent
 * wires the two in agent/idle_notify.c). Workload and owner come from the
 * Kubernetes pod table (src/kube, started by the kube module and reached
 * through mw_env.kube) joined on the pod UID of mlwatch_container_info;
 * without it the owner is the namespace.
 *
 * A GPU the kubelet allocated to a container (src/kube/podresources.c,
 * joined on mlwatch_gpu_info{uuid}) is held by it too, even with no process
 * of it on the GPU; such a session's utilization is the GPU's
 * (mlwatch_gpu_utilization_ratio). A MIG device allocated this way (a MIG-
 * UUID, joined on mlwatch_mig_memory_total_bytes{uuid}) is a session on
 * that instance, judged by the instance's activity. GPUs allocated through
 * DRA come the same way (the poller resolves them to their UUID). A
 * fraction of a GPU (a time-slicing replica, GPU-...::N) held by
 * allocation only is judged by the container's own share of the GPU
 * (mlwatch_container_gpu_utilization_ratio, 0 without one), never by the
 * whole GPU's utilization, which the other holders make: an idle fraction
 * is an idle session of its pod. A KAI fractional pod (gpu-fraction,
 * gpu-memory) with no process on a GPU holds the GPU its runai-gpu-group's
 * reservation pod holds (kube.h), on its first container, judged the same. */
#include "idle.h"
#include "idle_config.h"
#include "../agent/module.h"
#include "../core/log.h"
#include "../core/util.h"
#include "../kube/kube_module.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SESSIONS 1024
#define MAX_NAMESPACES 256
/* Gaps longer than this (a stalled agent) are not counted as idle time. */
#define MAX_STEP_MS 60000
/* What the carbon module exports: grams of CO2 per kWh of the grid now. */
#define CARBON_INTENSITY "mlwatch_carbon_intensity_grams_per_kwh"

int mw_idle_step(mw_idle_track *t, int64_t now, double util, const mw_idle_rule *r)
{
    int below = util < r->threshold;
    switch (t->state) {
    case MW_IDLE_BUSY:
        if (!below) return MW_IDLE_NONE;
        t->state = MW_IDLE_BELOW;
        t->below_since_ms = now;
        /* A window shorter than the interval opens at once. */
        /* fall through */
    case MW_IDLE_BELOW:
        if (!below) {
            t->state = MW_IDLE_BUSY;
            return MW_IDLE_NONE;
        }
        if (now - t->below_since_ms < r->window_ms) return MW_IDLE_NONE;
        t->state = MW_IDLE_IDLE;
        t->above_since_ms = 0;
        return MW_IDLE_OPENED;
    case MW_IDLE_IDLE:
        if (below) {
            t->above_since_ms = 0;
            return MW_IDLE_NONE;
        }
        if (!t->above_since_ms) t->above_since_ms = now;
        if (now - t->above_since_ms < r->busy_ms) return MW_IDLE_NONE;
        t->state = MW_IDLE_BUSY;
        t->above_since_ms = 0;
        return MW_IDLE_CLOSED;
    }
    return MW_IDLE_NONE;
}

/* A session: its labels, each a string of its own, and the open episode's
 * figures. An episode (mw_idle_episode) has a fixed-size field for each
 * label (sized for the longest names Kubernetes allows, ~1.9 KB in all):
 * one is filled from the session (episode_of) when the notifier needs it,
 * and labels are cut to those sizes here too, so both say the same. */
typedef struct session {
    char *key; /* namespace/pod/container/gpu[/gi/ci] */
    char *ns, *pod, *container, *gpu, *model, *uuid, *workload_kind, *workload, *owner;
    int64_t idle_since_ms;  /* the open episode's identity with key */
    double memory_bytes;    /* GPU memory held */
    double gpu_seconds;     /* idle GPU-seconds in the open episode */
    double energy_joules;   /* GPU energy spent idle in it */
    double co2_grams;       /* < 0: unknown (no carbon intensity) */
    double threshold_ratio; /* the rule's threshold */
    mw_idle_track tr;
    int64_t last_seen_ms;
    int seen, judged;
    /* Held by allocation only: no process memory this cycle. */
    int alloc_only;
    int fraction;       /* ... of a fraction of the GPU (a time-slicing replica) */
    double energy_prev; /* the container's GPU energy counter, -1 = none */
    int co2_known;
    /* A MIG instance (mig = 1): its labels as the MIG families have them. */
    int mig;
    char gi[12], ci[12], profile[32];
} session;

/* The size of field f of mw_idle_episode: what a label is cut to
 * (mw_set_string). */
#define EP_MAX(f) sizeof(((mw_idle_episode *)0)->f)

static void session_free_labels(session *s)
{
    char **labels[] = {&s->key,   &s->ns,   &s->pod,           &s->container, &s->gpu,
                       &s->model, &s->uuid, &s->workload_kind, &s->workload,  &s->owner};
    for (size_t i = 0; i < MW_ARRAY_LEN(labels); i++) {
        free(*labels[i]);
        *labels[i] = NULL;
    }
}

typedef struct ns_total {
    char ns[64];
    double sessions, gpu_seconds, energy, co2;
} ns_total;

typedef struct idle_state {
    const mw_config *cfg;
    session *s;
    size_t n;
    ns_total ns[MAX_NAMESPACES];
    size_t nns;
    int carbon_seen;
    int64_t prev_ms;
    mw_idle_episode *ended; /* episodes that ended in this derive */
    size_t nended;
    const mw_kube_inputs *kube; /* NULL: none (tests); its members NULL while off */
    mw_podres_table alloc;      /* the latest copy of the kubelet's allocations */
    uint64_t alloc_gen;
    mw_kube_kai *kai; /* MW_KUBE_MAX_KAI, allocated with the first pod table */
    char node[254];
} idle_state;

/* clang-format off */
MW_METRIC(IDLE_SECONDS, MW_GAUGE, "mlwatch_gpu_idle_seconds", "seconds", "How long a GPU (or MIG instance) held by this container has been idle in the open episode; 0 while it is not idle.");
MW_METRIC(IDLE_SESSIONS, MW_GAUGE, "mlwatch_idle_gpu_sessions", "", "Open idle GPU sessions (held GPUs below the idle threshold for the idle window).");
MW_METRIC(IDLE_GPU_SECONDS, MW_COUNTER, "mlwatch_idle_gpu_seconds_total", "seconds", "GPU-seconds held idle in idle sessions: the capacity that could be reclaimed.");
MW_METRIC(IDLE_ENERGY, MW_COUNTER, "mlwatch_idle_gpu_energy_joules_total", "joules", "GPU energy spent by idle sessions (the container's GPU energy where the energy module reports it, else the GPU's power times its share of the GPU's memory).");
MW_METRIC(IDLE_CO2, MW_COUNTER, "mlwatch_idle_gpu_co2_grams_total", "grams", "CO2 emitted for the energy of idle sessions, at the grid's carbon intensity.");
/* clang-format on */

static const char *label(const mw_sample *s, const char *name)
{
    for (uint32_t i = 0; i < s->nlabels; i++)
        if (strcmp(s->labels[i].name, name) == 0) return s->labels[i].value;
    return "";
}

static void rule_for(const mw_config *config, const char *ns, mw_idle_rule *r)
{
    const mw_idle_settings *cfg = mw_config_group(config, &mw_idle_options);
    r->threshold = cfg->threshold / 100.0;
    r->window_ms = cfg->window_ms;
    r->busy_ms = cfg->busy_period_ms;
    for (size_t i = 0; i < cfg->noverrides; i++) {
        const struct mw_idle_override *o = &cfg->overrides[i];
        if (strcmp(o->ns, ns) != 0) continue;
        if (o->threshold >= 0) r->threshold = o->threshold / 100.0;
        if (o->window_ms) r->window_ms = o->window_ms;
        if (o->busy_period_ms) r->busy_ms = o->busy_period_ms;
    }
}

static ns_total *ns_of(idle_state *st, const char *ns)
{
    for (size_t i = 0; i < st->nns; i++)
        if (strcmp(st->ns[i].ns, ns) == 0) return &st->ns[i];
    if (st->nns >= MAX_NAMESPACES) return NULL;
    ns_total *t = &st->ns[st->nns++];
    memset(t, 0, sizeof(*t));
    mw_strlcpy(t->ns, ns, sizeof(t->ns));
    return t;
}

static session *find_session(idle_state *st, const char *key)
{
    for (size_t i = 0; i < st->n; i++)
        if (strcmp(st->s[i].key, key) == 0) return &st->s[i];
    return NULL;
}

static session *add_session(idle_state *st, const char *ns, const char *pod, const char *ctr,
                            const char *gpu, const char *key)
{
    if (st->n >= MAX_SESSIONS) {
        mw_log_once(MW_LOG_WARN, "idle", "sessions", "more than %d GPU sessions: ignoring more",
                    MAX_SESSIONS);
        return NULL;
    }
    session *s = &st->s[st->n++];
    memset(s, 0, sizeof(*s));
    mw_set_string(&s->key, key, EP_MAX(key));
    mw_set_string(&s->ns, ns, EP_MAX(ns));
    mw_set_string(&s->pod, pod, EP_MAX(pod));
    mw_set_string(&s->container, ctr, EP_MAX(container));
    mw_set_string(&s->gpu, gpu, EP_MAX(gpu));
    mw_set_string(&s->model, "", 1);
    mw_set_string(&s->uuid, "", 1);
    mw_set_string(&s->workload_kind, "", 1);
    mw_set_string(&s->workload, "", 1);
    mw_set_string(&s->owner, "", 1);
    s->energy_prev = -1;
    s->co2_grams = -1;
    return s;
}

static void make_key(char *key, size_t n, const char *ns, const char *pod, const char *ctr,
                     const char *gpu)
{
    snprintf(key, n, "%s/%s/%s/%s", ns, pod, ctr, gpu);
}

/* The session of a container on MIG instance gi/ci of GPU gpu (found or
 * added), with its MIG labels set. */
static session *mig_session(idle_state *st, const char *ns, const char *pod, const char *ctr,
                            const char *gpu, const char *gi, const char *ci, const char *profile)
{
    char key[400];
    snprintf(key, sizeof(key), "%s/%s/%s/%s/%s/%s", ns, pod, ctr, gpu, gi, ci);
    session *s = find_session(st, key);
    if (!s) s = add_session(st, ns, pod, ctr, gpu, key);
    if (!s) return NULL;
    s->mig = 1;
    mw_strlcpy(s->gi, gi, sizeof(s->gi));
    mw_strlcpy(s->ci, ci, sizeof(s->ci));
    mw_strlcpy(s->profile, profile, sizeof(s->profile));
    return s;
}

/* "0", or "0 MIG 1g.10gb GI 7 CI 0": the session's device in log lines. */
static const char *device_of(const session *s, char *buf, size_t n)
{
    if (!s->mig) return s->gpu;
    snprintf(buf, n, "%s MIG %s GI %s CI %s", s->gpu, s->profile, s->gi, s->ci);
    return buf;
}

static int gpu_in_mig_mode(const mw_snapshot *snap, const char *gpu)
{
    double mig = 0;
    return mw_snapshot_get(snap, "mlwatch_gpu_mig_enabled", &mig, "gpu", gpu, MW_END) == 0 &&
           mig == 1;
}

static int idle_init(const mw_env *env, void **out)
{
    idle_state *st = mw_xcalloc(1, sizeof(*st));
    st->cfg = env->cfg;
    st->s = mw_xcalloc(MAX_SESSIONS, sizeof(session));
    st->ended = mw_xcalloc(MAX_SESSIONS, sizeof(mw_idle_episode));
    st->kube = env->kube;
    mw_node_name(env->cfg, st->node, sizeof(st->node)); /* as the series' node label */
    *out = st;
    return 0;
}

int mw_idle_restore(void *state, const mw_idle_episode *ep, int64_t now_ms)
{
    idle_state *st = state;
    if (ep->ended_ms || find_session(st, ep->key)) return 0;
    session *s = add_session(st, ep->ns, ep->pod, ep->container, ep->gpu, ep->key);
    if (!s) return -1;
    mw_set_string(&s->model, ep->model, EP_MAX(model));
    mw_set_string(&s->uuid, ep->uuid, EP_MAX(uuid));
    mw_set_string(&s->workload_kind, ep->workload_kind, EP_MAX(workload_kind));
    mw_set_string(&s->workload, ep->workload, EP_MAX(workload));
    mw_set_string(&s->owner, ep->owner, EP_MAX(owner));
    s->idle_since_ms = ep->idle_since_ms;
    s->memory_bytes = ep->memory_bytes;
    s->gpu_seconds = ep->gpu_seconds;
    s->energy_joules = ep->energy_joules;
    s->co2_grams = ep->co2_grams;
    s->threshold_ratio = ep->threshold_ratio;
    s->tr.state = MW_IDLE_IDLE;
    s->tr.below_since_ms = ep->idle_since_ms;
    s->last_seen_ms = now_ms;
    s->co2_known = ep->co2_grams >= 0;
    return 0;
}

/* The GPU's label from mlwatch_gpu_info (model, uuid); for a MIG instance
 * its own UUID and "MODEL MIG PROFILE, GI n CI m", so that a message
 * names the slice. */
static void gpu_identity(const mw_snapshot *snap, const char *gpu, session *s)
{
    const char *model = NULL, *uuid = NULL;
    const mw_family *f = mw_snapshot_find(snap, "mlwatch_gpu_info");
    for (const mw_sample *x = f ? f->first : NULL; x; x = x->next)
        if (strcmp(label(x, "gpu"), gpu) == 0) {
            model = label(x, "model");
            uuid = label(x, "uuid");
            break;
        }
    if (s->mig) {
        f = mw_snapshot_find(snap, "mlwatch_mig_memory_total_bytes");
        for (const mw_sample *x = f ? f->first : NULL; x; x = x->next)
            if (!strcmp(label(x, "gpu"), gpu) && !strcmp(label(x, "gpu_instance"), s->gi) &&
                !strcmp(label(x, "compute_instance"), s->ci)) {
                uuid = label(x, "uuid");
                break;
            }
        if (model) {
            char m[EP_MAX(model)];
            snprintf(m, sizeof(m), "%.48s MIG %.14s, GI %.8s CI %.8s", model, s->profile, s->gi,
                     s->ci);
            mw_set_string(&s->model, m, sizeof(m));
        }
    } else if (model) {
        mw_set_string(&s->model, model, EP_MAX(model));
    }
    if (uuid) mw_set_string(&s->uuid, uuid, EP_MAX(uuid));
}

/* The session's utilization, or -1 when nothing says (not judged). */
static double session_util(const mw_snapshot *snap, const session *s)
{
    double v;
    if (s->mig)
        return mw_snapshot_get(snap, "mlwatch_mig_utilization_ratio", &v, "gpu", s->gpu,
                               "gpu_instance", s->gi, "compute_instance", s->ci, MW_END) == 0
                   ? v
                   : -1;
    if (gpu_in_mig_mode(snap, s->gpu)) return -1; /* a whole GPU in MIG mode: no figure */
    if (s->alloc_only && s->fraction)
        return mw_snapshot_get(snap, "mlwatch_container_gpu_utilization_ratio", &v, "namespace",
                               s->ns, "pod", s->pod, "container", s->container, "gpu", s->gpu,
                               MW_END) == 0
                   ? v
                   : 0; /* no process of its own: none of the GPU's work is its */
    if (s->alloc_only)
        return mw_snapshot_get(snap, "mlwatch_gpu_utilization_ratio", &v, "gpu", s->gpu, MW_END) ==
                       0
                   ? v
                   : -1;
    if (mw_snapshot_get(snap, "mlwatch_container_gpu_utilization_ratio", &v, "namespace", s->ns,
                        "pod", s->pod, "container", s->container, "gpu", s->gpu, MW_END) == 0)
        return v;
    return -1;
}

/* Energy of session s over the last dt_ms: the container's GPU energy
 * counter (split among its GPUs) when the energy module exports it, else
 * the GPU's power times the session's share of the GPU memory held by
 * pods. */
static double session_energy(idle_state *st, const mw_snapshot *snap, session *s, int64_t dt_ms)
{
    /* The energy module splits it by kind (dynamic, idle): add them up. */
    double e = 0;
    int found = 0;
    const mw_family *cf = mw_snapshot_find(snap, "mlwatch_container_energy_joules_total");
    for (const mw_sample *x = cf ? cf->first : NULL; x; x = x->next)
        if (!strcmp(label(x, "component"), "gpu") && !strcmp(label(x, "namespace"), s->ns) &&
            !strcmp(label(x, "pod"), s->pod) && !strcmp(label(x, "container"), s->container)) {
            e += x->value;
            found = 1;
        }
    if (found) {
        double d = s->energy_prev >= 0 && e >= s->energy_prev ? e - s->energy_prev : 0;
        s->energy_prev = e;
        size_t gpus = 0;
        for (size_t i = 0; i < st->n; i++)
            if (st->s[i].seen && !strcmp(st->s[i].ns, s->ns) && !strcmp(st->s[i].pod, s->pod) &&
                !strcmp(st->s[i].container, s->container))
                gpus++;
        return gpus ? d / (double)gpus : d;
    }
    double w;
    if (mw_snapshot_get(snap, "mlwatch_gpu_power_watts", &w, "gpu", s->gpu, MW_END) < 0) return 0;
    double it = 0, gt = 0;
    if (s->mig &&
        mw_snapshot_get(snap, "mlwatch_mig_memory_total_bytes", &it, "gpu", s->gpu, "gpu_instance",
                        s->gi, "compute_instance", s->ci, MW_END) == 0 &&
        mw_snapshot_get(snap, "mlwatch_gpu_memory_total_bytes", &gt, "gpu", s->gpu, MW_END) == 0 &&
        gt > 0) {
        /* A MIG instance owns its slice of the GPU (as the energy module
         * counts it), used or not; inside it, sessions by memory. */
        double mem = 0;
        size_t n = 0;
        for (size_t i = 0; i < st->n; i++) {
            const session *o = &st->s[i];
            if (o->seen && o->mig && !strcmp(o->gpu, s->gpu) && !strcmp(o->gi, s->gi) &&
                !strcmp(o->ci, s->ci)) {
                mem += o->memory_bytes;
                n++;
            }
        }
        double within = mem > 0 ? s->memory_bytes / mem : 1.0 / (double)(n ? n : 1);
        return w * (it / gt) * within * (double)dt_ms / 1000.0;
    }
    double total = 0;
    for (size_t i = 0; i < st->n; i++)
        if (st->s[i].seen && !strcmp(st->s[i].gpu, s->gpu)) total += st->s[i].memory_bytes;
    double share = total > 0 ? s->memory_bytes / total : 1;
    return w * share * (double)dt_ms / 1000.0;
}

static void account(idle_state *st, session *s, double secs, double joules, double intensity)
{
    s->gpu_seconds += secs;
    s->energy_joules += joules;
    double g = intensity >= 0 ? joules / 3.6e6 * intensity : 0;
    if (intensity >= 0) {
        if (!s->co2_known) s->co2_grams = 0;
        s->co2_known = 1;
        s->co2_grams += g;
    }
    ns_total *t = ns_of(st, s->ns);
    if (t) {
        t->gpu_seconds += secs;
        t->energy += joules;
        t->co2 += g;
    }
}

/* The episode of session s, as consumers get it. */
static void episode_of(const idle_state *st, const session *s, mw_idle_episode *ep)
{
    memset(ep, 0, sizeof(*ep));
    mw_strlcpy(ep->key, s->key, sizeof(ep->key));
    mw_strlcpy(ep->ns, s->ns, sizeof(ep->ns));
    mw_strlcpy(ep->pod, s->pod, sizeof(ep->pod));
    mw_strlcpy(ep->container, s->container, sizeof(ep->container));
    mw_strlcpy(ep->gpu, s->gpu, sizeof(ep->gpu));
    mw_strlcpy(ep->model, s->model, sizeof(ep->model));
    mw_strlcpy(ep->uuid, s->uuid, sizeof(ep->uuid));
    mw_strlcpy(ep->node, st->node, sizeof(ep->node));
    mw_strlcpy(ep->workload_kind, s->workload_kind, sizeof(ep->workload_kind));
    mw_strlcpy(ep->workload, s->workload, sizeof(ep->workload));
    mw_strlcpy(ep->owner, s->owner, sizeof(ep->owner));
    ep->idle_since_ms = s->idle_since_ms;
    ep->memory_bytes = s->memory_bytes;
    ep->gpu_seconds = s->gpu_seconds;
    ep->energy_joules = s->energy_joules;
    ep->co2_grams = s->co2_grams;
    ep->threshold_ratio = s->threshold_ratio;
}

static void end_episode(idle_state *st, session *s, int64_t now, const char *reason)
{
    if (st->nended < MAX_SESSIONS) {
        mw_idle_episode *ep = &st->ended[st->nended++];
        episode_of(st, s, ep);
        ep->ended_ms = now;
        mw_strlcpy(ep->end_reason, reason, sizeof(ep->end_reason));
    }
    char dev[96];
    mw_log(MW_LOG_INFO, "idle", "idle session ended (%s): %s/%s container %s GPU %s, %.0f s idle",
           reason, s->ns, s->pod, s->container, device_of(s, dev, sizeof(dev)),
           (double)(now - s->idle_since_ms) / 1000.0);
    memset(&s->tr, 0, sizeof(s->tr));
    s->gpu_seconds = s->energy_joules = 0;
    s->co2_grams = -1;
    s->co2_known = 0;
}

static void identify(idle_state *st, const mw_snapshot *snap, session *s)
{
    mw_set_string(&s->owner, s->ns, EP_MAX(owner));
    mw_kube *pods = st->kube ? st->kube->pods : NULL;
    if (!pods) return;
    const char *uid = "";
    const mw_family *f = mw_snapshot_find(snap, "mlwatch_container_info");
    for (const mw_sample *x = f ? f->first : NULL; x; x = x->next)
        if (!strcmp(label(x, "namespace"), s->ns) && !strcmp(label(x, "pod"), s->pod) &&
            *label(x, "pod_uid")) {
            uid = label(x, "pod_uid");
            break;
        }
    mw_kube_pod p;
    if (mw_kube_lookup(pods, uid, s->ns, s->pod, &p)) {
        mw_set_string(&s->workload_kind, p.workload_kind, EP_MAX(workload_kind));
        mw_set_string(&s->workload, p.workload, EP_MAX(workload));
        if (p.owner[0]) mw_set_string(&s->owner, p.owner, EP_MAX(owner));
    }
}

/* GPUs and MIG devices the kubelet allocated to containers that have no
 * process on them: sessions too, judged by the GPU's utilization or the
 * MIG instance's activity. */
static void held_by_allocation(idle_state *st, const mw_snapshot *snap, int64_t now)
{
    mw_podres *podres = st->kube ? st->kube->podres : NULL;
    if (!podres) return;
    mw_podres_copy(podres, &st->alloc_gen, &st->alloc);
    const mw_family *info = mw_snapshot_find(snap, "mlwatch_gpu_info");
    const mw_family *migs = mw_snapshot_find(snap, "mlwatch_mig_memory_total_bytes");
    for (size_t i = 0; i < st->alloc.n; i++) {
        const mw_podres_row *a = &st->alloc.rows[i];
        if (!a->device[0]) continue; /* a DRA device not resolved to a GPU */
        if (st->kube->pods && mw_kube_is_kai_reservation(st->kube->pods, a->ns, a->pod))
            continue; /* a KAI reservation: the GPU is its fractional pods' (held_by_kai) */
        const char *gpu = NULL;
        for (const mw_sample *x = info ? info->first : NULL; x && !gpu; x = x->next)
            if (!strcmp(label(x, "uuid"), a->device)) gpu = label(x, "gpu");
        session *s = NULL;
        if (gpu) {
            char key[400];
            make_key(key, sizeof(key), a->ns, a->pod, a->container, gpu);
            s = find_session(st, key);
            if (s && s->seen) continue; /* its processes hold it already */
            if (!s) s = add_session(st, a->ns, a->pod, a->container, gpu, key);
        } else {
            /* A MIG device: its instance, by the MIG device's UUID. */
            const mw_sample *m = NULL;
            for (const mw_sample *x = migs ? migs->first : NULL; x && !m; x = x->next)
                if (!strcmp(label(x, "uuid"), a->device)) m = x;
            if (!m) continue; /* a device this agent does not see */
            char key[400];
            snprintf(key, sizeof(key), "%s/%s/%s/%s/%s/%s", a->ns, a->pod, a->container,
                     label(m, "gpu"), label(m, "gpu_instance"), label(m, "compute_instance"));
            s = find_session(st, key);
            if (s && s->seen) continue;
            s = mig_session(st, a->ns, a->pod, a->container, label(m, "gpu"),
                            label(m, "gpu_instance"), label(m, "compute_instance"),
                            label(m, "mig_profile"));
        }
        if (!s) continue;
        s->seen = 1;
        s->alloc_only = 1;
        s->fraction = a->replica >= 0;
        s->last_seen_ms = now;
        s->memory_bytes = 0;
    }
}

/* KAI fractional pods with no process on the GPU their group's
 * reservation pod holds (kube.h): a fraction held, judged by the pod's own
 * share (0), as a time-slicing replica is. */
static void held_by_kai(idle_state *st, const mw_snapshot *snap, int64_t now)
{
    mw_kube *pods = st->kube ? st->kube->pods : NULL;
    if (!pods) return;
    if (!st->kai) st->kai = mw_xcalloc(MW_KUBE_MAX_KAI, sizeof(*st->kai));
    mw_kube_kai *kai = st->kai;
    size_t n = mw_kube_kai_list(pods, kai, MW_KUBE_MAX_KAI);
    const mw_family *info = mw_snapshot_find(snap, "mlwatch_gpu_info");
    for (size_t i = 0; i < n; i++) {
        const mw_kube_kai *k = &kai[i];
        const char *gpu = NULL;
        for (const mw_sample *x = info ? info->first : NULL; x && !gpu; x = x->next)
            if (!strcmp(label(x, "uuid"), k->gpu_uuid)) gpu = label(x, "gpu");
        if (!gpu) continue;
        int held = 0; /* by a process of the pod (any container), or by its allocation */
        for (size_t j = 0; j < st->n && !held; j++)
            held = st->s[j].seen && !st->s[j].mig && !strcmp(st->s[j].ns, k->ns) &&
                   !strcmp(st->s[j].pod, k->name) && !strcmp(st->s[j].gpu, gpu);
        if (held) continue;
        char key[400];
        make_key(key, sizeof(key), k->ns, k->name, k->container, gpu);
        session *s = find_session(st, key);
        if (!s) s = add_session(st, k->ns, k->name, k->container, gpu, key);
        if (!s) continue;
        s->seen = 1;
        s->alloc_only = 1;
        s->fraction = 1;
        s->last_seen_ms = now;
        s->memory_bytes = 0;
    }
}

static void idle_derive(void *state, mw_snapshot *snap)
{
    idle_state *st = state;
    int64_t now = snap->timestamp_ms ? snap->timestamp_ms : mw_now_ms();
    int64_t dt = st->prev_ms && now > st->prev_ms ? now - st->prev_ms : 0;
    if (dt > MAX_STEP_MS) dt = MAX_STEP_MS;
    st->prev_ms = now;
    st->nended = 0;
    double intensity = -1;
    if (mw_snapshot_get(snap, CARBON_INTENSITY, &intensity, MW_END) < 0) intensity = -1;
    if (intensity >= 0) st->carbon_seen = 1;

    for (size_t i = 0; i < st->n; i++)
        st->s[i].seen = 0;
    const mw_family *mem = mw_snapshot_find(snap, "mlwatch_container_gpu_memory_used_bytes");
    for (const mw_sample *x = mem ? mem->first : NULL; x; x = x->next) {
        const char *ns = label(x, "namespace"), *pod = label(x, "pod");
        if (!*pod || !(x->value > 0)) continue;               /* processes outside pods */
        if (gpu_in_mig_mode(snap, label(x, "gpu"))) continue; /* per instance, below */
        char key[400];
        make_key(key, sizeof(key), ns, pod, label(x, "container"), label(x, "gpu"));
        session *s = find_session(st, key);
        if (!s) s = add_session(st, ns, pod, label(x, "container"), label(x, "gpu"), key);
        if (!s) continue;
        s->seen = 1;
        s->alloc_only = 0;
        s->fraction = 0;
        s->last_seen_ms = now;
        s->memory_bytes = x->value;
    }
    const mw_family *mm = mw_snapshot_find(snap, "mlwatch_container_mig_memory_used_bytes");
    for (const mw_sample *x = mm ? mm->first : NULL; x; x = x->next) {
        if (!*label(x, "pod") || !(x->value > 0)) continue;
        session *s = mig_session(st, label(x, "namespace"), label(x, "pod"), label(x, "container"),
                                 label(x, "gpu"), label(x, "gpu_instance"),
                                 label(x, "compute_instance"), label(x, "mig_profile"));
        if (!s) continue;
        s->seen = 1;
        s->alloc_only = 0;
        s->last_seen_ms = now;
        s->memory_bytes = x->value;
    }
    held_by_allocation(st, snap, now);
    held_by_kai(st, snap, now);

    for (size_t i = 0; i < st->nns; i++)
        st->ns[i].sessions = 0;
    for (size_t i = 0; i < st->n; i++) {
        session *s = &st->s[i];
        if (!s->seen) continue;
        mw_idle_rule r;
        rule_for(st->cfg, s->ns, &r);
        s->threshold_ratio = r.threshold;
        gpu_identity(snap, s->gpu, s);
        identify(st, snap, s);
        double joules = session_energy(st, snap, s, dt);
        double u = session_util(snap, s);
        s->judged = u >= 0;
        int was_idle = s->tr.state == MW_IDLE_IDLE;
        int ev = s->judged ? mw_idle_step(&s->tr, now, u, &r) : MW_IDLE_NONE;
        if (ev == MW_IDLE_OPENED) {
            s->idle_since_ms = s->tr.below_since_ms;
            s->gpu_seconds = s->energy_joules = 0;
            /* The window itself was idle: count it, at this cycle's power. */
            int64_t win = now - s->tr.below_since_ms;
            double est = dt > 0 ? joules * (double)win / (double)dt : 0;
            account(st, s, (double)win / 1000.0, est, intensity);
            char dev[96];
            mw_log(MW_LOG_INFO, "idle",
                   "idle session: %s/%s container %s GPU %s below %g%% for %lld s", s->ns, s->pod,
                   s->container, device_of(s, dev, sizeof(dev)), r.threshold * 100,
                   (long long)(win / 1000));
        } else if (was_idle) {
            account(st, s, (double)dt / 1000.0, joules, intensity);
            if (ev == MW_IDLE_CLOSED) end_episode(st, s, now, "busy");
        }
        ns_total *t = ns_of(st, s->ns);
        if (t && s->tr.state == MW_IDLE_IDLE) t->sessions++;
        double secs =
            s->tr.state == MW_IDLE_IDLE ? (double)(now - s->tr.below_since_ms) / 1000.0 : 0;
        if (s->mig)
            mw_emit(snap, &IDLE_SECONDS, secs, "namespace", s->ns, "pod", s->pod, "container",
                    s->container, "gpu", s->gpu, "mig_profile", s->profile, "gpu_instance", s->gi,
                    "compute_instance", s->ci, "workload_kind", s->workload_kind, "workload",
                    s->workload, "owner", s->owner, MW_END);
        else
            mw_emit(snap, &IDLE_SECONDS, secs, "namespace", s->ns, "pod", s->pod, "container",
                    s->container, "gpu", s->gpu, "workload_kind", s->workload_kind, "workload",
                    s->workload, "owner", s->owner, MW_END);
    }

    /* Sessions gone for a busy period end; the table keeps the held ones. */
    for (size_t i = st->n; i-- > 0;) {
        session *s = &st->s[i];
        if (s->seen) continue;
        mw_idle_rule r;
        rule_for(st->cfg, s->ns, &r);
        if (now - s->last_seen_ms < r.busy_ms) continue;
        if (s->tr.state == MW_IDLE_IDLE) end_episode(st, s, now, "ended");
        session_free_labels(s);
        st->s[i] = st->s[st->n - 1];
        st->n--;
    }

    for (size_t i = 0; i < st->nns; i++) {
        const ns_total *t = &st->ns[i];
        mw_emit(snap, &IDLE_SESSIONS, t->sessions, "namespace", t->ns, MW_END);
        mw_emit(snap, &IDLE_GPU_SECONDS, t->gpu_seconds, "namespace", t->ns, MW_END);
        mw_emit(snap, &IDLE_ENERGY, t->energy, "namespace", t->ns, MW_END);
        if (st->carbon_seen) mw_emit(snap, &IDLE_CO2, t->co2, "namespace", t->ns, MW_END);
    }
}

size_t mw_idle_ended(void *state, const mw_idle_episode **out)
{
    idle_state *st = state;
    *out = st->ended;
    return st->nended;
}

void mw_idle_each_open(void *state, void (*fn)(void *ctx, const mw_idle_episode *ep), void *ctx)
{
    idle_state *st = state;
    for (size_t i = 0; i < st->n; i++)
        if (st->s[i].tr.state == MW_IDLE_IDLE) {
            mw_idle_episode ep;
            episode_of(st, &st->s[i], &ep);
            fn(ctx, &ep);
        }
}

static void idle_destroy(void *state)
{
    idle_state *st = state;
    mw_podres_table_free(&st->alloc);
    free(st->kai);
    for (size_t i = 0; i < st->n; i++)
        session_free_labels(&st->s[i]);
    free(st->s);
    free(st->ended);
    free(st);
}

const mw_module mw_module_idle = {
    .agent_only = 1,
    .name = "idle",
    .options = &mw_idle_options,
    .init = idle_init,
    .derive = idle_derive,
    .destroy = idle_destroy,
};
