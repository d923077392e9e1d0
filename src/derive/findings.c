/* findings.c - the doctor's rules: one function per kind of finding.
 *
 * Each rule reads the frames of the window (history.c): counters as the
 * difference between the first and the last frame, gauges as their mean or
 * their latest value. Thresholds come from the `doctor:` section
 * (doctor_config.c). The rules, their evidence and their advice are
 * documented in docs/doctor.md; keep the two in step. */
#include "findings.h"
#include "../core/util.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name, *advice;
} kinds[DR_NKINDS] = {
    [DR_CPU_GOVERNOR] = {"cpu_governor",
                         "Set the CPU frequency governor to performance on this node (cpupower "
                         "frequency-set -g performance, or the BIOS power profile) and check that "
                         "no power cap keeps the cores below their maximum."},
    [DR_CPU_THROTTLING] = {"cpu_throttling",
                           "Raise the container's CPU limit (or remove it and keep the request), "
                           "or use fewer data-loader workers and threads than the limit allows."},
    [DR_NUMA_MISMATCH] = {"numa_mismatch",
                          "Pin the container to the CPUs and memory of its GPUs' NUMA node (the "
                          "kubelet's topology manager with policy single-numa-node or "
                          "restricted, and the static CPU manager), or schedule it onto GPUs on "
                          "the node of its CPUs."},
    [DR_GPU_THERMAL_THROTTLE] = {"gpu_thermal_throttle",
                                 "Check the GPU's cooling: fans, airflow, inlet temperature, "
                                 "blocked filters; the GPU lowers its clocks to stay within its "
                                 "temperature limit."},
    [DR_GPU_POWER_THROTTLE] = {"gpu_power_throttle",
                               "The GPU hits its power limit: check the enforced limit "
                               "(nvidia-smi -q -d POWER) against the default, and the node's "
                               "power supply and power brake signals."},
    [DR_PCIE_DOWNGRADED] = {"pcie_downgraded",
                            "The PCIe link trained below its maximum: reseat the GPU or its "
                            "riser, check the slot and the BIOS PCIe settings; host-device "
                            "copies are slower until then."},
    [DR_INPUT_BOUND] = {"input_bound",
                        "The GPU waits for input: use more data-loader workers, pin memory, "
                        "prefetch, cache or pre-process the data set, or give the container more "
                        "CPUs or faster storage."},
    [DR_MEMORY_PRESSURE] = {"memory_pressure",
                            "The container is close to its memory limit or stalls on memory "
                            "reclaim: raise the limit, or lower the batch size, the number of "
                            "workers or the page cache it needs."},
    [DR_GPU_ERRORS] = {"gpu_errors",
                       "The GPU reported errors while this workload ran: check the kernel log "
                       "for the XIDs (dmesg | grep -i xid), drain the GPU and run the vendor's "
                       "diagnostics (dcgmi diag); a pending row remap needs a GPU reset."},
    [DR_GPU_SHARED] = {"gpu_shared",
                       "Another workload uses the same GPU: ask for a whole GPU, or use MIG "
                       "instances so that the workloads do not compete for the same SMs and "
                       "memory bandwidth."},
};

const char *dr_kind_name(dr_kind k)
{
    return (unsigned)k < DR_NKINDS ? kinds[k].name : "unknown";
}

const char *dr_kind_advice(dr_kind k)
{
    return (unsigned)k < DR_NKINDS ? kinds[k].advice : "";
}

int dr_kind_parse(const char *s)
{
    for (int k = 0; k < DR_NKINDS; k++)
        if (strcmp(s, kinds[k].name) == 0) return k;
    return -1;
}

static const char *const severities[] = {"info", "warning", "critical"};

const char *dr_severity_name(dr_severity s)
{
    return (unsigned)s < MW_ARRAY_LEN(severities) ? severities[s] : "unknown";
}

int dr_severity_parse(const char *s)
{
    for (size_t i = 0; i < MW_ARRAY_LEN(severities); i++)
        if (strcmp(s, severities[i]) == 0) return (int)i;
    return -1;
}

/* ---- lists ---- */

void dr_list_init(dr_list *l)
{
    memset(l, 0, sizeof(*l));
    l->root = "";
    mw_arena_init(&l->strs, 4096);
}

void dr_list_free(dr_list *l)
{
    free(l->items);
    mw_arena_free(&l->strs);
    dr_list_init(l);
}

const char *dr_list_str(dr_list *l, const char *s, size_t max)
{
    if (!s || !*s) return "";
    return mw_arena_strndup(&l->strs, s, strnlen(s, max - 1));
}

dr_finding *dr_list_add(dr_list *l)
{
    if (l->n >= DR_MAX_FINDINGS) {
        l->dropped++;
        return NULL;
    }
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->items = mw_xrealloc(l->items, l->cap * sizeof(dr_finding));
    }
    dr_finding *f = &l->items[l->n++];
    memset(f, 0, sizeof(*f));
    f->namespace_ = f->pod = f->container = f->summary = "";
    f->list = l;
    return f;
}

static int cmp_rank(const void *pa, const void *pb)
{
    const dr_finding *a = pa, *b = pb;
    if (a->severity != b->severity) return a->severity > b->severity ? -1 : 1;
    if (a->magnitude != b->magnitude) return a->magnitude > b->magnitude ? -1 : 1;
    if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
    int c = strcmp(a->namespace_, b->namespace_);
    if (!c) c = strcmp(a->pod, b->pod);
    if (!c) c = strcmp(a->container, b->container);
    if (!c) c = strcmp(a->gpu, b->gpu);
    return c;
}

void dr_list_rank(dr_list *l)
{
    if (l->n) qsort(l->items, l->n, sizeof(dr_finding), cmp_rank);
}

void dr_list_filter(dr_list *l, const char *ns, const char *pod, const char *container)
{
    size_t w = 0;
    for (size_t i = 0; i < l->n; i++) {
        const dr_finding *f = &l->items[i];
        int node_wide = !f->namespace_[0] && !f->pod[0] && !f->container[0];
        int keep =
            node_wide || ((!ns || !*ns || strcmp(f->namespace_, ns) == 0) &&
                          (!pod || !*pod || strcmp(f->pod, pod) == 0) &&
                          (!container || !*container || strcmp(f->container, container) == 0));
        if (keep) l->items[w++] = *f;
    }
    l->n = w;
}

/* ---- building findings ---- */

static void evidence(dr_finding *f, const char *name, double v)
{
    if (f->nev >= DR_MAX_EVIDENCE || !isfinite(v)) return;
    f->ev[f->nev].name = dr_list_str(f->list, name, DR_EVIDENCE_NAME_MAX);
    f->ev[f->nev++].value = v;
}

static void summary(dr_finding *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void summary(dr_finding *f, const char *fmt, ...)
{
    char text[DR_SUMMARY_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    f->summary = dr_list_str(f->list, text, sizeof(text));
}

/* A finding to copy into the list once per workload (add_for_gpu): its
 * strings are out's, like those of the findings made from it. */
static dr_finding template_for(dr_list *out, dr_kind kind, dr_severity severity)
{
    dr_finding f = {.kind = kind, .severity = severity, .list = out};
    f.namespace_ = f.pod = f.container = f.summary = "";
    return f;
}

static void set_workload(dr_finding *f, const dr_container *c)
{
    f->namespace_ = dr_list_str(f->list, c->id->ns, DR_NAMESPACE_MAX);
    f->pod = dr_list_str(f->list, c->id->pod, DR_POD_MAX);
    f->container = dr_list_str(f->list, c->id->name, DR_CONTAINER_MAX);
}

static const char *workload_name(const dr_container *ctr, char *buf, size_t n)
{
    const dr_ident *c = ctr->id;
    if (c->ns[0] || c->pod[0])
        snprintf(buf, n, "%s/%s/%s", c->ns, c->pod, c->name);
    else
        snprintf(buf, n, "%s", c->name[0] ? c->name : c->cgroup);
    return buf;
}

/* A GPU-level finding goes to each container using the GPU (in the newest
 * frame), or to the GPU alone when nobody uses it. */
static void add_for_gpu(dr_list *out, const dr_frame *last, size_t gi, const dr_finding *tmpl)
{
    int any = 0;
    for (size_t u = 0; u < last->nuses; u++) {
        if (last->uses[u].gpu != gi) continue;
        dr_finding *f = dr_list_add(out);
        if (!f) return;
        *f = *tmpl;
        set_workload(f, &last->ctrs[last->uses[u].container]);
        any = 1;
    }
    if (!any) {
        dr_finding *f = dr_list_add(out);
        if (f) *f = *tmpl;
    }
}

static const dr_gpu *gpu_in(const dr_frame *f, const char *id)
{
    for (size_t i = 0; i < f->ngpus; i++)
        if (strcmp(f->gpus[i].id, id) == 0) return &f->gpus[i];
    return NULL;
}

static const dr_cpu *cpu_in(const dr_frame *f, int32_t id)
{
    size_t lo = 0, hi = f->ncpus;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (f->cpus[mid].cpu == id) return &f->cpus[mid];
        if (f->cpus[mid].cpu < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Rate of a cumulative value between two frames; -1 when unknown or reset. */
static double rate(double a, double b, double dt_s)
{
    if (a < 0 || b < 0 || b < a || dt_s <= 0) return -1;
    return (b - a) / dt_s;
}

typedef struct window {
    const dr_frame *const *frames; /* oldest first */
    size_t n;
    const dr_frame *first, *last; /* first: its containers and CPUs whole */
    double dt_s;
    const struct mw_doctor_thresholds *t;
    const dr_history *h;
    size_t i0; /* index of frames[0] in h */
    /* Per frame, the nearest frame at or before it with whole CPUs: whose
     * CPU ids a packed frame's CPUs have, in order. */
    const dr_frame *cpu_ids[DR_MAX_FRAMES];
} window;

/* Rate of a cumulative container value that its collector refreshes only
 * every few cycles (PSI: emitted again unchanged in between): between the
 * frames where it changed, which are the moments it was read. */
static double psi_rate(const window *w, const char *key, size_t offset)
{
    double v_prev = -1, v_first = -1, v_last = -1, v0 = -1;
    int64_t t_first = 0, t_last = 0, t0 = 0;
    size_t changes = 0;
    double vals[DR_MAX_FRAMES];
    dr_history_series(w->h, w->i0, key, offset, vals);
    for (size_t j = 0; j < w->n; j++) {
        double v = vals[j];
        if (v < 0) continue;
        if (v0 < 0) {
            v0 = v;
            t0 = w->frames[j]->t_ms;
        } else if (v != v_prev) {
            if (!changes++) {
                v_first = v;
                t_first = w->frames[j]->t_ms;
            }
            v_last = v;
            t_last = w->frames[j]->t_ms;
        }
        v_prev = v;
    }
    if (v0 < 0) return -1;
    if (!changes) return 0;
    if (changes == 1) return rate(v0, v_last, (double)(t_last - t0) / 1000);
    return rate(v_first, v_last, (double)(t_last - t_first) / 1000);
}

/* The frequencies of CPU id in the window's frame j, packed or not; -1
 * when the frame lacks the CPU. */
static int cpu_freq_in(const window *w, size_t j, int32_t id, double *hz, double *max_hz)
{
    const dr_frame *f = w->frames[j];
    if (f->cpus) {
        const dr_cpu *x = cpu_in(f, id);
        if (!x) return -1;
        *hz = x->hz;
        *max_hz = x->max_hz;
        return 0;
    }
    const dr_frame *ids = w->cpu_ids[j];
    const dr_cpu *x = cpu_in(ids, id);
    if (!x) return -1;
    const dr_cpu_packed *p = &f->pcpus[x - ids->cpus];
    *hz = (double)p->hz;
    *max_hz = (double)p->max_hz;
    return 0;
}

/* Where a container's span in the window starts: the window's first frame,
 * or, for a container younger than the window, the first frame it is in
 * (a rule judges it on the frames it has, not on none). */
typedef struct ctr_span {
    dr_container start; /* its values in that frame */
    double dt_s;        /* from that frame to the newest */
    int young;          /* absent from the window's first frame */
} ctr_span;

static int container_span(const window *w, const char *key, ctr_span *s)
{
    const dr_container *o = dr_frame_container(w->first, key);
    if (o) {
        *s = (ctr_span){*o, w->dt_s, 0};
        return 0;
    }
    for (size_t j = 1; j + 1 < w->n; j++) {
        const dr_frame *f = w->frames[j];
        long k = dr_frame_find(f, key);
        if (k < 0) continue;
        if (f->ctrs) {
            s->start = f->ctrs[k];
        } else {
            dr_container *values = dr_history_values(w->h, w->i0 + j);
            s->start = values[k];
            free(values);
        }
        s->dt_s = (double)(w->last->t_ms - f->t_ms) / 1000;
        s->young = 1;
        return 0;
    }
    return -1;
}

/* The evidence and the words of a young container's shorter span. */
static void span_evidence(dr_finding *f, const ctr_span *s, char *words, size_t n)
{
    words[0] = '\0';
    if (!s->young) return;
    evidence(f, "seconds_observed", s->dt_s);
    snprintf(words, n, " over the %.0f s it has existed", s->dt_s);
}

/* ---- the rules ---- */

static void rule_cpu_governor(const window *w, dr_list *out)
{
    const dr_frame *last = w->last;
    size_t not_perf = 0, known = 0, nbusy = 0, nratio = 0;
    const char *gov = NULL;
    double ratio_sum = 0, min_ratio = 1e9, hz_sum = 0, max_sum = 0;
    for (size_t i = 0; i < last->ncpus; i++) {
        const dr_cpu *c = &last->cpus[i];
        const char *governor = last->governors[i].name;
        if (governor[0]) {
            known++;
            if (strcmp(governor, "performance") != 0) {
                not_perf++;
                if (!gov) gov = governor;
            }
        }
        const dr_cpu *o = w->n >= 2 ? cpu_in(w->first, c->cpu) : NULL;
        if (!o || c->total_s - o->total_s <= 0) continue;
        double busy = (c->busy_s - o->busy_s) / (c->total_s - o->total_s);
        if (busy < w->t->busy_cpu_ratio) continue;
        nbusy++;
        /* Mean frequency of this busy CPU over the window's frames. */
        double r = 0, hz = 0, mx = 0;
        size_t k = 0;
        for (size_t j = 0; j < w->n; j++) {
            double x_hz, x_max;
            if (cpu_freq_in(w, j, c->cpu, &x_hz, &x_max) < 0 || x_hz <= 0 || x_max <= 0) continue;
            r += x_hz / x_max;
            hz += x_hz;
            mx += x_max;
            k++;
            if (x_hz / x_max < min_ratio) min_ratio = x_hz / x_max;
        }
        if (!k) continue;
        ratio_sum += r / (double)k;
        hz_sum += hz / (double)k;
        max_sum += mx / (double)k;
        nratio++;
    }
    double ratio = nratio ? ratio_sum / (double)nratio : -1;
    int slow = nratio && ratio < w->t->cpu_frequency_ratio;
    if (!not_perf && !slow) return;
    dr_finding *f = dr_list_add(out);
    if (!f) return;
    f->kind = DR_CPU_GOVERNOR;
    f->severity = nbusy ? DR_WARNING : DR_INFO;
    f->magnitude = slow ? 1 - ratio : 0.5 * (double)not_perf / (double)(known ? known : 1);
    evidence(f, "cpus_not_performance", (double)not_perf);
    evidence(f, "cpus", (double)last->ncpus);
    evidence(f, "busy_cpus", (double)nbusy);
    if (nratio) {
        evidence(f, "busy_frequency_ratio", ratio);
        evidence(f, "busy_frequency_min_ratio", min_ratio);
        evidence(f, "busy_frequency_hertz", hz_sum / (double)nratio);
        evidence(f, "frequency_max_hertz", max_sum / (double)nratio);
    }
    char gtext[128] = "", ftext[256] = "";
    if (not_perf)
        snprintf(gtext, sizeof(gtext), "%zu of %zu CPUs use the '%s' governor, not performance",
                 not_perf, known, gov);
    if (nratio)
        snprintf(ftext, sizeof(ftext),
                 "%s%zu busy CPUs ran at %.0f%% of their maximum frequency on average (%.2f of "
                 "%.2f GHz, lowest %.0f%%)",
                 not_perf ? "; " : "", nratio, 100 * ratio, hz_sum / (double)nratio / 1e9,
                 max_sum / (double)nratio / 1e9, 100 * min_ratio);
    summary(f, "%s%s.", gtext, ftext);
}

static void rule_cpu_throttling(const window *w, dr_list *out)
{
    for (size_t i = 0; i < w->last->nctrs && w->n >= 2; i++) {
        const dr_container *c = &w->last->ctrs[i];
        const dr_ctr_now *cn = &w->last->now[i];
        ctr_span sp;
        if (container_span(w, c->id->key, &sp) < 0) continue;
        const dr_container *o = &sp.start;
        if (c->periods < 0 || o->periods < 0 || c->throttled_periods < 0 ||
            o->throttled_periods < 0)
            continue;
        double periods = c->periods - o->periods;
        double thr = c->throttled_periods - o->throttled_periods;
        if (periods < 10 || thr < 0) continue; /* too few periods to judge */
        double ratio = thr / periods;
        if (ratio < w->t->throttled_ratio) continue;
        dr_finding *f = dr_list_add(out);
        if (!f) return;
        f->kind = DR_CPU_THROTTLING;
        f->severity = ratio >= w->t->throttled_critical_ratio ? DR_CRITICAL : DR_WARNING;
        f->magnitude = ratio;
        set_workload(f, c);
        double tps = rate(o->throttled_s, c->throttled_s, sp.dt_s);
        double use = rate(o->cpu_s, c->cpu_s, sp.dt_s);
        evidence(f, "throttled_periods_ratio", ratio);
        evidence(f, "throttled_periods", thr);
        evidence(f, "periods", periods);
        if (tps >= 0) evidence(f, "throttled_seconds_per_second", tps);
        if (cn->quota_cpus >= 0) evidence(f, "quota_cpus", cn->quota_cpus);
        if (use >= 0) evidence(f, "cpu_usage_cpus", use);
        char q[64] = "no quota now", since[64];
        if (cn->quota_cpus >= 0) snprintf(q, sizeof(q), "a quota of %.2f CPUs", cn->quota_cpus);
        span_evidence(f, &sp, since, sizeof(since));
        summary(f,
                "Throttled in %.0f%% of its CFS periods (%.0f of %.0f)%s with %s; it used %.2f "
                "CPUs and waited %.2f s per second.",
                100 * ratio, thr, periods, since, q, use >= 0 ? use : 0, tps >= 0 ? tps : 0);
    }
}

static void nodes_text(uint64_t mask, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < 64 && len + 4 < n; i++)
        if (mask & (1ULL << i))
            len += (size_t)snprintf(buf + len, n - len, "%s%d", len ? "," : "", i);
}

static void rule_numa_mismatch(const window *w, dr_list *out)
{
    const dr_frame *last = w->last;
    for (size_t u = 0; u < last->nuses; u++) {
        const dr_container *ctr = &last->ctrs[last->uses[u].container];
        const dr_ctr_now *c = &last->now[last->uses[u].container];
        const dr_gpu *g = &last->gpus[last->uses[u].gpu];
        if (g->numa_node < 0) continue;
        uint64_t bit = 1ULL << g->numa_node;
        int cpu_off = c->cpu_nodes && !(c->cpu_nodes & bit);
        int mem_off = c->mem_nodes && !(c->mem_nodes & bit);
        if (!cpu_off && !mem_off) continue;
        dr_finding *f = dr_list_add(out);
        if (!f) return;
        f->kind = DR_NUMA_MISMATCH;
        f->severity = DR_WARNING;
        f->magnitude = cpu_off && mem_off ? 1 : 0.5;
        set_workload(f, ctr);
        mw_strlcpy(f->gpu, g->id, sizeof(f->gpu));
        evidence(f, "gpu_numa_node", g->numa_node);
        if (c->ncpus_allowed >= 0) evidence(f, "cpus_allowed", c->ncpus_allowed);
        evidence(f, "cpus_on_gpu_node", cpu_off ? 0 : 1);
        evidence(f, "memory_on_gpu_node", mem_off ? 0 : 1);
        char cn[64], mn[64];
        nodes_text(c->cpu_nodes, cn, sizeof(cn));
        nodes_text(c->mem_nodes, mn, sizeof(mn));
        summary(f,
                "GPU %s is on NUMA node %d, but the container may run only on CPUs of node(s) "
                "%s and allocate memory only on node(s) %s.",
                g->id, g->numa_node, cn[0] ? cn : "any", mn[0] ? mn : "any");
    }
}

static void rule_gpu_clocks(const window *w, dr_list *out, dr_kind kind)
{
    uint32_t bits = kind == DR_GPU_THERMAL_THROTTLE
                        ? DR_REASON_SW_THERMAL | DR_REASON_HW_THERMAL | DR_REASON_HW_SLOWDOWN
                        : DR_REASON_SW_POWER | DR_REASON_HW_POWER_BRAKE;
    uint32_t hard =
        kind == DR_GPU_THERMAL_THROTTLE ? DR_REASON_HW_THERMAL : DR_REASON_HW_POWER_BRAKE;
    const dr_frame *last = w->last;
    for (size_t gi = 0; gi < last->ngpus; gi++) {
        const char *id = last->gpus[gi].id;
        size_t total = 0, hits = 0;
        double ratio = 0, hz = 0, mx = 0;
        uint32_t seen = 0;
        for (size_t j = 0; j < w->n; j++) {
            const dr_gpu *g = gpu_in(w->frames[j], id);
            if (!g || g->sm_hz < 0 || g->sm_max_hz <= 0) continue;
            total++;
            if (!(g->reasons & bits) || g->sm_hz >= w->t->gpu_clock_ratio * g->sm_max_hz) continue;
            hits++;
            ratio += g->sm_hz / g->sm_max_hz;
            hz += g->sm_hz;
            mx += g->sm_max_hz;
            seen |= g->reasons & bits;
        }
        if (!hits || (double)hits / (double)total < w->t->gpu_throttle_fraction) continue;
        double frac = (double)hits / (double)total;
        ratio /= (double)hits;
        dr_finding tmpl = template_for(out, kind, seen & hard ? DR_CRITICAL : DR_WARNING);
        tmpl.magnitude = frac * (1 - ratio);
        mw_strlcpy(tmpl.gpu, id, sizeof(tmpl.gpu));
        evidence(&tmpl, "throttled_fraction", frac);
        evidence(&tmpl, "sm_clock_ratio", ratio);
        evidence(&tmpl, "sm_clock_hertz", hz / (double)hits);
        evidence(&tmpl, "sm_clock_max_hertz", mx / (double)hits);
        char reasons[128] = "";
        static const struct {
            uint32_t bit;
            const char *name;
        } names[] = {{DR_REASON_SW_THERMAL, "sw_thermal_slowdown"},
                     {DR_REASON_HW_THERMAL, "hw_thermal_slowdown"},
                     {DR_REASON_HW_SLOWDOWN, "hw_slowdown"},
                     {DR_REASON_SW_POWER, "sw_power_cap"},
                     {DR_REASON_HW_POWER_BRAKE, "hw_power_brake_slowdown"}};
        for (size_t k = 0; k < MW_ARRAY_LEN(names); k++)
            if (seen & names[k].bit) {
                size_t len = strlen(reasons);
                snprintf(reasons + len, sizeof(reasons) - len, "%s%s", len ? ", " : "",
                         names[k].name);
            }
        summary(&tmpl,
                "GPU %s ran at %.0f%% of its maximum SM clock (%.0f of %.0f MHz) with %s active "
                "in %.0f%% of the samples.",
                id, 100 * ratio, hz / (double)hits / 1e6, mx / (double)hits / 1e6, reasons,
                100 * frac);
        add_for_gpu(out, last, gi, &tmpl);
    }
}

static double pcie_lane_gts(double gen)
{
    static const double gts[] = {0, 2.5, 5, 8, 16, 32, 64};
    int g = (int)gen;
    return g >= 1 && g <= 6 ? gts[g] : gen;
}

static void rule_pcie(const window *w, dr_list *out)
{
    const dr_frame *last = w->last;
    for (size_t gi = 0; gi < last->ngpus; gi++) {
        const dr_gpu *g = &last->gpus[gi];
        int narrow =
            g->pcie_width > 0 && g->pcie_width_max > 0 && g->pcie_width < g->pcie_width_max;
        /* An idle GPU lowers its link generation to save power: only a busy
         * one tells. */
        int slow = g->pcie_gen > 0 && g->pcie_gen_max > 0 && g->pcie_gen < g->pcie_gen_max &&
                   g->util >= w->t->gpu_busy_ratio;
        if (!narrow && !slow) continue;
        double gen = g->pcie_gen > 0 ? g->pcie_gen : g->pcie_gen_max;
        double width = g->pcie_width > 0 ? g->pcie_width : g->pcie_width_max;
        double bw = pcie_lane_gts(gen) * width;
        double bw_max = pcie_lane_gts(g->pcie_gen_max > 0 ? g->pcie_gen_max : gen) *
                        (g->pcie_width_max > 0 ? g->pcie_width_max : width);
        dr_finding tmpl = template_for(out, DR_PCIE_DOWNGRADED, DR_WARNING);
        tmpl.magnitude = bw_max > 0 ? 1 - bw / bw_max : 0;
        mw_strlcpy(tmpl.gpu, g->id, sizeof(tmpl.gpu));
        evidence(&tmpl, "pcie_link_generation", gen);
        evidence(&tmpl, "pcie_link_max_generation", g->pcie_gen_max);
        evidence(&tmpl, "pcie_link_width", width);
        evidence(&tmpl, "pcie_link_max_width", g->pcie_width_max);
        evidence(&tmpl, "bandwidth_ratio", bw_max > 0 ? bw / bw_max : 0);
        if (g->util >= 0) evidence(&tmpl, "gpu_utilization", g->util);
        summary(&tmpl,
                "GPU %s's PCIe link runs at generation %.0f x%.0f, below its maximum of "
                "generation %.0f x%.0f (%.0f%% of the bandwidth).",
                g->id, gen, width, g->pcie_gen_max, g->pcie_width_max,
                bw_max > 0 ? 100 * bw / bw_max : 0);
        add_for_gpu(out, last, gi, &tmpl);
    }
}

/* Mean utilization over the window of the GPUs container ci of the newest
 * frame uses; -1 when unknown. Writes the GPUs' ids into ids. */
static double used_gpu_util(const window *w, size_t ci, char *ids, size_t n)
{
    const dr_frame *last = w->last;
    double sum = 0;
    size_t k = 0, len = 0;
    ids[0] = '\0';
    for (size_t u = 0; u < last->nuses; u++) {
        if (last->uses[u].container != ci) continue;
        const char *id = last->gpus[last->uses[u].gpu].id;
        if (len + strlen(id) + 2 < n)
            len += (size_t)snprintf(ids + len, n - len, "%s%s", len ? "," : "", id);
        for (size_t j = 0; j < w->n; j++) {
            const dr_gpu *g = gpu_in(w->frames[j], id);
            if (g && g->util >= 0) {
                sum += g->util;
                k++;
            }
        }
    }
    return k ? sum / (double)k : -1;
}

static void rule_input_bound(const window *w, dr_list *out)
{
    const dr_frame *last = w->last;
    for (size_t ci = 0; ci < last->nctrs && w->n >= 2; ci++) {
        const dr_container *c = &last->ctrs[ci];
        const dr_ctr_now *cn = &last->now[ci];
        if (!cn->uses_gpu) continue;
        ctr_span sp;
        if (container_span(w, c->id->key, &sp) < 0) continue;
        const dr_container *o = &sp.start;
        char ids[64];
        double util = used_gpu_util(w, ci, ids, sizeof(ids));
        if (util < 0 || util >= w->t->input_gpu_utilization) continue;
        double use = rate(o->cpu_s, c->cpu_s, sp.dt_s);
        double cap = cn->quota_cpus > 0      ? cn->quota_cpus
                     : cn->ncpus_allowed > 0 ? (double)cn->ncpus_allowed
                                             : (double)last->ncpus;
        double sat = use >= 0 && cap > 0 ? use / cap : -1;
        double io = rate(o->io_some_s, c->io_some_s, sp.dt_s) > 0
                        ? psi_rate(w, c->id->key, offsetof(dr_container, io_some_s))
                        : rate(o->io_some_s, c->io_some_s, sp.dt_s);
        int cpu_bound = sat >= w->t->input_cpu_saturation;
        int io_bound = io >= w->t->input_io_pressure;
        if (!cpu_bound && !io_bound) continue;
        dr_finding *f = dr_list_add(out);
        if (!f) return;
        f->kind = DR_INPUT_BOUND;
        f->severity = DR_WARNING;
        f->magnitude = (1 - util) * (sat > io ? (sat > 1 ? 1 : sat) : (io > 1 ? 1 : io));
        set_workload(f, c);
        if (!strchr(ids, ',')) mw_strlcpy(f->gpu, ids, sizeof(f->gpu));
        evidence(f, "gpu_utilization", util);
        if (sat >= 0) evidence(f, "cpu_saturation", sat);
        if (use >= 0) evidence(f, "cpu_usage_cpus", use);
        if (cap > 0) evidence(f, "cpu_capacity_cpus", cap);
        if (io >= 0) evidence(f, "io_pressure_ratio", io);
        char why[160], since[64];
        span_evidence(f, &sp, since, sizeof(since));
        if (cpu_bound)
            snprintf(why, sizeof(why), "its CPUs are saturated (%.2f of %.2f CPUs, %.0f%%)", use,
                     cap, 100 * sat);
        else
            snprintf(why, sizeof(why), "it stalls on I/O %.0f%% of the time", 100 * io);
        summary(f, "GPU %s is only %.0f%% busy while %s%s.", ids, 100 * util, why, since);
    }
}

static void rule_memory_pressure(const window *w, dr_list *out)
{
    const dr_frame *last = w->last;
    for (size_t ci = 0; ci < last->nctrs; ci++) {
        const dr_container *c = &last->ctrs[ci];
        const dr_ctr_now *cn = &last->now[ci];
        ctr_span sp = {.dt_s = 0};
        const dr_container *o =
            w->n >= 2 && container_span(w, c->id->key, &sp) == 0 ? &sp.start : NULL;
        double ratio =
            cn->ws_bytes >= 0 && cn->limit_bytes > 0 ? cn->ws_bytes / cn->limit_bytes : -1;
        double some = o ? rate(o->mem_some_s, c->mem_some_s, sp.dt_s) : -1;
        double full = o ? rate(o->mem_full_s, c->mem_full_s, sp.dt_s) : -1;
        /* Only a container that stalled at all costs the exact rate. */
        if (some > 0) some = psi_rate(w, c->id->key, offsetof(dr_container, mem_some_s));
        if (full > 0) full = psi_rate(w, c->id->key, offsetof(dr_container, mem_full_s));
        int near = ratio >= w->t->memory_working_set_ratio;
        int stalls = some >= w->t->memory_pressure_ratio;
        if (!near && !stalls) continue;
        dr_finding *f = dr_list_add(out);
        if (!f) return;
        f->kind = DR_MEMORY_PRESSURE;
        f->severity =
            ratio >= w->t->memory_working_set_critical || full >= w->t->memory_pressure_ratio
                ? DR_CRITICAL
                : DR_WARNING;
        f->magnitude = ratio > some ? ratio : some;
        set_workload(f, c);
        if (cn->ws_bytes >= 0) evidence(f, "working_set_bytes", cn->ws_bytes);
        if (cn->limit_bytes > 0) evidence(f, "limit_bytes", cn->limit_bytes);
        if (ratio >= 0) evidence(f, "working_set_ratio", ratio);
        if (some >= 0) evidence(f, "memory_stall_some_ratio", some);
        if (full >= 0) evidence(f, "memory_stall_full_ratio", full);
        char a[128] = "", b[128] = "", since[64] = "";
        if (o) span_evidence(f, &sp, since, sizeof(since));
        if (ratio >= 0)
            snprintf(a, sizeof(a),
                     "Its working set is %.0f%% of its memory limit (%.2f of %.2f GiB)",
                     100 * ratio, cn->ws_bytes / 1073741824.0, cn->limit_bytes / 1073741824.0);
        if (some >= 0)
            snprintf(b, sizeof(b), "%sit stalled on memory %.0f%% of the time%s",
                     a[0] ? "; " : "It ", 100 * some, since);
        summary(f, "%s%s.", a, b);
    }
}

/* The first frame of the window in which container key uses GPU id. */
static const dr_frame *first_use(const window *w, const char *key, const char *id)
{
    for (size_t j = 0; j < w->n; j++) {
        const dr_frame *fr = w->frames[j];
        for (size_t u = 0; u < fr->nuses; u++)
            if (strcmp(dr_frame_ident(fr, fr->uses[u].container)->key, key) == 0 &&
                strcmp(fr->gpus[fr->uses[u].gpu].id, id) == 0)
                return fr;
    }
    return w->first;
}

static void gpu_errors_since(const window *w, const dr_frame *base, const dr_gpu *g,
                             const dr_container *c, dr_list *out)
{
    const dr_gpu *b = gpu_in(base, g->id);
    if (!b) return;
    double d_unc = g->ecc_uncorrected - b->ecc_uncorrected;
    double d_corr = g->ecc_corrected - b->ecc_corrected;
    double d_remap = g->remap_uncorrectable - b->remap_uncorrectable;
    double d_xid = g->xid_total - b->xid_total;
    /* A driver reload resets the ECC counts: a negative difference is no error. */
    if (d_unc < 0) d_unc = 0;
    if (d_corr < 0) d_corr = 0;
    if (d_remap < 0) d_remap = 0;
    if (d_xid < 0) d_xid = 0;
    /* The GPU's health (collect/gpu/gpu_health.c): unhealthy, or any recent
     * hardware-class XID, is critical for a workload on it; degraded warns. */
    int critical = d_unc > 0 || d_xid > 0 || d_remap > 0 || g->remap_pending > 0 ||
                   g->remap_failure > 0 || g->health == 3 || g->recent_hw_events > 0;
    /* Reasons with a rule of their own (pcie_downgraded, the throttle rules)
     * are left to it. */
    int degraded = g->health == 1 && strcmp(g->health_reason, "pcie_link_degraded") != 0 &&
                   strcmp(g->health_reason, "thermal_slowdown") != 0 &&
                   strcmp(g->health_reason, "power_brake") != 0;
    if (!critical && !degraded && !(d_corr >= w->t->gpu_corrected_errors && d_corr > 0)) return;
    dr_finding *f = dr_list_add(out);
    if (!f) return;
    f->kind = DR_GPU_ERRORS;
    f->severity = critical ? DR_CRITICAL : DR_WARNING;
    f->magnitude = critical ? 1 : 0.5;
    if (c) set_workload(f, c);
    mw_strlcpy(f->gpu, g->id, sizeof(f->gpu));
    evidence(f, "ecc_uncorrected_errors", d_unc);
    evidence(f, "ecc_corrected_errors", d_corr);
    evidence(f, "xid_errors", d_xid);
    evidence(f, "remapped_rows_uncorrectable", d_remap);
    evidence(f, "remap_pending", g->remap_pending);
    evidence(f, "remap_failure", g->remap_failure);
    evidence(f, "seconds_observed", (double)(w->last->t_ms - base->t_ms) / 1000);
    if (g->health >= 0) evidence(f, "gpu_health_state", g->health);
    evidence(f, "recent_hardware_events", g->recent_hw_events);
    char health[160] = "";
    if (g->health == 1 || g->health == 3)
        snprintf(health, sizeof(health), "; its health is %s (%s; recommended action: %s)",
                 g->health == 3 ? "unhealthy" : "degraded", g->health_reason, g->health_action);
    summary(f,
            "GPU %s reported %.0f uncorrected and %.0f corrected ECC errors, %.0f XID errors and "
            "%.0f new uncorrectable row remaps in the last %.0f s%s%s%s%s.",
            g->id, d_unc, d_corr, d_xid, d_remap, (double)(w->last->t_ms - base->t_ms) / 1000,
            g->remap_pending > 0 ? "; a row remap is pending (needs a GPU reset)" : "",
            g->remap_failure > 0 ? "; a row remap failed" : "",
            g->recent_hw_events > 0 ? "; the kernel log has hardware-class XIDs of it" : "",
            health);
}

static void rule_gpu_errors(const window *w, dr_list *out)
{
    const dr_frame *last = w->last;
    for (size_t gi = 0; gi < last->ngpus; gi++) {
        const dr_gpu *g = &last->gpus[gi];
        int any = 0;
        for (size_t u = 0; u < last->nuses; u++) {
            if (last->uses[u].gpu != gi) continue;
            const dr_container *c = &last->ctrs[last->uses[u].container];
            /* Since the workload started (on this GPU, within the window). */
            gpu_errors_since(w, first_use(w, c->id->key, g->id), g, c, out);
            any = 1;
        }
        if (!any) gpu_errors_since(w, w->first, g, NULL, out);
    }
}

static void rule_gpu_shared(const window *w, dr_list *out)
{
    const dr_frame *last = w->last;
    for (size_t gi = 0; gi < last->ngpus; gi++) {
        const dr_gpu *g = &last->gpus[gi];
        if (g->mig) continue; /* MIG instances are isolated from each other */
        size_t n = 0;
        double total = 0;
        for (size_t u = 0; u < last->nuses; u++)
            if (last->uses[u].gpu == gi) {
                n++;
                total += last->uses[u].mem_bytes;
            }
        if (n < 2) continue;
        for (size_t u = 0; u < last->nuses; u++) {
            if (last->uses[u].gpu != gi) continue;
            const dr_container *c = &last->ctrs[last->uses[u].container];
            dr_finding *f = dr_list_add(out);
            if (!f) return;
            f->kind = DR_GPU_SHARED;
            f->severity = DR_WARNING;
            f->magnitude = 1 - 1 / (double)n;
            set_workload(f, c);
            mw_strlcpy(f->gpu, g->id, sizeof(f->gpu));
            evidence(f, "workloads_on_gpu", (double)n);
            evidence(f, "gpu_memory_used_bytes", last->uses[u].mem_bytes);
            evidence(f, "others_gpu_memory_used_bytes", total - last->uses[u].mem_bytes);
            if (g->util >= 0) evidence(f, "gpu_utilization", g->util);
            char other[256] = "";
            for (size_t v = 0; v < last->nuses; v++) {
                if (last->uses[v].gpu != gi || v == u) continue;
                char name[200];
                size_t len = strlen(other);
                if (len + 4 < sizeof(other))
                    snprintf(
                        other + len, sizeof(other) - len, "%s%s", len ? ", " : "",
                        workload_name(&last->ctrs[last->uses[v].container], name, sizeof(name)));
            }
            summary(f, "GPU %s is shared by %zu workloads; the others: %s.", g->id, n, other);
        }
    }
}

void dr_evaluate(const dr_history *h, int64_t window_ms, const struct mw_doctor_thresholds *t,
                 dr_list *out)
{
    size_t n = dr_history_len(h);
    if (!n) return;
    const dr_frame *frames[DR_MAX_FRAMES];
    const dr_frame *last = dr_history_at(h, n - 1);
    size_t k = 0, i0 = 0;
    for (size_t i = 0; i < n; i++) {
        const dr_frame *f = dr_history_at(h, i);
        /* a tenth of slack for the scheduling jitter of the cycles */
        if (window_ms > 0 && last->t_ms - f->t_ms > window_ms + window_ms / 10) continue;
        if (!k) i0 = i;
        frames[k++] = f;
    }
    /* The newest frame of a history keeps its newest-frame parts. */
    if (!last->now || !last->governors) return;
    window w = {.frames = frames,
                .n = k,
                .first = frames[0],
                .last = last,
                .dt_s = (double)(last->t_ms - frames[0]->t_ms) / 1000,
                .t = t,
                .h = h,
                .i0 = i0};
    /* Once per window, not per CPU and frame: a walk back through the ring. */
    for (size_t j = 0; j < k; j++)
        w.cpu_ids[j] = frames[j]->cpus ? frames[j]
                       : j             ? w.cpu_ids[j - 1]
                                       : dr_history_cpu_ids(h, i0);
    /* A window that starts between the oldest and the newest frame starts
     * at a packed one: its values whole for the rules. */
    dr_frame first;
    dr_container *first_values = NULL;
    dr_cpu *first_cpus = NULL;
    if (frames[0]->packed) {
        first = *frames[0];
        first_values = dr_history_values(h, i0);
        first.ctrs = first_values;
        first.packed = NULL;
        if (first.pcpus) {
            first_cpus = dr_history_cpus(h, i0);
            first.cpus = first_cpus;
            first.pcpus = NULL;
        }
        w.first = &first;
    }
    rule_cpu_governor(&w, out);
    rule_cpu_throttling(&w, out);
    rule_numa_mismatch(&w, out);
    rule_gpu_clocks(&w, out, DR_GPU_THERMAL_THROTTLE);
    rule_gpu_clocks(&w, out, DR_GPU_POWER_THROTTLE);
    rule_pcie(&w, out);
    rule_input_bound(&w, out);
    rule_memory_pressure(&w, out);
    rule_gpu_errors(&w, out);
    rule_gpu_shared(&w, out);
    free(first_values);
    free(first_cpus);
}
