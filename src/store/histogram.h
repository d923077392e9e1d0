/* histogram.h - native histograms (Prometheus 3's sparse exponential
 * histograms, and its custom-bucket ones): the one in-memory form, its
 * compact encoding on disk, and where the store keeps them.
 *
 * A histogram sample lives in a series like a float sample: its value is a
 * NaN whose payload refers to the histogram (mw_hist_ref_*), so the WAL, the
 * head's chunks, snapshots and blocks carry it unchanged (they keep a
 * value's 64 bits; the staleness marker relies on that too). The histogram
 * itself is appended, compactly encoded (histogram.c: varints, bucket
 * counts as deltas), to the data folder's `histograms` file; the NaN's
 * payload is its offset there. A series may mix floats and histograms
 * from one sample to the next, as Prometheus's may.
 *
 * The in-memory form keeps the buckets as (index, count) pairs, sorted by
 * index, with absolute counts: spans and deltas are only the wire's and the
 * file's. Bucket index i of schema s covers (2^((i-1)/2^s), 2^(i/2^s)]
 * (negative buckets mirror it); custom-bucket histograms (schema -53) have
 * upper bounds custom[i] for positive index i (index 0: (-Inf, custom[0]]),
 * and index ncustom the +Inf bucket. */
#ifndef MW_HISTOGRAM_H
#define MW_HISTOGRAM_H

#include "../core/buf.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MW_HIST_SCHEMA_MIN (-4)
#define MW_HIST_SCHEMA_MAX 8
#define MW_HIST_SCHEMA_CUSTOM (-53)
/* Most buckets (positive plus negative) and custom bounds one histogram
 * may have: Prometheus's native histograms are limited to 160 buckets by
 * default; a sender's own limit may be higher. */
#define MW_HIST_MAX_BUCKETS 4096

/* The counter-reset hint of the wire (prompb Histogram.ResetHint). */
enum { MW_HINT_UNKNOWN = 0, MW_HINT_YES = 1, MW_HINT_NO = 2, MW_HINT_GAUGE = 3 };

typedef struct mw_histogram {
    int32_t schema;
    int hint;
    double zero_threshold;
    double count, sum, zero_count;
    size_t npos, nneg, ncustom;
    int32_t *pos_idx, *neg_idx;
    double *pos, *neg; /* absolute counts */
    double *custom;    /* schema -53: the upper bounds */
} mw_histogram;

/* One histogram's arrays are one allocation (pos_idx owns it): free and
 * copy know that. */
void mw_hist_alloc(mw_histogram *h, size_t npos, size_t nneg, size_t ncustom);
void mw_hist_free(mw_histogram *h);
void mw_hist_copy(mw_histogram *dst, const mw_histogram *src);

/* NULL when h is a histogram Prometheus would accept (schema -4..8 or -53,
 * zero threshold >= 0, finite indexes, custom bounds increasing and finite
 * for -53, no negative buckets or zero bucket there); else why not. */
const char *mw_hist_validate(const mw_histogram *h);

/* The compact encoding (histogram.c says the layout). decode: 0, or -1 on
 * a malformed or oversized encoding (h is then empty). */
void mw_hist_encode(const mw_histogram *h, mw_buf *out);
int mw_hist_decode(const uint8_t *p, size_t n, mw_histogram *h);

/* Spans and deltas (the wire's shape) into index/count pairs: from
 * nspans spans (offset, length) and nb bucket values (deltas of integer
 * counts when deltas is set, else absolute float counts). -1 when the
 * spans' lengths do not add up to nb or an index overflows. */
int mw_hist_from_spans(const int32_t *offsets, const uint32_t *lengths, size_t nspans,
                       const int64_t *deltas, const double *counts, size_t nb, int32_t *idx,
                       double *out);

/* The NaN payloads that refer to histograms. A stored reference (in the
 * store's series) carries the offset in the histograms file; a query's
 * own histograms (query/) use the other tag, with an index of theirs. A
 * float sample whose bits happen to look like one is made a plain NaN on
 * the way in (mw_hist_clean_float). */
#define MW_HIST_REF_TAG 0x7ff4000000000000ULL
#define MW_HIST_QREF_TAG 0x7ff2000000000000ULL
#define MW_HIST_TAG_MASK 0xfffe000000000000ULL
#define MW_HIST_PAYLOAD_MASK 0x0001ffffffffffffULL
static inline uint64_t mw_hist_bits(double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof(b));
    return b;
}
static inline double mw_hist_from_bits(uint64_t b)
{
    double v;
    memcpy(&v, &b, sizeof(v));
    return v;
}
static inline int mw_hist_is_ref(double v)
{
    uint64_t t = mw_hist_bits(v) & MW_HIST_TAG_MASK;
    return t == MW_HIST_REF_TAG || t == MW_HIST_QREF_TAG;
}
static inline double mw_hist_clean_float(double v)
{
    return mw_hist_is_ref(v) ? mw_hist_from_bits(0x7ff8000000000001ULL) : v;
}

/* The store's histograms file (histogram.c): put appends one histogram
 * (its encoding) and gives the value that refers to it; get reads one
 * back (0, or -1 when the reference is not one of this store's). sync
 * makes what was put durable (before the WAL records that refer to it). */
typedef struct mw_store mw_store;
int mw_store_put_histogram(mw_store *s, const mw_histogram *h, double *ref, char *err,
                           size_t errsize);
int mw_store_get_histogram(mw_store *s, double ref, mw_histogram *h);
int mw_store_sync_histograms(mw_store *s);
/* 1 when ref is one of the store's references and its record holds
 * exactly h (a resent sample), else 0. */
int mw_store_same_histogram(mw_store *s, double ref, const mw_histogram *h);
/* The store's handle on its file: closed with the store. */
typedef struct mw_hstore mw_hstore;
void mw_hstore_close(mw_hstore *h);

#endif
