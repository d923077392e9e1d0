/* gorilla.c - delta-of-delta timestamps and XOR values, bit-packed. */
#include "gorilla.h"

#include <string.h>

/* Up to 56 bits (the word holds up to 7 bits in use plus 57). */
static inline __attribute__((always_inline)) void put_bits56(uint8_t *buf, uint32_t *nbits,
                                                             uint64_t v, unsigned count)
{
    if (count == 0) return;
    v &= count == 64 ? ~0ull : (1ull << count) - 1;
    uint32_t byte = *nbits >> 3;
    unsigned used = *nbits & 7, total = used + count;
    uint64_t w = v << (64 - total);
    if (used) w |= (uint64_t)(buf[byte] & (uint8_t)(0xff << (8 - used))) << 56;
    for (unsigned i = 0, n = (total + 7) >> 3; i < n; i++)
        buf[byte + i] = (uint8_t)(w >> (56 - 8 * i));
    *nbits += count;
}

/* Most significant bit first; the bytes are written whole (the first one
 * keeps its bits already in use), so that the buffer's old contents never
 * leak into the stream. Through a 64-bit word: this was 9.6 % of the CPU
 * of ingesting 10k long series, one byte per loop turn; inline (it was a
 * recursive call, 6 % of that CPU even so). */
static inline __attribute__((always_inline)) void put_bits(uint8_t *buf, uint32_t *nbits,
                                                           uint64_t v, unsigned count)
{
    if (count > 56) {
        put_bits56(buf, nbits, v >> 32, count - 32);
        count = 32;
    }
    put_bits56(buf, nbits, v, count);
}

static unsigned clz64(uint64_t x)
{
    return x ? (unsigned)__builtin_clzll(x) : 64;
}

static unsigned ctz64(uint64_t x)
{
    return x ? (unsigned)__builtin_ctzll(x) : 64;
}

void mw_gorilla_enc_init(mw_gorilla_enc *e)
{
    memset(e, 0, sizeof(*e));
    e->leading = 0xff; /* no window yet */
}

static void put_value(mw_gorilla_enc *e, uint8_t *buf, uint64_t bits)
{
    uint64_t x = bits ^ e->vbits;
    if (x == 0) {
        put_bits(buf, &e->nbits, 0, 1);
        return;
    }
    unsigned lead = clz64(x), trail = ctz64(x);
    if (lead > 31) lead = 31; /* five bits for the leading count */
    if (e->leading != 0xff && lead >= e->leading && trail >= e->trailing) {
        /* The meaningful bits fit in the previous window: reuse it. */
        put_bits(buf, &e->nbits, 2, 2);
        unsigned sig = 64 - e->leading - e->trailing;
        put_bits(buf, &e->nbits, x >> e->trailing, sig);
        return;
    }
    unsigned sig = 64 - lead - trail;
    put_bits(buf, &e->nbits, 3, 2);
    put_bits(buf, &e->nbits, lead, 5);
    put_bits(buf, &e->nbits, sig & 63, 6); /* 64 is written as 0 */
    put_bits(buf, &e->nbits, x >> trail, sig);
    e->leading = (uint8_t)lead;
    e->trailing = (uint8_t)trail;
}

static unsigned value_bits(const mw_gorilla_enc *e, uint64_t bits)
{
    uint64_t x = bits ^ e->vbits;
    if (x == 0) return 1;
    unsigned lead = clz64(x), trail = ctz64(x);
    if (lead > 31) lead = 31;
    if (e->leading != 0xff && lead >= e->leading && trail >= e->trailing)
        return 2 + 64 - e->leading - e->trailing;
    return 2 + 5 + 6 + 64 - lead - trail;
}

uint32_t mw_gorilla_bits_after(const mw_gorilla_enc *e, int64_t t, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    if (e->n == 0) return e->nbits + 128;
    uint64_t delta = (uint64_t)t - (uint64_t)e->t;
    unsigned tb;
    if (e->n == 1) {
        tb = delta < (1u << 14) ? 15 : 65;
    } else {
        int64_t dod = (int64_t)(delta - e->delta);
        tb = dod == 0                            ? 1
             : (dod >= -8191 && dod <= 8192)     ? 16
             : (dod >= -65535 && dod <= 65536)   ? 20
             : (dod >= -524287 && dod <= 524288) ? 24
                                                 : 68;
    }
    return e->nbits + tb + value_bits(e, bits);
}

void mw_gorilla_append(mw_gorilla_enc *e, uint8_t *buf, int64_t t, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    if (e->n == 0) {
        put_bits(buf, &e->nbits, (uint64_t)t, 64);
        put_bits(buf, &e->nbits, bits, 64);
    } else if (e->n == 1) {
        uint64_t delta = (uint64_t)t - (uint64_t)e->t;
        /* The first delta: 14 bits if it fits (a 15 s or 1 s scrape), else 64. */
        if (delta < (1u << 14)) {
            put_bits(buf, &e->nbits, 0, 1);
            put_bits(buf, &e->nbits, delta, 14);
        } else {
            put_bits(buf, &e->nbits, 1, 1);
            put_bits(buf, &e->nbits, delta, 64);
        }
        e->delta = delta;
        put_value(e, buf, bits);
    } else {
        uint64_t delta = (uint64_t)t - (uint64_t)e->t;
        int64_t dod = (int64_t)(delta - e->delta);
        if (dod == 0) {
            put_bits(buf, &e->nbits, 0, 1);
        } else if (dod >= -8191 && dod <= 8192) {
            put_bits(buf, &e->nbits, 2, 2);
            put_bits(buf, &e->nbits, (uint64_t)dod & 0x3fff, 14);
        } else if (dod >= -65535 && dod <= 65536) {
            put_bits(buf, &e->nbits, 6, 3);
            put_bits(buf, &e->nbits, (uint64_t)dod & 0x1ffff, 17);
        } else if (dod >= -524287 && dod <= 524288) {
            put_bits(buf, &e->nbits, 14, 4);
            put_bits(buf, &e->nbits, (uint64_t)dod & 0xfffff, 20);
        } else {
            put_bits(buf, &e->nbits, 15, 4);
            put_bits(buf, &e->nbits, (uint64_t)dod, 64);
        }
        e->delta = delta;
        put_value(e, buf, bits);
    }
    e->t = t;
    e->vbits = bits;
    e->n++;
}

void mw_gorilla_dec_init(mw_gorilla_dec *d, const uint8_t *buf, size_t nbytes, uint32_t n)
{
    memset(d, 0, sizeof(*d));
    d->buf = buf;
    d->nbits = (uint64_t)nbytes * 8;
    d->n = n;
}

/* Read count bits (<= 64); -1 when they run past the end. */
static int get_bits(mw_gorilla_dec *d, unsigned count, uint64_t *out)
{
    if (d->nbits - d->pos < count) return -1;
    uint64_t at = d->pos >> 3;
    /* Fast path, the common case: one big-endian 8-byte load holds the
     * bits (at most 7 already used + 56 wanted), and the load stays
     * inside the buffer. Decoding is most of a range query's time. */
    if (count - 1 < 56 && at + 8 <= d->nbits >> 3) {
        uint64_t w;
        memcpy(&w, d->buf + at, 8);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        w = __builtin_bswap64(w);
#endif
        *out = (w << (d->pos & 7)) >> (64 - count);
        d->pos += count;
        return 0;
    }
    uint64_t v = 0;
    while (count > 0) {
        uint64_t byte = d->pos >> 3;
        unsigned used = (unsigned)(d->pos & 7), room = 8 - used;
        unsigned take = count < room ? count : room;
        uint8_t bits = (uint8_t)((d->buf[byte] >> (room - take)) & ((1u << take) - 1));
        v = (v << take) | bits;
        d->pos += take;
        count -= take;
    }
    *out = v;
    return 0;
}

static int get_value(mw_gorilla_dec *d)
{
    uint64_t b;
    if (get_bits(d, 1, &b) < 0) return -1;
    if (b == 0) return 0; /* same value */
    if (get_bits(d, 1, &b) < 0) return -1;
    if (b == 1) {
        uint64_t lead, sig;
        if (get_bits(d, 5, &lead) < 0 || get_bits(d, 6, &sig) < 0) return -1;
        if (sig == 0) sig = 64;
        if (lead + sig > 64) return -1;
        d->leading = (uint8_t)lead;
        d->trailing = (uint8_t)(64 - lead - sig);
    }
    unsigned sig = 64u - d->leading - d->trailing;
    uint64_t x;
    if (get_bits(d, sig, &x) < 0) return -1;
    d->vbits ^= sig == 64 ? x : x << d->trailing;
    return 0;
}

int mw_gorilla_next(mw_gorilla_dec *d, int64_t *t, double *v)
{
    if (d->i >= d->n) return 0;
    uint64_t b;
    if (d->i == 0) {
        uint64_t tb;
        if (get_bits(d, 64, &tb) < 0 || get_bits(d, 64, &d->vbits) < 0) return -1;
        d->t = (int64_t)tb;
    } else if (d->i == 1) {
        if (get_bits(d, 1, &b) < 0) return -1;
        if (get_bits(d, b ? 64 : 14, &d->delta) < 0) return -1;
        d->t = (int64_t)((uint64_t)d->t + d->delta);
        if (get_value(d) < 0) return -1;
    } else {
        unsigned ones = 0;
        while (ones < 4) {
            if (get_bits(d, 1, &b) < 0) return -1;
            if (b == 0) break;
            ones++;
        }
        static const unsigned width[5] = {0, 14, 17, 20, 64};
        uint64_t dod = 0;
        if (ones > 0) {
            if (get_bits(d, width[ones], &dod) < 0) return -1;
            if (width[ones] < 64) {
                uint64_t sign = 1ull << (width[ones] - 1);
                /* Sign-extend; the top value of each bucket is positive
                 * (8192, 65536, 524288) as the encoder writes it. */
                if ((dod & sign) && dod != sign) dod |= ~((sign << 1) - 1);
            }
        }
        d->delta += dod;
        d->t = (int64_t)((uint64_t)d->t + d->delta);
        if (get_value(d) < 0) return -1;
    }
    d->i++;
    *t = d->t;
    memcpy(v, &d->vbits, sizeof(*v));
    return 1;
}

/* ---- decoding a whole chunk at once ----
 *
 * The same stream as mw_gorilla_next, decoded in one loop: a range query
 * decodes every chunk of thousands of series, and reading the control bits
 * one call at a time was most of the decoding cost. Each step looks at the
 * next 57 bits at once (one big-endian load; zeros past the end), counts
 * the timestamp's control bits with one clz, and checks every field against
 * the end of the stream exactly as mw_gorilla_next does, so a corrupt chunk
 * stops at the same sample. */

/* The stream being read: its last 8 bytes are also copied into tail,
 * zero-padded, so that every look at the next bits is one 8-byte load
 * (from the stream, or near its end from tail) without a byte loop. */
typedef struct bitsrc {
    const uint8_t *b;
    size_t tail_at; /* loads from here on come from tail */
    uint8_t tail[16];
} bitsrc;

static void bitsrc_init(bitsrc *s, const uint8_t *b, size_t nbytes)
{
    s->b = b;
    s->tail_at = nbytes >= 8 ? nbytes - 8 : 0;
    memset(s->tail, 0, sizeof(s->tail));
    if (nbytes) memcpy(s->tail, b + s->tail_at, nbytes - s->tail_at);
}

/* The 64 bits from bit pos (at most the stream's end) on, left-aligned;
 * the top 57 are valid (the rest, and anything past the end, read as
 * zero). */
static inline uint64_t peek57(const bitsrc *s, uint64_t pos)
{
    uint64_t at = pos >> 3, w;
    if (at < s->tail_at)
        memcpy(&w, s->b + at, 8);
    else
        memcpy(&w, s->tail + (at - s->tail_at), 8);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w << (pos & 7);
}

/* count bits (1..64) at pos. */
static inline uint64_t bits_at(const bitsrc *s, uint64_t pos, unsigned count)
{
    if (count <= 57) return peek57(s, pos) >> (64 - count);
    uint64_t hi = peek57(s, pos) >> 32;
    uint64_t lo = peek57(s, pos + 32) >> (64 - (count - 32));
    return hi << (count - 32) | lo;
}

/* Take count bits into out, or stop decoding when the stream is shorter. */
#define TAKE(count, out)                                                                           \
    do {                                                                                           \
        unsigned c_ = (count);                                                                     \
        if (nbits - pos < c_) return i;                                                            \
        (out) = bits_at(&src, pos, c_);                                                            \
        pos += c_;                                                                                 \
    } while (0)

size_t mw_gorilla_decode(const uint8_t *buf, size_t nbytes, uint32_t n, int64_t *ts, double *vs)
{
    static const unsigned width[5] = {0, 14, 17, 20, 64};
    const uint64_t nbits = (uint64_t)nbytes * 8;
    uint64_t pos = 0, delta = 0, vbits = 0, b;
    int64_t t = 0;
    unsigned leading = 0, trailing = 0;
    size_t i = 0;
    bitsrc src;
    bitsrc_init(&src, buf, nbytes);
    for (; i < n; i++) {
        if (i == 0) {
            uint64_t tb;
            TAKE(64, tb);
            TAKE(64, vbits);
            t = (int64_t)tb;
        } else {
            if (i == 1) {
                TAKE(1, b);
                TAKE(b ? 64 : 14, delta);
            } else {
                /* Up to four 1 bits, then a 0 unless there were four. */
                uint64_t w = peek57(&src, pos);
                unsigned ones = ~w ? (unsigned)__builtin_clzll(~w) : 64;
                if (ones > 4) ones = 4;
                unsigned ctl = ones < 4 ? ones + 1 : 4;
                if (nbits - pos < ctl) return i;
                pos += ctl;
                uint64_t dod = 0;
                if (ones > 0) {
                    TAKE(width[ones], dod);
                    if (width[ones] < 64) {
                        uint64_t sign = 1ull << (width[ones] - 1);
                        if ((dod & sign) && dod != sign) dod |= ~((sign << 1) - 1);
                    }
                }
                delta += dod;
            }
            t = (int64_t)((uint64_t)t + delta);
            /* The value: 0 same, 10 within the previous window, 11 new window
             * (then 5 bits leading zeros, 6 bits length): all the control
             * bits from one look, each checked against the end in the order
             * of the fields, as TAKE would. */
            uint64_t w = peek57(&src, pos), left = nbits - pos;
            if (left < 1) return i;
            if (w >> 63) {
                if (left < 2) return i;
                if (w >> 62 & 1) {
                    if (left < 13) return i;
                    uint64_t lead = w >> 57 & 31, sig = w >> 51 & 63;
                    pos += 13;
                    if (sig == 0) sig = 64;
                    if (lead + sig > 64) return i;
                    leading = (unsigned)lead;
                    trailing = (unsigned)(64 - lead - sig);
                } else {
                    pos += 2;
                }
                unsigned sig = 64u - leading - trailing;
                uint64_t x;
                TAKE(sig, x);
                vbits ^= sig == 64 ? x : x << trailing;
            } else {
                pos += 1;
            }
        }
        ts[i] = t;
        memcpy(&vs[i], &vbits, sizeof(double));
    }
    return i;
}
