/* podresources.h - which devices the kubelet allocated to which container.
 *
 * The kubelet serves its pod-resources API (gRPC service
 * v1.PodResourcesLister) on the unix socket
 * /var/lib/kubelet/pod-resources/kubelet.sock (under --root). With
 * --kubelet-pod-resources (default on) a thread calls List every
 * MW_PODRES_INTERVAL_MS and keeps the GPU allocations, per container:
 *  - from the device plugin (nvidia.com/gpu, and nvidia.com/gpu.shared as
 *    time-slicing names it when renamed): the GPU UUIDs (GPU-...) or MIG
 *    device UUIDs (MIG-...) it was given; a time-slicing replica
 *    (GPU-...::N) is that GPU, with its replica index, and
 *    GetAllocatableResources says how many replicas each GPU has;
 *  - from Dynamic Resource Allocation (dynamic_resources): each allocated
 *    device's driver/pool/device triplet and its claim; the device's UUID
 *    comes from the ResourceSlices of the API server (kube/dra.h), when the
 *    kube module gave the poller a resolver.
 * So a GPU allocated to a pod counts as held by it even when none of its
 * processes is on the GPU. A missing socket means "not available" and
 * is not an error (no kubelet, or the socket is not mounted); other failures
 * are counted and logged once per quiet period. The table is bounded
 * (MW_PODRES_MAX_ROWS) and so is the response (MW_PODRES_MAX_FRAME). */
#ifndef MW_PODRESOURCES_H
#define MW_PODRESOURCES_H

#include "../core/config.h"

#include <stddef.h>
#include <stdint.h>

#define MW_PODRES_MAX_ROWS 4096
#define MW_PODRES_MAX_FRAME (16u << 20)
#define MW_PODRES_INTERVAL_MS 10000
#define MW_PODRES_SOCKET "/var/lib/kubelet/pod-resources/kubelet.sock"
#define MW_PODRES_RESOURCE "nvidia.com/gpu"
#define MW_PODRES_RESOURCE_SHARED "nvidia.com/gpu.shared"

/* Where an allocation comes from. */
enum { MW_PODRES_DEVICE_PLUGIN, MW_PODRES_DRA, MW_PODRES_CLAIM };

/* One allocated device: (namespace, pod, container) -> device UUID. */
typedef struct mw_podres_row {
    char ns[64];
    char pod[254];
    char container[64]; /* "" for a claim known only from the API server */
    char device[96];    /* GPU-xxxx or MIG-xxxx; "" for a DRA device not resolved */
    int source;         /* MW_PODRES_* */
    int replica;        /* time-slicing replica index (the ::N of the ID), -1: none */
    int replicas;       /* the GPU's replicas (allocatable IDs), 0: unknown */
    /* DRA: the device's triplet and its claim (namespace/name). */
    char driver[64], pool[254], dra_device[128], claim[320];
} mw_podres_row;

typedef struct mw_podres_table {
    mw_podres_row *rows;
    size_t n, cap;
} mw_podres_table;

void mw_podres_table_free(mw_podres_table *t);

/* ---- decoding: a pure function, fuzzed ---- */

/* Decode a List response body: one gRPC frame (flag byte 0 = not
 * compressed, 4-byte big-endian length, the ListPodResourcesResponse). The
 * rows of resources MW_PODRES_RESOURCE(_SHARED) and every DRA device
 * replace t's (replicas 0, DRA devices unresolved). Returns the number of
 * rows, or -1 with a message (t is then empty). */
int mw_podres_decode(const uint8_t *body, size_t len, mw_podres_table *t, char *err,
                     size_t errsize);

/* Decode a GetAllocatableResources response body (same framing) and set
 * the replicas of each row of t that is a replica: the number of
 * allocatable IDs UUID::N of its GPU. Returns the number of GPUs offered
 * as replicas, or -1 with a message (t unchanged). */
int mw_podres_decode_allocatable(const uint8_t *body, size_t len, mw_podres_table *t, char *err,
                                 size_t errsize);

/* "GPU-x::3" -> uuid "GPU-x", returns 3; "GPU-x" -> -1 (not a replica). */
int mw_podres_split_replica(const char *id, char *uuid, size_t n);

/* ---- the poller ---- */

typedef struct mw_podres mw_podres;

/* The poller's settings (podresources.c). */
typedef struct mw_podres_settings {
    int kubelet_pod_resources;
} mw_podres_settings;
extern const mw_option_group mw_podres_options;

/* Resolves a DRA device to its GPU or MIG UUID (kube/dra.c): 1 and uuid,
 * else 0; and lists the claims the API server knows for this node's pods
 * (rows of source MW_PODRES_CLAIM appended to t). */
typedef struct mw_podres_resolver {
    int (*uuid)(void *cls, const char *driver, const char *pool, const char *device, char *uuid,
                size_t n);
    void (*claims)(void *cls, mw_podres_table *t);
    void *cls;
} mw_podres_resolver;

/* Start the poller thread when --kubelet-pod-resources is set: 0 with
 * *out, 1 when off. resolver may be NULL (no API server). */
int mw_podres_start(const mw_config *cfg, const mw_podres_resolver *resolver, mw_podres **out);
/* Resolve the DRA rows of t and add the API server's claims (pods and
 * devices not in t yet); what the poller does after each List. */
void mw_podres_resolve(const mw_podres_resolver *r, mw_podres_table *t);
/* A row, appended to t (NULL when the table is full). */
mw_podres_row *mw_podres_add(mw_podres_table *t);
/* Copy the latest table into t when it changed since *generation (which is
 * updated); returns 1 when copied, 0 when unchanged. */
int mw_podres_copy(mw_podres *p, uint64_t *generation, mw_podres_table *t);
/* Poll now rather than at the next interval (any thread). */
void mw_podres_kick(void *p);
void mw_podres_stop(mw_podres *p);

#endif
