/* dra.c - ResourceSlices and ResourceClaims from the API server (see
 * dra.h): the parsers, and the thread that lists both and answers the
 * pod-resources poller's questions (which GPU is this DRA device; which
 * claims hold devices for this node's pods).
 *
 * Lists, not watches: slices change when a driver starts or a GPU is
 * partitioned, claims when pods start; a list every 30 s is cheap next to
 * the pod watch, and the pod-resources poller (10 s) is the one that sees a
 * new allocation first. A resource the server does not serve (404: before
 * Kubernetes 1.34, or DRA off) is asked again every 10 intervals. The
 * first lists wait for the pod watch's first list. */
#include "dra.h"
#include "../core/buf.h"
#include "../core/log.h"
#include "../core/util.h"
#include "../core/worker.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LIST_BYTES (64u << 20)

static const char *str_at(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static json_t *load_list(const char *text, size_t len, json_t **items, char *err, size_t errsize)
{
    if (len > MAX_LIST_BYTES) {
        mw_fail(err, errsize, "list larger than %u bytes", MAX_LIST_BYTES);
        return NULL;
    }
    json_error_t je;
    json_t *j = json_loadb(text, len, 0, &je);
    if (!j) {
        mw_fail(err, errsize, "invalid JSON at line %d column %d: %s", je.line, je.column, je.text);
        return NULL;
    }
    *items = json_object_get(j, "items");
    if (!json_is_array(*items) && !json_is_null(*items)) {
        mw_fail(err, errsize, "not a list: no items");
        json_decref(j);
        return NULL;
    }
    return j;
}

/* The device's UUID attribute: "uuid", or qualified with the driver's
 * domain ("gpu.nvidia.com/uuid"), holding {"string": "..."}. */
static const char *uuid_attr(json_t *attrs, const char *driver)
{
    json_t *a = json_object_get(attrs, "uuid");
    if (!a && driver) {
        char key[96];
        snprintf(key, sizeof(key), "%.80s/uuid", driver);
        a = json_object_get(attrs, key);
    }
    return json_is_object(a) ? str_at(a, "string") : NULL;
}

int mw_dra_slices_parse(const char *text, size_t len, void (*fn)(void *, const mw_dra_device *),
                        void *cls, char *err, size_t errsize)
{
    json_t *items;
    json_t *j = load_list(text, len, &items, err, errsize);
    if (!j) return -1;
    int n = 0;
    size_t i, k;
    json_t *it, *dev;
    json_array_foreach(items, i, it)
    {
        json_t *spec = json_object_get(it, "spec");
        const char *driver = str_at(spec, "driver");
        const char *pool = str_at(json_object_get(spec, "pool"), "name");
        json_t *devices = json_object_get(spec, "devices");
        if (!driver || !pool || !json_is_array(devices)) continue;
        json_array_foreach(devices, k, dev)
        {
            const char *name = str_at(dev, "name");
            const char *uuid = uuid_attr(json_object_get(dev, "attributes"), driver);
            mw_dra_device d;
            memset(&d, 0, sizeof(d)); /* compared whole for changes */
            if (!name || !uuid || strlen(driver) >= sizeof(d.driver) ||
                strlen(pool) >= sizeof(d.pool) || strlen(name) >= sizeof(d.device) ||
                strlen(uuid) >= sizeof(d.uuid))
                continue;
            mw_strlcpy(d.driver, driver, sizeof(d.driver));
            mw_strlcpy(d.pool, pool, sizeof(d.pool));
            mw_strlcpy(d.device, name, sizeof(d.device));
            mw_strlcpy(d.uuid, uuid, sizeof(d.uuid));
            fn(cls, &d);
            n++;
        }
    }
    json_decref(j);
    return n;
}

int mw_dra_claims_parse(const char *text, size_t len, void (*fn)(void *, const mw_dra_claim *),
                        void *cls, char *err, size_t errsize)
{
    json_t *items;
    json_t *j = load_list(text, len, &items, err, errsize);
    if (!j) return -1;
    int n = 0;
    size_t i, k, m;
    json_t *it, *res, *who;
    json_array_foreach(items, i, it)
    {
        json_t *md = json_object_get(it, "metadata");
        json_t *status = json_object_get(it, "status");
        const char *ns = str_at(md, "namespace"), *name = str_at(md, "name");
        json_t *results = json_object_get(
            json_object_get(json_object_get(status, "allocation"), "devices"), "results");
        json_t *reserved = json_object_get(status, "reservedFor");
        if (!ns || !name || !json_is_array(results) || !json_is_array(reserved)) continue;
        json_array_foreach(reserved, m, who)
        {
            const char *res_kind = str_at(who, "resource"), *uid = str_at(who, "uid");
            const char *pod = str_at(who, "name");
            /* reservedFor names pods with resource "pods" and no API group. */
            if (!res_kind || strcmp(res_kind, "pods") != 0 || !uid || !pod ||
                (str_at(who, "apiGroup") && *str_at(who, "apiGroup")))
                continue;
            json_array_foreach(results, k, res)
            {
                const char *driver = str_at(res, "driver"), *pool = str_at(res, "pool");
                const char *device = str_at(res, "device");
                mw_dra_claim c;
                memset(&c, 0, sizeof(c));
                if (!driver || !pool || !device || strlen(ns) >= sizeof(c.claim_ns) ||
                    strlen(name) >= sizeof(c.claim) || strlen(uid) >= sizeof(c.pod_uid) ||
                    strlen(pod) >= sizeof(c.pod) || strlen(driver) >= sizeof(c.driver) ||
                    strlen(pool) >= sizeof(c.pool) || strlen(device) >= sizeof(c.device))
                    continue;
                mw_strlcpy(c.claim_ns, ns, sizeof(c.claim_ns));
                mw_strlcpy(c.claim, name, sizeof(c.claim));
                mw_strlcpy(c.pod_uid, uid, sizeof(c.pod_uid));
                mw_strlcpy(c.pod, pod, sizeof(c.pod));
                mw_strlcpy(c.driver, driver, sizeof(c.driver));
                mw_strlcpy(c.pool, pool, sizeof(c.pool));
                mw_strlcpy(c.device, device, sizeof(c.device));
                fn(cls, &c);
                n++;
            }
        }
    }
    json_decref(j);
    return n;
}

int mw_dra_uuid_in(const mw_dra_device *devs, size_t n, const char *driver, const char *pool,
                   const char *device, char *uuid, size_t size)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(devs[i].driver, driver) && !strcmp(devs[i].pool, pool) &&
            !strcmp(devs[i].device, device)) {
            mw_strlcpy(uuid, devs[i].uuid, size);
            return 1;
        }
    return 0;
}

/* ---- the poller ---- */

struct mw_dra {
    mw_worker w; /* its mutex guards the tables */
    mw_kube *kube;
    mw_dra_device *devs; /* MW_DRA_MAX_DEVICES */
    size_t ndevs;
    mw_dra_claim *claims; /* MW_DRA_MAX_CLAIMS */
    size_t nclaims;
    mw_podres_resolver resolver;
    void (*on_change)(void *cls); /* guarded by w.mu */
    void *on_change_cls;
    /* the list in progress (this thread only) */
    mw_dra_device *new_devs;
    size_t nnew_devs;
    mw_dra_claim *new_claims;
    size_t nnew_claims;
};

static void add_device(void *cls, const mw_dra_device *d)
{
    mw_dra *r = cls;
    if (r->nnew_devs < MW_DRA_MAX_DEVICES) r->new_devs[r->nnew_devs++] = *d;
}

static void add_claim(void *cls, const mw_dra_claim *c)
{
    mw_dra *r = cls;
    if (r->nnew_claims < MW_DRA_MAX_CLAIMS) r->new_claims[r->nnew_claims++] = *c;
}

/* GET one list: 0 parsed, 1 not served (404), -1 failed (logged). */
static int list(mw_dra *r, const char *what, const char *path, int slices)
{
    mw_buf body;
    mw_buf_init(&body, MAX_LIST_BYTES);
    char err[768];
    long status =
        mw_kube_call(r->kube, "GET", path, NULL, NULL, MAX_LIST_BYTES, &body, err, sizeof(err));
    int rc = -1;
    if (status < 0) {
        mw_log_once(MW_LOG_WARN, "dra", what, "listing %s: %s", what, err);
    } else if (status == 404) {
        mw_log_once(MW_LOG_INFO, "dra", what,
                    "the API server does not serve %s (resource.k8s.io/v1: Kubernetes 1.34 or "
                    "later with DRA): no DRA allocations from it",
                    what);
        rc = 1;
    } else if (status == 403) {
        mw_log_once(MW_LOG_WARN, "dra", what,
                    "listing %s: HTTP 403: the service account may not list %s "
                    "(deploy/kubernetes grants it; see docs/security.md)",
                    what, what);
    } else if (status != 200) {
        mw_log_once(MW_LOG_WARN, "dra", what, "listing %s: HTTP %ld", what, status);
    } else {
        int n = slices ? mw_dra_slices_parse(body.data ? body.data : "", body.len, add_device, r,
                                             err, sizeof(err))
                       : mw_dra_claims_parse(body.data ? body.data : "", body.len, add_claim, r,
                                             err, sizeof(err));
        if (n < 0)
            mw_log_once(MW_LOG_WARN, "dra", what, "listing %s: %s", what, err);
        else
            rc = 0;
    }
    mw_buf_free(&body);
    return rc;
}

static void *run(void *arg)
{
    mw_dra *r = arg;
    int skip = 0; /* intervals to wait after a 404 */
    /* After the pod list: claims are kept for this node's pods only, and
     * credentials that do not work are reported once, by the pod watch. */
    while (!mw_kube_listed(r->kube))
        if (!mw_worker_sleep(&r->w, 200)) return NULL;
    do {
        if (skip > 0) {
            skip--;
            continue;
        }
        char path[512];
        snprintf(path, sizeof(path),
                 "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%%3D%s",
                 mw_kube_node(r->kube));
        r->nnew_devs = r->nnew_claims = 0;
        int s = list(r, "resourceslices", path, 1);
        int c =
            s == 1 ? 1 : list(r, "resourceclaims", "/apis/resource.k8s.io/v1/resourceclaims", 0);
        if (s == 1 || c == 1) skip = 9;
        pthread_mutex_lock(&r->w.mu);
        int changed =
            (s == 0 && (r->ndevs != r->nnew_devs ||
                        memcmp(r->devs, r->new_devs, r->nnew_devs * sizeof(*r->devs)))) ||
            (c == 0 && (r->nclaims != r->nnew_claims ||
                        memcmp(r->claims, r->new_claims, r->nnew_claims * sizeof(*r->claims))));
        if (s == 0) {
            memcpy(r->devs, r->new_devs, r->nnew_devs * sizeof(*r->devs));
            r->ndevs = r->nnew_devs;
        } else if (s == 1) {
            r->ndevs = 0;
        }
        if (c == 0) {
            memcpy(r->claims, r->new_claims, r->nnew_claims * sizeof(*r->claims));
            r->nclaims = r->nnew_claims;
        } else if (c == 1) {
            r->nclaims = 0;
        }
        void (*fn)(void *) = changed ? r->on_change : NULL;
        void *cls = r->on_change_cls;
        pthread_mutex_unlock(&r->w.mu);
        if (fn) fn(cls);
    } while (mw_worker_sleep(&r->w, MW_DRA_INTERVAL_MS));
    return NULL;
}

static int resolve_uuid(void *cls, const char *driver, const char *pool, const char *device,
                        char *uuid, size_t n)
{
    mw_dra *r = cls;
    pthread_mutex_lock(&r->w.mu);
    int found = mw_dra_uuid_in(r->devs, r->ndevs, driver, pool, device, uuid, n);
    pthread_mutex_unlock(&r->w.mu);
    return found;
}

/* Claims of this node's pods that the kubelet did not report: rows of
 * their own, on the container that uses the claim (the pod spec's
 * resources.claims, kube.h); "" when none does or the pod watch has not
 * seen the generated claim's name yet. */
static void add_claims(void *cls, mw_podres_table *t)
{
    mw_dra *r = cls;
    size_t reported = t->n;
    pthread_mutex_lock(&r->w.mu);
    for (size_t i = 0; i < r->nclaims; i++) {
        const mw_dra_claim *c = &r->claims[i];
        mw_kube_pod p;
        if (!mw_kube_lookup(r->kube, c->pod_uid, "", "", &p)) continue; /* not on this node */
        int known = 0;
        for (size_t k = 0; k < reported && !known; k++) {
            const mw_podres_row *row = &t->rows[k];
            known = row->source == MW_PODRES_DRA && !strcmp(row->ns, p.ns) &&
                    !strcmp(row->pod, p.name) && !strcmp(row->driver, c->driver) &&
                    !strcmp(row->pool, c->pool) && !strcmp(row->dra_device, c->device);
        }
        if (known) continue;
        mw_podres_row *row = mw_podres_add(t);
        if (!row) break;
        mw_strlcpy(row->ns, p.ns, sizeof(row->ns));
        mw_strlcpy(row->pod, p.name, sizeof(row->pod));
        if (!strcmp(c->claim_ns, p.ns)) /* else "" (the row starts zeroed) */
            mw_kube_claim_container(&p, c->claim, row->container, sizeof(row->container));
        row->source = MW_PODRES_CLAIM;
        mw_strlcpy(row->driver, c->driver, sizeof(row->driver));
        mw_strlcpy(row->pool, c->pool, sizeof(row->pool));
        mw_strlcpy(row->dra_device, c->device, sizeof(row->dra_device));
        snprintf(row->claim, sizeof(row->claim), "%s/%s", c->claim_ns, c->claim);
        mw_dra_uuid_in(r->devs, r->ndevs, c->driver, c->pool, c->device, row->device,
                       sizeof(row->device));
    }
    pthread_mutex_unlock(&r->w.mu);
}

/* clang-format off */
static const mw_option dra_rows[] = {
    MW_OPT(mw_dra_settings, "kubernetes-dra", MW_OPT_BOOL, kubernetes_dra, "true", NULL, "With --kubernetes, list this node's ResourceSlices and the ResourceClaims (resource.k8s.io/v1) to attribute GPUs allocated through DRA"),
};
/* clang-format on */
const mw_option_group mw_dra_options =
    MW_OPTION_GROUP("Kubernetes DRA", "src/kube/dra.c", mw_dra_settings, dra_rows, NULL);

int mw_dra_start(const mw_config *cfg, mw_kube *k, mw_dra **out)
{
    *out = NULL;
    const mw_dra_settings *s = mw_config_group(cfg, &mw_dra_options);
    if (!k || !s->kubernetes_dra) return 1;
    mw_dra *r = mw_xcalloc(1, sizeof(*r));
    r->kube = k;
    r->devs = mw_xcalloc(MW_DRA_MAX_DEVICES, sizeof(*r->devs));
    r->new_devs = mw_xcalloc(MW_DRA_MAX_DEVICES, sizeof(*r->new_devs));
    r->claims = mw_xcalloc(MW_DRA_MAX_CLAIMS, sizeof(*r->claims));
    r->new_claims = mw_xcalloc(MW_DRA_MAX_CLAIMS, sizeof(*r->new_claims));
    r->resolver = (mw_podres_resolver){.uuid = resolve_uuid, .claims = add_claims, .cls = r};
    mw_worker_init(&r->w);
    if (mw_worker_start(&r->w, run, r) < 0) {
        mw_log(MW_LOG_WARN, "dra", "cannot start a thread");
        mw_dra_stop(r);
        return 1;
    }
    *out = r;
    return 0;
}

void mw_dra_on_change(mw_dra *d, void (*fn)(void *cls), void *cls)
{
    if (!d) return;
    pthread_mutex_lock(&d->w.mu);
    d->on_change = fn;
    d->on_change_cls = cls;
    pthread_mutex_unlock(&d->w.mu);
}

const mw_podres_resolver *mw_dra_resolver(mw_dra *d)
{
    return d ? &d->resolver : NULL;
}

void mw_dra_stop(mw_dra *d)
{
    if (!d) return;
    mw_worker_stop(&d->w); /* joins the thread if it was started */
    mw_worker_destroy(&d->w);
    free(d->devs);
    free(d->new_devs);
    free(d->claims);
    free(d->new_claims);
    free(d);
}
