/* fuzz_gpu_version.c - the driver version parser on arbitrary bytes, and the
 * CPU list formatter on the same bytes taken as a bitmap. */
#include "collect/gpu/gpu.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    unsigned a, b, c;
    mw_gpu_parse_driver_version(s, &a, &b, &c);
    uint64_t bits[16] = {0};
    memcpy(bits, data, size < sizeof(bits) ? size : sizeof(bits));
    char list[4096];
    mw_gpu_format_cpulist(bits, 16, list, size % sizeof(list) + 1);
    free(s);
    return 0;
}
