/* energy.c - node energy per interval and its attribution to containers; see
 * energy.h and docs/energy.md for the model. */
#include "energy.h"
#include "../core/hash.h"
#include "../core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 4096
#define MAX_COUNTERS 200000 /* previous values kept; beyond it new series get no delta */
#define MAX_NODE_SERIES 256
#define MAX_GPUS 64
#define ENTITY_EXPIRY_MS 600000 /* a container gone this long stops being exported */
#define SEP '\x1f'

const char *const mw_energy_component_names[MW_EC_N] = {"cpu", "dram", "gpu", "other"};
const char *const mw_energy_kind_names[MW_EK_N] = {"dynamic", "idle"};

static const mw_metric_desc NODE_ENERGY = {
    "mlwatch_node_energy_joules_total",
    "Energy of one power source of the node since the agent first saw it (kept across restarts); "
    "method is measured or estimated. Zones overlap (package includes core): do not sum them.",
    "joules", MW_COUNTER};
static const mw_metric_desc CONTAINER_ENERGY = {
    "mlwatch_container_energy_joules_total",
    "Energy attributed to the container by component (cpu, dram, gpu, other) and kind (dynamic, "
    "idle); empty namespace, pod and container hold the unattributed remainder, so all samples "
    "add up to the node's energy.",
    "joules", MW_COUNTER};
static const mw_metric_desc CONTAINER_CO2 = {
    "mlwatch_container_co2_grams_total",
    "CO2-equivalent of the container's energy: each interval's energy times that interval's "
    "carbon intensity.",
    "grams", MW_COUNTER};
static const mw_metric_desc VIOLATIONS = {
    "mlwatch_energy_conservation_violations_total",
    "Intervals whose attributed parts did not add up to the node energy within 0.1%.", "",
    MW_COUNTER};
static const mw_metric_desc BELOW_PARTS = {
    "mlwatch_energy_node_below_parts_total",
    "Intervals where the node power meter read less than RAPL and GPUs together; the parts were "
    "kept and component other was 0.",
    "", MW_COUNTER};
static const mw_metric_desc INTERVALS = {"mlwatch_energy_intervals_total",
                                         "Intervals whose energy was attributed.", "", MW_COUNTER};

/* --- string-keyed table --------------------------------------------------- */

typedef struct ent {
    char *ns, *pod, *ctr;
    double j[MW_EC_N][MW_EK_N];
    double co2;
    int64_t last_ms;
    /* scratch of the current interval */
    uint64_t cycle;
    double cpu_d, weight, gpu[MW_EK_N];
    /* CPU seconds its cgroup counted before the node's /proc/stat did (the
     * files are read moments apart), not paid in interval owed_cycle: the
     * node counts them, and their energy, in the next interval. */
    double owed;
    uint64_t owed_cycle;
} ent;

typedef struct node {
    struct node *next;
    char *key;
    uint64_t seen;
    double v;
    ent *ent; /* entity table only */
} node;

typedef struct table {
    node *b[NBUCKETS];
    size_t n, cap;
} table;

static uint64_t hash(const char *s)
{
    return mw_fnv1a64_str(MW_FNV1A64_SEED, s);
}

static node *tfind(table *t, const char *key, int create)
{
    size_t i = hash(key) & (NBUCKETS - 1);
    for (node *n = t->b[i]; n; n = n->next)
        if (strcmp(n->key, key) == 0) return n;
    if (!create || t->n >= t->cap) return NULL;
    node *n = mw_xcalloc(1, sizeof(*n));
    n->key = mw_xstrdup(key);
    n->next = t->b[i];
    t->b[i] = n;
    t->n++;
    return n;
}

static void free_ent(ent *x)
{
    if (!x) return;
    free(x->ns);
    free(x->pod);
    free(x->ctr);
    free(x);
}

/* Drop nodes for which keep() says no. */
static void tsweep(table *t, int (*keep)(const node *, const void *), const void *arg)
{
    for (size_t i = 0; i < NBUCKETS; i++)
        for (node **p = &t->b[i]; *p;) {
            node *n = *p;
            if (keep(n, arg)) {
                p = &n->next;
                continue;
            }
            *p = n->next;
            free_ent(n->ent);
            free(n->key);
            free(n);
            t->n--;
        }
}

static int keep_none(const node *n, const void *arg)
{
    (void)n;
    (void)arg;
    return 0;
}

static void tfree(table *t)
{
    tsweep(t, keep_none, NULL);
}

/* --- the model's state ----------------------------------------------------- */

typedef struct gpu_part {
    char index[16];
    double j, idle;
} gpu_part;

struct mw_energy {
    mw_energy_params p;
    table counters; /* previous counter values and power floors */
    table ents;     /* containers */
    table nodes;    /* node source totals, key source SEP zone SEP method */
    ent *unattr;
    uint64_t cycle, violations, below_parts, intervals;
    int64_t last_ts;
    int have_ts, restored;
    double floor_w[MW_EC_N]; /* lowest power seen per component (idle estimate) */
    int have_floor[MW_EC_N];
    double last_node_w; /* previous node meter reading, for the trapezoid */
    int have_node_w;
    mw_energy_interval last;
    gpu_part gpus[MAX_GPUS];
    size_t ngpus;
};

static int keep_seen(const node *n, const void *arg)
{
    return arg && n->seen == *(const uint64_t *)arg;
}

mw_energy *mw_energy_new(const mw_energy_params *p)
{
    mw_energy *e = mw_xcalloc(1, sizeof(*e));
    e->p = *p;
    if (!e->p.max_containers) e->p.max_containers = 10000;
    e->counters.cap = MAX_COUNTERS;
    e->ents.cap = e->p.max_containers + 1;
    e->nodes.cap = MAX_NODE_SERIES;
    node *u = tfind(&e->ents, "\x1f\x1f", 1);
    u->ent = mw_xcalloc(1, sizeof(ent));
    u->ent->ns = mw_xstrdup("");
    u->ent->pod = mw_xstrdup("");
    u->ent->ctr = mw_xstrdup("");
    e->unattr = u->ent;
    return e;
}

void mw_energy_free(mw_energy *e)
{
    if (!e) return;
    tfree(&e->counters);
    tfree(&e->ents);
    tfree(&e->nodes);
    free(e);
}

const mw_energy_interval *mw_energy_last(const mw_energy *e)
{
    return &e->last;
}

uint64_t mw_energy_violations(const mw_energy *e)
{
    return e->violations;
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
    node *n = tfind(&e->counters, key, 1);
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

static void node_add(mw_energy *e, const char *source, const char *zone, const char *method,
                     double j)
{
    char key[512];
    snprintf(key, sizeof(key), "%s%c%s%c%s", source, SEP, zone, SEP, method);
    node *n = tfind(&e->nodes, key, 1);
    if (n) n->v += j;
}

static ent *entity(mw_energy *e, const char *ns, const char *pod, const char *ctr, int create)
{
    char key[1024];
    snprintf(key, sizeof(key), "%s%c%s%c%s", ns, SEP, pod, SEP, ctr);
    node *n = tfind(&e->ents, key, create);
    if (!n) return NULL;
    if (!n->ent) {
        n->ent = mw_xcalloc(1, sizeof(ent));
        n->ent->ns = mw_xstrdup(ns);
        n->ent->pod = mw_xstrdup(pod);
        n->ent->ctr = mw_xstrdup(ctr);
    }
    ent *x = n->ent;
    if (x->cycle != e->cycle) {
        x->cycle = e->cycle;
        x->cpu_d = x->weight = 0;
        x->gpu[0] = x->gpu[1] = 0;
    }
    return x;
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
    return entity(e, ns, pod, ctr, 1);
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

/* Idle part of energy j over dt: the lowest power seen so far (this interval
 * included) times dt; the floor is kept in *floor. */
static double idle_part(double j, double dt, double *floor, int *have)
{
    double w = j / dt;
    if (!*have || w < *floor) *floor = w;
    *have = 1;
    double idle = *floor * dt;
    return idle < j ? idle : j;
}

static double gpu_floor(mw_energy *e, const char *uuid, double j, double dt)
{
    char key[160];
    snprintf(key, sizeof(key), "gpufloor%c%s", SEP, uuid);
    node *n = tfind(&e->counters, key, 1);
    if (!n) return 0;
    int have = n->seen != 0;
    n->seen = e->cycle;
    return idle_part(j, dt, &n->v, &have);
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
        node_add(e, "rapl", zone, "measured", d);
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

static void read_gpus(mw_energy *e, const mw_snapshot *snap, interval *iv)
{
    char key[256];
    e->ngpus = 0;
    FOR_SAMPLES(snap, "mlwatch_gpu_energy_joules_total", s)
    {
        const char *index = label_or(s, "gpu"), *uuid = label_or(s, "uuid");
        snprintf(key, sizeof(key), "gpu%c%s", SEP, uuid);
        double d, w;
        int rc = counter_delta(e, key, s->value, &d);
        if (rc < 0) /* counter reset: the power reading is the best estimate */
            d = mw_snapshot_get(snap, "mlwatch_gpu_power_watts", &w, "uuid", uuid, MW_END) == 0
                    ? w * iv->dt
                    : 0;
        gpu_part *g = gpu_of(e, index);
        if (!g) continue;
        g->j += d;
        g->idle += iv->dt > 0 && d > 0 ? gpu_floor(e, uuid, d, iv->dt) : 0;
        node_add(e, "gpu", index, "measured", d);
    }
    /* GPUs without an energy counter: power times the interval. */
    FOR_SAMPLES(snap, "mlwatch_gpu_power_watts", s)
    {
        const char *index = label_or(s, "gpu"), *uuid = label_or(s, "uuid");
        double dummy;
        if (mw_snapshot_get(snap, "mlwatch_gpu_energy_joules_total", &dummy, "uuid", uuid,
                            MW_END) == 0)
            continue;
        gpu_part *g = gpu_of(e, index);
        if (!g) continue;
        double d = s->value * iv->dt;
        g->j += d;
        g->idle += iv->dt > 0 && d > 0 ? gpu_floor(e, uuid, d, iv->dt) : 0;
        node_add(e, "gpu", index, "measured", d);
    }
    for (size_t i = 0; i < e->ngpus; i++)
        iv->comp[MW_EC_GPU] += e->gpus[i].j;
}

/* Node-level meters: IPMI DCMI first, then an ACPI power meter (hwmon chip
 * "power_meter"). Other hwmon power sensors are exported, not used: what
 * they measure (a GPU, a VRM, a PSU rail) is not known. */
static void read_node(mw_energy *e, const mw_snapshot *snap, interval *iv)
{
    double w = 0;
    int have = 0;
    const char *src = NULL;
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
        node_add(e, "hwmon", zone, "measured", s->value * iv->dt);
        if (!src && strcmp(chip, "power_meter") == 0) {
            w += s->value;
            have = 1;
        }
    }
    if (!src && have) src = "hwmon";
    if (!have) {
        e->have_node_w = 0;
        return;
    }
    /* Trapezoid between the previous and this reading. */
    double avg = e->have_node_w ? (e->last_node_w + w) / 2 : w;
    e->last_node_w = w;
    e->have_node_w = 1;
    iv->have_node = 1;
    iv->node_j = avg * iv->dt;
    if (strcmp(src, "ipmi") == 0) node_add(e, "ipmi", "node", "measured", iv->node_j);
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
    if (e->p.idle_policy != MW_IDLE_REQUESTS || !e->p.cpu_weight) return;
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
            /* MIG: each instance owns its slice of the GPU (its share of the
             * memory slices); inside it, containers by memory used. */
            FOR_SAMPLES(snap, "mlwatch_mig_memory_total_bytes", m)
            {
                if (strcmp(label_or(m, "gpu"), g->index) != 0) continue;
                const char *gi = label_or(m, "gpu_instance"), *ci = label_or(m, "compute_instance");
                double w = gpu_weights(e, snap, "mlwatch_container_mig_memory_used_bytes", g->index,
                                       gi, ci, 0, g, 0, 0);
                if (w > 0)
                    gpu_weights(e, snap, "mlwatch_container_mig_memory_used_bytes", g->index, gi,
                                ci, m->value / memtotal, g, 1, w);
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
        if (w > 0) gpu_weights(e, snap, fam, g->index, NULL, NULL, 1, g, 1, w);
    }
}

static int keep_ent(const node *n, const void *arg)
{
    const mw_energy *e = arg;
    const ent *x = n->ent;
    return x == e->unattr || e->last_ts - x->last_ms <= ENTITY_EXPIRY_MS;
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
            for (int k = 0; k < MW_EC_N; k++)
                for (int kind = 0; kind < MW_EK_N; kind++) {
                    if (x->j[k][kind] <= 0 && !(k == MW_EC_CPU && kind == MW_EK_DYNAMIC)) continue;
                    mw_emit(snap, &CONTAINER_ENERGY, x->j[k][kind], "namespace", x->ns, "pod",
                            x->pod, "container", x->ctr, "component", mw_energy_component_names[k],
                            "kind", mw_energy_kind_names[kind], MW_END);
                }
            if (have_intensity || x->co2 > 0)
                mw_emit(snap, &CONTAINER_CO2, x->co2, "namespace", x->ns, "pod", x->pod,
                        "container", x->ctr, MW_END);
        }
    mw_emit(snap, &VIOLATIONS, (double)e->violations, MW_END);
    mw_emit(snap, &BELOW_PARTS, (double)e->below_parts, MW_END);
    mw_emit(snap, &INTERVALS, (double)e->intervals, MW_END);
}

static void add(ent *x, int k, int kind, double j, double intensity, double *sum)
{
    x->j[k][kind] += j;
    if (intensity >= 0) x->co2 += j * intensity / 3.6e6;
    *sum += j;
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
    e->unattr->last_ms = snap->timestamp_ms;
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
    tsweep(&e->counters, keep_seen, &e->cycle);
    if (first) {
        for (int k = 0; k < MW_EC_N; k++)
            e->have_floor[k] = 0;
        tsweep(&e->ents, keep_ent, e);
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
        idle[MW_EC_CPU] = iv.ncpu * e->p.idle_watts_per_cpu * iv.dt;
        iv.comp[MW_EC_CPU] =
            idle[MW_EC_CPU] +
            iv.ncpu * (e->p.max_watts_per_cpu - e->p.idle_watts_per_cpu) * util * iv.dt;
        node_add(e, "model", "cpu", "estimated", iv.comp[MW_EC_CPU]);
        estimated = 1;
    } else if (iv.comp[MW_EC_CPU] > 0) {
        idle[MW_EC_CPU] =
            idle_part(iv.comp[MW_EC_CPU], iv.dt, &e->floor_w[MW_EC_CPU], &e->have_floor[MW_EC_CPU]);
    }
    if (iv.comp[MW_EC_DRAM] > 0)
        idle[MW_EC_DRAM] = idle_part(iv.comp[MW_EC_DRAM], iv.dt, &e->floor_w[MW_EC_DRAM],
                                     &e->have_floor[MW_EC_DRAM]);
    for (size_t i = 0; i < e->ngpus; i++)
        idle[MW_EC_GPU] += e->gpus[i].idle;
    double parts = iv.comp[MW_EC_CPU] + iv.comp[MW_EC_DRAM] + iv.comp[MW_EC_GPU];
    double whole = parts;
    if (iv.have_node) {
        if (iv.node_j >= parts) {
            iv.comp[MW_EC_OTHER] = iv.node_j - parts;
            whole = iv.node_j;
            if (iv.comp[MW_EC_OTHER] > 0)
                idle[MW_EC_OTHER] = idle_part(iv.comp[MW_EC_OTHER], iv.dt, &e->floor_w[MW_EC_OTHER],
                                              &e->have_floor[MW_EC_OTHER]);
        } else {
            e->below_parts++;
        }
    }

    /* CPU-time shares; requests weights. A container's CPU time is its
     * cgroup's difference plus what it was owed from the previous interval;
     * when the containers together ran ahead of the node's busy time, each
     * is paid the node's part and owed the rest. */
    double sum_cpu = 0, sum_w = 0;
    for (size_t i = 0; i < NBUCKETS; i++)
        for (const node *n = e->ents.b[i]; n; n = n->next) {
            ent *x = n->ent;
            if (x->cycle != e->cycle || x == e->unattr) continue;
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
            if (x->cycle != e->cycle || x == e->unattr) continue;
            double unpaid =
                sum_cpu > iv.busy ? x->cpu_d * (1 - (iv.busy > 0 ? iv.busy : 0) / sum_cpu) : 0;
            x->owed = unpaid < x->owed ? unpaid : x->owed;
            x->owed_cycle = e->cycle;
        }
    attribute_gpus(e, snap);

    double attributed[MW_EC_N][MW_EK_N] = {{0}};
    double sum_parts = 0;
    for (size_t i = 0; i < NBUCKETS; i++)
        for (const node *n = e->ents.b[i]; n; n = n->next) {
            ent *x = n->ent;
            if (x->cycle != e->cycle || x == e->unattr) continue;
            double share = denom > 0 ? x->cpu_d / denom : 0;
            double ishare = e->p.idle_policy == MW_IDLE_CPU                     ? share
                            : e->p.idle_policy == MW_IDLE_REQUESTS && sum_w > 0 ? x->weight / sum_w
                                                                                : 0;
            for (int k = 0; k < MW_EC_N; k++) {
                double dyn, idl;
                if (k == MW_EC_GPU) {
                    dyn = x->gpu[MW_EK_DYNAMIC];
                    idl = x->gpu[MW_EK_IDLE];
                } else {
                    dyn = (iv.comp[k] - idle[k]) * share;
                    idl = idle[k] * ishare;
                }
                if (dyn > 0) add(x, k, MW_EK_DYNAMIC, dyn, intensity, &sum_parts);
                if (idl > 0) add(x, k, MW_EK_IDLE, idl, intensity, &sum_parts);
                attributed[k][MW_EK_DYNAMIC] += dyn > 0 ? dyn : 0;
                attributed[k][MW_EK_IDLE] += idl > 0 ? idl : 0;
            }
        }
    for (int k = 0; k < MW_EC_N; k++) {
        double kinds[MW_EK_N] = {iv.comp[k] - idle[k], idle[k]};
        for (int kind = 0; kind < MW_EK_N; kind++) {
            double rest = kinds[kind] - attributed[k][kind];
            /* Rounding may leave -1e-12; a counter never goes down. */
            if (rest > 0) add(e->unattr, k, kind, rest, intensity, &sum_parts);
            e->last.component[k][kind] = kinds[kind];
        }
    }
    if (fabs(sum_parts - whole) > 0.001 * whole + 1e-9) e->violations++;
    e->intervals++;
    e->last.seconds = iv.dt;
    e->last.node_joules = whole;
    e->last.parts_joules = sum_parts;
    e->last.estimated_cpu = estimated;
    e->last.valid = 1;
    tsweep(&e->ents, keep_ent, e);
    emit(e, snap, intensity >= 0);
}

/* --- totals in and out ------------------------------------------------------ */

int mw_energy_container(const mw_energy *e, const char *ns, const char *pod, const char *container,
                        double joules[MW_EC_N][MW_EK_N], double *co2_grams)
{
    char key[1024];
    snprintf(key, sizeof(key), "%s%c%s%c%s", ns, SEP, pod, SEP, container);
    node *n = tfind((table *)&e->ents, key, 0);
    if (!n || !n->ent) return -1;
    memcpy(joules, n->ent->j, sizeof(n->ent->j));
    if (co2_grams) *co2_grams = n->ent->co2;
    return 0;
}

void mw_energy_visit(const mw_energy *e, mw_energy_visit_fn fn, void *ctx)
{
    for (size_t i = 0; i < NBUCKETS; i++)
        for (const node *n = e->ents.b[i]; n; n = n->next) {
            double v[MW_EC_N * MW_EK_N + 1];
            memcpy(v, n->ent->j, sizeof(n->ent->j));
            v[MW_EC_N * MW_EK_N] = n->ent->co2;
            fn(ctx, 'c', n->ent->ns, n->ent->pod, n->ent->ctr, v, MW_ARRAY_LEN(v));
        }
    for (size_t i = 0; i < NBUCKETS; i++)
        for (const node *n = e->nodes.b[i]; n; n = n->next) {
            char a[512];
            mw_strlcpy(a, n->key, sizeof(a));
            char *b = strchr(a, SEP), *c = b ? strchr(b + 1, SEP) : NULL;
            if (!c) continue;
            *b = *c = '\0';
            fn(ctx, 'n', a, b + 1, c + 1, &n->v, 1);
        }
}

void mw_energy_restore_container(mw_energy *e, const char *ns, const char *pod,
                                 const char *container, const double joules[MW_EC_N][MW_EK_N],
                                 double co2_grams)
{
    ent *x = entity(e, ns, pod, container, 1);
    if (!x) return;
    memcpy(x->j, joules, sizeof(x->j));
    x->co2 = co2_grams;
    x->last_ms = 0;
    e->restored = 1;
}

void mw_energy_restore_node(mw_energy *e, const char *source, const char *zone, const char *method,
                            double joules)
{
    node_add(e, source, zone, method, joules);
}
