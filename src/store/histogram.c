/* histogram.c - native histograms: validation, the compact encoding, and
 * the store's histograms file (histogram.h).
 *
 * Encoding (version 1), little-endian, varints LEB128 (zigzag when signed):
 *   u8 version, varint schema, u8 hint, u8 flags (1: integer counts),
 *   u64 zero_threshold, u64 sum (the doubles' bits),
 *   count and zero_count: uvarints (integer) or u64 bits (float),
 *   uvarint npos, then per bucket varint index delta (from the previous
 *   index, the first from 0) and the count: a varint delta from the
 *   previous bucket's (integer) or u64 bits (float); the same for the
 *   negative buckets; uvarint ncustom and u64 bits per bound.
 * An integer histogram of Prometheus's default layout (10-20 buckets of
 * neighbouring indexes and slowly changing counts) takes 1-2 bytes a
 * bucket.
 *
 * File: records of u32 length, u32 CRC-32 of the payload, payload; a
 * histogram's reference is its record's offset. Appends happen under the
 * store's write lock order (one mutex here); reads are pread()s. A record
 * whose checksum fails (a torn tail after a crash) reads as missing. */
#include "histogram.h"
#include "../core/util.h"
#include "crc.h"
#include "store_internal.h"
#include "varint.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define HIST_FILE "histograms"
#define HIST_MAX_RECORD (1u << 20)

struct mw_hstore {
    int fd;
    uint64_t size;
    pthread_mutex_t mu;
};

void mw_hist_alloc(mw_histogram *h, size_t npos, size_t nneg, size_t ncustom)
{
    size_t ni = npos + nneg, nd = npos + nneg + ncustom;
    char *m = mw_xcalloc(1, ni * sizeof(int32_t) + nd * sizeof(double) + 8);
    double *d = (double *)(void *)m;
    h->pos = d;
    h->neg = d + npos;
    h->custom = d + npos + nneg;
    int32_t *ix = (int32_t *)(void *)(m + nd * sizeof(double));
    h->pos_idx = ix;
    h->neg_idx = ix + npos;
    h->npos = npos;
    h->nneg = nneg;
    h->ncustom = ncustom;
}

void mw_hist_free(mw_histogram *h)
{
    if (h->pos) free(h->pos);
    memset(h, 0, sizeof(*h));
}

void mw_hist_copy(mw_histogram *dst, const mw_histogram *src)
{
    mw_histogram t = *src;
    mw_hist_alloc(&t, src->npos, src->nneg, src->ncustom);
    /* An empty histogram's arrays are NULL, which memcpy may not be given
     * even for 0 bytes. */
    if (src->npos) memcpy(t.pos, src->pos, src->npos * sizeof(double));
    if (src->nneg) memcpy(t.neg, src->neg, src->nneg * sizeof(double));
    if (src->ncustom) memcpy(t.custom, src->custom, src->ncustom * sizeof(double));
    if (src->npos) memcpy(t.pos_idx, src->pos_idx, src->npos * sizeof(int32_t));
    if (src->nneg) memcpy(t.neg_idx, src->neg_idx, src->nneg * sizeof(int32_t));
    *dst = t;
}

const char *mw_hist_validate(const mw_histogram *h)
{
    int custom = h->schema == MW_HIST_SCHEMA_CUSTOM;
    if (!custom && (h->schema < MW_HIST_SCHEMA_MIN || h->schema > MW_HIST_SCHEMA_MAX))
        return "histogram schema out of range (-4..8, or -53 for custom buckets)";
    if (h->npos + h->nneg + h->ncustom > MW_HIST_MAX_BUCKETS)
        return "histogram has too many buckets";
    if (!(h->zero_threshold >= 0)) return "histogram zero threshold is negative or NaN";
    for (size_t i = 1; i < h->npos; i++)
        if (h->pos_idx[i] <= h->pos_idx[i - 1]) return "histogram positive spans overlap";
    for (size_t i = 1; i < h->nneg; i++)
        if (h->neg_idx[i] <= h->neg_idx[i - 1]) return "histogram negative spans overlap";
    if (custom) {
        if (h->nneg || h->zero_count != 0 || h->zero_threshold != 0)
            return "custom-bucket histogram has negative buckets or a zero bucket";
        for (size_t i = 0; i < h->ncustom; i++) {
            if (!isfinite(h->custom[i])) return "custom-bucket histogram has a non-finite bound";
            if (i && h->custom[i] <= h->custom[i - 1])
                return "custom-bucket histogram bounds are not increasing";
        }
        for (size_t i = 0; i < h->npos; i++)
            if (h->pos_idx[i] < 0 || (size_t)h->pos_idx[i] > h->ncustom)
                return "custom-bucket histogram has a bucket past its bounds";
    } else if (h->ncustom) {
        return "exponential histogram has custom bounds";
    }
    return NULL;
}

int mw_hist_from_spans(const int32_t *offsets, const uint32_t *lengths, size_t nspans,
                       const int64_t *deltas, const double *counts, size_t nb, int32_t *idx,
                       double *out)
{
    int64_t at = 0, cur = 0;
    size_t k = 0;
    for (size_t s = 0; s < nspans; s++) {
        at += offsets[s];
        if (lengths[s] > nb - k) return -1;
        for (uint32_t j = 0; j < lengths[s]; j++, k++) {
            if (at < INT32_MIN || at > INT32_MAX) return -1;
            idx[k] = (int32_t)at++;
            if (deltas) {
                cur += deltas[k];
                out[k] = (double)cur;
            } else {
                out[k] = counts[k];
            }
        }
    }
    return k == nb ? 0 : -1;
}

static int all_integers(const mw_histogram *h)
{
    double lim = 9007199254740992.0; /* 2^53 */
    if (!(h->count >= 0 && h->count < lim && h->count == floor(h->count))) return 0;
    if (!(h->zero_count >= 0 && h->zero_count < lim && h->zero_count == floor(h->zero_count)))
        return 0;
    for (size_t i = 0; i < h->npos; i++)
        if (!(h->pos[i] >= 0 && h->pos[i] < lim && h->pos[i] == floor(h->pos[i]))) return 0;
    for (size_t i = 0; i < h->nneg; i++)
        if (!(h->neg[i] >= 0 && h->neg[i] < lim && h->neg[i] == floor(h->neg[i]))) return 0;
    return 1;
}

static void put_f64(mw_buf *b, double v)
{
    mw_buf_u64(b, mw_hist_bits(v));
}

static void encode_buckets(mw_buf *b, const int32_t *idx, const double *c, size_t n, int ints)
{
    mw_buf_uvarint(b, n);
    int64_t prev_i = 0, prev_c = 0;
    for (size_t i = 0; i < n; i++) {
        mw_buf_varint(b, (int64_t)idx[i] - prev_i);
        prev_i = idx[i];
        if (ints) {
            mw_buf_varint(b, (int64_t)c[i] - prev_c);
            prev_c = (int64_t)c[i];
        } else {
            put_f64(b, c[i]);
        }
    }
}

void mw_hist_encode(const mw_histogram *h, mw_buf *b)
{
    int ints = all_integers(h);
    uint8_t head[3] = {1, 0, 0};
    mw_buf_append(b, head, 1);
    mw_buf_varint(b, h->schema);
    head[1] = (uint8_t)h->hint;
    head[2] = (uint8_t)ints;
    mw_buf_append(b, head + 1, 2);
    put_f64(b, h->zero_threshold);
    put_f64(b, h->sum);
    if (ints) {
        mw_buf_uvarint(b, (uint64_t)h->count);
        mw_buf_uvarint(b, (uint64_t)h->zero_count);
    } else {
        put_f64(b, h->count);
        put_f64(b, h->zero_count);
    }
    encode_buckets(b, h->pos_idx, h->pos, h->npos, ints);
    encode_buckets(b, h->neg_idx, h->neg, h->nneg, ints);
    mw_buf_uvarint(b, h->ncustom);
    for (size_t i = 0; i < h->ncustom; i++)
        put_f64(b, h->custom[i]);
}

static double rd_f64(mw_rd *r)
{
    return mw_hist_from_bits(mw_rd_u64(r));
}

static int decode_buckets(mw_rd *r, int32_t *idx, double *c, size_t n, int ints)
{
    int64_t prev_i = 0, prev_c = 0;
    for (size_t i = 0; i < n && !r->bad; i++) {
        prev_i += mw_rd_varint(r);
        if (prev_i < INT32_MIN || prev_i > INT32_MAX) return -1;
        idx[i] = (int32_t)prev_i;
        if (ints) {
            prev_c += mw_rd_varint(r);
            c[i] = (double)prev_c;
        } else {
            c[i] = rd_f64(r);
        }
    }
    return r->bad ? -1 : 0;
}

int mw_hist_decode(const uint8_t *p, size_t n, mw_histogram *h)
{
    memset(h, 0, sizeof(*h));
    mw_rd r = {p, n, 0, 0};
    const uint8_t *v = mw_rd_bytes(&r, 1);
    if (!v || *v != 1) return -1;
    int64_t schema = mw_rd_varint(&r);
    const uint8_t *hf = mw_rd_bytes(&r, 2);
    if (!hf || schema < INT32_MIN || schema > INT32_MAX) return -1;
    mw_histogram t = {.schema = (int32_t)schema, .hint = hf[0] & 3};
    int ints = hf[1] & 1;
    t.zero_threshold = rd_f64(&r);
    t.sum = rd_f64(&r);
    if (ints) {
        t.count = (double)mw_rd_uvarint(&r);
        t.zero_count = (double)mw_rd_uvarint(&r);
    } else {
        t.count = rd_f64(&r);
        t.zero_count = rd_f64(&r);
    }
    /* Counts first, to size the one allocation: walk a copy of the reader. */
    uint64_t np = mw_rd_uvarint(&r);
    if (r.bad || np > MW_HIST_MAX_BUCKETS) return -1;
    mw_rd pr = r;
    for (uint64_t i = 0; i < np; i++) {
        (void)mw_rd_varint(&pr);
        if (ints)
            (void)mw_rd_varint(&pr);
        else
            (void)mw_rd_u64(&pr);
    }
    uint64_t nn = mw_rd_uvarint(&pr);
    if (pr.bad || nn > MW_HIST_MAX_BUCKETS) return -1;
    for (uint64_t i = 0; i < nn; i++) {
        (void)mw_rd_varint(&pr);
        if (ints)
            (void)mw_rd_varint(&pr);
        else
            (void)mw_rd_u64(&pr);
    }
    uint64_t nc = mw_rd_uvarint(&pr);
    if (pr.bad || nc > MW_HIST_MAX_BUCKETS || np + nn + nc > MW_HIST_MAX_BUCKETS) return -1;
    mw_hist_alloc(&t, (size_t)np, (size_t)nn, (size_t)nc);
    if (decode_buckets(&r, t.pos_idx, t.pos, t.npos, ints) < 0) goto bad;
    (void)mw_rd_uvarint(&r);
    if (decode_buckets(&r, t.neg_idx, t.neg, t.nneg, ints) < 0) goto bad;
    (void)mw_rd_uvarint(&r);
    for (size_t i = 0; i < t.ncustom; i++)
        t.custom[i] = rd_f64(&r);
    if (r.bad) goto bad;
    *h = t;
    return 0;
bad:
    mw_hist_free(&t);
    return -1;
}

/* ---- the store's file ---- */

static pthread_mutex_t open_mu = PTHREAD_MUTEX_INITIALIZER;

static mw_hstore *hstore(mw_store *s, int create)
{
    pthread_mutex_lock(&open_mu);
    if (!s->hist) {
        char path[PATH_MAX + 32];
        mw_store_path(s, HIST_FILE, path, sizeof(path));
        int fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
        if (fd >= 0) {
            mw_hstore *h = mw_xcalloc(1, sizeof(*h));
            h->fd = fd;
            off_t end = lseek(fd, 0, SEEK_END);
            h->size = end > 0 ? (uint64_t)end : 0;
            pthread_mutex_init(&h->mu, NULL);
            s->hist = h;
        }
    }
    mw_hstore *h = s->hist;
    pthread_mutex_unlock(&open_mu);
    return h;
}

void mw_hstore_close(mw_hstore *h)
{
    if (!h) return;
    close(h->fd);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

int mw_store_put_histogram(mw_store *s, const mw_histogram *hg, double *ref, char *err,
                           size_t errsize)
{
    mw_hstore *h = hstore(s, 1);
    if (!h) {
        snprintf(err, errsize, "cannot open the histograms file in %s: %s", s->dir,
                 strerror(errno));
        return -1;
    }
    mw_buf b;
    mw_buf_init(&b, 0);
    mw_buf_u32(&b, 0);
    mw_buf_u32(&b, 0);
    mw_hist_encode(hg, &b);
    uint8_t *p = (uint8_t *)b.data;
    uint32_t len = (uint32_t)(b.len - 8);
    mw_put_le32(p, len);
    mw_put_le32(p + 4, mw_crc32(p + 8, len));
    pthread_mutex_lock(&h->mu);
    uint64_t off = h->size;
    int rc = 0;
    if (off > MW_HIST_PAYLOAD_MASK - b.len) {
        snprintf(err, errsize, "the histograms file is full");
        rc = -1;
    } else {
        size_t done = 0;
        while (done < b.len) {
            ssize_t w = pwrite(h->fd, p + done, b.len - done, (off_t)(off + done));
            if (w <= 0) {
                if (w < 0 && errno == EINTR) continue;
                snprintf(err, errsize, "cannot write the histograms file: %s",
                         w < 0 ? strerror(errno) : "short write");
                rc = -1;
                break;
            }
            done += (size_t)w;
        }
        if (rc == 0) h->size = off + b.len;
    }
    pthread_mutex_unlock(&h->mu);
    mw_buf_free(&b);
    if (rc == 0) *ref = mw_hist_from_bits(MW_HIST_REF_TAG | off);
    return rc;
}

int mw_store_sync_histograms(mw_store *s)
{
    mw_hstore *h = hstore(s, 0);
    if (!h || s->opt.no_sync) return 0;
    return fdatasync(h->fd) < 0 ? -1 : 0;
}

int mw_store_same_histogram(mw_store *s, double ref, const mw_histogram *hg)
{
    uint64_t bits = mw_hist_bits(ref);
    if ((bits & MW_HIST_TAG_MASK) != MW_HIST_REF_TAG) return 0;
    uint64_t off = bits & MW_HIST_PAYLOAD_MASK;
    mw_hstore *h = hstore(s, 0);
    if (!h) return 0;
    mw_buf b;
    mw_buf_init(&b, 0);
    mw_hist_encode(hg, &b);
    uint8_t hd[8];
    int same = 0;
    if (pread(h->fd, hd, 8, (off_t)off) == 8 && mw_get_le32(hd) == b.len) {
        /* The encoding is a function of the histogram (the sum by its
         * bits, as Prometheus compares a resent one): equal bytes, equal
         * histograms. The stored record's checksum must hold too. */
        uint8_t *p = mw_xmalloc(b.len + 1);
        same = pread(h->fd, p, b.len, (off_t)(off + 8)) == (ssize_t)b.len &&
               mw_crc32(p, b.len) == mw_get_le32(hd + 4) && memcmp(p, b.data, b.len) == 0;
        free(p);
    }
    mw_buf_free(&b);
    return same;
}

int mw_store_get_histogram(mw_store *s, double ref, mw_histogram *out)
{
    memset(out, 0, sizeof(*out));
    uint64_t bits = mw_hist_bits(ref);
    if ((bits & MW_HIST_TAG_MASK) != MW_HIST_REF_TAG) return -1;
    uint64_t off = bits & MW_HIST_PAYLOAD_MASK;
    mw_hstore *h = hstore(s, 0);
    if (!h) return -1;
    uint8_t hd[8];
    if (pread(h->fd, hd, 8, (off_t)off) != 8) return -1;
    uint32_t len = mw_get_le32(hd), crc = mw_get_le32(hd + 4);
    if (len > HIST_MAX_RECORD) return -1;
    uint8_t stackbuf[512];
    uint8_t *p = len <= sizeof(stackbuf) ? stackbuf : mw_xmalloc(len);
    int rc = -1;
    if (pread(h->fd, p, len, (off_t)(off + 8)) == (ssize_t)len && mw_crc32(p, len) == crc)
        rc = mw_hist_decode(p, len, out);
    if (p != stackbuf) free(p);
    return rc;
}
