/* kube_parse.c - the Kubernetes objects mlwatch reads: pods (from a list or
 * a watch event) reduced to their workload and owner, and kubeconfig files.
 * Pure functions on buffers, unit-tested and fuzzed (fuzz/fuzz_kube_*.c).
 *
 * Workload of a pod, first match wins:
 *   label notebook-name                      -> Notebook (Kubeflow)
 *   label training.kubeflow.org/job-name     -> the controller's kind
 *        (PyTorchJob, TFJob, MPIJob, ...: the kubeflow.org owner reference,
 *        else training.kubeflow.org/operator-name), else TrainingJob
 *   label jobset.sigs.k8s.io/jobset-name     -> TrainJob (Kubeflow Trainer)
 *   controller owner ReplicaSet NAME-HASH    -> Deployment NAME (pod-template-hash)
 *   controller owner of another kind         -> that kind and name (Job,
 *                                               StatefulSet, DaemonSet, ...)
 *   no owner                                 -> Pod, the pod's name */
#include "kube.h"
#include "../core/log.h"
#include "../core/util.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* Objects larger than this are refused (a pod is a few KiB). */
#define MAX_OBJECT (4u << 20)

static const char *str_at(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Copy a string field; refuse one too long for the table. */
static int copy_field(char *dst, size_t n, const char *v, const char *what, char *err,
                      size_t errsize)
{
    if (!v) v = "";
    if (strlen(v) >= n)
        return mw_fail(err, errsize, "%s is longer than %zu characters", what, n - 1);
    mw_strlcpy(dst, v, n);
    return 0;
}

static const char *training_kind(const char *operator_name)
{
    static const struct {
        const char *prefix, *kind;
    } kinds[] = {{"pytorchjob", "PyTorchJob"}, {"tfjob", "TFJob"},         {"mpijob", "MPIJob"},
                 {"xgboostjob", "XGBoostJob"}, {"paddlejob", "PaddleJob"}, {"jaxjob", "JAXJob"}};
    for (size_t i = 0; operator_name && i < MW_ARRAY_LEN(kinds); i++)
        if (strncmp(operator_name, kinds[i].prefix, strlen(kinds[i].prefix)) == 0)
            return kinds[i].kind;
    return "TrainingJob";
}

/* The first container of spec whose resources.claims names pod claim
 * name, or NULL. */
static const char *claim_user(json_t *spec, const char *name)
{
    json_t *ctrs = json_object_get(spec, "containers"), *c;
    size_t i;
    json_array_foreach(ctrs, i, c)
    {
        json_t *uses = json_object_get(json_object_get(c, "resources"), "claims"), *u;
        size_t j;
        json_array_foreach(uses, j, u)
        {
            const char *n = str_at(u, "name");
            if (n && !strcmp(n, name)) return str_at(c, "name");
        }
    }
    return NULL;
}

/* DRA: "CLAIM=CONTAINER;" for each ResourceClaim of the pod a container
 * uses (kube.h). Malformed parts are skipped: the pod still counts. */
static void claims_of(json_t *obj, mw_kube_pod *out)
{
    json_t *spec = json_object_get(obj, "spec");
    json_t *statuses = json_object_get(json_object_get(obj, "status"), "resourceClaimStatuses");
    json_t *claims = json_object_get(spec, "resourceClaims"), *rc;
    size_t i, used = 0;
    json_array_foreach(claims, i, rc)
    {
        const char *name = str_at(rc, "name");
        if (!name) continue;
        const char *claim = str_at(rc, "resourceClaimName");
        json_t *st;
        size_t j;
        json_array_foreach(statuses, j, st)
        {
            const char *sn = str_at(st, "name");
            if (!claim && sn && !strcmp(sn, name)) claim = str_at(st, "resourceClaimName");
        }
        const char *ctr = claim ? claim_user(spec, name) : NULL;
        if (!ctr) continue; /* not generated yet, or no container uses it */
        int w = snprintf(out->claim_containers + used, sizeof(out->claim_containers) - used,
                         "%s=%s;", claim, ctr);
        if (w < 0 || (size_t)w >= sizeof(out->claim_containers) - used) {
            out->claim_containers[used] = '\0'; /* does not fit: left out */
            continue;
        }
        used += (size_t)w;
    }
}

int mw_kube_claim_container(const mw_kube_pod *p, const char *claim, char *out, size_t n)
{
    size_t cl = strlen(claim);
    for (const char *e = p->claim_containers; *e;) {
        const char *eq = strchr(e, '='), *end = eq ? strchr(eq, ';') : NULL;
        if (!end) return 0;
        if ((size_t)(eq - e) == cl && !strncmp(e, claim, cl)) {
            size_t len = (size_t)(end - eq - 1);
            if (len >= n) return 0;
            memcpy(out, eq + 1, len);
            out[len] = '\0';
            return 1;
        }
        e = end + 1;
    }
    return 0;
}

static int pod_from_json(json_t *obj, const char *owner_from, mw_kube_pod *out, char *err,
                         size_t errsize)
{
    memset(out, 0, sizeof(*out));
    json_t *md = json_object_get(obj, "metadata");
    if (!json_is_object(md)) return mw_fail(err, errsize, "pod without metadata");
    const char *uid = str_at(md, "uid"), *ns = str_at(md, "namespace"), *name = str_at(md, "name");
    if (!uid || !*uid || !ns || !name)
        return mw_fail(err, errsize, "pod metadata lacks uid, namespace or name");
    if (copy_field(out->uid, sizeof(out->uid), uid, "metadata.uid", err, errsize) < 0 ||
        copy_field(out->ns, sizeof(out->ns), ns, "metadata.namespace", err, errsize) < 0 ||
        copy_field(out->name, sizeof(out->name), name, "metadata.name", err, errsize) < 0 ||
        copy_field(out->rv, sizeof(out->rv), str_at(md, "resourceVersion"),
                   "metadata.resourceVersion", err, errsize) < 0)
        return -1;
    json_t *labels = json_object_get(md, "labels");
    json_t *ann = json_object_get(md, "annotations");
    if (labels && !json_is_object(labels)) return mw_fail(err, errsize, "labels is not an object");
    if (ann && !json_is_object(ann)) return mw_fail(err, errsize, "annotations is not an object");

    /* The controlling owner reference. */
    const char *okind = NULL, *oname = NULL, *oapi = NULL;
    json_t *refs = json_object_get(md, "ownerReferences");
    if (refs && !json_is_array(refs)) return mw_fail(err, errsize, "ownerReferences is not a list");
    size_t i;
    json_t *ref;
    json_array_foreach(refs, i, ref)
    {
        if (!json_is_object(ref))
            return mw_fail(err, errsize, "ownerReferences[%zu] is not an object", i);
        if (!okind || json_is_true(json_object_get(ref, "controller"))) {
            okind = str_at(ref, "kind");
            oname = str_at(ref, "name");
            oapi = str_at(ref, "apiVersion");
        }
    }

    const char *kind = "Pod", *wl = name;
    char trimmed[254];
    const char *v;
    if ((v = labels ? str_at(labels, "notebook-name") : NULL)) {
        kind = "Notebook";
        wl = v;
    } else if ((v = labels ? str_at(labels, "training.kubeflow.org/job-name") : NULL)) {
        wl = v;
        if (okind && oapi && strncmp(oapi, "kubeflow.org/", 13) == 0)
            kind = okind;
        else
            kind = training_kind(str_at(labels, "training.kubeflow.org/operator-name"));
    } else if ((v = labels ? str_at(labels, "jobset.sigs.k8s.io/jobset-name") : NULL)) {
        kind = "TrainJob";
        wl = v;
    } else if (okind && oname) {
        kind = okind;
        wl = oname;
        const char *hash = labels ? str_at(labels, "pod-template-hash") : NULL;
        size_t nl = strlen(oname), hl = hash ? strlen(hash) : 0;
        if (strcmp(okind, "ReplicaSet") == 0 && hl && nl > hl + 1 && oname[nl - hl - 1] == '-' &&
            strcmp(oname + nl - hl, hash) == 0 && nl - hl - 1 < sizeof(trimmed)) {
            memcpy(trimmed, oname, nl - hl - 1);
            trimmed[nl - hl - 1] = '\0';
            kind = "Deployment";
            wl = trimmed;
        }
    }
    if (copy_field(out->workload_kind, sizeof(out->workload_kind), kind, "owner kind", err,
                   errsize) < 0 ||
        copy_field(out->workload, sizeof(out->workload), wl, "workload name", err, errsize) < 0)
        return -1;

    /* KAI's fractions: a number in a string ("0.5", "2000"). */
    const char *frac = ann ? str_at(ann, "gpu-fraction") : NULL;
    const char *gmem = ann ? str_at(ann, "gpu-memory") : NULL;
    char *end;
    double f = frac ? strtod(frac, &end) : 0;
    if (frac && *frac && !*end && f > 0 && f <= 1) out->gpu_fraction = f;
    double m = gmem ? strtod(gmem, &end) : 0;
    if (gmem && *gmem && !*end && m > 0 && m < 1e9) out->gpu_memory_mib = m;

    /* KAI's GPU group and reservation; Kubernetes bounds label values to 63
     * characters and a GPU UUID is 40: longer ones are cut, not refused. */
    if (labels && (v = str_at(labels, "runai-gpu-group")))
        mw_strlcpy(out->gpu_group, v, sizeof(out->gpu_group));
    if (ann && (v = str_at(ann, "run.ai/reserve_for_gpu_index")))
        mw_strlcpy(out->reserved_gpu, v, sizeof(out->reserved_gpu));
    out->kai_reservation =
        out->gpu_group[0] && (out->reserved_gpu[0] || !strcmp(ns, "kai-resource-reservation") ||
                              !strcmp(ns, "runai-reservation"));
    json_t *ctrs = json_object_get(json_object_get(obj, "spec"), "containers");
    if (json_is_array(ctrs) && (v = str_at(json_array_get(ctrs, 0), "name")))
        mw_strlcpy(out->first_container, v, sizeof(out->first_container));

    claims_of(obj, out);

    const char *owner = ns;
    if (owner_from && strncmp(owner_from, "label:", 6) == 0 && labels &&
        (v = str_at(labels, owner_from + 6)))
        owner = v;
    else if (owner_from && strncmp(owner_from, "annotation:", 11) == 0 && ann &&
             (v = str_at(ann, owner_from + 11)))
        owner = v;
    /* An over-long owner value is cut, not refused: the pod still counts. */
    mw_strlcpy(out->owner, owner, sizeof(out->owner));
    return 0;
}

static json_t *load(const char *text, size_t len, char *err, size_t errsize)
{
    if (len > MAX_OBJECT) {
        mw_fail(err, errsize, "object larger than %u bytes", MAX_OBJECT);
        return NULL;
    }
    json_error_t je;
    json_t *j = json_loadb(text, len, 0, &je);
    if (!j)
        mw_fail(err, errsize, "invalid JSON at line %d column %d: %s", je.line, je.column, je.text);
    return j;
}

int mw_kube_pod_parse(const char *text, size_t len, const char *owner_from, mw_kube_pod *out,
                      char *err, size_t errsize)
{
    json_t *j = load(text, len, err, errsize);
    if (!j) return -1;
    int rc = pod_from_json(j, owner_from, out, err, errsize);
    json_decref(j);
    return rc;
}

int mw_kube_list_parse(const char *text, size_t len, const char *owner_from,
                       void (*fn)(void *cls, const mw_kube_pod *pod), void *cls, char *rv,
                       size_t rvsize, char *err, size_t errsize)
{
    json_t *j = load(text, len, err, errsize);
    if (!j) return -1;
    int rc = -1;
    json_t *items = json_object_get(j, "items");
    const char *lrv = str_at(json_object_get(j, "metadata"), "resourceVersion");
    if (!json_is_array(items) && !json_is_null(items)) {
        mw_fail(err, errsize, "not a list: no items");
    } else if (!lrv || strlen(lrv) >= rvsize) {
        mw_fail(err, errsize, "list without a usable metadata.resourceVersion");
    } else if (json_array_size(items) > MW_KUBE_MAX_PODS) {
        mw_fail(err, errsize, "more than %d pods on one node", MW_KUBE_MAX_PODS);
    } else {
        mw_strlcpy(rv, lrv, rvsize);
        rc = 0;
        size_t i;
        json_t *it;
        json_array_foreach(items, i, it)
        {
            mw_kube_pod p;
            char why[256];
            /* One bad pod does not hide the others. */
            if (pod_from_json(it, owner_from, &p, why, sizeof(why)) < 0) continue;
            fn(cls, &p);
            rc++;
        }
    }
    json_decref(j);
    return rc;
}

int mw_kube_event_parse(const char *text, size_t len, const char *owner_from, mw_kube_pod *pod,
                        int *code, char *err, size_t errsize)
{
    memset(pod, 0, sizeof(*pod));
    *code = 0;
    json_t *j = load(text, len, err, errsize);
    if (!j) return -1;
    int rc = -1;
    const char *type = str_at(j, "type");
    json_t *obj = json_object_get(j, "object");
    if (!type || !json_is_object(obj)) {
        mw_fail(err, errsize, "watch event without type or object");
    } else if (strcmp(type, "ERROR") == 0) {
        json_t *c = json_object_get(obj, "code");
        *code = json_is_integer(c) ? (int)json_integer_value(c) : 0;
        rc = MW_KUBE_ERROR;
    } else if (strcmp(type, "BOOKMARK") == 0) {
        const char *rv = str_at(json_object_get(obj, "metadata"), "resourceVersion");
        if (!rv || strlen(rv) >= sizeof(pod->rv))
            mw_fail(err, errsize, "bookmark without a usable resourceVersion");
        else {
            mw_strlcpy(pod->rv, rv, sizeof(pod->rv));
            rc = MW_KUBE_BOOKMARK;
        }
    } else {
        int t = strcmp(type, "ADDED") == 0      ? MW_KUBE_ADDED
                : strcmp(type, "MODIFIED") == 0 ? MW_KUBE_MODIFIED
                : strcmp(type, "DELETED") == 0  ? MW_KUBE_DELETED
                                                : -1;
        if (t < 0)
            mw_fail(err, errsize, "unknown watch event type '%.32s'", type);
        else if (pod_from_json(obj, owner_from, pod, err, errsize) == 0)
            rc = t;
    }
    json_decref(j);
    return rc;
}

/* ---- kubeconfig ---- */

static int b64val(int c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Decode base64 (whitespace ignored) into a NUL-terminated buffer. */
static int b64decode(const char *in, char *out, size_t outsize)
{
    size_t o = 0;
    unsigned acc = 0;
    int bits = 0;
    for (; *in; in++) {
        if (*in == '=' || *in == ' ' || *in == '\n' || *in == '\r') continue;
        int v = b64val((unsigned char)*in);
        if (v < 0) return -1;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o + 1 >= outsize) return -1;
            out[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    out[o] = '\0';
    return 0;
}

static const char *ytext(yaml_node_t *n)
{
    if (!n || n->type != YAML_SCALAR_NODE) return NULL;
    const char *t = (const char *)n->data.scalar.value;
    return strlen(t) == n->data.scalar.length ? t : NULL;
}

static yaml_node_t *yget(yaml_document_t *d, yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE) return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        const char *k = ytext(yaml_document_get_node(d, p->key));
        if (k && strcmp(k, key) == 0) return yaml_document_get_node(d, p->value);
    }
    return NULL;
}

/* In a list of {name: N, KEY: {...}} find N's KEY mapping (the only entry
 * when name is NULL and there is exactly one). */
static yaml_node_t *named(yaml_document_t *d, yaml_node_t *list, const char *name, const char *key)
{
    if (!list || list->type != YAML_SEQUENCE_NODE) return NULL;
    size_t count = (size_t)(list->data.sequence.items.top - list->data.sequence.items.start);
    for (yaml_node_item_t *it = list->data.sequence.items.start; it < list->data.sequence.items.top;
         it++) {
        yaml_node_t *e = yaml_document_get_node(d, *it);
        const char *n = ytext(yget(d, e, "name"));
        if ((name && n && strcmp(n, name) == 0) || (!name && count == 1)) return yget(d, e, key);
    }
    return NULL;
}

static int path_field(char *dst, size_t n, const char *v, const char *base, const char *what,
                      char *err, size_t errsize)
{
    if (!v) return 0;
    int w = v[0] == '/' || !base || !*base ? snprintf(dst, n, "%s", v)
                                           : snprintf(dst, n, "%s/%s", base, v);
    if (w < 0 || (size_t)w >= n)
        return mw_fail(err, errsize, "kubeconfig: %s: path too long", what);
    return 0;
}

static int data_field(char *dst, size_t n, const char *v, const char *what, char *err,
                      size_t errsize)
{
    if (!v) return 0;
    if (b64decode(v, dst, n) < 0)
        return mw_fail(err, errsize, "kubeconfig: %s: invalid base64 or larger than %zu bytes",
                       what, n - 1);
    return 0;
}

static int kubeconfig_doc(yaml_document_t *d, const char *base, mw_kube_creds *c, char *err,
                          size_t errsize)
{
    yaml_node_t *root = yaml_document_get_root_node(d);
    if (!root || root->type != YAML_MAPPING_NODE)
        return mw_fail(err, errsize, "kubeconfig: the top level must be a mapping");
    const char *cur = ytext(yget(d, root, "current-context"));
    if (cur && !*cur) cur = NULL;
    yaml_node_t *ctx = named(d, yget(d, root, "contexts"), cur, "context");
    if (!ctx)
        return mw_fail(err, errsize, "kubeconfig: %s%s%s", cur ? "no context named '" : "",
                       cur ? cur : "no current-context and not exactly one context",
                       cur ? "'" : "");
    const char *cname = ytext(yget(d, ctx, "cluster")), *uname = ytext(yget(d, ctx, "user"));
    if (!cname) return mw_fail(err, errsize, "kubeconfig: the context names no cluster");
    yaml_node_t *cl = named(d, yget(d, root, "clusters"), cname, "cluster");
    if (!cl) return mw_fail(err, errsize, "kubeconfig: no cluster named '%.100s'", cname);
    const char *server = ytext(yget(d, cl, "server"));
    if (!server || !*server)
        return mw_fail(err, errsize, "kubeconfig: cluster '%.100s' has no server", cname);
    if (strlen(server) >= sizeof(c->server))
        return mw_fail(err, errsize, "kubeconfig: server URL too long");
    mw_strlcpy(c->server, server, sizeof(c->server));
    const char *ins = ytext(yget(d, cl, "insecure-skip-tls-verify"));
    c->insecure = ins && strcmp(ins, "true") == 0;
    if (path_field(c->ca_file, sizeof(c->ca_file), ytext(yget(d, cl, "certificate-authority")),
                   base, "certificate-authority", err, errsize) < 0 ||
        data_field(c->ca_data, sizeof(c->ca_data), ytext(yget(d, cl, "certificate-authority-data")),
                   "certificate-authority-data", err, errsize) < 0)
        return -1;
    if (!uname) return 0; /* anonymous */
    yaml_node_t *u = named(d, yget(d, root, "users"), uname, "user");
    if (!u) return mw_fail(err, errsize, "kubeconfig: no user named '%.100s'", uname);
    if (yget(d, u, "exec") || yget(d, u, "auth-provider"))
        return mw_fail(err, errsize,
                       "kubeconfig: user '%.100s' uses an exec or auth-provider "
                       "plugin, which mlwatch does not run; use a token or a client "
                       "certificate",
                       uname);
    const char *tok = ytext(yget(d, u, "token"));
    if (tok && strlen(tok) >= sizeof(c->token))
        return mw_fail(err, errsize, "kubeconfig: token too long");
    if (tok) mw_strlcpy(c->token, tok, sizeof(c->token));
    if (path_field(c->token_file, sizeof(c->token_file), ytext(yget(d, u, "tokenFile")), base,
                   "tokenFile", err, errsize) < 0 ||
        path_field(c->client_cert_file, sizeof(c->client_cert_file),
                   ytext(yget(d, u, "client-certificate")), base, "client-certificate", err,
                   errsize) < 0 ||
        path_field(c->client_key_file, sizeof(c->client_key_file), ytext(yget(d, u, "client-key")),
                   base, "client-key", err, errsize) < 0 ||
        data_field(c->client_cert_data, sizeof(c->client_cert_data),
                   ytext(yget(d, u, "client-certificate-data")), "client-certificate-data", err,
                   errsize) < 0 ||
        data_field(c->client_key_data, sizeof(c->client_key_data),
                   ytext(yget(d, u, "client-key-data")), "client-key-data", err, errsize) < 0)
        return -1;
    /* A certificate without its key (or the reverse) cannot work: say so
     * now rather than as a TLS error on every retry. */
    int cert = c->client_cert_file[0] || c->client_cert_data[0];
    int key = c->client_key_file[0] || c->client_key_data[0];
    if (cert != key)
        return mw_fail(err, errsize, "kubeconfig: user '%.100s' has %s but no %s", uname,
                       cert ? "a client certificate" : "a client key",
                       cert ? "client-key or client-key-data"
                            : "client-certificate or "
                              "client-certificate-data");
    return 0;
}

int mw_kubeconfig_parse(const char *text, size_t len, const char *base_dir, mw_kube_creds *out,
                        char *err, size_t errsize)
{
    memset(out, 0, sizeof(*out));
    if (len > (1u << 20)) return mw_fail(err, errsize, "kubeconfig larger than 1 MiB");
    yaml_parser_t p;
    yaml_document_t d;
    if (!yaml_parser_initialize(&p)) return mw_fail(err, errsize, "cannot initialise YAML");
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    if (!yaml_parser_load(&p, &d)) {
        mw_fail(err, errsize, "kubeconfig:%zu:%zu: YAML syntax error: %s", p.problem_mark.line + 1,
                p.problem_mark.column + 1, p.problem ? p.problem : "unknown");
        yaml_parser_delete(&p);
        return -1;
    }
    int rc = kubeconfig_doc(&d, base_dir, out, err, errsize);
    yaml_document_delete(&d);
    yaml_parser_delete(&p);
    if (rc < 0) memset(out, 0, sizeof(*out));
    return rc;
}

size_t mw_kube_kai_resolve(const mw_kube_pod *pods, size_t n, mw_kube_kai *out, size_t max)
{
    size_t got = 0;
    for (size_t i = 0; i < n && got < max; i++) {
        const mw_kube_pod *p = &pods[i];
        if (!(p->gpu_fraction > 0 || p->gpu_memory_mib > 0) || !p->gpu_group[0]) continue;
        const char *uuid = NULL;
        for (size_t j = 0; j < n && !uuid; j++)
            if (j != i && pods[j].reserved_gpu[0] && !strcmp(pods[j].gpu_group, p->gpu_group))
                uuid = pods[j].reserved_gpu;
        if (!uuid) continue; /* not placed yet, or its reservation pod has not said */
        mw_kube_kai *k = &out[got++];
        memset(k, 0, sizeof(*k));
        mw_strlcpy(k->uid, p->uid, sizeof(k->uid));
        mw_strlcpy(k->ns, p->ns, sizeof(k->ns));
        mw_strlcpy(k->name, p->name, sizeof(k->name));
        mw_strlcpy(k->container, p->first_container, sizeof(k->container));
        mw_strlcpy(k->gpu_uuid, uuid, sizeof(k->gpu_uuid));
        k->gpu_fraction = p->gpu_fraction;
        k->gpu_memory_mib = p->gpu_memory_mib;
    }
    return got;
}
