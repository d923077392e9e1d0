/* fuzz_store_gorilla.c - the two Gorilla chunk decoders (src/store/
 * gorilla.c) on arbitrary bytes: mw_gorilla_decode (a whole chunk at once,
 * used by queries) must return exactly what mw_gorilla_next returns sample
 * by sample, the same count and the same bits, and neither may read past
 * the stream. Input: 2 bytes little-endian sample count, then the stream;
 * the seeds are real head chunks. */
#include "store/gorilla.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    uint32_t n = (uint32_t)data[0] | (uint32_t)data[1] << 8;
    /* The stream in its own allocation, so that ASan sees any read past it. */
    size_t nbytes = size - 2;
    uint8_t *buf = malloc(nbytes ? nbytes : 1);
    if (nbytes) memcpy(buf, data + 2, nbytes);
    int64_t *t = malloc((n ? n : 1) * sizeof(int64_t));
    double *v = malloc((n ? n : 1) * sizeof(double));
    size_t got = mw_gorilla_decode(buf, nbytes, n, t, v);
    mw_gorilla_dec d;
    mw_gorilla_dec_init(&d, buf, nbytes, n);
    size_t k = 0;
    int64_t tt;
    double vv;
    while (mw_gorilla_next(&d, &tt, &vv) == 1) {
        if (k >= got || tt != t[k] || memcmp(&vv, &v[k], sizeof(double)) != 0) abort();
        k++;
    }
    if (k != got) abort();
    free(buf);
    free(t);
    free(v);
    return 0;
}
