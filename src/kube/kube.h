/* kube.h - this node's pods from the Kubernetes API server: who runs what.
 *
 * With --kubernetes the agent lists the pods of its node
 * (fieldSelector=spec.nodeName=NODE) and then watches them from the list's
 * resourceVersion on its own thread; a dropped watch reconnects with
 * backoff (1 s doubling to 30 s), a 410 Gone (resourceVersion too old)
 * lists again. Credentials: the in-cluster service account
 * (/var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt},
 * KUBERNETES_SERVICE_HOST/PORT) or a kubeconfig (--kubeconfig). The table
 * keeps, per pod UID, only what mlwatch uses: namespace, name, the workload
 * (kind and name) and the owner; it is bounded (MW_KUBE_MAX_PODS). */
#ifndef MW_KUBE_H
#define MW_KUBE_H

#include "../core/buf.h"
#include "../core/config.h"

#include <stddef.h>
#include <stdint.h>

#define MW_KUBE_MAX_PODS 4096
#define MW_KUBE_MAX_KAI 256 /* fractional pods resolved per node (mw_kube_kai_list) */

typedef struct mw_kube_pod {
    char uid[64];
    char ns[64];
    char name[254];
    char workload_kind[32]; /* Notebook, PyTorchJob, TrainJob, Job, StatefulSet, ... */
    char workload[254];
    char owner[254];
    char rv[32]; /* resourceVersion of this object */
    /* KAI scheduler's GPU sharing annotations: gpu-fraction (the share of
     * one GPU, 0 < f <= 1) and gpu-memory (MiB of one GPU); 0 when absent
     * or not a valid number. */
    double gpu_fraction, gpu_memory_mib;
    /* KAI's shared GPU: the runai-gpu-group label (same value on a
     * fractional pod and on the reservation pod that holds its GPU) and,
     * on the reservation pod, run.ai/reserve_for_gpu_index (the GPU's
     * UUID, which the reservation pod sets once it runs). "" when absent. */
    char gpu_group[64];
    char reserved_gpu[96];
    /* A KAI reservation pod: it holds a shared GPU for the fractional pods
     * of its group (a runai-gpu-group label, in kai-resource-reservation or
     * Run:ai's runai-reservation, or with reserve_for_gpu_index); the GPU
     * is theirs, not a session of its own. */
    int kai_reservation;
    char first_container[64]; /* spec.containers[0].name */
    /* DRA: which container uses each of the pod's ResourceClaims,
     * "CLAIM=CONTAINER;..." with CLAIM the ResourceClaim's name
     * (spec.resourceClaims[].resourceClaimName, or for a template
     * status.resourceClaimStatuses[].resourceClaimName) and CONTAINER the
     * first of spec.containers whose resources.claims names it; claims that
     * do not fit are left out. */
    char claim_containers[512];
} mw_kube_pod;

/* The container of pod p that uses ResourceClaim claim (its name, in the
 * pod's namespace): 1 with out, else 0. */
int mw_kube_claim_container(const mw_kube_pod *p, const char *claim, char *out, size_t n);

/* A KAI fractional pod (gpu-fraction or gpu-memory) and the GPU its group's
 * reservation pod holds: what tells a fraction's GPU before (or without)
 * a process of the pod on it. */
typedef struct mw_kube_kai {
    char uid[64], ns[64], name[254];
    char container[64]; /* the pod's first container: the fraction is the pod's */
    char gpu_uuid[96];
    double gpu_fraction, gpu_memory_mib;
} mw_kube_kai;

/* The fractional pods among pods[0..n) whose group has a reservation pod
 * with its GPU's UUID, at most max into out; returns how many. */
size_t mw_kube_kai_resolve(const mw_kube_pod *pods, size_t n, mw_kube_kai *out, size_t max);

typedef struct mw_kube mw_kube;

/* The pod watch's settings (kube.c). */
typedef struct mw_kube_settings {
    int kubernetes;
    char kubeconfig[PATH_MAX];
    char owner_from[256]; /* "namespace", "label:KEY" or "annotation:KEY" */
} mw_kube_settings;
extern const mw_option_group mw_kube_options;

/* Start the watcher thread when --kubernetes is set: 0 with *out, 1 when
 * off, -1 with a message (no credentials, unreadable kubeconfig). */
int mw_kube_start(const mw_config *cfg, mw_kube **out, char *err, size_t errsize);
/* Find a pod by UID, else by namespace and name. Returns 1 and fills out. */
int mw_kube_lookup(mw_kube *k, const char *uid, const char *ns, const char *name, mw_kube_pod *out);
/* 1 when the pod ns/name is a KAI reservation pod (any thread); a pod not
 * known yet counts as one when it is in a KAI reservation namespace. */
int mw_kube_is_kai_reservation(mw_kube *k, const char *ns, const char *name);
/* mw_kube_kai_resolve over this node's pods (any thread). */
size_t mw_kube_kai_list(mw_kube *k, mw_kube_kai *out, size_t max);
void mw_kube_stop(mw_kube *k);

/* One call to the API server with the pod watch's credentials, from any
 * thread while k runs: method "GET" (body NULL) or "PATCH" (body with its
 * content type), path from /api or /apis with its query. Returns the HTTP
 * status with the answer (up to max bytes) in out (may be NULL), or -1
 * with a message naming the path (no credentials in it). */
long mw_kube_call(mw_kube *k, const char *method, const char *path, const char *content_type,
                  const char *body, size_t max, mw_buf *out, char *err, size_t errsize);
/* 1 once the node's pods were listed (the credentials work). */
int mw_kube_listed(mw_kube *k);
/* The node whose pods are watched (--node-name, $NODE_NAME, host name). */
const char *mw_kube_node(const mw_kube *k);

/* ---- parsing (kube_parse.c): pure functions, fuzzed ---- */

/* How to connect: from a kubeconfig or the service account. */
typedef struct mw_kube_creds {
    char server[512];
    char ca_file[PATH_MAX]; /* certificate-authority, or a file written from -data */
    char ca_data[8192];     /* certificate-authority-data, decoded PEM ("" if none) */
    char token[4096];
    char token_file[PATH_MAX];
    char client_cert_file[PATH_MAX], client_key_file[PATH_MAX];
    char client_cert_data[8192], client_key_data[8192];
    int insecure;
} mw_kube_creds;

/* Parse a kubeconfig (its current-context, else the only context). Relative
 * file paths are taken relative to base_dir. Returns 0, or -1 with a message. */
int mw_kubeconfig_parse(const char *text, size_t len, const char *base_dir, mw_kube_creds *out,
                        char *err, size_t errsize);

/* Parse one pod object (JSON text). owner_from: "namespace", "label:KEY",
 * "annotation:KEY". Returns 0 or -1 with a message. */
int mw_kube_pod_parse(const char *json, size_t len, const char *owner_from, mw_kube_pod *out,
                      char *err, size_t errsize);

/* Parse a PodList: calls fn for each pod, sets the list's resourceVersion.
 * Returns the number of pods, or -1 with a message. */
int mw_kube_list_parse(const char *json, size_t len, const char *owner_from,
                       void (*fn)(void *cls, const mw_kube_pod *pod), void *cls, char *rv,
                       size_t rvsize, char *err, size_t errsize);

enum { MW_KUBE_ADDED, MW_KUBE_MODIFIED, MW_KUBE_DELETED, MW_KUBE_BOOKMARK, MW_KUBE_ERROR };

/* Parse one watch event line. ERROR events set *code (410 = Gone). For a
 * BOOKMARK only pod->rv is set. Returns the event type, or -1. */
int mw_kube_event_parse(const char *json, size_t len, const char *owner_from, mw_kube_pod *pod,
                        int *code, char *err, size_t errsize);

#endif
