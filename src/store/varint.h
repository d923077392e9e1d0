/* varint.h - the store's byte encodings: LEB128 varints (zigzag for signed),
 * little-endian fixed-width integers, each reader bounded by its input. */
#ifndef MW_VARINT_H
#define MW_VARINT_H

#include "../core/buf.h"
#include "../core/bytes.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline size_t mw_uvarint_put(uint8_t *p, uint64_t v)
{
    size_t i = 0;
    while (v >= 0x80) {
        p[i++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[i++] = (uint8_t)v;
    return i;
}

static inline void mw_buf_uvarint(mw_buf *b, uint64_t v)
{
    uint8_t t[10];
    mw_buf_append(b, t, mw_uvarint_put(t, v));
}

static inline void mw_buf_varint(mw_buf *b, int64_t v)
{
    mw_buf_uvarint(b, ((uint64_t)v << 1) ^ (v < 0 ? UINT64_MAX : 0));
}

static inline void mw_buf_u64(mw_buf *b, uint64_t v)
{
    uint8_t t[8];
    mw_put_le64(t, v);
    mw_buf_append(b, t, 8);
}

static inline void mw_buf_u32(mw_buf *b, uint32_t v)
{
    uint8_t t[4];
    mw_put_le32(t, v);
    mw_buf_append(b, t, 4);
}

/* A bounded reader: every get fails (and stays failed) past the end. */
typedef struct mw_rd {
    const uint8_t *p;
    size_t n, off;
    int bad;
} mw_rd;

static inline uint64_t mw_rd_uvarint(mw_rd *r)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->off >= r->n) break;
        uint8_t c = r->p[r->off++];
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) return v;
    }
    r->bad = 1;
    return 0;
}

static inline int64_t mw_rd_varint(mw_rd *r)
{
    uint64_t u = mw_rd_uvarint(r);
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static inline uint64_t mw_rd_u64(mw_rd *r)
{
    if (r->n - r->off < 8 || r->off > r->n) {
        r->bad = 1;
        return 0;
    }
    uint64_t v = mw_get_le64(r->p + r->off);
    r->off += 8;
    return v;
}

static inline uint32_t mw_rd_u32(mw_rd *r)
{
    if (r->n - r->off < 4 || r->off > r->n) {
        r->bad = 1;
        return 0;
    }
    const uint8_t *p = r->p + r->off;
    r->off += 4;
    return mw_get_le32(p);
}

/* A pointer to n bytes, or NULL past the end. */
static inline const uint8_t *mw_rd_bytes(mw_rd *r, size_t n)
{
    if (r->off > r->n || r->n - r->off < n) {
        r->bad = 1;
        return NULL;
    }
    const uint8_t *p = r->p + r->off;
    r->off += n;
    return p;
}

#endif
