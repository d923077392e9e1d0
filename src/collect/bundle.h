/* bundle.h - Kubernetes names of a container from its runtime's OCI bundle.
 *
 * The CRI runtimes write each container's OCI runtime spec on the node, with
 * the names the kubelet gave them as annotations:
 *   containerd: run/containerd/io.containerd.runtime.v2.task/k8s.io/<id>/config.json
 *     io.kubernetes.cri.container-type   "sandbox" or "container"
 *     io.kubernetes.cri.container-name   (containers only)
 *     io.kubernetes.cri.sandbox-name, io.kubernetes.cri.sandbox-namespace
 *   CRI-O: var/lib/containers/storage/overlay-containers/<id>/userdata/config.json
 *     io.kubernetes.cri-o.ContainerType  "sandbox" or "container"
 *     io.kubernetes.container.name, io.kubernetes.pod.name,
 *     io.kubernetes.pod.namespace
 * These are the runtime's own records, so they name a container before the
 * kubelet writes its logs and tell the sandbox apart from the containers.
 * A bundle does not change during its container's life: the cgroup collector
 * reads it once per container (docs/containers.md). */
#ifndef MW_BUNDLE_H
#define MW_BUNDLE_H

#include "../core/hostfs.h"

#include <stddef.h>

#define MW_BUNDLE_MAX (1024 * 1024) /* config.json read at most (they are tens of KiB) */

typedef struct mw_bundle_names {
    int sandbox; /* the pod's sandbox (pause) container */
    char namespace_[64];
    char pod[254];
    char container[64]; /* empty for a sandbox */
} mw_bundle_names;

/* Take the names from the "annotations" object of an OCI runtime spec
 * (text[0..len)). Returns 1 when the annotations name a Kubernetes container
 * or sandbox (container type and pod name present), 0 when they do not (a
 * spec without them), -1 when the text is not a JSON object or a known
 * annotation is not a string (err is set). */
int mw_bundle_parse(const char *text, size_t len, mw_bundle_names *out, const char **err);

/* Read the bundle of container ID under host, containerd's first then
 * CRI-O's. Returns 1 with *out filled, 0 when neither exists (or names
 * nothing), or -1 with *path set to the file and *err (a negative errno, or
 * 0 when malformed) and *what set: an unreadable, oversized or malformed
 * config.json. path must hold 160 bytes. */
int mw_bundle_read(const mw_hostfs *host, const char *id, mw_buf *scratch, mw_bundle_names *out,
                   char *path, int *err, const char **what);

#endif
