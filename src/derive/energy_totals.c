/* energy_totals.c - the energy model's tables and its totals in and out:
 * names, parameters, creation, the containers' and shares' running totals,
 * what the state file saves and restores (energy_state.c). See energy.h. */
#include "../core/hash.h"
#include "../core/util.h"
#include "energy.h"
#include "energy_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const mw_energy_component_names[MW_EC_N] = {"cpu", "dram", "gpu", "other"};
const char *const mw_energy_kind_names[MW_EK_N] = {"dynamic", "idle"};
const char *const mw_energy_method_names[MW_EM_N] = {"measured", "estimated"};
const char *const mw_energy_share_names[MW_ES_N] = {"unreserved", "system"};
const char *const mw_energy_floor_source_names[MW_EF_N] = {"prior", "learnt", "configured"};

int mw_energy_name_index(const char *const *names, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) return i;
    return -1;
}

void mw_energy_params_init(mw_energy_params *p, mw_idle_policy policy)
{
    memset(p, 0, sizeof(*p));
    p->idle_watts_per_cpu = MW_ENERGY_IDLE_WATTS_PER_CPU;
    p->max_watts_per_cpu = MW_ENERGY_MAX_WATTS_PER_CPU;
    p->idle_policy = policy;
    p->floor_tau_s = MW_ENERGY_FLOOR_TAU_S;
    p->idle_util_max = MW_ENERGY_IDLE_UTIL;
}

/* --- tables ---------------------------------------------------------------- */

static uint64_t hash(const char *s)
{
    return mw_fnv1a64_str(MW_FNV1A64_SEED, s);
}

node *mw_energy_tfind(table *t, const char *key, int create)
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

void mw_energy_tsweep(table *t, int (*keep)(const node *, const void *), const void *arg)
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

void mw_energy_tfree(table *t)
{
    mw_energy_tsweep(t, keep_none, NULL);
}

void mw_energy_node_add(mw_energy *e, const char *source, const char *zone, const char *method,
                        double j)
{
    char key[512];
    snprintf(key, sizeof(key), "%s%c%s%c%s", source, SEP, zone, SEP, method);
    node *n = mw_energy_tfind(&e->nodes, key, 1);
    if (n) n->v += j;
}

ent *mw_energy_entity(mw_energy *e, const char *ns, const char *pod, const char *ctr, int create)
{
    char key[1024];
    snprintf(key, sizeof(key), "%s%c%s%c%s", ns, SEP, pod, SEP, ctr);
    node *n = mw_energy_tfind(&e->ents, key, create);
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

idle_floor *mw_energy_gpu_floor(mw_energy *e, const char *uuid)
{
    for (size_t i = 0; i < e->ngpu_floors; i++)
        if (strcmp(e->gpu_floors[i].uuid, uuid) == 0) return &e->gpu_floors[i].f;
    if (e->ngpu_floors >= MAX_GPUS) return NULL;
    gpu_floor_slot *g = &e->gpu_floors[e->ngpu_floors++];
    memset(g, 0, sizeof(*g));
    mw_strlcpy(g->uuid, uuid, sizeof(g->uuid));
    return &g->f;
}

/* --- the model ------------------------------------------------------------- */

mw_energy *mw_energy_new(const mw_energy_params *p)
{
    mw_energy *e = mw_xcalloc(1, sizeof(*e));
    e->p = *p;
    /* Unknown until the first interval says how the CPU's energy is had:
     * no zero series may claim "measured" on a machine that measures nothing. */
    e->cpu_method = -1;
    if (!e->p.max_containers) e->p.max_containers = 10000;
    e->counters.cap = MAX_COUNTERS;
    e->ents.cap = e->p.max_containers + 1;
    e->nodes.cap = MAX_NODE_SERIES;
    if (!(e->p.floor_tau_s > 0)) e->p.floor_tau_s = MW_ENERGY_FLOOR_TAU_S;
    if (!(e->p.idle_util_max >= 0)) e->p.idle_util_max = MW_ENERGY_IDLE_UTIL;
    return e;
}

void mw_energy_free(mw_energy *e)
{
    if (!e) return;
    mw_energy_tfree(&e->counters);
    mw_energy_tfree(&e->ents);
    mw_energy_tfree(&e->nodes);
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

/* --- totals in and out ------------------------------------------------------ */

static void sum_methods(const ent *x, double joules[MW_EC_N][MW_EK_N])
{
    for (int k = 0; k < MW_EC_N; k++)
        for (int kind = 0; kind < MW_EK_N; kind++) {
            joules[k][kind] = 0;
            for (int m = 0; m < MW_EM_N; m++)
                joules[k][kind] += x->j[k][kind][m];
        }
}

int mw_energy_container(const mw_energy *e, const char *ns, const char *pod, const char *container,
                        double joules[MW_EC_N][MW_EK_N], double *co2_grams)
{
    char key[1024];
    snprintf(key, sizeof(key), "%s%c%s%c%s", ns, SEP, pod, SEP, container);
    node *n = mw_energy_tfind((table *)&e->ents, key, 0);
    if (!n || !n->ent) return -1;
    sum_methods(n->ent, joules);
    if (co2_grams) *co2_grams = n->ent->co2;
    return 0;
}

void mw_energy_share(const mw_energy *e, int share, double joules[MW_EC_N][MW_EK_N],
                     double *co2_grams)
{
    sum_methods(&e->shares[share], joules);
    if (co2_grams) *co2_grams = e->shares[share].co2;
}

static void visit_ent(const ent *x, char kind, const char *a, const char *b, const char *c,
                      mw_energy_visit_fn fn, void *ctx)
{
    double v[MW_ENERGY_VALUES + 1];
    memcpy(v, x->j, sizeof(x->j));
    v[MW_ENERGY_VALUES] = x->co2;
    fn(ctx, kind, a, b, c, v, MW_ARRAY_LEN(v));
}

void mw_energy_visit(const mw_energy *e, mw_energy_visit_fn fn, void *ctx)
{
    for (size_t i = 0; i < NBUCKETS; i++)
        for (const node *n = e->ents.b[i]; n; n = n->next)
            visit_ent(n->ent, 'c', n->ent->ns, n->ent->pod, n->ent->ctr, fn, ctx);
    for (int sh = 0; sh < MW_ES_N; sh++)
        visit_ent(&e->shares[sh], 's', mw_energy_share_names[sh], "", "", fn, ctx);
    for (size_t i = 0; i < NBUCKETS; i++)
        for (const node *n = e->nodes.b[i]; n; n = n->next) {
            char a[512];
            mw_strlcpy(a, n->key, sizeof(a));
            char *b = strchr(a, SEP), *c = b ? strchr(b + 1, SEP) : NULL;
            if (!c) continue;
            *b = *c = '\0';
            fn(ctx, 'n', a, b + 1, c + 1, &n->v, 1);
        }
    for (int k = 0; k < MW_EC_N; k++)
        for (int kind = 0; kind < MW_EK_N; kind++)
            for (int m = 0; m < MW_EM_N; m++)
                if (e->comp_total[k][kind][m] > 0)
                    fn(ctx, 'k', mw_energy_component_names[k], mw_energy_kind_names[kind],
                       mw_energy_method_names[m], &e->comp_total[k][kind][m], 1);
    fn(ctx, 'g', "", "", "", &e->node_co2, 1);
    for (int k = 0; k < MW_EC_N; k++)
        if (k != MW_EC_GPU && e->floor[k].learnt)
            fn(ctx, 'f', mw_energy_component_names[k], "", "", &e->floor[k].w, 1);
    for (size_t i = 0; i < e->ngpu_floors; i++)
        if (e->gpu_floors[i].f.learnt)
            fn(ctx, 'f', "gpu", e->gpu_floors[i].uuid, "", &e->gpu_floors[i].f.w, 1);
}

void mw_energy_restore_container(mw_energy *e, const char *ns, const char *pod,
                                 const char *container, const double joules[MW_ENERGY_VALUES],
                                 double co2_grams)
{
    ent *x = mw_energy_entity(e, ns, pod, container, 1);
    if (!x) return;
    memcpy(x->j, joules, sizeof(x->j));
    x->co2 = co2_grams;
    x->last_ms = 0;
    e->restored = 1;
}

void mw_energy_restore_share(mw_energy *e, int share, const double joules[MW_ENERGY_VALUES],
                             double co2_grams)
{
    if (share < 0 || share >= MW_ES_N) return;
    memcpy(e->shares[share].j, joules, sizeof(e->shares[share].j));
    e->shares[share].co2 = co2_grams;
}

void mw_energy_restore_component(mw_energy *e, int component, int kind, int method, double joules)
{
    if (component < 0 || component >= MW_EC_N || kind < 0 || kind >= MW_EK_N || method < 0 ||
        method >= MW_EM_N)
        return;
    e->comp_total[component][kind][method] = joules;
}

void mw_energy_restore_node_co2(mw_energy *e, double grams)
{
    e->node_co2 = grams;
}

void mw_energy_restore_floor(mw_energy *e, int component, const char *uuid, double watts)
{
    idle_floor *f = NULL;
    if (component == MW_EC_GPU)
        f = mw_energy_gpu_floor(e, uuid);
    else if (component >= 0 && component < MW_EC_N)
        f = &e->floor[component];
    if (!f) return;
    f->w = watts;
    f->learnt = 1;
}

static void add_parts(double total[MW_EC_N][MW_EK_N][MW_EM_N], const ent *x, double *co2)
{
    for (int k = 0; k < MW_EC_N; k++)
        for (int kind = 0; kind < MW_EK_N; kind++)
            for (int m = 0; m < MW_EM_N; m++)
                total[k][kind][m] += x->j[k][kind][m];
    *co2 += x->co2;
}

void mw_energy_restore_components_from_parts(mw_energy *e)
{
    memset(e->comp_total, 0, sizeof(e->comp_total));
    e->node_co2 = 0;
    for (size_t i = 0; i < NBUCKETS; i++)
        for (const node *n = e->ents.b[i]; n; n = n->next)
            add_parts(e->comp_total, n->ent, &e->node_co2);
    for (int sh = 0; sh < MW_ES_N; sh++)
        add_parts(e->comp_total, &e->shares[sh], &e->node_co2);
}

void mw_energy_restore_node(mw_energy *e, const char *source, const char *zone, const char *method,
                            double joules)
{
    mw_energy_node_add(e, source, zone, method, joules);
}
