/* fuzz_gpu_mig.c - the MIG profile parser (from MIG device names) and the
 * label-value cleaner on arbitrary bytes. */
#include "collect/gpu/gpu.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    char out[32], clean[97];
    if (mw_gpu_parse_mig_profile(s, out, size % 32 + 1) == 0 && strlen(out) > size) abort();
    mw_gpu_clean_string(clean, sizeof(clean), (const char *)data, size);
    for (const char *p = clean; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) abort();
    if (mw_gpu_parse_mig_profile(clean, out, sizeof(out)) == 0 && !strchr(out, 'g')) abort();
    free(s);
    return 0;
}
