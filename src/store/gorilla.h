/* gorilla.h - Gorilla-style compression of (timestamp, value) samples.
 *
 * Timestamps are delta-of-delta encoded, values XOR-encoded against the
 * previous value (Pelkonen et al., "Gorilla", VLDB 2015; the bucket sizes of
 * Prometheus' XOR chunks). All arithmetic on timestamps is modulo 2^64, so
 * any sequence of int64 timestamps round-trips exactly, and values are kept
 * as raw bits, so every NaN payload (the Prometheus stale marker
 * 0x7ff0000000000002 included) comes back bit for bit.
 *
 * The encoder state is kept apart from the bytes so that the head can keep
 * one small state per series and the bytes in a buffer sized to fit. */
#ifndef MW_GORILLA_H
#define MW_GORILLA_H

#include <stddef.h>
#include <stdint.h>

/* The most bytes one appended sample can add to a chunk (4 + 64 timestamp
 * bits, 2 + 5 + 6 + 64 value bits, rounded up). */
#define MW_GORILLA_MAX_SAMPLE_BYTES 19

typedef struct mw_gorilla_enc {
    int64_t t;       /* last timestamp */
    uint64_t delta;  /* last timestamp delta (mod 2^64) */
    uint64_t vbits;  /* last value's bits */
    uint32_t nbits;  /* bits written so far */
    uint16_t n;      /* samples in the chunk */
    uint8_t leading; /* XOR window of the last value written with a window */
    uint8_t trailing;
} mw_gorilla_enc;

/* Start an empty chunk. */
void mw_gorilla_enc_init(mw_gorilla_enc *e);
/* Bytes the chunk occupies now. */
static inline size_t mw_gorilla_bytes(const mw_gorilla_enc *e)
{
    return (e->nbits + 7) / 8;
}
/* Append one sample. buf must hold at least mw_gorilla_bytes(e) +
 * MW_GORILLA_MAX_SAMPLE_BYTES bytes; bytes past the written bits need not be
 * zero. A chunk holds at most 65535 samples (the caller cuts before). */
void mw_gorilla_append(mw_gorilla_enc *e, uint8_t *buf, int64_t t, double v);

/* The number of bits the chunk will hold once (t, v) is appended, without
 * appending it: the head sizes its buffers exactly with it. */
uint32_t mw_gorilla_bits_after(const mw_gorilla_enc *e, int64_t t, double v);

typedef struct mw_gorilla_dec {
    const uint8_t *buf;
    uint64_t nbits, pos;
    uint32_t n, i;
    int64_t t;
    uint64_t delta, vbits;
    uint8_t leading, trailing;
} mw_gorilla_dec;

/* Decode n samples from nbytes bytes. */
void mw_gorilla_dec_init(mw_gorilla_dec *d, const uint8_t *buf, size_t nbytes, uint32_t n);
/* 1 and the next sample, 0 at the end, -1 when the bytes run out before n
 * samples (a corrupt chunk: never reads past nbytes). */
int mw_gorilla_next(mw_gorilla_dec *d, int64_t *t, double *v);
/* Decode up to n samples into ts[0..n), vs[0..n) at once (faster than
 * mw_gorilla_next per sample); returns how many were decoded: n, or fewer
 * where mw_gorilla_next would have returned -1. */
size_t mw_gorilla_decode(const uint8_t *buf, size_t nbytes, uint32_t n, int64_t *ts, double *vs);

#endif
