/* gpu_alloc.c - the "gpu_alloc" module: how much of a GPU each container
 * was given, next to the share it is measured to use.
 *
 *   mlwatch_container_gpu_fraction_requested{namespace,pod,container,gpu,source}
 *
 * source, and where the fraction comes from:
 *   device-plugin  a whole GPU from the kubelet's device plugin: 1
 *   dra            a whole GPU allocated through DRA (the kubelet's dynamic
 *                  resources or a ResourceClaim, resolved to the GPU by its
 *                  ResourceSlice's uuid attribute): 1; a claim known only
 *                  from the API server is on the container the pod spec
 *                  gives it to (kube.h), "" when none
 *   time-slicing   k replicas of a GPU the device plugin shares in R
 *                  replicas (IDs GPU-...::N): k / R; absent while R is
 *                  unknown (GetAllocatableResources failed)
 *   kai            KAI scheduler's gpu-fraction pod annotation, on the
 *                  GPU(s) the pod's processes use (the annotation names no
 *                  GPU), on the pod's first container there; a pod with no
 *                  process on a GPU: on the GPU its runai-gpu-group's
 *                  reservation pod holds, on its first container
 *   kai-memory     KAI's gpu-memory annotation (MiB) over the GPU's
 *                  memory (mlwatch_gpu_memory_total_bytes)
 * The measured share is mlwatch_container_gpu_utilization_ratio (the
 * container's part of the GPU's utilization, gpu.md) and, for memory,
 * mlwatch_container_gpu_memory_used_bytes over the GPU's total: same
 * labels but source, so `requested - on(namespace,pod,container,gpu)
 * measured` shows over- and under-use. MIG devices are not reported here
 * (a MIG instance is its own device, with its own families).
 * The kube inputs come from mw_env.kube (kube/kube_module.h). */
#include "../agent/module.h"
#include "../core/util.h"
#include "../kube/kube_module.h"

#include <stdlib.h>
#include <string.h>

/* clang-format off */
MW_METRIC(FRACTION_REQUESTED, MW_GAUGE, "mlwatch_container_gpu_fraction_requested", "", "The fraction of the GPU allocated to the container (1 for a whole GPU; a time-slicing replica's or KAI's gpu-fraction / gpu-memory share for a shared one), by source.");
/* clang-format on */

#define MAX_ROWS 1024

typedef struct fraction {
    const char *ns, *pod, *container, *gpu, *source;
    double value;
} fraction;

typedef struct alloc_state {
    const mw_kube_inputs *kube;
    mw_podres_table alloc;
    uint64_t gen;
    mw_kube_kai *kai; /* MW_KUBE_MAX_KAI: this cycle's fractional pods with their GPU */
    size_t nkai;
    fraction *rows; /* MAX_ROWS, pointing into alloc and the snapshot */
    size_t n;
} alloc_state;

static const char *label(const mw_sample *s, const char *name)
{
    for (uint32_t i = 0; i < s->nlabels; i++)
        if (strcmp(s->labels[i].name, name) == 0) return s->labels[i].value;
    return "";
}

static void add(alloc_state *st, const char *ns, const char *pod, const char *ctr, const char *gpu,
                const char *source, double v)
{
    for (size_t i = 0; i < st->n; i++) {
        fraction *f = &st->rows[i];
        if (!strcmp(f->ns, ns) && !strcmp(f->pod, pod) && !strcmp(f->container, ctr) &&
            !strcmp(f->gpu, gpu) && !strcmp(f->source, source)) {
            f->value += v;
            return;
        }
    }
    if (st->n < MAX_ROWS) st->rows[st->n++] = (fraction){ns, pod, ctr, gpu, source, v};
}

/* The gpu label of the GPU with this UUID (mlwatch_gpu_info), or NULL. */
static const char *gpu_of(const mw_snapshot *snap, const char *uuid)
{
    const mw_family *info = mw_snapshot_find(snap, "mlwatch_gpu_info");
    for (const mw_sample *x = info ? info->first : NULL; x; x = x->next)
        if (!strcmp(label(x, "uuid"), uuid)) return label(x, "gpu");
    return NULL;
}

static void from_allocations(alloc_state *st, const mw_snapshot *snap)
{
    mw_podres *podres = st->kube ? st->kube->podres : NULL;
    if (!podres) return;
    mw_podres_copy(podres, &st->gen, &st->alloc);
    for (size_t i = 0; i < st->alloc.n; i++) {
        const mw_podres_row *a = &st->alloc.rows[i];
        const char *gpu = a->device[0] ? gpu_of(snap, a->device) : NULL;
        if (!gpu) continue; /* unresolved, a MIG device, or a GPU this agent does not see */
        if (st->kube->pods && mw_kube_is_kai_reservation(st->kube->pods, a->ns, a->pod))
            continue; /* its GPU is its group's fractions' */
        if (a->replica >= 0) {
            if (a->replicas > 0)
                add(st, a->ns, a->pod, a->container, gpu, "time-slicing", 1.0 / a->replicas);
        } else {
            add(st, a->ns, a->pod, a->container, gpu,
                a->source == MW_PODRES_DEVICE_PLUGIN ? "device-plugin" : "dra", 1);
        }
    }
}

/* KAI's annotations, on the GPUs where the pod's processes are. */
static void from_kai(alloc_state *st, const mw_snapshot *snap)
{
    mw_kube *pods = st->kube ? st->kube->pods : NULL;
    if (!pods) return;
    const mw_family *mem = mw_snapshot_find(snap, "mlwatch_container_gpu_memory_used_bytes");
    const mw_family *info = mw_snapshot_find(snap, "mlwatch_container_info");
    for (const mw_sample *x = mem ? mem->first : NULL; x; x = x->next) {
        const char *ns = label(x, "namespace"), *pod = label(x, "pod"), *gpu = label(x, "gpu");
        if (!*pod) continue;
        int first = 1; /* the pod's first container on this GPU */
        for (const mw_sample *y = mem->first; y != x && first; y = y->next)
            first = !(!strcmp(label(y, "namespace"), ns) && !strcmp(label(y, "pod"), pod) &&
                      !strcmp(label(y, "gpu"), gpu));
        if (!first) continue;
        const char *uid = "";
        for (const mw_sample *y = info ? info->first : NULL; y; y = y->next)
            if (!strcmp(label(y, "namespace"), ns) && !strcmp(label(y, "pod"), pod) &&
                *label(y, "pod_uid")) {
                uid = label(y, "pod_uid");
                break;
            }
        mw_kube_pod p;
        if (!mw_kube_lookup(pods, uid, ns, pod, &p)) continue;
        if (p.gpu_fraction > 0) add(st, ns, pod, label(x, "container"), gpu, "kai", p.gpu_fraction);
        double total;
        if (p.gpu_memory_mib > 0 &&
            mw_snapshot_get(snap, "mlwatch_gpu_memory_total_bytes", &total, "gpu", gpu, MW_END) ==
                0 &&
            total > 0)
            add(st, ns, pod, label(x, "container"), gpu, "kai-memory",
                p.gpu_memory_mib * 1048576.0 / total);
    }
}

/* 1 when a row of source for (ns, pod, any container, gpu) exists. */
static int have_row(const alloc_state *st, const char *ns, const char *pod, const char *gpu,
                    const char *source)
{
    for (size_t i = 0; i < st->n; i++) {
        const fraction *f = &st->rows[i];
        if (!strcmp(f->ns, ns) && !strcmp(f->pod, pod) && !strcmp(f->gpu, gpu) &&
            !strcmp(f->source, source))
            return 1;
    }
    return 0;
}

/* KAI pods with no process on their GPU yet (a notebook before its first
 * CUDA call, a server between requests): the GPU is their group's
 * reservation pod's (kube.h), the fraction on the pod's first container.
 * Their measured share is 0 (no mlwatch_container_gpu_utilization_ratio
 * series), which the idle rule judges them by too (idle.c). */
static void from_kai_reservations(alloc_state *st, const mw_snapshot *snap)
{
    mw_kube *pods = st->kube ? st->kube->pods : NULL;
    st->nkai = pods ? mw_kube_kai_list(pods, st->kai, MW_KUBE_MAX_KAI) : 0;
    for (size_t i = 0; i < st->nkai; i++) {
        const mw_kube_kai *k = &st->kai[i];
        const char *gpu = gpu_of(snap, k->gpu_uuid);
        if (!gpu) continue; /* a GPU this agent does not see */
        if (k->gpu_fraction > 0 && !have_row(st, k->ns, k->name, gpu, "kai"))
            add(st, k->ns, k->name, k->container, gpu, "kai", k->gpu_fraction);
        double total;
        if (k->gpu_memory_mib > 0 && !have_row(st, k->ns, k->name, gpu, "kai-memory") &&
            mw_snapshot_get(snap, "mlwatch_gpu_memory_total_bytes", &total, "gpu", gpu, MW_END) ==
                0 &&
            total > 0)
            add(st, k->ns, k->name, k->container, gpu, "kai-memory",
                k->gpu_memory_mib * 1048576.0 / total);
    }
}

static int alloc_init(const mw_env *env, void **out)
{
    if (!env->kube) return MW_COLLECTOR_ABSENT;
    alloc_state *st = mw_xcalloc(1, sizeof(*st));
    st->kube = env->kube;
    st->rows = mw_xcalloc(MAX_ROWS, sizeof(*st->rows));
    st->kai = mw_xcalloc(MW_KUBE_MAX_KAI, sizeof(*st->kai));
    *out = st;
    return 0;
}

static void alloc_derive(void *state, mw_snapshot *snap)
{
    alloc_state *st = state;
    st->n = 0;
    from_allocations(st, snap);
    from_kai(st, snap);
    from_kai_reservations(st, snap);
    for (size_t i = 0; i < st->n; i++) {
        const fraction *f = &st->rows[i];
        mw_emit(snap, &FRACTION_REQUESTED, f->value, "namespace", f->ns, "pod", f->pod, "container",
                f->container, "gpu", f->gpu, "source", f->source, MW_END);
    }
}

static void alloc_destroy(void *state)
{
    alloc_state *st = state;
    mw_podres_table_free(&st->alloc);
    free(st->rows);
    free(st->kai);
    free(st);
}

const mw_module mw_module_gpu_alloc = {
    .agent_only = 1,
    .name = "gpu_alloc",
    .init = alloc_init,
    .derive = alloc_derive,
    .destroy = alloc_destroy,
};
