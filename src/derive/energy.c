/* energy.c - node energy per interval and its attribution to containers; see
 * energy.h and docs/energy.md for the model. */
#include "energy.h"
#include "energy_internal.h"
#include "../core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* clang-format off */
MW_METRIC(NODE_ENERGY, MW_COUNTER, "mlwatch_node_energy_joules_total", "joules", "Energy of one power source of the node since the agent first saw it (kept across restarts); method is measured or estimated. Zones overlap (package includes core): do not sum them.");
MW_METRIC(CONTAINER_ENERGY, MW_COUNTER, "mlwatch_container_energy_joules_total", "joules", "Energy attributed to the container by component (cpu, dram, gpu, other), kind (dynamic, idle) and method (measured, estimated); with mlwatch_energy_share_joules_total it adds up to mlwatch_energy_component_joules_total, the node's energy.");
MW_METRIC(SHARE_ENERGY, MW_COUNTER, "mlwatch_energy_share_joules_total", "joules", "Energy that is no workload's: share unreserved (idle energy no one reserves) and system (processes outside any container, the kernel), by component, kind and method.");
MW_METRIC(COMPONENT_ENERGY, MW_COUNTER, "mlwatch_energy_component_joules_total", "joules", "The node's energy that was attributed, by component, kind and method: the sum of the containers' and the shares' energy (kept across restarts).");
MW_METRIC(SHARE_CO2, MW_COUNTER, "mlwatch_energy_share_co2_grams_total", "grams", "CO2-equivalent of a share's energy.");
MW_METRIC(NODE_CO2, MW_COUNTER, "mlwatch_node_co2_grams_total", "grams", "CO2-equivalent of the node's attributed energy: the containers' and the shares' together.");
MW_METRIC(IDLE_FLOOR, MW_GAUGE, "mlwatch_energy_idle_floor_watts", "watts", "Idle power of a component (GPUs: per gpu) in use: source learnt (lowest idle power seen, kept across restarts, rising slowly toward higher idle readings), prior (nothing idle seen yet) or configured (--energy-idle-watts).");
MW_METRIC(CONTAINER_CO2, MW_COUNTER, "mlwatch_container_co2_grams_total", "grams", "CO2-equivalent of the container's energy: each interval's energy times that interval's carbon intensity.");
MW_METRIC(VIOLATIONS, MW_COUNTER, "mlwatch_energy_conservation_violations_total", "", "Intervals whose attributed parts did not add up to the node energy within 0.1%.");
MW_METRIC(BELOW_PARTS, MW_COUNTER, "mlwatch_energy_node_below_parts_total", "", "Intervals where the node power meter read less than RAPL and GPUs together; the parts were kept and component other was 0.");
MW_METRIC(INTERVALS, MW_COUNTER, "mlwatch_energy_intervals_total", "", "Intervals whose energy was attributed.");
/* clang-format on */

static int keep_seen(const node *n, const void *arg)
{
    return arg && n->seen == *(const uint64_t *)arg;
}

/* --- helpers ---------------------------------------------------------------- */

static const char *label(const mw_sample *s, const char *name)
{
    for (uint32_t i = 0; i < s->nlabels; i++)
        if (strcmp(s->labels[i].name, name) == 0) return s->labels[i].value;
    return NULL;
}

static const char *label_or(const mw_sample *s, const char *name)
{
    const char *v = label(s, name);
    return v ? v : "";
}

/* "name SEP v1 SEP v2 ..." of a sample, cut at size. */
static void series_key(const char *prefix, const mw_sample *s, char *out, size_t size)
{
    size_t n = mw_strlcpy(out, prefix, size);
    for (uint32_t i = 0; i < s->nlabels && n + 1 < size; i++) {
        out[n++] = SEP;
        out[n] = '\0';
        n += mw_strlcpy(out + n, s->labels[i].value, size - n);
    }
    if (n >= size) out[size - 1] = '\0';
}

/* The increase of a counter since the previous cycle. Returns 1 with *d set,
 * 0 on first sight (no delta), -1 when it went down (a reset: *d is the new
 * value). */
static int counter_delta(mw_energy *e, const char *key, double v, double *d)
{
    node *n = mw_energy_tfind(&e->counters, key, 1);
    *d = 0;
    if (!n) return 0; /* table full: such a series is never counted */
    int had = n->seen != 0;
    double prev = n->v;
    n->v = v;
    n->seen = e->cycle;
    if (!had) return 0;
    if (v < prev) {
        *d = v;
        return -1;
    }
    *d = v - prev;
    return 1;
}

/* The exported identity of a container sample: Kubernetes names, or for
 * other cgroups empty namespace and pod and the cgroup path (or runtime ID)
 * as container. NULL when the sample names nothing (the unattributed rest). */
static ent *entity_of(mw_energy *e, const mw_sample *s)
{
    const char *ns = label_or(s, "namespace"), *pod = label_or(s, "pod");
    const char *ctr = label_or(s, "container");
    if (!*ns && !*pod && !*ctr) {
        ctr = label_or(s, "cgroup");
        if (!*ctr) ctr = label_or(s, "container_id");
        if (!*ctr) return NULL;
    } else if (!*ctr) {
        ctr = label_or(s, "container_id");
    }
    return mw_energy_entity(e, ns, pod, ctr, 1);
}

static gpu_part *gpu_of(mw_energy *e, const char *index)
{
    for (size_t i = 0; i < e->ngpus; i++)
        if (strcmp(e->gpus[i].index, index) == 0) return &e->gpus[i];
    if (e->ngpus >= MAX_GPUS) return NULL;
    gpu_part *g = &e->gpus[e->ngpus++];
    memset(g, 0, sizeof(*g));
    mw_strlcpy(g->index, index, sizeof(g->index));
    return g;
}

#define FOR_SAMPLES(snap, name, s)                                                                 \
    for (const mw_family *f_ = mw_snapshot_find(snap, name); f_; f_ = NULL)                        \
        for (const mw_sample *s = f_->first; s; s = s->next)

/* Energy of sampled power over the interval: the trapezoid between the
 * previous reading of the same series and this one (the exact energy of
 * power moving linearly between them); on first sight, this reading x dt.
 * The one rule for every power reading (node meters, hwmon sensors, GPUs
 * without an energy counter). */
static double sampled_energy(mw_energy *e, const char *key, double w, double dt)
{
    node *n = mw_energy_tfind(&e->counters, key, 1);
    if (!n) return w * dt;  /* table full */
    int had = n->seen != 0; /* unseen series are swept every cycle */
    double prev = n->v;
    n->v = w;
    n->seen = e->cycle;
    return (had ? (prev + w) / 2 : w) * dt;
}

/* The idle part of a component's energy j over dt, and its floor's watts
 * and source. configured < 0: learnt. A learnt floor falls at once
 * to any lower reading and rises toward a higher idle one by 1 - exp(-dt /
 * tau) of the gap; until an idle interval has been seen the prior holds. */
static double floor_idle(const mw_energy *e, idle_floor *f, double configured, double prior,
                         double j, double dt, int idle_like, double *watts, int *source)
{
    double w = j / dt, fw;
    if (configured >= 0) {
        fw = configured;
        *source = MW_EF_CONFIGURED;
    } else {
        if (f->learnt) {
            if (w < f->w)
                f->w = w;
            else if (idle_like)
                f->w += (w - f->w) * (1 - exp(-dt / e->p.floor_tau_s));
        } else if (idle_like) {
            f->w = w;
            f->learnt = 1;
        }
        fw = f->learnt ? f->w : prior;
        *source = f->learnt ? MW_EF_LEARNT : MW_EF_PRIOR;
    }
    *watts = fw;
    double idle = fw * dt;
    return idle < j ? idle : j;
}

/* A component's idle watts set by hand, or -1. */
static double configured(const mw_energy *e, int k)
{
    return (e->p.idle_watts_set & (1u << k)) ? e->p.idle_watts[k] : -1;
}

/* A GPU is idle in an interval when no container has utilization or memory
 * on it and its own utilization (where reported) is at most 5%. */
static int gpu_idle_like(const mw_snapshot *snap, const char *index)
{
    static const char *const used[] = {"mlwatch_container_gpu_utilization_ratio",
                                       "mlwatch_container_gpu_memory_used_bytes",
                                       "mlwatch_container_mig_memory_used_bytes"};
    for (size_t i = 0; i < MW_ARRAY_LEN(used); i++)
        FOR_SAMPLES(snap, used[i], s)
    if (s->value > 0 && strcmp(label_or(s, "gpu"), index) == 0) return 0;
    double u;
    if (mw_snapshot_get(snap, "mlwatch_gpu_utilization_ratio", &u, "gpu", index, MW_END) == 0 &&
        u > MW_ENERGY_GPU_IDLE_UTIL)
        return 0;
    return 1;
}

/* A GPU's energy of the interval: its idle part by its floor. */
static void gpu_add(mw_energy *e, const mw_snapshot *snap, const char *index, const char *uuid,
                    double d, double dt)
{
    gpu_part *g = gpu_of(e, index);
    if (!g) return;
    mw_strlcpy(g->uuid, uuid, sizeof(g->uuid));
    g->j += d;
    idle_floor *f = mw_energy_gpu_floor(e, uuid);
    if (f && dt > 0 && d > 0)
        g->idle += floor_idle(e, f, configured(e, MW_EC_GPU), 0, d, dt, gpu_idle_like(snap, index),
                              &g->floor_w, &g->floor_source);
    mw_energy_node_add(e, "gpu", index, "measured", d);
}

/* --- one interval ----------------------------------------------------------- */

typedef struct interval {
    double dt, busy, total;
    int ncpu, have_rapl_pkg, have_node;
    double comp[MW_EC_N]; /* energy of each component (gpu: sum of devices) */
    double node_j;        /* node meter, when have_node */
} interval;

static void read_cpu(mw_energy *e, const mw_snapshot *snap, interval *iv)
{
    char key[256];
    FOR_SAMPLES(snap, "mlwatch_cpu_seconds_total", s)
    {
        const char *mode = label_or(s, "mode");
        series_key("cpu", s, key, sizeof(key));
        double d;
        if (counter_delta(e, key, s->value, &d) < 0) d = 0;
        iv->total += d;
        if (strcmp(mode, "idle") != 0 && strcmp(mode, "iowait") != 0) iv->busy += d;
        if (strcmp(mode, "user") == 0) iv->ncpu++;
    }
}

static void read_rapl(mw_energy *e, const mw_snapshot *snap, interval *iv)
{
    char key[256];
    FOR_SAMPLES(snap, "mlwatch_rapl_energy_joules_total", s)
    {
        const char *zone = label_or(s, "zone");
        series_key("rapl", s, key, sizeof(key));
        double d;
        /* The collector keeps the counter monotonic across wraps; a decrease
         * means it started over (zone re-found): no delta this interval. */
        if (counter_delta(e, key, s->value, &d) < 0) d = 0;
        mw_energy_node_add(e, "rapl", zone, "measured", d);
        const char *slash = strrchr(zone, '/');
        const char *last = slash ? slash + 1 : zone;
        if (!slash && strncmp(zone, "package", 7) == 0) {
            iv->comp[MW_EC_CPU] += d;
            iv->have_rapl_pkg = 1;
        } else if (strncmp(last, "dram", 4) == 0) {
            iv->comp[MW_EC_DRAM] += d;
        }
    }
}

/* GPUs: the energy counter's difference where there is one (NVML's power
 * reading is sampled only part of the time on A100/H100; the counter sees
 * everything), else the trapezoid of the power readings. */
static void read_gpus(mw_energy *e, const mw_snapshot *snap, interval *iv)
{
    char key[256];
    e->ngpus = 0;
    double power[MAX_GPUS]; /* this interval's trapezoid per power sample */
    const char *power_uuid[MAX_GPUS];
    size_t np = 0;
    FOR_SAMPLES(snap, "mlwatch_gpu_power_watts", s)
    {
        snprintf(key, sizeof(key), "gpupower%c%s", SEP, label_or(s, "uuid"));
        double d = sampled_energy(e, key, s->value, iv->dt);
        if (np < MAX_GPUS) {
            power_uuid[np] = label_or(s, "uuid");
            power[np++] = d;
        }
    }
    FOR_SAMPLES(snap, "mlwatch_gpu_energy_joules_total", s)
    {
        const char *index = label_or(s, "gpu"), *uuid = label_or(s, "uuid");
        snprintf(key, sizeof(key), "gpu%c%s", SEP, uuid);
        double d;
        int rc = counter_delta(e, key, s->value, &d);
        if (rc < 0) { /* counter reset: the power readings are the best estimate */
            d = 0;
            for (size_t i = 0; i < np; i++)
                if (strcmp(power_uuid[i], uuid) == 0) d = power[i];
        }
        gpu_add(e, snap, index, uuid, d, iv->dt);
    }
    size_t i = 0;
    FOR_SAMPLES(snap, "mlwatch_gpu_power_watts", s)
    {
        const char *index = label_or(s, "gpu"), *uuid = label_or(s, "uuid");
        double d = i < np ? power[i] : 0, dummy;
        i++;
        if (mw_snapshot_get(snap, "mlwatch_gpu_energy_joules_total", &dummy, "uuid", uuid,
                            MW_END) == 0)
            continue;
        gpu_add(e, snap, index, uuid, d, iv->dt);
    }
    for (size_t g = 0; g < e->ngpus; g++)
        iv->comp[MW_EC_GPU] += e->gpus[g].j;
}

/* Node-level meters: IPMI DCMI first, then an ACPI power meter (hwmon chip
 * "power_meter"). Other hwmon power sensors are exported, not used: what
 * they measure (a GPU, a VRM, a PSU rail) is not known. Every reading is
 * integrated by the trapezoid. */
static void read_node(mw_energy *e, const mw_snapshot *snap, interval *iv)
{
    double w = 0;
    int have = 0;
    const char *src = NULL;
    char key[512];
    FOR_SAMPLES(snap, "mlwatch_ipmi_power_watts", s)
    {
        w += s->value;
        have = 1;
        src = "ipmi";
    }
    FOR_SAMPLES(snap, "mlwatch_hwmon_power_watts", s)
    {
        const char *chip = label_or(s, "chip");
        char zone[160];
        snprintf(zone, sizeof(zone), "%s/%s", chip, label_or(s, "sensor"));
        series_key("hwmonpower", s, key, sizeof(key));
        mw_energy_node_add(e, "hwmon", zone, "measured", sampled_energy(e, key, s->value, iv->dt));
        if (!src && strcmp(chip, "power_meter") == 0) {
            w += s->value;
            have = 1;
        }
    }
    if (!have) return;
    if (!src) src = "hwmon";
    snprintf(key, sizeof(key), "nodemeter%c%s", SEP, src);
    iv->have_node = 1;
    iv->node_j = sampled_energy(e, key, w, iv->dt);
    if (strcmp(src, "ipmi") == 0) mw_energy_node_add(e, "ipmi", "node", "measured", iv->node_j);
}

static void read_containers(mw_energy *e, const mw_snapshot *snap, interval *iv)
{
    char key[1024];
    (void)iv;
    FOR_SAMPLES(snap, "mlwatch_container_cpu_seconds_total", s)
    {
        series_key("ccpu", s, key, sizeof(key));
        double d;
        counter_delta(e, key, s->value, &d); /* a reset: a new cgroup, d = its time */
        ent *x = entity_of(e, s);
        if (!x) continue;
        x->cpu_d += d;
        x->last_ms = snap->timestamp_ms;
    }
    if (e->p.idle_policy != MW_IDLE_POLICY_REQUESTS || !e->p.cpu_weight) return;
    FOR_SAMPLES(snap, "mlwatch_container_info", s)
    {
        const char *cg = label(s, "cgroup");
        if (!cg || !*label_or(s, "pod_uid")) continue; /* Kubernetes containers only */
        double w;
        ent *x = entity_of(e, s);
        if (x && e->p.cpu_weight(e->p.cpu_weight_ctx, cg, &w) == 0 && w > 0) x->weight += w;
    }
}

/* Attribute a GPU's energy by weights from a family of per-container samples
 * for that GPU (and MIG instance). Returns the weight total. */
static double gpu_weights(mw_energy *e, const mw_snapshot *snap, const char *family,
                          const char *index, const char *gi, const char *ci, double scale,
                          const gpu_part *g, int apply, double wsum)
{
    double sum = 0;
    FOR_SAMPLES(snap, family, s)
    {
        if (strcmp(label_or(s, "gpu"), index) != 0) continue;
        if (gi && (strcmp(label_or(s, "gpu_instance"), gi) != 0 ||
                   strcmp(label_or(s, "compute_instance"), ci) != 0))
            continue;
        if (!(s->value > 0)) continue;
        sum += s->value;
        if (!apply) continue;
        ent *x = entity_of(e, s);
        if (!x) continue; /* processes outside containers: unattributed */
        double f = scale * s->value / wsum;
        x->gpu[MW_EK_IDLE] += g->idle * f;
        x->gpu[MW_EK_DYNAMIC] += (g->j - g->idle) * f;
        x->last_ms = snap->timestamp_ms;
    }
    return sum;
}

/* Whether a container (not the memory of no process, the driver's reserve
 * on an empty MIG instance among it) has a sample of FAMILY on that GPU or
 * MIG instance. */
static int container_on(const mw_snapshot *snap, const char *family, const char *index,
                        const char *gi, const char *ci)
{
    FOR_SAMPLES(snap, family, s)
    {
        if (strcmp(label_or(s, "gpu"), index) != 0 || !(s->value > 0)) continue;
        if (gi && (strcmp(label_or(s, "gpu_instance"), gi) != 0 ||
                   strcmp(label_or(s, "compute_instance"), ci) != 0))
            continue;
        if (*label_or(s, "namespace") || *label_or(s, "pod") || *label_or(s, "container") ||
            *label_or(s, "cgroup") || *label_or(s, "container_id"))
            return 1;
    }
    return 0;
}

/* A GPU (or a MIG instance) no container uses: under the requests policy
 * its idle energy (IDLE joules: the GPU's, or the instance's memory-slice
 * share of it) belongs to the containers the kubelet allocated that UUID
 * to (a reservation, as a CPU request is), equally; its dynamic energy
 * stays the system share's (no container's process used it). */
static void reserved_gpu(mw_energy *e, const mw_snapshot *snap, const char *uuid, double idle)
{
    if (e->p.idle_policy != MW_IDLE_POLICY_REQUESTS || !e->p.gpu_holders || !uuid[0] || !(idle > 0))
        return;
    mw_energy_holder h[8];
    size_t n = e->p.gpu_holders(e->p.gpu_holders_ctx, uuid, h, MW_ARRAY_LEN(h));
    if (n > MW_ARRAY_LEN(h)) n = MW_ARRAY_LEN(h);
    for (size_t i = 0; i < n; i++) {
        ent *x = mw_energy_entity(e, h[i].ns, h[i].pod, h[i].container, 1);
        if (!x) continue; /* the table is full: it stays unreserved */
        x->gpu[MW_EK_IDLE] += idle / (double)n;
        x->last_ms = snap->timestamp_ms;
    }
}

static void attribute_gpus(mw_energy *e, const mw_snapshot *snap)
{
    for (size_t i = 0; i < e->ngpus; i++) {
        const gpu_part *g = &e->gpus[i];
        double mig = 0, memtotal = 0;
        if (mw_snapshot_get(snap, "mlwatch_gpu_mig_enabled", &mig, "gpu", g->index, MW_END) == 0 &&
            mig > 0 &&
            mw_snapshot_get(snap, "mlwatch_gpu_memory_total_bytes", &memtotal, "gpu", g->index,
                            MW_END) == 0 &&
            memtotal > 0) {
            /* MIG: each instance owns its slice of the GPU by memory (its
             * memory over the GPU's, not its compute slices: the
             * fraction the driver reports for every profile); inside it,
             * containers by memory used. An instance no container uses is
             * reserved by the pods allocated its MIG UUID (requests policy),
             * else its slice stays unreserved (idle) and the system's
             * (dynamic). */
            FOR_SAMPLES(snap, "mlwatch_mig_memory_total_bytes", m)
            {
                if (strcmp(label_or(m, "gpu"), g->index) != 0) continue;
                const char *gi = label_or(m, "gpu_instance"), *ci = label_or(m, "compute_instance");
                double w = gpu_weights(e, snap, "mlwatch_container_mig_memory_used_bytes", g->index,
                                       gi, ci, 0, g, 0, 0);
                if (w > 0 &&
                    container_on(snap, "mlwatch_container_mig_memory_used_bytes", g->index, gi, ci))
                    gpu_weights(e, snap, "mlwatch_container_mig_memory_used_bytes", g->index, gi,
                                ci, m->value / memtotal, g, 1, w);
                else /* no container on it: the pods it is allocated to reserve its slice */
                    reserved_gpu(e, snap, label_or(m, "uuid"), g->idle * m->value / memtotal);
            }
            continue;
        }
        /* Shared GPU: by SM utilization share, else by memory share. */
        const char *fam = "mlwatch_container_gpu_utilization_ratio";
        double w = gpu_weights(e, snap, fam, g->index, NULL, NULL, 0, g, 0, 0);
        if (!(w > 0)) {
            fam = "mlwatch_container_gpu_memory_used_bytes";
            w = gpu_weights(e, snap, fam, g->index, NULL, NULL, 0, g, 0, 0);
        }
        if (w > 0)
            gpu_weights(e, snap, fam, g->index, NULL, NULL, 1, g, 1, w);
        else
            reserved_gpu(e, snap, g->uuid, g->idle);
    }
}

static int keep_ent(const node *n, const void *arg)
{
    const mw_energy *e = arg;
    return e->last_ts - n->ent->last_ms <= ENTITY_EXPIRY_MS;
}

/* One entity's (a container's, a share's) energy samples: every nonzero
 * total, and CPU dynamic by the current method always, so that each has a
 * series from its first interval. */
static void emit_joules(const mw_energy *e, mw_snapshot *snap, const mw_metric_desc *d,
                        const char *l1, const char *v1, const char *l2, const char *v2,
                        const char *l3, const char *v3, const ent *x)
{
    for (int k = 0; k < MW_EC_N; k++)
        for (int kind = 0; kind < MW_EK_N; kind++)
            for (int m = 0; m < MW_EM_N; m++) {
                if (x->j[k][kind][m] <= 0 &&
                    !(k == MW_EC_CPU && kind == MW_EK_DYNAMIC && m == e->cpu_method))
                    continue;
                const char *c = mw_energy_component_names[k], *kn = mw_energy_kind_names[kind];
                const char *mn = mw_energy_method_names[m];
                if (l2)
                    mw_emit(snap, d, x->j[k][kind][m], l1, v1, l2, v2, l3, v3, "component", c,
                            "kind", kn, "method", mn, MW_END);
                else
                    mw_emit(snap, d, x->j[k][kind][m], l1, v1, "component", c, "kind", kn, "method",
                            mn, MW_END);
            }
}

static void emit_floors(const mw_energy *e, mw_snapshot *snap)
{
    const mw_energy_interval *l = &e->last;
    if (!l->valid) return;
    for (int k = 0; k < MW_EC_N; k++) {
        if (k == MW_EC_GPU || l->component[k][0] + l->component[k][1] <= 0) continue;
        mw_emit(snap, &IDLE_FLOOR, l->floor_watts[k], "component", mw_energy_component_names[k],
                "source", mw_energy_floor_source_names[l->floor_source[k]], MW_END);
    }
    for (size_t i = 0; i < e->ngpus; i++)
        mw_emit(snap, &IDLE_FLOOR, e->gpus[i].floor_w, "component", "gpu", "gpu", e->gpus[i].index,
                "source", mw_energy_floor_source_names[e->gpus[i].floor_source], MW_END);
}

static void emit(mw_energy *e, mw_snapshot *snap, int have_intensity)
{
    for (size_t i = 0; i < NBUCKETS; i++)
        for (const node *n = e->nodes.b[i]; n; n = n->next) {
            const char *a = n->key, *b = strchr(a, SEP), *c = b ? strchr(b + 1, SEP) : NULL;
            if (!c) continue;
            char source[64], zone[256];
            snprintf(source, sizeof(source), "%.*s", (int)(b - a), a);
            snprintf(zone, sizeof(zone), "%.*s", (int)(c - b - 1), b + 1);
            mw_emit(snap, &NODE_ENERGY, n->v, "source", source, "zone", zone, "method", c + 1,
                    MW_END);
        }
    for (size_t i = 0; i < NBUCKETS; i++)
        for (const node *n = e->ents.b[i]; n; n = n->next) {
            const ent *x = n->ent;
            emit_joules(e, snap, &CONTAINER_ENERGY, "namespace", x->ns, "pod", x->pod, "container",
                        x->ctr, x);
            if (have_intensity || x->co2 > 0)
                mw_emit(snap, &CONTAINER_CO2, x->co2, "namespace", x->ns, "pod", x->pod,
                        "container", x->ctr, MW_END);
        }
    for (int sh = 0; sh < MW_ES_N; sh++) {
        emit_joules(e, snap, &SHARE_ENERGY, "share", mw_energy_share_names[sh], NULL, NULL, NULL,
                    NULL, &e->shares[sh]);
        if (have_intensity || e->shares[sh].co2 > 0)
            mw_emit(snap, &SHARE_CO2, e->shares[sh].co2, "share", mw_energy_share_names[sh],
                    MW_END);
    }
    for (int k = 0; k < MW_EC_N; k++)
        for (int kind = 0; kind < MW_EK_N; kind++)
            for (int m = 0; m < MW_EM_N; m++)
                if (e->comp_total[k][kind][m] > 0 ||
                    (k == MW_EC_CPU && kind == MW_EK_DYNAMIC && m == e->cpu_method))
                    mw_emit(snap, &COMPONENT_ENERGY, e->comp_total[k][kind][m], "component",
                            mw_energy_component_names[k], "kind", mw_energy_kind_names[kind],
                            "method", mw_energy_method_names[m], MW_END);
    if (have_intensity || e->node_co2 > 0) mw_emit(snap, &NODE_CO2, e->node_co2, MW_END);
    emit_floors(e, snap);
    mw_emit(snap, &VIOLATIONS, (double)e->violations, MW_END);
    mw_emit(snap, &BELOW_PARTS, (double)e->below_parts, MW_END);
    mw_emit(snap, &INTERVALS, (double)e->intervals, MW_END);
}

/* Add j joules of component k, kind, method to x (its CO2 too). */
typedef struct adder {
    double intensity, sum;
    const int *method; /* per component */
} adder;

static void add(adder *ad, ent *x, int k, int kind, double j)
{
    if (!(j > 0)) return; /* rounding may leave -1e-12; a counter never goes down */
    x->j[k][kind][ad->method[k]] += j;
    if (ad->intensity >= 0) x->co2 += j * ad->intensity / 3.6e6;
    ad->sum += j;
}

/* Idle floors of cpu, dram and other; fills idle[] and the interval's
 * floor figures. */
static void idle_parts(mw_energy *e, const interval *iv, int estimated, double idle[MW_EC_N])
{
    int idle_like = iv->total > 0 && iv->busy / iv->total <= e->p.idle_util_max;
    mw_energy_interval *l = &e->last;
    for (int k = 0; k < MW_EC_N; k++) {
        if (k == MW_EC_GPU || !(iv->comp[k] > 0)) continue;
        /* Priors: the CPU's is the estimation model's idle watts per CPU
         * (Cloud Carbon Footprint, docs/energy.md); DRAM's and other's 0 W
         * (all dynamic, following use, until an idle interval is seen). */
        double prior = k == MW_EC_CPU ? iv->ncpu * e->p.idle_watts_per_cpu : 0;
        if (k == MW_EC_CPU && estimated) {
            /* The model's own idle part; a configured floor overrides it. */
            double cw = configured(e, k);
            l->floor_watts[k] = cw >= 0 ? cw : prior;
            l->floor_source[k] = cw >= 0 ? MW_EF_CONFIGURED : MW_EF_PRIOR;
            idle[k] = l->floor_watts[k] * iv->dt;
            if (idle[k] > iv->comp[k]) idle[k] = iv->comp[k];
            continue;
        }
        idle[k] = floor_idle(e, &e->floor[k], configured(e, k), prior, iv->comp[k], iv->dt,
                             idle_like, &l->floor_watts[k], &l->floor_source[k]);
    }
    for (size_t i = 0; i < e->ngpus; i++) {
        idle[MW_EC_GPU] += e->gpus[i].idle;
        l->floor_watts[MW_EC_GPU] += e->gpus[i].floor_w;
        if (i == 0) l->floor_source[MW_EC_GPU] = e->gpus[i].floor_source;
    }
}

void mw_energy_step(mw_energy *e, mw_snapshot *snap, double intensity)
{
    e->cycle++;
    interval iv;
    memset(&iv, 0, sizeof(iv));
    int first = !e->have_ts || snap->timestamp_ms <= e->last_ts;
    iv.dt = first ? 0 : (double)(snap->timestamp_ms - e->last_ts) / 1000.0;
    e->last_ts = snap->timestamp_ms;
    e->have_ts = 1;
    memset(&e->last, 0, sizeof(e->last));
    if (e->restored) { /* restored totals count as seen now */
        for (size_t i = 0; i < NBUCKETS; i++)
            for (node *n = e->ents.b[i]; n; n = n->next)
                if (!n->ent->last_ms) n->ent->last_ms = snap->timestamp_ms;
        e->restored = 0;
    }

    read_cpu(e, snap, &iv);
    read_rapl(e, snap, &iv);
    read_gpus(e, snap, &iv);
    read_node(e, snap, &iv);
    read_containers(e, snap, &iv);
    mw_energy_tsweep(&e->counters, keep_seen, &e->cycle);
    if (first) {
        mw_energy_tsweep(&e->ents, keep_ent, e);
        emit(e, snap, intensity >= 0);
        return;
    }

    /* Components and their idle parts. */
    double idle[MW_EC_N] = {0};
    int estimated = 0;
    if (!iv.have_rapl_pkg && iv.ncpu > 0 && iv.total > 0) {
        /* No measurement: the linear per-CPU model, labelled estimated. */
        double util = iv.busy / iv.total;
        if (util > 1) util = 1;
        iv.comp[MW_EC_CPU] =
            iv.ncpu * e->p.idle_watts_per_cpu * iv.dt +
            iv.ncpu * (e->p.max_watts_per_cpu - e->p.idle_watts_per_cpu) * util * iv.dt;
        mw_energy_node_add(e, "model", "cpu", "estimated", iv.comp[MW_EC_CPU]);
        estimated = 1;
    }
    double parts = iv.comp[MW_EC_CPU] + iv.comp[MW_EC_DRAM] + iv.comp[MW_EC_GPU];
    double whole = parts;
    if (iv.have_node) {
        if (iv.node_j >= parts) {
            iv.comp[MW_EC_OTHER] = iv.node_j - parts;
            whole = iv.node_j;
        } else {
            e->below_parts++;
        }
    }
    idle_parts(e, &iv, estimated, idle);
    int method[MW_EC_N] = {MW_EM_MEASURED, MW_EM_MEASURED, MW_EM_MEASURED, MW_EM_MEASURED};
    /* Without RAPL the CPU's energy is the model's, even in an interval
     * where the model had no CPU time to go on. */
    if (estimated || !iv.have_rapl_pkg) method[MW_EC_CPU] = MW_EM_ESTIMATED;
    e->cpu_method = method[MW_EC_CPU];

    /* CPU-time shares; requests weights. A container's CPU time is its
     * cgroup's difference plus what it was owed from the previous interval;
     * when the containers together ran ahead of the node's busy time, each
     * is paid the node's part and owed the rest. */
    double sum_cpu = 0, sum_w = 0;
    for (size_t i = 0; i < NBUCKETS; i++)
        for (const node *n = e->ents.b[i]; n; n = n->next) {
            ent *x = n->ent;
            if (x->cycle != e->cycle) continue;
            double raw = x->cpu_d;
            if (x->owed_cycle + 1 == e->cycle) x->cpu_d += x->owed;
            x->owed = raw; /* the most it can be owed next: a read skew is less than an interval */
            sum_cpu += x->cpu_d;
            sum_w += x->weight;
        }
    double denom = iv.busy > sum_cpu ? iv.busy : sum_cpu;
    for (size_t i = 0; i < NBUCKETS; i++)
        for (const node *n = e->ents.b[i]; n; n = n->next) {
            ent *x = n->ent;
            if (x->cycle != e->cycle) continue;
            double unpaid =
                sum_cpu > iv.busy ? x->cpu_d * (1 - (iv.busy > 0 ? iv.busy : 0) / sum_cpu) : 0;
            x->owed = unpaid < x->owed ? unpaid : x->owed;
            x->owed_cycle = e->cycle;
        }
    attribute_gpus(e, snap);

    /* Idle energy by reservation: the requests policy with requests gives
     * each Kubernetes container its CPU request over the node's CPUs (1024
     * shares per CPU), the rest unreserved; with none (or policy cpu), by
     * CPU time, processes outside any container being the system share. */
    int by_requests = e->p.idle_policy == MW_IDLE_POLICY_REQUESTS && sum_w > 0;
    int by_cpu = e->p.idle_policy == MW_IDLE_POLICY_CPU ||
                 (e->p.idle_policy == MW_IDLE_POLICY_REQUESTS && !(sum_w > 0));
    double capacity = iv.ncpu * 1024.0 > sum_w ? iv.ncpu * 1024.0 : sum_w;
    double system_frac = denom > 0 ? (denom - sum_cpu) / denom : 0;

    adder ad = {.intensity = intensity, .method = method};
    double attributed[MW_EC_N][MW_EK_N] = {{0}};
    for (size_t i = 0; i < NBUCKETS; i++)
        for (const node *n = e->ents.b[i]; n; n = n->next) {
            ent *x = n->ent;
            if (x->cycle != e->cycle) continue;
            double share = denom > 0 ? x->cpu_d / denom : 0;
            double ishare = by_requests ? x->weight / capacity : by_cpu ? share : 0;
            for (int k = 0; k < MW_EC_N; k++) {
                double dyn, idl;
                if (k == MW_EC_GPU) {
                    dyn = x->gpu[MW_EK_DYNAMIC];
                    idl = x->gpu[MW_EK_IDLE];
                } else {
                    dyn = (iv.comp[k] - idle[k]) * share;
                    idl = idle[k] * ishare;
                }
                double before = ad.sum;
                add(&ad, x, k, MW_EK_DYNAMIC, dyn);
                attributed[k][MW_EK_DYNAMIC] += ad.sum - before;
                before = ad.sum;
                add(&ad, x, k, MW_EK_IDLE, idl);
                attributed[k][MW_EK_IDLE] += ad.sum - before;
            }
        }
    e->last.workloads_joules = ad.sum;
    /* The shares: dynamic energy no container used is the system's; idle
     * energy is the system's by its CPU time under the CPU-time rule, and
     * what is left of it (all of it under policy none) is unreserved. */
    ent *unres = &e->shares[MW_ES_UNRESERVED], *sys = &e->shares[MW_ES_SYSTEM];
    for (int k = 0; k < MW_EC_N; k++) {
        double kinds[MW_EK_N] = {iv.comp[k] - idle[k], idle[k]};
        double dyn_rest = kinds[MW_EK_DYNAMIC] - attributed[k][MW_EK_DYNAMIC];
        double idle_rest = kinds[MW_EK_IDLE] - attributed[k][MW_EK_IDLE];
        double sys_idle = by_cpu && k != MW_EC_GPU ? idle[k] * system_frac : 0;
        if (sys_idle > idle_rest) sys_idle = idle_rest;
        double before = ad.sum;
        add(&ad, sys, k, MW_EK_DYNAMIC, dyn_rest);
        e->last.share[MW_ES_SYSTEM][k][MW_EK_DYNAMIC] = ad.sum - before;
        before = ad.sum;
        add(&ad, sys, k, MW_EK_IDLE, sys_idle);
        e->last.share[MW_ES_SYSTEM][k][MW_EK_IDLE] = ad.sum - before;
        before = ad.sum;
        add(&ad, unres, k, MW_EK_IDLE, idle_rest - sys_idle);
        e->last.share[MW_ES_UNRESERVED][k][MW_EK_IDLE] = ad.sum - before;
        for (int kind = 0; kind < MW_EK_N; kind++) {
            e->last.component[k][kind] = kinds[kind];
            if (kinds[kind] > 0) e->comp_total[k][kind][method[k]] += kinds[kind];
        }
    }
    if (intensity >= 0) e->node_co2 += whole * intensity / 3.6e6;
    if (fabs(ad.sum - whole) > 0.001 * whole + 1e-9) e->violations++;
    e->intervals++;
    e->last.seconds = iv.dt;
    e->last.node_joules = whole;
    e->last.parts_joules = ad.sum;
    e->last.estimated_cpu = estimated;
    e->last.valid = 1;
    mw_energy_tsweep(&e->ents, keep_ent, e);
    emit(e, snap, intensity >= 0);
}
