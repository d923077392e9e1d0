/* fuzz_remote_write.c - the remote-write decoder (snappy block + protobuf
 * WriteRequest, src/store/remote_write.c) on arbitrary bodies: it must
 * either refuse with a message or hand back series whose every label is a
 * NUL-terminated string and whose sample count adds up; never crash, never
 * read out of bounds, never allocate past its bound. The first byte picks
 * whether the rest is used as the body (snappy included) or compressed here
 * first, so that the fuzzer also reaches the protobuf decoder. */
#include "store/histogram.h"
#include "store/remote_write.h"

#include <snappy-c.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const uint8_t *body = data + 1;
    size_t len = size - 1;
    char *z = NULL;
    if (data[0] & 1) {
        size_t zl = snappy_max_compressed_length(len);
        z = malloc(zl ? zl : 1);
        if (snappy_compress((const char *)body, len, z, &zl) != SNAPPY_OK) {
            free(z);
            return 0;
        }
        body = (const uint8_t *)z;
        len = zl;
    }
    mw_rw_request r;
    char err[256];
    if (mw_rw_decode(body, len, &r, err, sizeof(err)) == 0) {
        size_t n = 0;
        for (size_t i = 0; i < r.n; i++) {
            for (size_t j = 0; j < r.ts[i].nlabels; j++)
                if (!r.ts[i].labels[j].name || !r.ts[i].labels[j].value ||
                    strlen(r.ts[i].labels[j].name) > MW_RW_MAX_DECODED)
                    abort();
            n += r.ts[i].nsamples;
        }
        if (n != r.nsamples) abort();
        /* TimeSeries.histograms: each pending sample names a decoded,
         * valid histogram of the request. */
        for (size_t i = 0; i < r.n; i++)
            for (size_t j = 0; j < r.ts[i].nsamples; j++) {
                uint64_t b = mw_hist_bits(r.ts[i].samples[j].v);
                if ((b & MW_HIST_TAG_MASK) == MW_HIST_REF_TAG) abort(); /* cleaned on the way in */
                if ((b & MW_HIST_TAG_MASK) != MW_HIST_QREF_TAG) continue;
                if ((b & MW_HIST_PAYLOAD_MASK) >= r.nhists) abort();
                if (mw_hist_validate(&r.hists[b & MW_HIST_PAYLOAD_MASK])) abort();
            }
        for (size_t i = 0; i < r.nmeta; i++) /* WriteRequest.metadata */
            if (!r.meta[i].name || !r.meta[i].type || !r.meta[i].help || !r.meta[i].unit) abort();
    } else if (!err[0]) {
        abort(); /* a refusal always says why */
    }
    mw_rw_request_free(&r);
    free(z);
    return 0;
}
