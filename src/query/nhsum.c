/* nhsum.c - compensated sums of native histograms, as Prometheus 3's
 * FloatHistogram.KahanAdd: sum, avg, sum_over_time and avg_over_time add
 * histograms with a Kahan-Neumaier compensation for every count, the sum
 * and each bucket, so that 1e100 + 1 - 1e100 still gives 1. And the
 * reconciliation of custom-bucket histograms (schema -53) with different
 * bounds: both are mapped onto the bounds they have in common, each
 * bucket going to the first common bound at or above its own upper bound
 * (the +Inf bucket when none is). */
#include "qinternal.h"

#include "../core/util.h"

#include <math.h>
#include <stdlib.h>

static int is_custom(const mw_histogram *h)
{
    return h->schema == MW_HIST_SCHEMA_CUSTOM;
}

int q_hist_same_bounds(const mw_histogram *a, const mw_histogram *b)
{
    if (a->ncustom != b->ncustom) return 0;
    for (size_t i = 0; i < a->ncustom; i++)
        if (a->custom[i] != b->custom[i]) return 0;
    return 1;
}

size_t q_hist_common_bounds(const mw_histogram *a, const mw_histogram *b, double *out)
{
    size_t i = 0, j = 0, n = 0;
    while (i < a->ncustom && j < b->ncustom) {
        if (a->custom[i] == b->custom[j]) {
            out[n++] = a->custom[i];
            i++;
            j++;
        } else if (a->custom[i] < b->custom[j]) {
            i++;
        } else {
            j++;
        }
    }
    return n;
}

size_t q_hist_map_bucket(const mw_histogram *h, int32_t idx, const double *bounds, size_t nb)
{
    if (idx < 0 || (size_t)idx >= h->ncustom) return nb; /* the +Inf bucket */
    double upper = h->custom[idx];
    size_t lo = 0, hi = nb; /* the first common bound >= upper */
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (bounds[m] < upper)
            lo = m + 1;
        else
            hi = m;
    }
    return lo;
}

/* The non-empty buckets of dense[0..n] (and their compensation, when
 * cdense) as h's (and c's) positive buckets, with bounds[0..nb). */
static void set_dense(mw_histogram *h, mw_histogram *c, const double *dense, const double *cdense,
                      size_t n, const double *bounds, size_t nb)
{
    mw_histogram r = {.schema = MW_HIST_SCHEMA_CUSTOM,
                      .hint = h->hint,
                      .count = h->count,
                      .sum = h->sum,
                      .zero_count = h->zero_count,
                      .zero_threshold = h->zero_threshold};
    mw_hist_alloc(&r, n, 0, nb);
    r.npos = 0; /* filled below */
    memcpy(r.custom, bounds, nb * sizeof(double));
    mw_histogram rc = {0};
    if (c) {
        rc = r;
        rc.count = c->count;
        rc.sum = c->sum;
        rc.zero_count = c->zero_count;
        mw_hist_alloc(&rc, n, 0, nb);
        rc.npos = 0;
        memcpy(rc.custom, bounds, nb * sizeof(double));
    }
    for (size_t i = 0; i < n; i++) {
        if (dense[i] == 0 && (!cdense || cdense[i] == 0)) continue;
        r.pos_idx[r.npos] = (int32_t)i;
        r.pos[r.npos++] = dense[i];
        if (c) {
            rc.pos_idx[rc.npos] = (int32_t)i;
            rc.pos[rc.npos++] = cdense[i];
        }
    }
    mw_hist_free(h);
    *h = r;
    if (c) {
        mw_hist_free(c);
        *c = rc;
    }
}

void q_hist_reconcile_add(mw_histogram *a, const mw_histogram *b, double sign)
{
    double *bounds = mw_xmalloc((a->ncustom + 1) * sizeof(double));
    size_t nb = q_hist_common_bounds(a, b, bounds);
    double *dense = mw_xcalloc(nb + 1, sizeof(double));
    for (size_t i = 0; i < a->npos; i++)
        dense[q_hist_map_bucket(a, a->pos_idx[i], bounds, nb)] += a->pos[i];
    for (size_t i = 0; i < b->npos; i++)
        dense[q_hist_map_bucket(b, b->pos_idx[i], bounds, nb)] += sign * b->pos[i];
    set_dense(a, NULL, dense, NULL, nb + 1, bounds, nb);
    free(dense);
    free(bounds);
}

/* ---- the compensated sum ---- */

void q_hsum_start(q_hsum *s, const mw_histogram *first)
{
    mw_hist_copy(&s->h, first);
    mw_hist_copy(&s->c, first);
    s->c.count = s->c.sum = s->c.zero_count = 0;
    for (size_t i = 0; i < s->c.npos; i++)
        s->c.pos[i] = 0;
    for (size_t i = 0; i < s->c.nneg; i++)
        s->c.neg[i] = 0;
}

void q_hsum_free(q_hsum *s)
{
    mw_hist_free(&s->h);
    mw_hist_free(&s->c);
}

void q_hsum_copy(q_hsum *dst, const q_hsum *src)
{
    mw_hist_copy(&dst->h, &src->h);
    mw_hist_copy(&dst->c, &src->c);
}

void q_hsum_scale(q_hsum *s, double f)
{
    q_hist_scale(&s->h, f);
    q_hist_scale(&s->c, f);
}

/* Divides, not multiplies by the inverse: the rounding Prometheus has. */
static void hist_div(mw_histogram *h, double d)
{
    h->count /= d;
    h->sum /= d;
    h->zero_count /= d;
    for (size_t i = 0; i < h->npos; i++)
        h->pos[i] /= d;
    for (size_t i = 0; i < h->nneg; i++)
        h->neg[i] /= d;
}

void q_hsum_div(q_hsum *s, double d)
{
    hist_div(&s->h, d);
    hist_div(&s->c, d);
}

int q_hsum_overflow(const q_hsum *s)
{
    const mw_histogram *h = &s->h;
    if (isinf(h->count) || isinf(h->sum) || isinf(h->zero_count)) return 1;
    for (size_t i = 0; i < h->npos; i++)
        if (isinf(h->pos[i])) return 1;
    for (size_t i = 0; i < h->nneg; i++)
        if (isinf(h->neg[i])) return 1;
    return 0;
}

void q_hsum_result(q_hsum *s, mw_histogram *out)
{
    mw_histogram *h = &s->h;
    const mw_histogram *c = &s->c;
    h->count += c->count;
    h->sum += c->sum;
    h->zero_count += c->zero_count;
    for (size_t i = 0; i < h->npos; i++)
        h->pos[i] += c->pos[i];
    for (size_t i = 0; i < h->nneg; i++)
        h->neg[i] += c->neg[i];
    *out = *h;
    memset(h, 0, sizeof(*h));
    mw_hist_free(&s->c);
}

/* The zero count h would have with a zero threshold of at least *zt (its
 * compensation in *czc, from c's when given): the buckets below the
 * threshold go into it, and a populated bucket the threshold falls into
 * raises the threshold to the bucket's upper bound. */
static double zero_for_threshold(const mw_histogram *h, const mw_histogram *c, double *zt,
                                 double *czc)
{
    double t = *zt, zc;
    *czc = c ? c->zero_count : 0;
    for (;;) {
        zc = h->zero_count;
        for (size_t i = 0; i < h->npos; i++) {
            if (q_hist_bound(h->pos_idx[i] - 1, h) >= t) break;
            pq_kahan_inc(h->pos[i], &zc, czc);
            if (c) pq_kahan_inc(c->pos[i], &zc, czc);
            double upper = q_hist_bound(h->pos_idx[i], h);
            if (upper > t) {
                if (h->pos[i] != 0) t = upper;
                break;
            }
        }
        int again = 0;
        for (size_t i = 0; i < h->nneg; i++) {
            if (q_hist_bound(h->neg_idx[i] - 1, h) >= t) break;
            pq_kahan_inc(h->neg[i], &zc, czc);
            if (c) pq_kahan_inc(c->neg[i], &zc, czc);
            double upper = q_hist_bound(h->neg_idx[i], h);
            if (upper > t) {
                if (h->neg[i] != 0) {
                    t = upper; /* the positive side must be redone */
                    again = 1;
                }
                break;
            }
        }
        if (!again) break;
    }
    *zt = t;
    return zc;
}

/* Drops h's (and c's) buckets that lie within h's zero bucket. */
static void trim_zero(mw_histogram *h, mw_histogram *c)
{
    size_t o = 0;
    for (size_t i = 0; i < h->npos; i++) {
        if (q_hist_bound(h->pos_idx[i] - 1, h) < h->zero_threshold || h->pos[i] == 0) continue;
        h->pos_idx[o] = c->pos_idx[o] = h->pos_idx[i];
        c->pos[o] = c->pos[i];
        h->pos[o++] = h->pos[i];
    }
    h->npos = c->npos = o;
    o = 0;
    for (size_t i = 0; i < h->nneg; i++) {
        if (q_hist_bound(h->neg_idx[i] - 1, h) < h->zero_threshold || h->neg[i] == 0) continue;
        h->neg_idx[o] = c->neg_idx[o] = h->neg_idx[i];
        c->neg[o] = c->neg[i];
        h->neg[o++] = h->neg[i];
    }
    h->nneg = c->nneg = o;
}

/* Buckets (idx, v, cv) at schema from merged down to schema to, in place,
 * compensated. */
static void kahan_reduce(int32_t *idx, double *v, double *cv, size_t *n, int32_t from, int32_t to)
{
    int d = from - to;
    size_t o = 0;
    for (size_t i = 0; i < *n; i++) {
        int32_t t = (int32_t)((((int64_t)idx[i] - 1) >> d) + 1);
        if (o && idx[o - 1] == t) {
            pq_kahan_inc(v[i], &v[o - 1], &cv[o - 1]);
            pq_kahan_inc(cv[i], &v[o - 1], &cv[o - 1]);
        } else {
            idx[o] = t;
            v[o] = v[i];
            cv[o++] = cv[i];
        }
    }
    *n = o;
}

/* One side: a (with compensation ac) += b (with compensation bc, or
 * none), b's buckets at or below the zero threshold left out (they are
 * in the zero count already); into out arrays of an + bn. */
static size_t kahan_merge(const int32_t *ai, const double *av, const double *ac, size_t an,
                          const int32_t *bi, const double *bv, const double *bc, size_t bn,
                          const mw_histogram *layout, int32_t *oi, double *ov, double *oc)
{
    size_t i = 0, j = 0, o = 0;
    if (!is_custom(layout))
        while (j < bn && q_hist_bound(bi[j], layout) <= layout->zero_threshold)
            j++;
    while (i < an || j < bn) {
        if (j >= bn || (i < an && ai[i] < bi[j])) {
            oi[o] = ai[i];
            ov[o] = av[i];
            oc[o++] = ac[i++];
        } else if (i >= an || bi[j] < ai[i]) {
            oi[o] = bi[j];
            ov[o] = bv[j];
            oc[o++] = bc ? bc[j] : 0;
            j++;
        } else {
            double v = av[i], c = ac[i];
            pq_kahan_inc(bv[j], &v, &c);
            if (bc && bc[j] != 0) pq_kahan_inc(bc[j], &v, &c);
            oi[o] = ai[i];
            ov[o] = v;
            oc[o++] = c;
            i++;
            j++;
        }
    }
    return o;
}

/* Custom bounds that differ: h and c mapped with o onto the common ones. */
static void kahan_reconcile(q_hsum *s, const mw_histogram *o)
{
    mw_histogram *h = &s->h, *c = &s->c;
    double *bounds = mw_xmalloc((h->ncustom + 1) * sizeof(double));
    size_t nb = q_hist_common_bounds(h, o, bounds);
    double *dense = mw_xcalloc(nb + 1, sizeof(double));
    double *cdense = mw_xcalloc(nb + 1, sizeof(double));
    for (size_t i = 0; i < h->npos; i++) {
        size_t t = q_hist_map_bucket(h, h->pos_idx[i], bounds, nb);
        pq_kahan_inc(h->pos[i], &dense[t], &cdense[t]);
        pq_kahan_inc(c->pos[i], &dense[t], &cdense[t]);
    }
    for (size_t i = 0; i < o->npos; i++) {
        size_t t = q_hist_map_bucket(o, o->pos_idx[i], bounds, nb);
        pq_kahan_inc(o->pos[i], &dense[t], &cdense[t]);
    }
    set_dense(h, c, dense, cdense, nb + 1, bounds, nb);
    free(dense);
    free(cdense);
    free(bounds);
}

int q_hsum_add(q_hsum *s, const mw_histogram *o, int *reconciled)
{
    mw_histogram *h = &s->h, *c = &s->c;
    if (is_custom(h) != is_custom(o)) return Q_HIST_MIXED_SCHEMAS;
    if (!is_custom(h)) {
        /* A common zero bucket first, wide enough for both. */
        double ozc = o->zero_count, oczc = 0, ozt = o->zero_threshold;
        while (ozt != h->zero_threshold) {
            if (h->zero_threshold > ozt) {
                ozt = h->zero_threshold;
                ozc = zero_for_threshold(o, NULL, &ozt, &oczc);
            }
            if (ozt > h->zero_threshold) {
                double zt = ozt, czc;
                h->zero_count = zero_for_threshold(h, c, &zt, &czc);
                h->zero_threshold = c->zero_threshold = zt;
                c->zero_count = czc;
                trim_zero(h, c);
            }
        }
        pq_kahan_inc(ozc, &h->zero_count, &c->zero_count);
        pq_kahan_inc(oczc, &h->zero_count, &c->zero_count);
    }
    pq_kahan_inc(o->count, &h->count, &c->count);
    pq_kahan_inc(o->sum, &h->sum, &c->sum);
    if (is_custom(h) && !q_hist_same_bounds(h, o)) {
        kahan_reconcile(s, o);
        *reconciled = 1;
        return 0;
    }
    /* The other at the coarser schema of the two. */
    mw_histogram b;
    mw_hist_copy(&b, o);
    double *bpc = mw_xcalloc(b.npos + 1, sizeof(double)),
           *bnc = mw_xcalloc(b.nneg + 1, sizeof(double));
    if (!is_custom(h) && b.schema < h->schema) {
        kahan_reduce(h->pos_idx, h->pos, c->pos, &h->npos, h->schema, b.schema);
        kahan_reduce(h->neg_idx, h->neg, c->neg, &h->nneg, h->schema, b.schema);
        if (h->npos) memcpy(c->pos_idx, h->pos_idx, h->npos * sizeof(int32_t));
        if (h->nneg) memcpy(c->neg_idx, h->neg_idx, h->nneg * sizeof(int32_t));
        c->npos = h->npos;
        c->nneg = h->nneg;
        h->schema = c->schema = b.schema;
    } else if (!is_custom(h) && b.schema > h->schema) {
        kahan_reduce(b.pos_idx, b.pos, bpc, &b.npos, b.schema, h->schema);
        kahan_reduce(b.neg_idx, b.neg, bnc, &b.nneg, b.schema, h->schema);
        b.schema = h->schema;
    }
    mw_histogram r = *h, rc = *c;
    r.npos = r.nneg = r.ncustom = 0;
    r.pos_idx = r.neg_idx = NULL;
    r.pos = r.neg = r.custom = NULL;
    mw_hist_alloc(&r, h->npos + b.npos, h->nneg + b.nneg, h->ncustom);
    rc.pos_idx = rc.neg_idx = NULL;
    rc.pos = rc.neg = rc.custom = NULL;
    mw_hist_alloc(&rc, h->npos + b.npos, h->nneg + b.nneg, h->ncustom);
    if (h->ncustom) { /* NULL arrays when empty: not for memcpy */
        memcpy(r.custom, h->custom, h->ncustom * sizeof(double));
        memcpy(rc.custom, h->custom, h->ncustom * sizeof(double));
    }
    r.npos = kahan_merge(h->pos_idx, h->pos, c->pos, h->npos, b.pos_idx, b.pos, bpc, b.npos, h,
                         r.pos_idx, r.pos, rc.pos);
    r.nneg = kahan_merge(h->neg_idx, h->neg, c->neg, h->nneg, b.neg_idx, b.neg, bnc, b.nneg, h,
                         r.neg_idx, r.neg, rc.neg);
    rc.npos = r.npos;
    rc.nneg = r.nneg;
    rc.ncustom = r.ncustom = h->ncustom;
    memcpy(rc.pos_idx, r.pos_idx, r.npos * sizeof(int32_t));
    memcpy(rc.neg_idx, r.neg_idx, r.nneg * sizeof(int32_t));
    mw_hist_free(h);
    mw_hist_free(c);
    *h = r;
    *c = rc;
    mw_hist_free(&b);
    free(bpc);
    free(bnc);
    return 0;
}

static int q_hsum_mean_add(q_hsum *mean, const mw_histogram *o, double n, int *reconciled)
{
    /* mean = mean * (n-1)/n + o/n, compensated */
    q_hsum_scale(mean, (n - 1) / n);
    mw_histogram part;
    mw_hist_copy(&part, o);
    hist_div(&part, n);
    int rc = q_hsum_add(mean, &part, reconciled);
    mw_hist_free(&part);
    return rc;
}

/* ---- averages: direct while the sum fits, then incremental ---- */

void q_havg_start(q_havg *a, const mw_histogram *first)
{
    memset(a, 0, sizeof(*a));
    q_hsum_start(&a->s, first);
    a->n = 1;
}

int q_havg_add(q_havg *a, const mw_histogram *o, int *reconciled)
{
    a->n++;
    if (!a->incremental) {
        q_hsum next;
        q_hsum_copy(&next, &a->s);
        int rc = q_hsum_add(&next, o, reconciled);
        if (rc < 0) {
            q_hsum_free(&next);
            return rc;
        }
        if (!q_hsum_overflow(&next)) {
            q_hsum_free(&a->s);
            a->s = next;
            return 0;
        }
        q_hsum_free(&next);
        a->incremental = 1; /* the running sum is now the mean so far */
        q_hsum_div(&a->s, a->n - 1);
    }
    return q_hsum_mean_add(&a->s, o, a->n, reconciled);
}

void q_havg_result(q_havg *a, mw_histogram *out)
{
    if (!a->incremental) q_hsum_div(&a->s, a->n);
    q_hsum_result(&a->s, out);
}

void q_havg_free(q_havg *a)
{
    q_hsum_free(&a->s);
}
