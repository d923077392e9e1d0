/* fuzz_store_gorilla_roundtrip.c - Gorilla encode then decode (src/store/
 * gorilla.c): every (timestamp, value) sequence the fuzzer makes must come
 * back bit for bit from both decoders, chunk by chunk as the head cuts
 * them, and each append must grow the chunk by exactly the bits that
 * mw_gorilla_bits_after predicted.
 *
 * Input: 8 bytes of the first timestamp and 8 of the first value's bits,
 * then one control byte per sample followed by its operands. Bits 0-1 of
 * the control byte give the value: 0 raw 8 bytes of bits, 1 the previous
 * value plus a signed byte (large counters with small steps), 2 the
 * previous bits with one bit flipped (a byte says which), 3 the previous
 * value again. Bits 2-3 give the timestamp: 0 raw 8 bytes, 1 the previous
 * plus 15 s and a signed byte of jitter, 2 the previous plus a signed 16-bit
 * step, 3 the previous again. */
#include "store/gorilla.h"
#include "store/head.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MAX_SAMPLES = 4096 };

typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

static int take(reader *r, void *out, size_t k)
{
    if (r->n < k) return 0;
    memcpy(out, r->p, k);
    r->p += k;
    r->n -= k;
    return 1;
}

/* Encode n samples from a fresh chunk, decode them both ways, compare. */
static void check_chunk(const int64_t *t, const uint64_t *vbits, size_t n, uint8_t *buf,
                        int64_t *gt, double *gv)
{
    mw_gorilla_enc e;
    mw_gorilla_enc_init(&e);
    for (size_t i = 0; i < n; i++) {
        double v;
        memcpy(&v, &vbits[i], sizeof(v));
        uint32_t predicted = mw_gorilla_bits_after(&e, t[i], v);
        mw_gorilla_append(&e, buf, t[i], v);
        if (e.nbits != predicted) abort();
    }
    /* The stream in its own allocation, so that ASan sees a read past it. */
    size_t nbytes = mw_gorilla_bytes(&e);
    uint8_t *stream = malloc(nbytes ? nbytes : 1);
    memcpy(stream, buf, nbytes);
    if (mw_gorilla_decode(stream, nbytes, (uint32_t)n, gt, gv) != n) abort();
    mw_gorilla_dec d;
    mw_gorilla_dec_init(&d, stream, nbytes, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        int64_t tt;
        double vv;
        if (mw_gorilla_next(&d, &tt, &vv) != 1) abort();
        if (tt != t[i] || gt[i] != t[i]) abort();
        if (memcmp(&vv, &vbits[i], 8) != 0 || memcmp(&gv[i], &vbits[i], 8) != 0) abort();
    }
    int64_t tt;
    double vv;
    if (mw_gorilla_next(&d, &tt, &vv) != 0) abort();
    free(stream);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reader r = {data, size};
    static int64_t t[MAX_SAMPLES], gt[MAX_SAMPLES];
    static uint64_t vbits[MAX_SAMPLES];
    static double gv[MAX_SAMPLES];
    static uint8_t buf[MAX_SAMPLES * MW_GORILLA_MAX_SAMPLE_BYTES + 32];
    if (!take(&r, &t[0], 8) || !take(&r, &vbits[0], 8)) return 0;
    size_t n = 1;
    uint8_t ctl;
    while (n < MAX_SAMPLES && take(&r, &ctl, 1)) {
        uint64_t b = vbits[n - 1];
        int8_t small;
        uint8_t which;
        double v;
        switch (ctl & 3) {
        case 0:
            if (!take(&r, &b, 8)) return 0;
            break;
        case 1:
            if (!take(&r, &small, 1)) return 0;
            memcpy(&v, &b, 8);
            v += small;
            memcpy(&b, &v, 8);
            break;
        case 2:
            if (!take(&r, &which, 1)) return 0;
            b ^= 1ull << (which & 63);
            break;
        default:
            break;
        }
        uint64_t ts = (uint64_t)t[n - 1];
        int16_t step;
        switch ((ctl >> 2) & 3) {
        case 0:
            if (!take(&r, &ts, 8)) return 0;
            break;
        case 1:
            if (!take(&r, &small, 1)) return 0;
            ts += 15000 + (uint64_t)(int64_t)small;
            break;
        case 2:
            if (!take(&r, &step, 2)) return 0;
            ts += (uint64_t)(int64_t)step;
            break;
        default:
            break;
        }
        t[n] = (int64_t)ts;
        vbits[n] = b;
        n++;
    }
    /* The whole sequence as one chunk, then cut as the head cuts. */
    check_chunk(t, vbits, n, buf, gt, gv);
    size_t start = 0;
    while (start < n) {
        mw_gorilla_enc e;
        mw_gorilla_enc_init(&e);
        size_t i = start;
        while (i < n && mw_gorilla_bytes(&e) < MW_HEAD_CHUNK_BYTES) {
            double v;
            memcpy(&v, &vbits[i], 8);
            mw_gorilla_append(&e, buf, t[i], v);
            i++;
        }
        check_chunk(t + start, vbits + start, i - start, buf, gt, gv);
        start = i;
    }
    return 0;
}
