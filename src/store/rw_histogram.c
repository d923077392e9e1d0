/* rw_histogram.c - remote write 1.0's native histograms: one
 * prometheus.Histogram message (src/proto/remote.proto) decoded into the
 * store's form (histogram.h) and validated, for remote_write.c.
 *
 * Bounded: the message's bytes bound what it decodes to (every span,
 * delta or count takes at least one byte), so remote_write.c charges
 * MW_RW_HIST_COST_PER_BYTE per byte before this allocates anything from
 * the request's arena. */
#include "histogram.h"
#include "remote_write.h"
#include "store_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct hw {
    const uint8_t *p, *end;
} hw;

static int hw_varint(hw *w, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64 && w->p < w->end; shift += 7) {
        uint8_t b = *w->p++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

static int64_t unzig(uint64_t u)
{
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

/* One field: number, wire type, varint/fixed value or sub-bytes. */
static int hw_field(hw *w, uint32_t *num, int *type, uint64_t *v, hw *sub)
{
    uint64_t key;
    if (hw_varint(w, &key) < 0 || (key >> 3) == 0 || (key >> 3) > UINT32_MAX) return -1;
    *num = (uint32_t)(key >> 3);
    *type = (int)(key & 7);
    switch (*type) {
    case 0:
        return hw_varint(w, v);
    case 1:
    case 5: {
        size_t n = *type == 1 ? 8 : 4;
        if ((size_t)(w->end - w->p) < n) return -1;
        uint64_t x = 0;
        for (size_t i = 0; i < n; i++)
            x |= (uint64_t)w->p[i] << (8 * i);
        w->p += n;
        *v = x;
        return 0;
    }
    case 2: {
        uint64_t len;
        if (hw_varint(w, &len) < 0 || len > (uint64_t)(w->end - w->p)) return -1;
        *sub = (hw){w->p, w->p + len};
        w->p += len;
        return 0;
    }
    default:
        return -1;
    }
}

/* The decoded repeated fields, each counted first (arrays NULL) and then
 * filled. */
typedef struct hparts {
    size_t nspan[2], ndelta[2], ncount[2], ncustom;
    int32_t *off[2];
    uint32_t *len[2];
    int64_t *delta[2];
    double *count[2];
    double *custom;
} hparts;

/* A repeated scalar: packed (type 2) or one value (its own type). kind 0:
 * sint64 varints, 1: doubles. */
static int take_scalars(int type, uint64_t v, hw sub, int kind, size_t *n, int64_t *ints,
                        double *dbls)
{
    if (type == 2) {
        while (sub.p < sub.end) {
            uint64_t x;
            if (kind == 0) {
                if (hw_varint(&sub, &x) < 0) return -1;
                if (ints) ints[*n] = unzig(x);
            } else {
                if (sub.end - sub.p < 8) return -1;
                x = 0;
                for (int i = 0; i < 8; i++)
                    x |= (uint64_t)sub.p[i] << (8 * i);
                sub.p += 8;
                if (dbls) dbls[*n] = mw_hist_from_bits(x);
            }
            (*n)++;
        }
        return 0;
    }
    if (type != (kind == 0 ? 0 : 1)) return -1;
    if (ints) ints[*n] = unzig(v);
    if (dbls) dbls[*n] = mw_hist_from_bits(v);
    (*n)++;
    return 0;
}

static int take_span(hw sub, hparts *pp, int side)
{
    int32_t off = 0;
    uint32_t len = 0;
    uint32_t num;
    int type;
    uint64_t v;
    hw s2;
    while (sub.p < sub.end) {
        if (hw_field(&sub, &num, &type, &v, &s2) < 0) return -1;
        if (num == 1 && type == 0) {
            int64_t o = unzig(v);
            if (o < INT32_MIN || o > INT32_MAX) return -1;
            off = (int32_t)o;
        } else if (num == 2 && type == 0) {
            if (v > UINT32_MAX) return -1;
            len = (uint32_t)v;
        }
    }
    size_t k = pp->nspan[side]++;
    if (pp->off[side]) {
        pp->off[side][k] = off;
        pp->len[side][k] = len;
    }
    return 0;
}

/* One walk over the message: counts into pp (arrays NULL) or fills. */
static int walk(hw w, hparts *pp, mw_histogram *h, int *int_kind, int64_t *ts)
{
    memset(pp->nspan, 0, sizeof(pp->nspan));
    memset(pp->ndelta, 0, sizeof(pp->ndelta));
    memset(pp->ncount, 0, sizeof(pp->ncount));
    pp->ncustom = 0;
    while (w.p < w.end) {
        uint32_t num;
        int type;
        uint64_t v = 0;
        hw sub = {0};
        if (hw_field(&w, &num, &type, &v, &sub) < 0) return -1;
        int side = num <= 10 ? 0 : 1; /* 8-10 negative, 11-13 positive */
        switch (num) {
        case 1:
        case 6:
            if (type != 0) return -1;
            if (num == 1)
                h->count = (double)v;
            else
                h->zero_count = (double)v;
            *int_kind = 1;
            break;
        case 2:
        case 3:
        case 5:
        case 7:
            if (type != 1) return -1;
            if (num == 2) h->count = mw_hist_from_bits(v);
            if (num == 3) h->sum = mw_hist_from_bits(v);
            if (num == 5) h->zero_threshold = mw_hist_from_bits(v);
            if (num == 7) h->zero_count = mw_hist_from_bits(v);
            if (num == 2) *int_kind = 0;
            break;
        case 4:
            if (type != 0) return -1;
            {
                int64_t s = unzig(v);
                h->schema = s < INT32_MIN || s > INT32_MAX ? INT32_MIN : (int32_t)s;
            }
            break;
        case 8:
        case 11:
            if (type != 2 || take_span(sub, pp, side) < 0) return -1;
            break;
        case 9:
        case 12:
            if (take_scalars(type, v, sub, 0, &pp->ndelta[side], pp->delta[side], NULL) < 0)
                return -1;
            break;
        case 10:
        case 13:
            if (take_scalars(type, v, sub, 1, &pp->ncount[side], NULL, pp->count[side]) < 0)
                return -1;
            break;
        case 14:
            if (type != 0) return -1;
            h->hint = v <= 3 ? (int)v : 0;
            break;
        case 15:
            if (type != 0) return -1;
            *ts = (int64_t)v;
            break;
        case 16:
            if (take_scalars(type, v, sub, 1, &pp->ncustom, NULL, pp->custom) < 0) return -1;
            break;
        default:
            break; /* unknown: skipped */
        }
    }
    return 0;
}

int mw_rw_histogram(const uint8_t *p, size_t n, mw_arena *a, mw_histogram *h, int64_t *ts,
                    char *err, size_t errsize)
{
    hparts pp;
    memset(&pp, 0, sizeof(pp));
    memset(h, 0, sizeof(*h));
    *ts = 0;
    int int_kind = 1;
    hw w = {p, p + n};
    if (walk(w, &pp, h, &int_kind, ts) < 0) {
        snprintf(err, errsize, "protobuf: a Histogram is malformed");
        return -1;
    }
    for (int s = 0; s < 2; s++) {
        pp.off[s] = mw_arena_alloc(a, (pp.nspan[s] + 1) * sizeof(int32_t));
        pp.len[s] = mw_arena_alloc(a, (pp.nspan[s] + 1) * sizeof(uint32_t));
        pp.delta[s] = mw_arena_alloc(a, (pp.ndelta[s] + 1) * sizeof(int64_t));
        pp.count[s] = mw_arena_alloc(a, (pp.ncount[s] + 1) * sizeof(double));
    }
    pp.custom = mw_arena_alloc(a, (pp.ncustom + 1) * sizeof(double));
    *h = (mw_histogram){0};
    int_kind = 1;
    if (walk(w, &pp, h, &int_kind, ts) < 0) {
        snprintf(err, errsize, "protobuf: a Histogram is malformed");
        return -1;
    }
    size_t nb[2];
    for (int s = 0; s < 2; s++) {
        if (pp.ndelta[s] && pp.ncount[s]) {
            snprintf(err, errsize, "histogram has both bucket deltas and counts");
            return -1;
        }
        nb[s] = pp.ndelta[s] + pp.ncount[s];
        size_t spanned = 0;
        for (size_t i = 0; i < pp.nspan[s]; i++)
            spanned += pp.len[s][i];
        if (spanned != nb[s]) {
            snprintf(err, errsize,
                     "histogram %s spans need %zu buckets, have %zu buckets: spans and buckets "
                     "do not match",
                     s ? "positive" : "negative", spanned, nb[s]);
            return -1;
        }
    }
    if (nb[0] + nb[1] + pp.ncustom > MW_HIST_MAX_BUCKETS) {
        snprintf(err, errsize, "histogram has %zu buckets, more than %d",
                 nb[0] + nb[1] + pp.ncustom, MW_HIST_MAX_BUCKETS);
        return -1;
    }
    h->nneg = nb[0];
    h->npos = nb[1];
    h->ncustom = pp.ncustom;
    h->neg_idx = mw_arena_alloc(a, (nb[0] + 1) * sizeof(int32_t));
    h->neg = mw_arena_alloc(a, (nb[0] + 1) * sizeof(double));
    h->pos_idx = mw_arena_alloc(a, (nb[1] + 1) * sizeof(int32_t));
    h->pos = mw_arena_alloc(a, (nb[1] + 1) * sizeof(double));
    h->custom = pp.custom;
    for (int s = 0; s < 2; s++) {
        int32_t *idx = s ? h->pos_idx : h->neg_idx;
        double *c = s ? h->pos : h->neg;
        if (mw_hist_from_spans(pp.off[s], pp.len[s], pp.nspan[s], pp.ndelta[s] ? pp.delta[s] : NULL,
                               pp.count[s], nb[s], idx, c) < 0) {
            snprintf(err, errsize, "histogram %s spans do not fit its buckets",
                     s ? "positive" : "negative");
            return -1;
        }
        for (size_t i = 0; i < nb[s]; i++)
            if (!(c[i] >= 0) && !isnan(c[i])) {
                snprintf(err, errsize, "histogram has a negative bucket count");
                return -1;
            }
    }
    const char *why = mw_hist_validate(h);
    if (why) {
        snprintf(err, errsize, "%s", why);
        return -1;
    }
    (void)int_kind;
    return 0;
}

double mw_rw_pending(size_t i)
{
    return mw_hist_from_bits(MW_HIST_QREF_TAG | (uint64_t)i);
}

int mw_rw_store_histograms(mw_store *s, mw_rw_request *r, int wait, char *err, size_t errsize)
{
    if (!r->nhists) return 0;
    for (size_t i = 0; i < r->n; i++) {
        mw_store_sample *sm = (mw_store_sample *)r->ts[i].samples;
        int looked = 0, have_last = 0;
        int64_t last_t = 0;
        uint64_t last_bits = 0;
        for (size_t k = 0; k < r->ts[i].nsamples; k++) {
            uint64_t b = mw_hist_bits(sm[k].v);
            if ((b & MW_HIST_TAG_MASK) != MW_HIST_QREF_TAG) continue;
            size_t hi = (size_t)(b & MW_HIST_PAYLOAD_MASK);
            if (hi >= r->nhists) return -1;
            if (!looked) {
                looked = 1;
                have_last = mw_store_last_sample(s, r->ts[i].labels, r->ts[i].nlabels, &last_t,
                                                 &last_bits) == 0;
            }
            /* A resent sample (a retried batch): the series' newest sample
             * at its time holds this very histogram. It takes that
             * reference, so the append skips it as the duplicate it is,
             * and the file does not grow. */
            double last_v = mw_hist_from_bits(last_bits);
            if (have_last && sm[k].t == last_t &&
                mw_store_same_histogram(s, last_v, &r->hists[hi])) {
                sm[k].v = last_v;
                continue;
            }
            if (mw_store_put_histogram(s, &r->hists[hi], &sm[k].v, err, errsize) < 0) return -1;
        }
    }
    if (wait && mw_store_sync_histograms(s) < 0) {
        snprintf(err, errsize, "cannot sync the histograms file");
        return -1;
    }
    return 0;
}
