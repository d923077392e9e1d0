/* fuzz_dra.c - the ResourceSlice and ResourceClaim list parsers
 * (src/kube/dra.c) on arbitrary bytes: every device and claim they hand
 * back has NUL-terminated fields within their sizes; never crash. */
#include "kube/dra.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check(int ok)
{
    if (!ok) abort();
}

static void on_device(void *cls, const mw_dra_device *d)
{
    (void)cls;
    check(memchr(d->driver, 0, sizeof(d->driver)) && memchr(d->pool, 0, sizeof(d->pool)) &&
          memchr(d->device, 0, sizeof(d->device)) && memchr(d->uuid, 0, sizeof(d->uuid)) &&
          d->uuid[0]);
}

static void on_claim(void *cls, const mw_dra_claim *c)
{
    (void)cls;
    check(memchr(c->claim, 0, sizeof(c->claim)) && memchr(c->pod_uid, 0, sizeof(c->pod_uid)) &&
          memchr(c->device, 0, sizeof(c->device)) && c->pod_uid[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    mw_dra_slices_parse((const char *)data, size, on_device, NULL, err, sizeof(err));
    mw_dra_claims_parse((const char *)data, size, on_claim, NULL, err, sizeof(err));
    return 0;
}
