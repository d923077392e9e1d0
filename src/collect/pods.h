/* pods.h - Kubernetes names of pods and containers, without an API server.
 *
 * The kubelet writes, for every pod and container on the node:
 *   /var/log/pods/<namespace>_<pod>_<uid>/<container>/<restart>.log
 *   /var/log/containers/<pod>_<namespace>_<container>-<id>.log  (a symlink)
 * Namespaces, pod names and container names contain no '_' (they are DNS
 * labels and subdomains), so the folder and link names alone map a pod UID to
 * its namespace and name and a container ID to its name. Links are never
 * followed nor read: their targets are absolute host paths, outside --root.
 *
 * The index is rebuilt by mw_pods_scan() (the two folders and each pod's
 * folder are listed, no file is opened); the cgroup collector decides when
 * (docs/containers.md). A pod's folder holds one folder per container the
 * kubelet started, never one for the sandbox. */
#ifndef MW_PODS_H
#define MW_PODS_H

#include "../core/hostfs.h"

#include <stddef.h>
#include <stdint.h>

#define MW_PODS_MAX 16384            /* pod folders indexed at most */
#define MW_PODS_MAX_CONTAINERS 32768 /* container links indexed at most */

typedef struct mw_pod_info {
    char uid[48];
    char namespace_[64]; /* DNS label: 63 characters at most */
    char name[254];      /* DNS subdomain: 253 characters at most */
    int ncontainers;     /* container folders in the pod's log folder */
    char sole[64];       /* the container folder's name when ncontainers == 1 */
} mw_pod_info;

typedef struct mw_ctr_info {
    char id[72];
    char name[64];
    char namespace_[64];
    char pod[254];
} mw_ctr_info;

typedef struct mw_pods mw_pods;

mw_pods *mw_pods_new(void);
void mw_pods_free(mw_pods *p);

typedef struct mw_pods_error {
    const char *path; /* "var/log/pods" or "var/log/containers" */
    int err;          /* -errno, or 0 when the index is full */
    const char *what;
} mw_pods_error;

/* Rebuild the index from var/log/pods and var/log/containers under host.
 * A missing folder is an empty one (a node without Kubernetes). Entries whose
 * names do not have the kubelet's form are skipped. Returns 0, or fills *err
 * (when err is not NULL) and returns -1 after indexing what it could: an
 * unreadable folder, or more entries than the limits above. */
int mw_pods_scan(mw_pods *p, const mw_hostfs *host, mw_pods_error *err);
/* Incremented by every scan. */
uint64_t mw_pods_generation(const mw_pods *p);
size_t mw_pods_npods(const mw_pods *p);
size_t mw_pods_ncontainers(const mw_pods *p);

/* The pod with this UID ("-" form) or container with this ID, or NULL. */
const mw_pod_info *mw_pods_find_pod(const mw_pods *p, const char *uid);
const mw_ctr_info *mw_pods_find_container(const mw_pods *p, const char *id);

/* "<namespace>_<pod>_<uid>" -> out. Returns 0 or -1. */
int mw_parse_pod_log_dir(const char *name, mw_pod_info *out);
/* "<pod>_<namespace>_<container>-<id>.log" -> out. Returns 0 or -1. */
int mw_parse_container_log_name(const char *name, mw_ctr_info *out);

#endif
