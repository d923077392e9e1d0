/* amdgpu_ras.h - the parser of amdgpu's RAS error counters
 * (/sys/class/drm/cardN/device/ras/BLOCK_err_count), for the amdgpu_ras
 * collector (amdgpu_ras.c) and its fuzz target. */
#ifndef MW_AMDGPU_RAS_H
#define MW_AMDGPU_RAS_H

#include <stdint.h>

/* One counter file: the kernel writes "ue: N\nce: M\n", and for the UMC
 * (memory controller) block on newer kernels a third line "de: K"
 * (deferred errors). */
typedef struct mw_amdgpu_ras_count {
    uint64_t ue, ce, de;
    int has_de;
} mw_amdgpu_ras_count;

/* Returns 0, or -1 when the text is not of that form (each of ue and ce
 * exactly once, de at most once, nothing else). */
int mw_amdgpu_ras_parse(const char *text, mw_amdgpu_ras_count *out);

#endif
