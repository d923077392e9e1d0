/* tscodec.h - the chunk codec of compacted blocks (block format 2).
 *
 * Telemetry is rarely a full-precision float: utilisation and temperatures
 * are integers, power has milliwatt resolution, counters grow by regular
 * steps, clocks take a few states. Per chunk the encoder tries what the
 * values are and keeps the smallest that decodes to exactly the same bits:
 *   - a dictionary of at most 16 distinct values (one value: nothing per
 *     sample), indices one byte each;
 *   - decimals: every value is m / 10^d for an integer m (|m| < 2^53) and
 *     d in 0..9, checked per value at encode time (the decoder computes
 *     (double)m / 10^d, one correctly rounded IEEE division, so the check
 *     is the guarantee); m as deltas or deltas of deltas, divided by their
 *     greatest common divisor, zigzag varints;
 *   - Gorilla XOR (gorilla.h) for everything else (NaN payloads, -0,
 *     random bits ...).
 * Timestamps: nothing per sample when they are regular, else deltas of
 * deltas (divided by their gcd) as varints. The chunk is then compressed
 * with zstd when that is smaller. Layout: docs/store.md ("Block"). */
#ifndef MW_TSCODEC_H
#define MW_TSCODEC_H

#include <stddef.h>
#include <stdint.h>

/* Most samples one chunk may hold (the decoder refuses more). */
#define MW_TSC_MAX_SAMPLES 4096

/* What a chunk's values were encoded as. */
enum { MW_TSC_DICT, MW_TSC_DECIMAL, MW_TSC_GORILLA, MW_TSC_KINDS };
extern const char *const mw_tsc_kind_names[MW_TSC_KINDS];

typedef struct mw_tsc_enc mw_tsc_enc;
/* Encoder with its buffers and zstd context (one per writing thread). */
mw_tsc_enc *mw_tsc_enc_new(void);
void mw_tsc_enc_free(mw_tsc_enc *e);
/* Encode n samples (1..MW_TSC_MAX_SAMPLES); the bytes stay valid until the
 * next call. *kind (may be NULL) is what the values were encoded as. */
const uint8_t *mw_tsc_encode(mw_tsc_enc *e, const int64_t *t, const double *v, size_t n,
                             size_t *len, int *kind);

/* Decode a chunk of n samples into t[0..n), v[0..n): 0, or -1 when the bytes
 * are not a valid chunk of n samples (never reads past len; memory used is
 * bounded by n). *kind (may be NULL) as for mw_tsc_encode. */
int mw_tsc_decode(const uint8_t *p, size_t len, uint32_t n, int64_t *t, double *v, int *kind);

#endif
