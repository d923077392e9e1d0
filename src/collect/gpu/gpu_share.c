/* gpu_share.c - splitting a device figure into integer shares that add up
 * to it exactly (largest-remainder method), see gpu.h and docs/gpu.md. */
#include "gpu.h"

#include <string.h>

void mw_gpu_split(uint64_t total, const uint64_t *w, size_t n, uint64_t *out)
{
    if (n == 0) return;
    uint64_t wsum = 0, maxw = 0;
    for (size_t i = 0; i < n; i++) {
        if (w[i] > maxw) maxw = w[i];
    }
    /* Keep total * w and the weight sum within 64 bits by dropping low bits
     * of every weight alike (the ratios barely change). */
    unsigned shift = 0;
    while ((maxw >> shift) > 0 && ((maxw >> shift) > UINT64_MAX / (total ? total : 1) ||
                                   (maxw >> shift) > UINT64_MAX / 2 / (n + 1)))
        shift++;
    for (size_t i = 0; i < n; i++)
        wsum += w[i] >> shift;
    uint64_t given = 0;
    if (wsum == 0) {
        for (size_t i = 0; i < n; i++)
            out[i] = total / n;
        given = total / n * n;
        for (size_t i = 0; given < total; i++, given++)
            out[i]++;
        return;
    }
    /* Floors first, then one unit each to the largest remainders. */
    for (size_t i = 0; i < n; i++) {
        uint64_t prod = total * (w[i] >> shift);
        out[i] = prod / wsum;
        given += out[i];
    }
    while (given < total) {
        size_t best = n;
        uint64_t best_rem = 0;
        for (size_t i = 0; i < n; i++) {
            /* remainder of this part, less what it already got beyond its floor */
            uint64_t floor_i = total * (w[i] >> shift) / wsum;
            if (out[i] != floor_i) continue; /* already got its extra unit */
            uint64_t rem = total * (w[i] >> shift) % wsum;
            if (best == n || rem > best_rem) {
                best = i;
                best_rem = rem;
            }
        }
        if (best == n) break; /* cannot happen: fewer than n leftover units */
        out[best]++;
        given++;
    }
}
