/* kube_module.h - the Kubernetes inputs as an agent module of their own:
 * the pod watch (kube.c: who runs what) and the kubelet's pod-resources
 * poller (podresources.c: which GPUs it allocated to whom). The module
 * (kube_module.c) starts and stops them; the stages after it read them
 * through the agent's environment (mw_env.kube), never start them. */
#ifndef MW_KUBE_MODULE_H
#define MW_KUBE_MODULE_H

#include "dra.h"
#include "kube.h"
#include "node_condition.h"
#include "podresources.h"

/* What the Kubernetes inputs offer, for the agent's lifetime; a member is
 * NULL while its input is off (--kubernetes, --kubelet-pod-resources) or
 * failed to start, and in one-shot commands. */
typedef struct mw_kube_inputs {
    mw_kube *pods;                     /* this node's pods: mw_kube_lookup() */
    mw_podres *podres;                 /* the kubelet's device allocations: mw_podres_copy() */
    mw_dra *dra;                       /* ResourceSlices and ResourceClaims (used by podres) */
    mw_node_condition *node_condition; /* the GPUHealthy condition (no readers) */
} mw_kube_inputs;

#endif
