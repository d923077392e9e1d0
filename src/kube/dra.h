/* dra.h - GPUs allocated through Dynamic Resource Allocation, as the API
 * server describes them (resource.k8s.io/v1, GA in Kubernetes 1.34).
 *
 * The kubelet's pod-resources API names a DRA device by its driver, pool
 * and device name (podresources.h); which GPU that is, is published by the
 * driver in this node's ResourceSlices: spec.devices[].attributes.uuid
 * (gpu.nvidia.com publishes GPU-... for a GPU, MIG-... for a MIG device).
 * ResourceClaims (status.allocation.devices.results[] and
 * status.reservedFor[]) say which pod holds which device, for kubelets that
 * do not report dynamic resources. With --kubernetes and --kubernetes-dra
 * (default on) a thread lists both every MW_DRA_INTERVAL_MS with the pod
 * watch's credentials; the kubelet pod-resources poller resolves its DRA
 * rows through mw_dra_resolver(). Bounded: MW_DRA_MAX_DEVICES devices,
 * MW_DRA_MAX_CLAIMS allocations, 64 MiB per list. */
#ifndef MW_DRA_H
#define MW_DRA_H

#include "kube.h"
#include "podresources.h"

#include <stddef.h>

#define MW_DRA_MAX_DEVICES 4096
#define MW_DRA_MAX_CLAIMS 4096
#define MW_DRA_INTERVAL_MS 30000

/* A device of a ResourceSlice with the UUID its driver published. */
typedef struct mw_dra_device {
    char driver[64], pool[254], device[128], uuid[96];
} mw_dra_device;

/* One allocated device of a ResourceClaim, for one pod it is reserved for. */
typedef struct mw_dra_claim {
    char claim_ns[64], claim[254], pod_uid[64], pod[254];
    char driver[64], pool[254], device[128];
} mw_dra_claim;

/* ---- parsing: pure functions, fuzzed (fuzz/fuzz_dra.c) ---- */

/* A ResourceSliceList: each device with a string attribute "uuid" (or
 * "DRIVER/uuid") is called back. Returns the number of such devices, or -1
 * with a message. */
int mw_dra_slices_parse(const char *json, size_t len, void (*fn)(void *cls, const mw_dra_device *d),
                        void *cls, char *err, size_t errsize);
/* A ResourceClaimList: each allocation result of each claim, once per pod
 * in status.reservedFor. Returns the number called back, or -1. */
int mw_dra_claims_parse(const char *json, size_t len, void (*fn)(void *cls, const mw_dra_claim *c),
                        void *cls, char *err, size_t errsize);

/* ---- the poller ---- */

typedef struct mw_dra mw_dra;

typedef struct mw_dra_settings {
    int kubernetes_dra;
} mw_dra_settings;
extern const mw_option_group mw_dra_options;

/* Start the poller with the pod watch's connection: 0 with *out, 1 when
 * off (--kubernetes-dra=false, or no pod watch). */
int mw_dra_start(const mw_config *cfg, mw_kube *k, mw_dra **out);
/* Call fn(cls) after each list that changed what d knows (the kube module
 * kicks the pod-resources poller so that new devices resolve at once). */
void mw_dra_on_change(mw_dra *d, void (*fn)(void *cls), void *cls);
/* What the pod-resources poller calls (podresources.h), valid while d runs. */
const mw_podres_resolver *mw_dra_resolver(mw_dra *d);
void mw_dra_stop(mw_dra *d);

/* The same on given tables (tests): the UUID of a device, and the claim
 * rows of pods that t has no DRA row for, named through lookup. */
int mw_dra_uuid_in(const mw_dra_device *devs, size_t n, const char *driver, const char *pool,
                   const char *device, char *uuid, size_t size);

#endif
