/* fuzz_store_tscodec.c - the chunk decoder of block format 2 (src/store/
 * tscodec.c) on arbitrary bytes: it must refuse or decode, never read past
 * the chunk, never use more memory than its per-thread scratch (bounded by
 * MW_TSC_MAX_SAMPLES), and whatever it decodes must encode again to a chunk
 * that decodes to the same timestamps and value bits. Input: 2 bytes
 * little-endian sample count, then the chunk; seeds are chunks of each
 * encoding (dictionary, decimal with exceptions, Gorilla; raw and zstd). */
#include "store/tscodec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    uint32_t n = (uint32_t)data[0] | (uint32_t)data[1] << 8;
    size_t len = size - 2;
    uint8_t *buf = malloc(len ? len : 1); /* its own allocation: ASan sees overreads */
    if (len) memcpy(buf, data + 2, len);
    size_t cap = n && n <= MW_TSC_MAX_SAMPLES ? n : 1;
    int64_t *t = malloc(cap * sizeof(int64_t)), *t2 = malloc(cap * sizeof(int64_t));
    double *v = malloc(cap * sizeof(double)), *v2 = malloc(cap * sizeof(double));
    int ok = n <= MW_TSC_MAX_SAMPLES && mw_tsc_decode(buf, len, n, t, v, NULL) == 0;
    if (ok) {
        mw_tsc_enc *e = mw_tsc_enc_new();
        size_t l2;
        const uint8_t *p = mw_tsc_encode(e, t, v, n, &l2, NULL);
        if (mw_tsc_decode(p, l2, n, t2, v2, NULL) != 0 || memcmp(t, t2, n * sizeof(int64_t)) ||
            memcmp(v, v2, n * sizeof(double)))
            abort();
        mw_tsc_enc_free(e);
    }
    free(t);
    free(t2);
    free(v);
    free(v2);
    free(buf);
    return 0;
}
