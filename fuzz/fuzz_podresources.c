/* fuzz_podresources.c - the kubelet pod-resources response decoders (gRPC
 * frame + protobuf ListPodResourcesResponse with device-plugin and DRA
 * devices, and AllocatableResourcesResponse, src/kube/podresources.c) on
 * arbitrary bodies: each must either refuse with a message or hand back at
 * most MW_PODRES_MAX_ROWS rows of NUL-terminated strings; never crash,
 * never read out of bounds. */
#include "kube/podresources.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mw_podres_table t = {0};
    char err[256];
    int n = mw_podres_decode(data, size, &t, err, sizeof(err));
    if (n < 0 && (t.n != 0 || !err[0])) abort();
    if (n >= 0 && ((size_t)n != t.n || t.n > MW_PODRES_MAX_ROWS)) abort();
    for (size_t i = 0; i < t.n; i++)
        if (strlen(t.rows[i].ns) >= sizeof(t.rows[i].ns) ||
            strlen(t.rows[i].device) >= sizeof(t.rows[i].device) ||
            strlen(t.rows[i].claim) >= sizeof(t.rows[i].claim) ||
            strlen(t.rows[i].dra_device) >= sizeof(t.rows[i].dra_device))
            abort();
    /* The same body as an allocatable answer, counted into the rows. */
    int ids = mw_podres_decode_allocatable(data, size, &t, err, sizeof(err));
    if (ids > MW_PODRES_MAX_ROWS) abort();
    for (size_t i = 0; i < t.n; i++)
        if (t.rows[i].replicas < 0 || t.rows[i].replicas > MW_PODRES_MAX_ROWS) abort();
    mw_podres_table_free(&t);
    return 0;
}
