/* fuzz_kube_event.c - the Kubernetes watch-event, pod and pod-list parsers
 * (src/kube/kube_parse.c) on arbitrary bytes. Checks that every string they
 * return is terminated within its field, that an accepted pod has a UID, a
 * namespace and a workload, and that the event type is in range. */
#include "kube/kube.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok)
{
    if (!ok) abort();
}

static void check_pod(const mw_kube_pod *p)
{
    check(memchr(p->uid, 0, sizeof(p->uid)) != NULL);
    check(memchr(p->ns, 0, sizeof(p->ns)) != NULL);
    check(memchr(p->name, 0, sizeof(p->name)) != NULL);
    check(memchr(p->workload_kind, 0, sizeof(p->workload_kind)) != NULL);
    check(memchr(p->workload, 0, sizeof(p->workload)) != NULL);
    check(memchr(p->owner, 0, sizeof(p->owner)) != NULL);
    check(memchr(p->rv, 0, sizeof(p->rv)) != NULL);
}

static void on_pod(void *cls, const mw_kube_pod *p)
{
    (*(int *)cls)++;
    check_pod(p);
    check(p->uid[0] && p->workload_kind[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    char err[256];
    mw_kube_pod p;
    int code;
    int t = mw_kube_event_parse(text, size, "label:team", &p, &code, err, sizeof(err));
    check(t >= -1 && t <= MW_KUBE_ERROR);
    if (t < 0) check(memchr(err, 0, sizeof(err)) != NULL);
    if (t >= 0) check_pod(&p);
    if (t == MW_KUBE_ADDED || t == MW_KUBE_MODIFIED || t == MW_KUBE_DELETED)
        check(p.uid[0] && p.workload_kind[0] && p.owner[0]);
    if (mw_kube_pod_parse(text, size, "annotation:owner", &p, err, sizeof(err)) == 0) {
        check_pod(&p);
        check(p.uid[0] != '\0');
    }
    int seen = 0;
    char rv[32];
    int n = mw_kube_list_parse(text, size, "namespace", on_pod, &seen, rv, sizeof(rv), err,
                               sizeof(err));
    check(n == -1 || n == seen);
    if (n >= 0) check(memchr(rv, 0, sizeof(rv)) != NULL);
    return 0;
}
