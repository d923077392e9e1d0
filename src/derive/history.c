/* history.c - the doctor's memory: one compact frame per cycle, extracted
 * from the snapshot (the ring that keeps them: history_ring.c).
 *
 * A frame holds only what the rules in findings.c need (a few numbers per
 * CPU, container and GPU), so a 5-minute history of a 300-container node
 * costs under 1 MB, not 300 snapshots. Counters are kept cumulative: a rule
 * takes the difference between the oldest and the newest frame of its window.
 * The cpusets of containers that use a GPU are read here, through
 * collect/cgroup_cpuset.h (the cgroup collector does not report them):
 * numa_mismatch compares their NUMA nodes with the GPUs'. */
#include "findings.h"
#include "../collect/cgroup_cpuset.h"
#include "../core/hash.h"
#include "../core/parse.h"
#include "../core/util.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CPU_ID 8192
#define MAX_GPUS 64
#define MAX_NODES 64
#define NODE_BITS 1024 /* CPUs per NUMA node map */
#define MAX_CONTAINERS 16384

static const char *label(const mw_sample *s, const char *name)
{
    for (uint32_t i = 0; i < s->nlabels; i++)
        if (strcmp(s->labels[i].name, name) == 0) return s->labels[i].value;
    return NULL;
}

static const mw_sample *first_of(const mw_snapshot *snap, const char *name)
{
    const mw_family *f = mw_snapshot_find(snap, name);
    return f ? f->first : NULL;
}

/* A small non-negative decimal label ("12"); -1 otherwise. */
static long small_id(const char *s, long max)
{
    if (!s || !*s) return -1;
    const char *p = s;
    uint64_t v;
    if (mw_parse_u64(&p, &v) < 0 || *p || v >= (uint64_t)max) return -1;
    return (long)v;
}

int dr_parse_cpuset(const char *text, uint64_t *bits, size_t nbits)
{
    return mw_parse_cpulist(text, bits, nbits);
}

/* The frame being built: temporary arrays of their upper bounds, copied into
 * one exact allocation at the end (a frame lives for minutes; the bounds
 * and an arena's slack would be most of it). */
typedef struct xctr {
    dr_container c;
    dr_ctr_now n;
    const char *key, *ns, *pod, *name, *cgroup; /* the snapshot's, until interned */
} xctr;

typedef struct builder {
    dr_cpu *cpus;
    dr_governor *govs;
    size_t ncpus;
    xctr *ctrs;
    size_t nctrs;
    dr_gpu *gpus;
    size_t ngpus;
    dr_use *uses;
    size_t nuses;
} builder;

/* ---- host CPUs ---- */

static void extract_cpus(builder *fr, const mw_snapshot *snap)
{
    long maxid = -1;
    for (const mw_sample *s = first_of(snap, "mlwatch_cpu_seconds_total"); s; s = s->next) {
        long id = small_id(label(s, "cpu"), MAX_CPU_ID);
        if (id > maxid) maxid = id;
    }
    if (maxid < 0) return;
    size_t n = (size_t)maxid + 1;
    dr_cpu *tmp = mw_xcalloc(n, sizeof(*tmp));
    dr_governor *gov = mw_xcalloc(n, sizeof(*gov));
    unsigned char *present = mw_xcalloc(n, 1);
    for (size_t i = 0; i < n; i++)
        tmp[i] = (dr_cpu){.cpu = (int32_t)i, .hz = -1, .max_hz = -1};
    for (const mw_sample *s = first_of(snap, "mlwatch_cpu_seconds_total"); s; s = s->next) {
        long id = small_id(label(s, "cpu"), MAX_CPU_ID);
        const char *mode = label(s, "mode");
        if (id < 0 || !mode) continue;
        present[id] = 1;
        tmp[id].total_s += s->value;
        if (strcmp(mode, "idle") != 0 && strcmp(mode, "iowait") != 0) tmp[id].busy_s += s->value;
    }
    static const char *const freq_fam[] = {"mlwatch_cpu_frequency_hertz",
                                           "mlwatch_cpu_frequency_max_hertz",
                                           "mlwatch_cpu_hardware_frequency_max_hertz"};
    for (size_t k = 0; k < MW_ARRAY_LEN(freq_fam); k++)
        for (const mw_sample *s = first_of(snap, freq_fam[k]); s; s = s->next) {
            long id = small_id(label(s, "cpu"), (long)n);
            if (id < 0) continue;
            if (k == 0)
                tmp[id].hz = s->value;
            else /* the hardware maximum (turbo) wins over the governor's cap */
                tmp[id].max_hz = s->value;
        }
    for (const mw_sample *s = first_of(snap, "mlwatch_cpu_scaling_governor_info"); s; s = s->next) {
        long id = small_id(label(s, "cpu"), (long)n);
        const char *g = label(s, "governor");
        if (id >= 0 && g) mw_strlcpy(gov[id].name, g, sizeof(gov[id].name));
    }
    /* Compact in place: the present CPUs, in order of their ids. */
    for (size_t i = 0; i < n; i++)
        if (present[i]) {
            tmp[fr->ncpus] = tmp[i];
            gov[fr->ncpus++] = gov[i];
        }
    fr->cpus = tmp;
    fr->govs = gov;
    free(present);
}

/* ---- containers ---- */

static const char *container_key(const mw_sample *s)
{
    const char *id = label(s, "container_id");
    if (id && *id) return id;
    const char *cg = label(s, "cgroup");
    return cg && *cg ? cg : NULL;
}

const dr_ident *dr_frame_ident(const dr_frame *f, size_t i)
{
    return f->packed ? f->ids->id[i] : f->ctrs[i].id;
}

long dr_frame_find(const dr_frame *f, const char *key)
{
    size_t lo = 0, hi = f->nctrs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(dr_frame_ident(f, mid)->key, key);
        if (c == 0) return (long)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

const dr_container *dr_frame_container(const dr_frame *f, const char *key)
{
    long i = f->ctrs ? dr_frame_find(f, key) : -1;
    return i >= 0 ? &f->ctrs[i] : NULL;
}

static int cmp_xctr(const void *a, const void *b)
{
    return strcmp(((const xctr *)a)->key, ((const xctr *)b)->key);
}

static xctr *find_ctr(builder *fr, const mw_sample *s)
{
    const char *key = container_key(s);
    if (!key) return NULL;
    xctr k = {.key = key};
    return bsearch(&k, fr->ctrs, fr->nctrs, sizeof(xctr), cmp_xctr);
}

/* ---- shared strings and identities ---- */

struct dr_str {
    dr_str *next;
    uint64_t hash;
    uint32_t refs;
    char s[];
};

static const char *pool_get(dr_strpool *p, const char *s)
{
    uint64_t h = mw_fnv1a64_str(MW_FNV1A64_SEED, s);
    if (p->nbuckets) {
        for (dr_str *e = p->buckets[h & (p->nbuckets - 1)]; e; e = e->next)
            if (e->hash == h && strcmp(e->s, s) == 0) {
                e->refs++;
                return e->s;
            }
    }
    if (p->n >= p->nbuckets) { /* grow: load factor at most 1 */
        size_t nb = p->nbuckets ? p->nbuckets * 2 : 256;
        dr_str **b = mw_xcalloc(nb, sizeof(*b));
        for (size_t i = 0; i < p->nbuckets; i++)
            for (dr_str *e = p->buckets[i], *next; e; e = next) {
                next = e->next;
                e->next = b[e->hash & (nb - 1)];
                b[e->hash & (nb - 1)] = e;
            }
        free(p->buckets);
        p->buckets = b;
        p->nbuckets = nb;
    }
    size_t len = strlen(s);
    dr_str *e = mw_xmalloc(sizeof(*e) + len + 1);
    memcpy(e->s, s, len + 1);
    e->hash = h;
    e->refs = 1;
    e->next = p->buckets[h & (p->nbuckets - 1)];
    p->buckets[h & (p->nbuckets - 1)] = e;
    p->n++;
    return e->s;
}

static void pool_put(dr_strpool *p, const char *s)
{
    /* s is the tail of its entry: its hash is there, no need to hash again. */
    uint64_t h = ((const dr_str *)(const void *)(s - offsetof(dr_str, s)))->hash;
    for (dr_str **pp = &p->buckets[h & (p->nbuckets - 1)]; *pp; pp = &(*pp)->next) {
        dr_str *e = *pp;
        if (e->s != s) continue;
        if (--e->refs == 0) {
            *pp = e->next;
            free(e);
            p->n--;
        }
        return;
    }
}

static int same_ident(const dr_ident *e, const xctr *x)
{
    return strcmp(e->key, x->key) == 0 && strcmp(e->ns, x->ns) == 0 &&
           strcmp(e->pod, x->pod) == 0 && strcmp(e->name, x->name) == 0 &&
           strcmp(e->cgroup, x->cgroup) == 0;
}

/* The counted identity of x's strings (the same container keeps its
 * identity from frame to frame: one hash lookup per container per cycle). */
static const dr_ident *ident_get(dr_strpool *p, const xctr *x)
{
    uint64_t h = mw_fnv1a64_str(mw_fnv1a64_str(MW_FNV1A64_SEED, x->key), x->cgroup);
    if (p->nibuckets) {
        for (dr_ident *e = p->ibuckets[h & (p->nibuckets - 1)]; e; e = e->next)
            if (e->hash == h && same_ident(e, x)) {
                e->refs++;
                return e;
            }
    }
    if (p->nidents >= p->nibuckets) {
        size_t nb = p->nibuckets ? p->nibuckets * 2 : 256;
        dr_ident **b = mw_xcalloc(nb, sizeof(*b));
        for (size_t i = 0; i < p->nibuckets; i++)
            for (dr_ident *e = p->ibuckets[i], *next; e; e = next) {
                next = e->next;
                e->next = b[e->hash & (nb - 1)];
                b[e->hash & (nb - 1)] = e;
            }
        free(p->ibuckets);
        p->ibuckets = b;
        p->nibuckets = nb;
    }
    dr_ident *e = mw_xmalloc(sizeof(*e));
    *e = (dr_ident){.key = pool_get(p, x->key),
                    .ns = pool_get(p, x->ns),
                    .pod = pool_get(p, x->pod),
                    .name = pool_get(p, x->name),
                    .cgroup = pool_get(p, x->cgroup),
                    .hash = h,
                    .refs = 1};
    e->next = p->ibuckets[h & (p->nibuckets - 1)];
    p->ibuckets[h & (p->nibuckets - 1)] = e;
    p->nidents++;
    return e;
}

static void ident_put(dr_strpool *p, const dr_ident *id)
{
    for (dr_ident **pp = &p->ibuckets[id->hash & (p->nibuckets - 1)]; *pp; pp = &(*pp)->next) {
        dr_ident *e = *pp;
        if (e != id) continue;
        if (--e->refs == 0) {
            *pp = e->next;
            pool_put(p, e->key);
            pool_put(p, e->ns);
            pool_put(p, e->pod);
            pool_put(p, e->name);
            pool_put(p, e->cgroup);
            free(e);
            p->nidents--;
        }
        return;
    }
}

void dr_strpool_free(dr_strpool *p)
{
    for (size_t i = 0; i < p->nibuckets; i++)
        for (dr_ident *e = p->ibuckets[i], *next; e; e = next) {
            next = e->next;
            free(e);
        }
    free(p->ibuckets);
    for (size_t i = 0; i < p->nbuckets; i++)
        for (dr_str *e = p->buckets[i], *next; e; e = next) {
            next = e->next;
            free(e);
        }
    free(p->buckets);
    memset(p, 0, sizeof(*p));
}

static const char *or_empty(const char *s)
{
    return s ? s : "";
}

static void extract_containers(builder *fr, const mw_snapshot *snap)
{
    const mw_family *info = mw_snapshot_find(snap, "mlwatch_container_info");
    if (!info) return;
    size_t cap = info->nsamples < MAX_CONTAINERS ? info->nsamples : MAX_CONTAINERS;
    fr->ctrs = mw_xcalloc(cap + 1, sizeof(xctr));
    for (const mw_sample *s = info->first; s && fr->nctrs < cap; s = s->next) {
        const char *key = container_key(s);
        const char *name = label(s, "container");
        /* The pod's sandbox ("pause") does no work worth a finding. */
        if (!key || (name && strcmp(name, "POD") == 0)) continue;
        const char *cg = label(s, "cgroup");
        const char *ns = label(s, "namespace");
        fr->ctrs[fr->nctrs++] = (xctr){
            .key = key,
            .ns = or_empty(ns),
            .pod = or_empty(label(s, "pod")),
            /* outside Kubernetes the workload is its cgroup */
            .name = or_empty(name && *name ? name : (ns && *ns ? "" : cg)),
            .cgroup = or_empty(cg),
            .c = {.cpu_s = -1,
                  .throttled_periods = -1,
                  .periods = -1,
                  .throttled_s = -1,
                  .mem_some_s = -1,
                  .mem_full_s = -1,
                  .io_some_s = -1},
            .n = {.quota_cpus = -1, .ws_bytes = -1, .limit_bytes = -1, .ncpus_allowed = -1},
        };
    }
    qsort(fr->ctrs, fr->nctrs, sizeof(xctr), cmp_xctr);
    /* Duplicate keys (should not happen): keep the first, drop the rest. */
    size_t w = 0;
    for (size_t i = 0; i < fr->nctrs; i++)
        if (w == 0 || strcmp(fr->ctrs[w - 1].key, fr->ctrs[i].key) != 0)
            fr->ctrs[w++] = fr->ctrs[i];
    fr->nctrs = w;

    static const struct {
        const char *family;
        size_t offset;
    } gauges[] = {
        {"mlwatch_container_cpu_seconds_total", offsetof(xctr, c.cpu_s)},
        {"mlwatch_container_cpu_throttled_periods_total", offsetof(xctr, c.throttled_periods)},
        {"mlwatch_container_cpu_periods_total", offsetof(xctr, c.periods)},
        {"mlwatch_container_cpu_throttled_seconds_total", offsetof(xctr, c.throttled_s)},
        {"mlwatch_container_memory_working_set_bytes", offsetof(xctr, n.ws_bytes)},
        {"mlwatch_container_memory_limit_bytes", offsetof(xctr, n.limit_bytes)},
    };
    for (size_t k = 0; k < MW_ARRAY_LEN(gauges); k++)
        for (const mw_sample *s = first_of(snap, gauges[k].family); s; s = s->next) {
            xctr *c = find_ctr(fr, s);
            if (c) *(double *)(void *)((char *)c + gauges[k].offset) = s->value;
        }
    for (const mw_sample *s = first_of(snap, "mlwatch_container_cpu_quota_seconds"); s;
         s = s->next) {
        xctr *c = find_ctr(fr, s);
        if (c) c->n.quota_cpus = s->value; /* divided by the period below */
    }
    for (const mw_sample *s = first_of(snap, "mlwatch_container_cpu_period_seconds"); s;
         s = s->next) {
        xctr *c = find_ctr(fr, s);
        if (c && c->n.quota_cpus >= 0 && s->value > 0) c->n.quota_cpus /= s->value;
    }
    for (const mw_sample *s = first_of(snap, "mlwatch_container_pressure_waiting_seconds_total"); s;
         s = s->next) {
        xctr *c = find_ctr(fr, s);
        const char *r = label(s, "resource");
        if (!c || !r) continue;
        if (strcmp(r, "memory") == 0) c->c.mem_some_s = s->value;
        if (strcmp(r, "io") == 0) c->c.io_some_s = s->value;
    }
    for (const mw_sample *s = first_of(snap, "mlwatch_container_pressure_stalled_seconds_total"); s;
         s = s->next) {
        xctr *c = find_ctr(fr, s);
        const char *r = label(s, "resource");
        if (c && r && strcmp(r, "memory") == 0) c->c.mem_full_s = s->value;
    }
}

/* ---- GPUs ---- */

static dr_gpu *gpu_of(builder *fr, const mw_sample *s)
{
    const char *id = label(s, "gpu");
    if (!id || !*id || strlen(id) >= sizeof(fr->gpus[0].id)) return NULL;
    for (size_t i = 0; i < fr->ngpus; i++)
        if (strcmp(fr->gpus[i].id, id) == 0) return &fr->gpus[i];
    if (fr->ngpus >= MAX_GPUS) return NULL;
    dr_gpu *g = &fr->gpus[fr->ngpus++];
    *g = (dr_gpu){.util = -1,
                  .sm_hz = -1,
                  .sm_max_hz = -1,
                  .pcie_gen = -1,
                  .pcie_gen_max = -1,
                  .pcie_width = -1,
                  .pcie_width_max = -1,
                  .numa_node = -1,
                  .health = -1};
    mw_strlcpy(g->id, id, sizeof(g->id));
    return g;
}

static uint32_t reason_bit(const char *r)
{
    if (!r) return 0;
    if (strcmp(r, "sw_power_cap") == 0) return DR_REASON_SW_POWER;
    if (strcmp(r, "hw_slowdown") == 0) return DR_REASON_HW_SLOWDOWN;
    if (strcmp(r, "sw_thermal_slowdown") == 0) return DR_REASON_SW_THERMAL;
    if (strcmp(r, "hw_thermal_slowdown") == 0) return DR_REASON_HW_THERMAL;
    if (strcmp(r, "hw_power_brake_slowdown") == 0) return DR_REASON_HW_POWER_BRAKE;
    return 0;
}

static void extract_gpus(builder *fr, const mw_snapshot *snap)
{
    fr->gpus = mw_xcalloc(MAX_GPUS, sizeof(dr_gpu));
    static const struct {
        const char *family;
        size_t offset;
    } gauges[] = {
        {"mlwatch_gpu_utilization_ratio", offsetof(dr_gpu, util)},
        {"mlwatch_gpu_sm_clock_hertz", offsetof(dr_gpu, sm_hz)},
        {"mlwatch_gpu_sm_clock_max_hertz", offsetof(dr_gpu, sm_max_hz)},
        {"mlwatch_gpu_pcie_link_generation", offsetof(dr_gpu, pcie_gen)},
        {"mlwatch_gpu_pcie_link_max_generation", offsetof(dr_gpu, pcie_gen_max)},
        {"mlwatch_gpu_pcie_link_width", offsetof(dr_gpu, pcie_width)},
        {"mlwatch_gpu_pcie_link_max_width", offsetof(dr_gpu, pcie_width_max)},
    };
    for (const mw_sample *s = first_of(snap, "mlwatch_gpu_info"); s; s = s->next)
        gpu_of(fr, s);
    for (size_t k = 0; k < MW_ARRAY_LEN(gauges); k++)
        for (const mw_sample *s = first_of(snap, gauges[k].family); s; s = s->next) {
            dr_gpu *g = gpu_of(fr, s);
            if (g) *(double *)(void *)((char *)g + gauges[k].offset) = s->value;
        }
    for (const mw_sample *s = first_of(snap, "mlwatch_gpu_clock_event_active"); s; s = s->next) {
        dr_gpu *g = gpu_of(fr, s);
        if (g && s->value > 0) g->reasons |= reason_bit(label(s, "reason"));
    }
    for (const mw_sample *s = first_of(snap, "mlwatch_gpu_ecc_errors_total"); s; s = s->next) {
        dr_gpu *g = gpu_of(fr, s);
        const char *t = label(s, "type");
        if (!g || !t) continue;
        if (strcmp(t, "corrected") == 0) g->ecc_corrected = s->value;
        if (strcmp(t, "uncorrected") == 0) g->ecc_uncorrected = s->value;
    }
    for (const mw_sample *s = first_of(snap, "mlwatch_gpu_remapped_rows"); s; s = s->next) {
        dr_gpu *g = gpu_of(fr, s);
        const char *t = label(s, "type");
        if (!g || !t) continue;
        if (strcmp(t, "uncorrectable") == 0) g->remap_uncorrectable = s->value;
        if (strcmp(t, "pending") == 0) g->remap_pending = s->value;
        if (strcmp(t, "failure") == 0) g->remap_failure = s->value;
    }
    for (const mw_sample *s = first_of(snap, "mlwatch_gpu_xid_errors_total"); s; s = s->next) {
        dr_gpu *g = gpu_of(fr, s);
        if (g) g->xid_total += s->value;
    }
    static const char *const states[] = {"healthy", "degraded", "unknown", "unhealthy"};
    for (const mw_sample *s = first_of(snap, "mlwatch_gpu_health"); s; s = s->next) {
        dr_gpu *g = gpu_of(fr, s);
        const char *st = label(s, "state"), *why = label(s, "reason"), *act = label(s, "action");
        if (!g || !st || s->value != 1) continue;
        for (int k = 0; k < 4; k++)
            if (strcmp(st, states[k]) == 0) g->health = k;
        mw_strlcpy(g->health_reason, why ? why : "", sizeof(g->health_reason));
        mw_strlcpy(g->health_action, act ? act : "", sizeof(g->health_action));
    }
    for (const mw_sample *s = first_of(snap, "mlwatch_gpu_recent_hardware_events"); s;
         s = s->next) {
        dr_gpu *g = gpu_of(fr, s);
        if (g) g->recent_hw_events = s->value;
    }
    for (const mw_sample *s = first_of(snap, "mlwatch_gpu_numa_node"); s; s = s->next) {
        dr_gpu *g = gpu_of(fr, s);
        if (g && s->value >= 0 && s->value < MAX_NODES) g->numa_node = (int)s->value;
    }
    for (const mw_sample *s = first_of(snap, "mlwatch_gpu_mig_enabled"); s; s = s->next) {
        dr_gpu *g = gpu_of(fr, s);
        if (g) g->mig = s->value > 0;
    }
}

/* Which named container uses which GPU: memory or a utilization share. */
static void extract_uses(builder *fr, const mw_snapshot *snap)
{
    static const char *const fams[] = {"mlwatch_container_gpu_memory_used_bytes",
                                       "mlwatch_container_gpu_utilization_ratio"};
    size_t cap = 0;
    for (size_t k = 0; k < MW_ARRAY_LEN(fams); k++) {
        const mw_family *f = mw_snapshot_find(snap, fams[k]);
        cap += f ? f->nsamples : 0;
    }
    fr->uses = mw_xcalloc(cap + 1, sizeof(dr_use));
    for (size_t k = 0; k < MW_ARRAY_LEN(fams); k++)
        for (const mw_sample *s = first_of(snap, fams[k]); s; s = s->next) {
            const char *ns = label(s, "namespace"), *pod = label(s, "pod");
            const char *name = label(s, "container"), *gid = label(s, "gpu");
            /* the unattributed bucket (driver, processes outside containers) */
            if (!ns || !pod || !name || !gid || !*name || s->value <= 0) continue;
            size_t ci = 0;
            while (ci < fr->nctrs &&
                   (strcmp(fr->ctrs[ci].ns, ns) != 0 || strcmp(fr->ctrs[ci].pod, pod) != 0 ||
                    strcmp(fr->ctrs[ci].name, name) != 0))
                ci++;
            size_t gi = 0;
            while (gi < fr->ngpus && strcmp(fr->gpus[gi].id, gid) != 0)
                gi++;
            if (ci == fr->nctrs || gi == fr->ngpus) continue;
            dr_use *u = NULL;
            for (size_t i = 0; i < fr->nuses; i++)
                if (fr->uses[i].container == ci && fr->uses[i].gpu == gi) u = &fr->uses[i];
            if (!u) {
                u = &fr->uses[fr->nuses++];
                *u = (dr_use){(uint32_t)ci, (uint32_t)gi, 0};
            }
            if (k == 0) u->mem_bytes = s->value;
            fr->ctrs[ci].n.uses_gpu = 1;
        }
}

/* ---- cpusets of GPU users ---- */

static void extract_cpusets(builder *fr, const mw_snapshot *snap, const mw_hostfs *host)
{
    /* NUMA node -> CPUs, from the numa collector's info labels (8 KiB). */
    uint64_t node_cpus[MAX_NODES][NODE_BITS / 64];
    uint64_t have_nodes = 0;
    for (const mw_sample *s = first_of(snap, "mlwatch_numa_node_info"); s; s = s->next) {
        long id = small_id(label(s, "numa_node"), MAX_NODES);
        const char *list = label(s, "cpulist");
        if (id < 0 || !list) continue;
        if (dr_parse_cpuset(list, node_cpus[id], NODE_BITS) >= 0) have_nodes |= 1ULL << id;
    }
    mw_buf b;
    mw_buf_init(&b, 65536);
    for (size_t i = 0; i < fr->nctrs; i++) {
        dr_ctr_now *c = &fr->ctrs[i].n;
        const char *cgroup = fr->ctrs[i].cgroup;
        if (!c->uses_gpu) continue;
        uint64_t cpus[NODE_BITS / 64], mems[1];
        int n = mw_cg_read_cpuset(host, cgroup, MW_CG_CPUS_EFFECTIVE, &b, cpus, NODE_BITS);
        if (n > 0) {
            c->ncpus_allowed = n;
            for (int node = 0; node < MAX_NODES; node++) {
                if (!(have_nodes & (1ULL << node))) continue;
                for (size_t w = 0; w < NODE_BITS / 64; w++)
                    if (cpus[w] & node_cpus[node][w]) c->cpu_nodes |= 1ULL << node;
            }
        }
        if (mw_cg_read_cpuset(host, cgroup, MW_CG_MEMS_EFFECTIVE, &b, mems, 64) > 0)
            c->mem_nodes = mems[0];
    }
    mw_buf_free(&b);
}

/* One allocation for the frame and its arrays, of exactly their sizes: the
 * CPUs and containers whole or packed (packed: then their marks, places,
 * differences and anchors). */
dr_frame *dr_frame_alloc(const dr_frame_shape *sh)
{
#define ALIGN8(x) (((x) + 7) & ~(size_t)7)
    int packed = sh->packed;
    size_t ncpus = sh->ncpus, nctrs = sh->nctrs, ndiffs = sh->ndiffs;
    size_t nmarks = packed ? nctrs / DR_MARK_EVERY + 1 : 0;
    size_t off_cpus = ALIGN8(sizeof(dr_frame));
    size_t off_ctrs =
        ALIGN8(off_cpus + ncpus * (sh->cpus_packed ? sizeof(dr_cpu_packed) : sizeof(dr_cpu)));
    size_t off_marks =
        ALIGN8(off_ctrs + nctrs * (packed ? sizeof(dr_packed) : sizeof(dr_container)));
    size_t off_prev = off_marks + nmarks * sizeof(uint32_t);
    size_t off_diffs = off_prev + (packed == 2 ? nctrs * sizeof(uint32_t) : 0);
    size_t off_anchors = ALIGN8(off_diffs + (packed ? ndiffs * sizeof(float) : 0));
    size_t off_gpus = off_anchors + sh->nanchors * sizeof(dr_anchor);
    size_t off_uses = off_gpus + sh->ngpus * sizeof(dr_gpu);
    size_t size = off_uses + sh->nuses * sizeof(dr_use);
#undef ALIGN8
    char *mem = mw_xcalloc(1, size);
    dr_frame *fr = (dr_frame *)(void *)mem;
    if (sh->cpus_packed)
        fr->pcpus = (dr_cpu_packed *)(void *)(mem + off_cpus);
    else
        fr->cpus = (dr_cpu *)(void *)(mem + off_cpus);
    if (!packed) {
        fr->ctrs = (dr_container *)(void *)(mem + off_ctrs);
    } else {
        fr->packed = (dr_packed *)(void *)(mem + off_ctrs);
        fr->marks = (uint32_t *)(void *)(mem + off_marks);
        fr->diffs = (float *)(void *)(mem + off_diffs);
        fr->ndiffs = ndiffs;
    }
    if (packed == 2) fr->prev = (uint32_t *)(void *)(mem + off_prev);
    fr->anchors = (dr_anchor *)(void *)(mem + off_anchors);
    fr->gpus = (dr_gpu *)(void *)(mem + off_gpus);
    fr->uses = (dr_use *)(void *)(mem + off_uses);
    fr->ncpus = ncpus;
    fr->nctrs = nctrs;
    fr->nanchors = sh->nanchors;
    fr->ngpus = sh->ngpus;
    fr->nuses = sh->nuses;
    return fr;
}

dr_idset *dr_idset_take(dr_strpool *p, const dr_container *ctrs, size_t n, dr_idset *share)
{
    int same = share && share->n == n;
    for (size_t j = 0; j < n && same; j++)
        same = share->id[j] == ctrs[j].id;
    if (same) {
        for (size_t j = 0; j < n; j++)
            ident_put(p, ctrs[j].id);
        share->refs++;
        return share;
    }
    dr_idset *s = mw_xmalloc(sizeof(*s) + n * sizeof(s->id[0]));
    s->refs = 1;
    s->n = n;
    for (size_t j = 0; j < n; j++)
        s->id[j] = ctrs[j].id;
    return s;
}

void dr_idset_release(dr_strpool *p, dr_idset *s)
{
    if (!s || --s->refs) return;
    for (size_t j = 0; j < s->n; j++)
        ident_put(p, s->id[j]);
    free(s);
}

void dr_idset_give(dr_strpool *p, dr_idset *s)
{
    /* The identities are the pool's, counted by whoever holds them. */
    for (size_t j = 0; j < s->n; j++)
        ((dr_ident *)(uintptr_t)s->id[j])->refs++;
    dr_idset_release(p, s);
}

/* The frame of a builder, with the parts only the newest frame needs in a
 * second allocation. */
static dr_frame *finish(builder *b, dr_strpool *pool, dr_strpool *own)
{
    dr_frame_shape shape = {
        .ncpus = b->ncpus, .nctrs = b->nctrs, .ngpus = b->ngpus, .nuses = b->nuses};
    dr_frame *fr = dr_frame_alloc(&shape);
    fr->pool = own ? own : pool;
    fr->own = own;
    if (b->ncpus) memcpy(fr->cpus, b->cpus, b->ncpus * sizeof(dr_cpu));
    if (b->ngpus) memcpy(fr->gpus, b->gpus, b->ngpus * sizeof(dr_gpu));
    if (b->nuses) memcpy(fr->uses, b->uses, b->nuses * sizeof(dr_use));
    fr->governors = mw_xcalloc(b->ncpus + 1, sizeof(dr_governor));
    if (b->ncpus) memcpy(fr->governors, b->govs, b->ncpus * sizeof(dr_governor));
    fr->now = mw_xcalloc(b->nctrs + 1, sizeof(dr_ctr_now));
    for (size_t i = 0; i < b->nctrs; i++) {
        fr->ctrs[i] = b->ctrs[i].c;
        fr->ctrs[i].id = ident_get(fr->pool, &b->ctrs[i]);
        fr->now[i] = b->ctrs[i].n;
    }
    return fr;
}

dr_frame *dr_frame_from(const mw_snapshot *snap, const mw_hostfs *host, dr_strpool *pool)
{
    builder b = {0};
    extract_cpus(&b, snap);
    extract_containers(&b, snap);
    extract_gpus(&b, snap);
    extract_uses(&b, snap);
    if (host) extract_cpusets(&b, snap, host);
    dr_frame *fr = finish(&b, pool, pool ? NULL : mw_xcalloc(1, sizeof(dr_strpool)));
    fr->t_ms = snap->timestamp_ms;
    free(b.cpus);
    free(b.govs);
    free(b.ctrs);
    free(b.gpus);
    free(b.uses);
    return fr;
}

void dr_frame_drop_now(dr_frame *f)
{
    free(f->governors);
    free(f->now);
    f->governors = NULL;
    f->now = NULL;
}

void dr_frame_free(dr_frame *f)
{
    if (!f) return;
    if (f->packed)
        dr_idset_release(f->pool, f->ids);
    else
        for (size_t i = 0; i < f->nctrs; i++)
            ident_put(f->pool, f->ctrs[i].id);
    if (f->own) {
        dr_strpool_free(f->own);
        free(f->own);
    }
    dr_frame_drop_now(f);
    free(f);
}
