/* podresources.h - which devices the kubelet allocated to which container.
 *
 * The kubelet serves its pod-resources API (gRPC service
 * v1.PodResourcesLister) on the unix socket
 * /var/lib/kubelet/pod-resources/kubelet.sock (under --root). With
 * --kubelet-pod-resources (default on) a thread calls List every
 * MW_PODRES_INTERVAL_MS and keeps the nvidia.com/gpu allocations: per
 * container, the GPU UUIDs (GPU-...) or MIG device UUIDs (MIG-...) it was
 * given. So a GPU allocated to a pod counts as held by it even when none of
 * its processes is on the GPU. A missing socket means "not available" and
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

/* One allocated device: (namespace, pod, container) -> device UUID. */
typedef struct mw_podres_row {
    char ns[64];
    char pod[254];
    char container[64];
    char device[96]; /* GPU-xxxx or MIG-xxxx */
} mw_podres_row;

typedef struct mw_podres_table {
    mw_podres_row *rows;
    size_t n, cap;
} mw_podres_table;

void mw_podres_table_free(mw_podres_table *t);

/* ---- decoding: a pure function, fuzzed ---- */

/* Decode a List response body: one gRPC frame (flag byte 0 = not
 * compressed, 4-byte big-endian length, the ListPodResourcesResponse). The
 * rows of resource MW_PODRES_RESOURCE replace t's. Returns the number of
 * rows, or -1 with a message (t is then empty). */
int mw_podres_decode(const uint8_t *body, size_t len, mw_podres_table *t, char *err,
                     size_t errsize);

/* ---- the poller ---- */

typedef struct mw_podres mw_podres;

/* The poller's settings (podresources.c). */
typedef struct mw_podres_settings {
    int kubelet_pod_resources;
} mw_podres_settings;
extern const mw_option_group mw_podres_options;

/* Start the poller thread when --kubelet-pod-resources is set: 0 with
 * *out, 1 when off. */
int mw_podres_start(const mw_config *cfg, mw_podres **out);
/* Copy the latest table into t when it changed since *generation (which is
 * updated); returns 1 when copied, 0 when unchanged. */
int mw_podres_copy(mw_podres *p, uint64_t *generation, mw_podres_table *t);
void mw_podres_stop(mw_podres *p);

#endif
