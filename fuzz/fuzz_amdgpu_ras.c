/* fuzz_amdgpu_ras.c - the parser of amdgpu's ras/BLOCK_err_count files
 * (src/collect/amdgpu_ras.c) on arbitrary text: accept only "ue:" and
 * "ce:" (and at most one "de:") lines, never read past the NUL. */
#include "collect/amdgpu_ras.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    mw_amdgpu_ras_count c;
    if (mw_amdgpu_ras_parse(text, &c) == 0 && !c.has_de && c.de != 0) abort();
    free(text);
    return 0;
}
