/* bundle.c - Kubernetes names from a runtime's OCI bundle, see bundle.h. */
#include "bundle.h"
#include "../core/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* The annotation keys of one runtime. */
typedef struct bundle_keys {
    const char *dir_fmt; /* config.json of container %s, relative to the root */
    const char *type, *container, *pod, *namespace_;
} bundle_keys;

static const bundle_keys RUNTIMES[] = {
    {"run/containerd/io.containerd.runtime.v2.task/k8s.io/%s/config.json",
     "io.kubernetes.cri.container-type", "io.kubernetes.cri.container-name",
     "io.kubernetes.cri.sandbox-name", "io.kubernetes.cri.sandbox-namespace"},
    {"var/lib/containers/storage/overlay-containers/%s/userdata/config.json",
     "io.kubernetes.cri-o.ContainerType", "io.kubernetes.container.name", "io.kubernetes.pod.name",
     "io.kubernetes.pod.namespace"},
};
#define NRUNTIMES (sizeof(RUNTIMES) / sizeof(RUNTIMES[0]))

/* The string value of key in obj into out: 1 when present, 0 when absent,
 * -1 when not a string. */
static int take(const json_t *obj, const char *key, char *out, size_t size)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return 0;
    if (!json_is_string(v)) return -1;
    mw_strlcpy(out, json_string_value(v), size);
    return 1;
}

int mw_bundle_parse(const char *text, size_t len, mw_bundle_names *out, const char **err)
{
    memset(out, 0, sizeof(*out));
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root || !json_is_object(root)) {
        json_decref(root);
        *err = "not a JSON object";
        return -1;
    }
    const json_t *ann = json_object_get(root, "annotations");
    int rc = 0;
    if (ann && !json_is_object(ann)) {
        *err = "annotations is not an object";
        rc = -1;
    }
    for (size_t r = 0; rc == 0 && ann && r < NRUNTIMES; r++) {
        const bundle_keys *k = &RUNTIMES[r];
        char type[16] = "";
        int t = take(ann, k->type, type, sizeof(type));
        int p = take(ann, k->pod, out->pod, sizeof(out->pod));
        int n = take(ann, k->namespace_, out->namespace_, sizeof(out->namespace_));
        int c = take(ann, k->container, out->container, sizeof(out->container));
        if (t < 0 || p < 0 || n < 0 || c < 0) {
            *err = "a Kubernetes annotation is not a string";
            rc = -1;
        } else if (t > 0 && p > 0 && out->pod[0]) {
            out->sandbox = strcmp(type, "sandbox") == 0;
            if (out->sandbox) out->container[0] = '\0';
            rc = 1;
        } else {
            memset(out, 0, sizeof(*out));
        }
    }
    if (rc < 0) memset(out, 0, sizeof(*out));
    json_decref(root);
    return rc;
}

int mw_bundle_read(const mw_hostfs *host, const char *id, mw_buf *scratch, mw_bundle_names *out,
                   char *path, int *err, const char **what)
{
    memset(out, 0, sizeof(*out));
    for (size_t r = 0; r < NRUNTIMES; r++) {
        snprintf(path, 160, RUNTIMES[r].dir_fmt, id);
        int rc = mw_hostfs_read(host, path, scratch, MW_BUNDLE_MAX);
        if (rc == -ENOENT || rc == -ENOTDIR) continue;
        if (rc < 0) {
            *err = rc;
            *what = rc == -EFBIG ? "OCI bundle config.json larger than 1 MiB; its names are ignored"
                                 : "cannot read the OCI bundle";
            return -1;
        }
        const char *perr = NULL;
        int got = mw_bundle_parse(scratch->data, scratch->len, out, &perr);
        if (got < 0) {
            *err = 0;
            *what = perr;
            return -1;
        }
        if (got > 0) return 1;
    }
    return 0;
}
