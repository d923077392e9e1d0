/* fuzz_bundle.c - the OCI bundle annotations parser (collect/bundle.h) on
 * arbitrary bytes: never crashes, and a named result has terminated names. */
#include "collect/bundle.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mw_bundle_names b;
    const char *err = NULL;
    if (mw_bundle_parse((const char *)data, size, &b, &err) > 0 &&
        (strnlen(b.pod, sizeof(b.pod)) == sizeof(b.pod) ||
         strnlen(b.container, sizeof(b.container)) == sizeof(b.container)))
        abort();
    return 0;
}
