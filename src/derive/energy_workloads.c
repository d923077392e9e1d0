/* energy_workloads.c - energy, CO2 and GPU time per workload over its whole
 * life, from the energy model's container totals; see energy_workloads.h. */
#include "energy_workloads.h"
#include "../core/buf.h"
#include "../core/hash.h"
#include "../core/util.h"
#include "energy_state.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 1024
#define MAX_CONTAINERS 20000
#define SEP '\x1f'

static const mw_metric_desc W_ENERGY = {
    "mlwatch_workload_energy_joules_total",
    "Energy of a workload over its whole life (its containers' energy, idle share included), by "
    "method; kept across restarts and for 30 days after the workload was last seen.",
    "joules", MW_COUNTER};
static const mw_metric_desc W_CO2 = {"mlwatch_workload_co2_grams_total",
                                     "CO2-equivalent of a workload's energy over its whole life.",
                                     "grams", MW_COUNTER};
static const mw_metric_desc W_GPU = {
    "mlwatch_workload_gpu_seconds_total",
    "GPU time of a workload: each interval times the GPUs it had utilization or memory on "
    "(divide by 3600 for GPU-hours).",
    "seconds", MW_COUNTER};
static const mw_metric_desc W_SEEN = {
    "mlwatch_workload_last_seen_timestamp_seconds",
    "When the workload last had a container; gpu_model is the model of its last GPU.", "seconds",
    MW_GAUGE};

typedef struct wl {
    struct wl *next;
    char kind[32], ns[254], name[254], gpu_model[96];
    double j[MW_EM_N], co2, gpu_s;
    int64_t last_ms;
    uint64_t gpu_cycle; /* scratch: GPUs counted this cycle */
} wl;

typedef struct prev {
    struct prev *next;
    char *key;
    double v[MW_ENERGY_VALUES + 1];
    uint64_t seen;
} prev;

struct mw_workloads {
    mw_workload_lookup_fn lookup;
    void *ctx;
    wl *b[NBUCKETS];
    size_t n;
    prev *p[NBUCKETS];
    size_t np;
    uint64_t cycle;
    /* scratch of a step */
    const mw_snapshot *snap;
    int64_t now;
    int baseline;
};

static size_t bucket(const char *a, const char *b, const char *c)
{
    uint64_t h = mw_fnv1a64_str(MW_FNV1A64_SEED, a);
    h = mw_fnv1a64_str(h, b);
    h = mw_fnv1a64_str(h, c);
    return h & (NBUCKETS - 1);
}

static wl *find(mw_workloads *w, const char *kind, const char *ns, const char *name, int create)
{
    size_t i = bucket(kind, ns, name);
    for (wl *x = w->b[i]; x; x = x->next)
        if (!strcmp(x->kind, kind) && !strcmp(x->ns, ns) && !strcmp(x->name, name)) return x;
    if (!create || w->n >= MW_WORKLOAD_MAX) return NULL;
    wl *x = mw_xcalloc(1, sizeof(*x));
    mw_strlcpy(x->kind, kind, sizeof(x->kind));
    mw_strlcpy(x->ns, ns, sizeof(x->ns));
    mw_strlcpy(x->name, name, sizeof(x->name));
    x->next = w->b[i];
    w->b[i] = x;
    w->n++;
    return x;
}

mw_workloads *mw_workloads_new(mw_workload_lookup_fn lookup, void *ctx)
{
    mw_workloads *w = mw_xcalloc(1, sizeof(*w));
    w->lookup = lookup;
    w->ctx = ctx;
    w->baseline = 1;
    return w;
}

void mw_workloads_free(mw_workloads *w)
{
    if (!w) return;
    for (size_t i = 0; i < NBUCKETS; i++) {
        for (wl *x = w->b[i]; x;) {
            wl *n = x->next;
            free(x);
            x = n;
        }
        for (prev *x = w->p[i]; x;) {
            prev *n = x->next;
            free(x->key);
            free(x);
            x = n;
        }
    }
    free(w);
}

/* --- identity ---------------------------------------------------------------- */

void mw_workload_of_cgroup(const char *container, char kind[32], char name[254])
{
    /* Slurm: .../job_N/... (slurmstepd's cgroup v2 and v1 layouts). */
    for (const char *p = strstr(container, "job_"); p; p = strstr(p + 1, "job_")) {
        if (p != container && p[-1] != '/') continue;
        size_t n = strspn(p + 4, "0123456789");
        if (n && (p[4 + n] == '\0' || p[4 + n] == '/')) {
            mw_strlcpy(kind, "SlurmJob", 32);
            snprintf(name, 254, "%.*s", (int)n, p + 4);
            return;
        }
    }
    mw_strlcpy(kind, "cgroup", 32);
    mw_strlcpy(name, container, 254);
}

static const char *label_or(const mw_sample *s, const char *name)
{
    for (uint32_t i = 0; i < s->nlabels; i++)
        if (strcmp(s->labels[i].name, name) == 0) return s->labels[i].value;
    return "";
}

/* The workload of a container: its pod's owner, else the pod, else the
 * cgroup's. */
static wl *workload_of(mw_workloads *w, const char *ns, const char *pod, const char *ctr)
{
    char kind[32], name[254];
    if (*pod) {
        const char *uid = "";
        const mw_family *f = mw_snapshot_find(w->snap, "mlwatch_container_info");
        for (const mw_sample *s = f ? f->first : NULL; s && !*uid; s = s->next)
            if (!strcmp(label_or(s, "namespace"), ns) && !strcmp(label_or(s, "pod"), pod))
                uid = label_or(s, "pod_uid");
        if (!w->lookup || !w->lookup(w->ctx, uid, ns, pod, kind, name) || !*kind) {
            mw_strlcpy(kind, "Pod", sizeof(kind));
            mw_strlcpy(name, pod, sizeof(name));
        }
        return find(w, kind, ns, name, 1);
    }
    mw_workload_of_cgroup(ctr, kind, name);
    return find(w, kind, ns, name, 1);
}

/* --- one interval -------------------------------------------------------------- */

static prev *prev_of(mw_workloads *w, const char *key, int *fresh)
{
    size_t i = mw_fnv1a64_str(MW_FNV1A64_SEED, key) & (NBUCKETS - 1);
    *fresh = 0;
    for (prev *x = w->p[i]; x; x = x->next)
        if (!strcmp(x->key, key)) return x;
    if (w->np >= MAX_CONTAINERS) return NULL;
    prev *x = mw_xcalloc(1, sizeof(*x));
    x->key = mw_xstrdup(key);
    x->next = w->p[i];
    w->p[i] = x;
    w->np++;
    *fresh = 1;
    return x;
}

static void visit(void *arg, char kind, const char *a, const char *b, const char *c,
                  const double *v, size_t n)
{
    mw_workloads *w = arg;
    if (kind != 'c' || n != MW_ENERGY_VALUES + 1) return;
    char key[1100];
    snprintf(key, sizeof(key), "%s%c%s%c%s", a, SEP, b, SEP, c);
    int fresh;
    prev *p = prev_of(w, key, &fresh);
    if (!p) return;
    p->seen = w->cycle;
    /* A container the model dropped and found again starts from 0. */
    int lower = 0;
    for (size_t i = 0; i < n; i++)
        lower |= v[i] < p->v[i];
    double d[MW_ENERGY_VALUES + 1];
    for (size_t i = 0; i < n; i++)
        d[i] = w->baseline && fresh ? 0 : lower ? v[i] : v[i] - p->v[i];
    memcpy(p->v, v, sizeof(p->v));
    int any = 0;
    for (size_t i = 0; i < n; i++)
        any |= d[i] > 0;
    if (!any) return; /* nothing this interval (the model keeps a gone container 10 minutes) */
    wl *x = workload_of(w, a, b, c);
    if (!x) return;
    x->last_ms = w->now;
    for (int k = 0; k < MW_EC_N; k++)
        for (int kd = 0; kd < MW_EK_N; kd++)
            for (int m = 0; m < MW_EM_N; m++)
                x->j[m] += d[(k * MW_EK_N + kd) * MW_EM_N + m];
    x->co2 += d[MW_ENERGY_VALUES];
}

/* GPU seconds: each GPU (or MIG instance) a workload holds utilization or
 * memory on adds the interval once. */
static void gpu_time(mw_workloads *w, double dt)
{
    static const char *const fams[] = {"mlwatch_container_gpu_utilization_ratio",
                                       "mlwatch_container_gpu_memory_used_bytes",
                                       "mlwatch_container_mig_memory_used_bytes"};
    char seen[64][160];
    size_t nseen = 0;
    for (size_t f = 0; f < MW_ARRAY_LEN(fams); f++) {
        const mw_family *fam = mw_snapshot_find(w->snap, fams[f]);
        for (const mw_sample *s = fam ? fam->first : NULL; s; s = s->next) {
            if (!(s->value > 0)) continue;
            const char *ns = label_or(s, "namespace"), *pod = label_or(s, "pod");
            const char *ctr = label_or(s, "container");
            if (!*ns && !*pod && !*ctr) continue; /* no process's container */
            wl *x = workload_of(w, ns, pod, ctr);
            if (!x) continue;
            char key[160];
            snprintf(key, sizeof(key), "%p%c%s%c%s", (void *)x, SEP, label_or(s, "gpu"), SEP,
                     label_or(s, "gpu_instance"));
            int dup = 0;
            for (size_t i = 0; i < nseen && !dup; i++)
                dup = !strcmp(seen[i], key);
            if (dup || nseen >= MW_ARRAY_LEN(seen)) continue;
            mw_strlcpy(seen[nseen++], key, sizeof(seen[0]));
            x->gpu_s += dt;
            x->last_ms = w->now;
            const mw_family *info = mw_snapshot_find(w->snap, "mlwatch_gpu_info");
            for (const mw_sample *g = info ? info->first : NULL; g; g = g->next)
                if (!strcmp(label_or(g, "gpu"), label_or(s, "gpu")))
                    mw_strlcpy(x->gpu_model, label_or(g, "model"), sizeof(x->gpu_model));
        }
    }
}

static void emit(mw_workloads *w, mw_snapshot *snap)
{
    for (size_t i = 0; i < NBUCKETS; i++)
        for (wl **pp = &w->b[i]; *pp;) {
            wl *x = *pp;
            if (w->now - x->last_ms > MW_WORKLOAD_KEEP_MS) {
                *pp = x->next;
                free(x);
                w->n--;
                continue;
            }
            pp = &x->next;
            for (int m = 0; m < MW_EM_N; m++)
                if (x->j[m] > 0 || m == MW_EM_MEASURED)
                    mw_emit(snap, &W_ENERGY, x->j[m], "workload_kind", x->kind, "namespace", x->ns,
                            "workload", x->name, "method", mw_energy_method_names[m], MW_END);
            mw_emit(snap, &W_CO2, x->co2, "workload_kind", x->kind, "namespace", x->ns, "workload",
                    x->name, MW_END);
            mw_emit(snap, &W_GPU, x->gpu_s, "workload_kind", x->kind, "namespace", x->ns,
                    "workload", x->name, MW_END);
            mw_emit(snap, &W_SEEN, (double)x->last_ms / 1000.0, "workload_kind", x->kind,
                    "namespace", x->ns, "workload", x->name, "gpu_model", x->gpu_model, MW_END);
        }
}

void mw_workloads_step(mw_workloads *w, const mw_energy *e, mw_snapshot *snap, double dt_s)
{
    w->cycle++;
    w->snap = snap;
    w->now = snap->timestamp_ms;
    mw_energy_visit(e, visit, w);
    if (!w->baseline && dt_s > 0) gpu_time(w, dt_s);
    w->baseline = 0;
    /* Containers the model no longer tracks. */
    for (size_t i = 0; i < NBUCKETS; i++)
        for (prev **pp = &w->p[i]; *pp;) {
            prev *x = *pp;
            if (x->seen == w->cycle) {
                pp = &x->next;
                continue;
            }
            *pp = x->next;
            free(x->key);
            free(x);
            w->np--;
        }
    emit(w, snap);
    w->snap = NULL;
}

int mw_workloads_get(const mw_workloads *w, const char *kind, const char *ns, const char *name,
                     double joules[MW_EM_N], double *co2_grams, double *gpu_seconds)
{
    const wl *x = find((mw_workloads *)w, kind, ns, name, 0);
    if (!x) return -1;
    memcpy(joules, x->j, sizeof(x->j));
    if (co2_grams) *co2_grams = x->co2;
    if (gpu_seconds) *gpu_seconds = x->gpu_s;
    return 0;
}

/* --- the state file ------------------------------------------------------------ */

#define FORMAT "mlwatch-workload-state"
#define VERSION 1

char *mw_workloads_dump(const mw_workloads *w, const char *identity, int64_t now_ms)
{
    json_t *id = json_string(identity ? identity : "");
    if (!id) return NULL;
    mw_buf out;
    mw_buf_init(&out, 0);
    char *idt = json_dumps(id, JSON_ENCODE_ANY);
    json_decref(id);
    mw_buf_printf(&out,
                  "{\"format\":\"%s\",\"version\":%d,\"identity\":%s,\"saved_ms\":%lld,"
                  "\"workloads\":[",
                  FORMAT, VERSION, idt ? idt : "\"\"", (long long)now_ms);
    free(idt);
    int count = 0;
    for (size_t i = 0; i < NBUCKETS; i++)
        for (const wl *x = w->b[i]; x; x = x->next) {
            json_t *j =
                json_pack("{s:s,s:s,s:s,s:s,s:{s:f,s:f},s:f,s:f,s:I}", "kind", x->kind, "namespace",
                          x->ns, "name", x->name, "gpu_model", x->gpu_model, "joules", "measured",
                          x->j[MW_EM_MEASURED], "estimated", x->j[MW_EM_ESTIMATED], "co2_grams",
                          x->co2, "gpu_seconds", x->gpu_s, "last_ms", (json_int_t)x->last_ms);
            char *t = j ? json_dumps(j, JSON_COMPACT) : NULL; /* NULL: not UTF-8, left out */
            json_decref(j);
            if (!t) continue;
            if (count++) mw_buf_putc(&out, ',');
            mw_buf_puts(&out, t);
            free(t);
        }
    mw_buf_puts(&out, "]}");
    return mw_buf_steal(&out, NULL);
}

static int str(const json_t *o, const char *key, const char **out, size_t max)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_string(v) || json_string_length(v) >= max ||
        strlen(json_string_value(v)) != json_string_length(v))
        return -1;
    *out = json_string_value(v);
    return 0;
}

int mw_workloads_parse(mw_workloads *w, const char *text, size_t len, const char *identity,
                       char *err, size_t errsize)
{
    static const mw_state_kind state_kind = {FORMAT,  "workload",  VERSION,
                                             VERSION, "version 1", 255};
    json_int_t version;
    json_t *root = mw_energy_state_root(text, len, &state_kind, identity, &version, err, errsize);
    if (!root) return -1;
    int rc = -1;
    const json_t *ws = json_object_get(root, "workloads");
    if (!json_is_array(ws) || json_array_size(ws) > MW_WORKLOAD_MAX) {
        snprintf(err, errsize, "workloads must be a list of at most %d", MW_WORKLOAD_MAX);
        goto out;
    }
    for (int pass = 0; pass < 2; pass++) {
        size_t i;
        const json_t *o;
        json_array_foreach(ws, i, o)
        {
            const char *kind, *ns, *name, *model;
            double jm, je2, co2, gs;
            const json_t *j = json_object_get(o, "joules"), *last = json_object_get(o, "last_ms");
            if (str(o, "kind", &kind, 32) < 0 || str(o, "namespace", &ns, 254) < 0 ||
                str(o, "name", &name, 254) < 0 || str(o, "gpu_model", &model, 96) < 0 ||
                mw_energy_state_total(json_object_get(j, "measured"), &jm) < 0 ||
                mw_energy_state_total(json_object_get(j, "estimated"), &je2) < 0 ||
                mw_energy_state_total(json_object_get(o, "co2_grams"), &co2) < 0 ||
                mw_energy_state_total(json_object_get(o, "gpu_seconds"), &gs) < 0 ||
                !json_is_integer(last)) {
                snprintf(err, errsize, "workloads[%zu]: malformed", i);
                goto out;
            }
            if (!pass) continue;
            wl *x = find(w, kind, ns, name, 1);
            if (!x) continue;
            x->j[MW_EM_MEASURED] = jm;
            x->j[MW_EM_ESTIMATED] = je2;
            x->co2 = co2;
            x->gpu_s = gs;
            x->last_ms = (int64_t)json_integer_value(last);
            mw_strlcpy(x->gpu_model, model, sizeof(x->gpu_model));
        }
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

static int parse_cb(void *obj, const char *text, size_t len, const char *identity, char *err,
                    size_t errsize)
{
    return mw_workloads_parse(obj, text, len, identity, err, errsize);
}

int mw_workloads_load(mw_workloads *w, const char *dir, const char *identity, char *err,
                      size_t errsize)
{
    return mw_energy_state_read(dir, MW_WORKLOAD_STATE_FILE, parse_cb, w, identity, err, errsize);
}

int mw_workloads_save(const mw_workloads *w, const char *dir, const char *identity, int64_t now_ms)
{
    char *text = mw_workloads_dump(w, identity, now_ms);
    if (!text) return -ENOMEM;
    int rc = mw_energy_state_write(dir, MW_WORKLOAD_STATE_FILE, text);
    free(text);
    return rc;
}
