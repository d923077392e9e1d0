/* cgroup_names.c - Kubernetes names (namespace, pod, container) for the
 * cgroup collector's records: from the runtime's OCI bundle, else from the
 * kubelet's pods index, else inferred from the pod's other cgroups; never
 * guessed (see cgroup.c). */
#include "cgroup_int.h"
#include "bundle.h"
#include "../core/util.h"

#include <string.h>

void mw_cgroup_set_labels(cg_entry *e)
{
    size_t n = 0;
    if (e->node.kind == MW_CG_K8S_CONTAINER) {
        e->labels[n++] = (mw_label){"namespace", e->namespace_};
        e->labels[n++] = (mw_label){"pod", e->pod};
        e->labels[n++] = (mw_label){"container", e->container};
        e->labels[n++] = (mw_label){"container_id", e->node.id};
    } else {
        e->labels[n++] = (mw_label){"cgroup", e->cgroup};
        if (e->node.id[0]) e->labels[n++] = (mw_label){"container_id", e->node.id};
    }
    e->nlabels = n;
}

/* --- Kubernetes names ---------------------------------------------------- */

static void pods_scan(cg_state *st, mw_collect_ctx *ctx)
{
    mw_pods_error err;
    if (mw_pods_scan(st->pods, st->env->host, &err) < 0)
        mw_collect_error(ctx, err.path, err.err, err.what);
    st->pods_scan_ms = st->now_ms;
    st->pods_scan_cycle = st->cycle;
}

/* Names are cut as the process map's fields of their size would be. */
#define REF_SIZE(field) sizeof(((mw_container_ref *)0)->field)

/* Names from the runtime's bundle: 1 when it named e. Read until it names e
 * (a bundle does not change during its container's life), or once when it is
 * unreadable or malformed: that is counted and e keeps its ID. */
static int bundle_names(cg_state *st, mw_collect_ctx *ctx, cg_entry *e)
{
    if (e->bundle_failed) return 0;
    mw_bundle_names b;
    char path[160];
    int err = 0;
    const char *what = NULL;
    int rc = mw_bundle_read(st->env->host, e->node.id, &st->bundle_buf, &b, path, &err, &what);
    if (rc < 0) {
        e->bundle_failed = 1;
        mw_collect_error(ctx, path, err, what);
        return 0;
    }
    if (rc == 0) return 0;
    mw_set_string(&e->namespace_, b.namespace_, REF_SIZE(namespace_));
    mw_set_string(&e->pod, b.pod, REF_SIZE(pod));
    mw_set_string(&e->container, b.sandbox ? "POD" : b.container, REF_SIZE(container));
    e->sandbox = b.sandbox;
    e->named = e->bundle_named = 1;
    return 1;
}

/* Take names from the runtime's bundle, else from the index. Never
 * downgrades: a record keeps its names when the pod's logs are removed
 * before its cgroup. A container of a known pod without either keeps an
 * empty name until infer_names() finds evidence. */
static void apply_names(cg_state *st, mw_collect_ctx *ctx, cg_entry *e)
{
    e->names_gen = mw_pods_generation(st->pods);
    if (e->bundle_named || bundle_names(st, ctx, e)) {
        mw_cgroup_set_labels(e);
        return;
    }
    const mw_ctr_info *c = mw_pods_find_container(st->pods, e->node.id);
    const mw_pod_info *p = mw_pods_find_pod(st->pods, e->node.pod_uid);
    if (c) {
        mw_set_string(&e->namespace_, p ? p->namespace_ : c->namespace_, REF_SIZE(namespace_));
        mw_set_string(&e->pod, p ? p->name : c->pod, REF_SIZE(pod));
        mw_set_string(&e->container, c->name, REF_SIZE(container));
        e->named = 1;
    } else if (p && !e->named) {
        mw_set_string(&e->namespace_, p->namespace_, REF_SIZE(namespace_));
        mw_set_string(&e->pod, p->name, REF_SIZE(pod));
    }
    mw_cgroup_set_labels(e); /* the strings may have moved */
}

/* Names of a container neither its bundle nor a log link names, from what
 * its pod's other cgroups are (after the walk, when entries appeared or the
 * index changed, before the process map's walk ends):
 *  - every other container cgroup of the pod is named and they account for
 *    every container folder of the pod's log folder: e is the sandbox
 *    (the kubelet logs every container but the sandbox), "POD";
 *  - the pod's log folder holds one container folder and every other cgroup
 *    of the pod is the sandbox by its bundle (or there is none): e is that
 *    container.
 * Otherwise the name stays empty: container="" with container_id set. */
void mw_cgroup_infer_names(cg_state *st)
{
    for (size_t i = 0; i < st->nentries; i++) {
        cg_entry *e = st->entries[i];
        if (e->node.kind != MW_CG_K8S_CONTAINER || e->named || e->seen != st->cycle) continue;
        const mw_pod_info *p = mw_pods_find_pod(st->pods, e->node.pod_uid);
        if (!p || p->ncontainers == 0) continue;
        size_t unknown = 0, containers = 0, distinct = 0;
        const char *names[8];
        for (size_t j = 0; j < st->nentries; j++) {
            const cg_entry *s = st->entries[j];
            if (s == e || s->node.kind != MW_CG_K8S_CONTAINER || s->seen != st->cycle ||
                strcmp(s->node.pod_uid, e->node.pod_uid) != 0)
                continue;
            if (!s->named) {
                unknown++;
                continue;
            }
            if (s->sandbox) continue;
            containers++;
            size_t k = 0;
            while (k < distinct && strcmp(names[k], s->container) != 0)
                k++;
            if (k == distinct && distinct < sizeof(names) / sizeof(names[0]))
                names[distinct++] = s->container;
        }
        const char *name = NULL;
        if (unknown == 0 && containers > 0 && distinct == (size_t)p->ncontainers)
            name = "POD";
        else if (unknown == 0 && containers == 0 && p->ncontainers == 1)
            name = p->sole;
        if (!name || strcmp(e->container, name) == 0) continue;
        mw_set_string(&e->container, name, REF_SIZE(container));
        mw_cgroup_set_labels(e);
        if (st->env->procmap) mw_procmap_rename(st->env->procmap, e->cgroup, e->container);
    }
}

void mw_cgroup_name_entry(cg_state *st, mw_collect_ctx *ctx, cg_entry *e)
{
    if (e->node.kind != MW_CG_K8S_CONTAINER) return;
    int scanned_now = st->pods_scan_cycle == st->cycle;
    if (!scanned_now &&
        (st->pods_scan_cycle == 0 || st->now_ms - st->pods_scan_ms >= PODS_RESCAN_MS)) {
        pods_scan(st, ctx);
        scanned_now = 1;
    }
    if (e->names_gen != mw_pods_generation(st->pods)) apply_names(st, ctx, e);
    if (e->named || scanned_now) return;
    /* Unnamed: new, or young and not retried lately -> rebuild the index. */
    int is_new = e->born == st->cycle;
    int retry = st->now_ms - e->first_ms < PODS_RETRY_AGE_MS &&
                st->now_ms - e->last_try_ms >= PODS_RETRY_MS;
    if (!is_new && !retry) return;
    e->last_try_ms = st->now_ms;
    pods_scan(st, ctx);
    apply_names(st, ctx, e);
}
