/* fuzz_gpu_pci.c - the PCI bus ID parser (NVML busId, ROCm BDFID text) on
 * arbitrary bytes; a parsed ID must parse again to itself. */
#include "collect/gpu/gpu.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = '\0';
    char out[32], again[32];
    size_t cap = size % 32 + 1; /* small buffers too */
    if (mw_gpu_parse_pci_bus_id(s, out, cap) == 0) {
        if (mw_gpu_parse_pci_bus_id(out, again, sizeof(again)) != 0 || strcmp(out, again) != 0)
            abort();
    }
    free(s);
    return 0;
}
