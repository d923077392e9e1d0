/* funcs_native_histogram.c - PromQL functions over native histograms, as
 * Prometheus 3 computes them: histogram_count, _sum, _avg, _stddev,
 * _stdvar, _fraction, histogram_quantile's native part, and the range
 * functions over windows that hold histograms (rate, increase, delta,
 * irate, idelta, sum_over_time, avg_over_time; the others take their
 * floats, count_over_time and last_over_time take both). */
#include "qinternal.h"

#include "../core/util.h"

#include <math.h>
#include <stdlib.h>

/* A bucket as Prometheus's AllBucketIterator gives it: negative buckets
 * (most negative first), the zero bucket when it holds something, the
 * positive ones; bounds clamped to the zero bucket's. */
typedef struct qbucket {
    double lower, upper, count;
} qbucket;

static size_t hist_buckets(const mw_histogram *h, qbucket *out)
{
    size_t n = 0;
    double zt = h->zero_threshold;
    if (h->schema == MW_HIST_SCHEMA_CUSTOM) {
        for (size_t i = 0; i < h->npos; i++)
            out[n++] = (qbucket){q_hist_bound(h->pos_idx[i] - 1, h), q_hist_bound(h->pos_idx[i], h),
                                 h->pos[i]};
        return n;
    }
    for (size_t i = h->nneg; i-- > 0;) {
        qbucket b = {-q_hist_bound(h->neg_idx[i], h), -q_hist_bound(h->neg_idx[i] - 1, h),
                     h->neg[i]};
        if (b.upper < 0 && b.upper > -zt) b.upper = -zt;
        out[n++] = b;
    }
    if (h->zero_count > 0) out[n++] = (qbucket){-zt, zt, h->zero_count};
    for (size_t i = 0; i < h->npos; i++) {
        qbucket b = {q_hist_bound(h->pos_idx[i] - 1, h), q_hist_bound(h->pos_idx[i], h), h->pos[i]};
        if (b.lower > 0 && b.lower < zt) b.lower = zt;
        out[n++] = b;
    }
    return n;
}

static qbucket *buckets_of(const mw_histogram *h, size_t *n)
{
    qbucket *b = mw_xmalloc((h->npos + h->nneg + 1) * sizeof(qbucket));
    *n = hist_buckets(h, b);
    return b;
}

/* The q-quantile of h; *nan_info 1 when NaN observations make it NaN, 2
 * when they skew it higher (Prometheus's infos), else 0. */
static double h_quantile(double q, const mw_histogram *h, int *nan_info)
{
    *nan_info = 0;
    if (q < 0) return -INFINITY;
    if (q > 1) return INFINITY;
    if (h->count == 0 || isnan(q)) return NAN;
    size_t nb;
    qbucket *bs = buckets_of(h, &nb);
    int fwd = isnan(h->sum) || q < 0.5;
    double rank = fwd ? q * h->count : (1 - q) * h->count, count = 0;
    qbucket b = {0, 0, 0};
    size_t j = 0;
    for (; j < nb; j++) {
        b = bs[fwd ? j : nb - 1 - j];
        if (b.count == 0) continue;
        count += b.count;
        if (count >= rank) break;
    }
    /* NaN observations count in h->count but in no bucket: what the
     * buckets after this one hold tells whether some are missing. */
    double rest = 0;
    for (size_t r = j + 1; r < nb; r++)
        rest += bs[fwd ? r : nb - 1 - r].count;
    free(bs);
    int custom = h->schema == MW_HIST_SCHEMA_CUSTOM;
    if (!custom && b.lower < 0 && b.upper > 0) {
        if (h->nneg == 0 && h->npos > 0)
            b.lower = 0;
        else if (h->npos == 0 && h->nneg > 0)
            b.upper = 0;
    } else if (custom) {
        if (b.lower == -INFINITY) {
            if (b.upper <= 0) return b.upper;
            b.lower = 0;
        } else if (b.upper == INFINITY) {
            return b.lower;
        }
    }
    if (count > h->count) count = h->count;
    if (count < rank) {
        if (!isnan(h->sum)) return b.upper;
        *nan_info = 1;
        return NAN;
    }
    if (isnan(h->sum) && count + rest < h->count) *nan_info = 2;
    rank = fwd ? rank - (count - b.count) : count - rank;
    double fraction = rank / b.count;
    if (custom || (b.lower <= 0 && b.upper >= 0)) return b.lower + (b.upper - b.lower) * fraction;
    double ll = log2(fabs(b.lower)), lu = log2(fabs(b.upper));
    if (b.lower > 0) return exp2(ll + (lu - ll) * fraction);
    return -exp2(lu + (ll - lu) * (1 - fraction));
}

static double fraction_below(const qbucket *b, double v, int linear)
{
    if (linear) return (v - b->lower) / (b->upper - b->lower);
    double ll = log2(fabs(b->lower)), lu = log2(fabs(b->upper)), lv = log2(fabs(v));
    if (v > 0) return (lv - ll) / (lu - ll);
    return 1 - ((lv - lu) / (ll - lu));
}

/* The fraction of h's observations in [lower, upper]; *nan_info 1 when
 * some are NaN (in h->count but in no bucket: in no fraction). */
static double h_fraction(double lower, double upper, const mw_histogram *h, int *nan_info)
{
    *nan_info = 0;
    if (h->count == 0 || isnan(lower) || isnan(upper)) return NAN;
    if (lower >= upper) return 0;
    size_t nb;
    qbucket *bs = buckets_of(h, &nb);
    int custom = h->schema == MW_HIST_SCHEMA_CUSTOM;
    double count = 0, rank = 0, lr = 0, ur = 0;
    int lset = 0, uset = 0;
    size_t j = 0;
    for (; j < nb; j++) {
        qbucket b = bs[j];
        count += b.count;
        int zero = 0;
        if (b.lower <= 0 && b.upper >= 0) {
            zero = 1;
            if (h->nneg == 0 && h->npos > 0)
                b.lower = 0;
            else if (h->npos == 0 && h->nneg > 0)
                b.upper = 0;
        }
        int linear = custom || zero;
        if (!lset && b.lower >= lower) {
            lr = rank;
            lset = 1;
        }
        if (!uset && b.lower >= upper) {
            ur = rank;
            uset = 1;
        }
        if (lset && uset) break;
        if (!lset && b.lower < lower && b.upper > lower) {
            lr = linear && b.lower == -INFINITY
                     ? b.count
                     : rank + b.count * fraction_below(&b, lower, linear);
            lset = 1;
        }
        if (!uset && b.lower < upper && b.upper > upper) {
            ur = linear && b.lower == -INFINITY
                     ? b.count
                     : rank + b.count * fraction_below(&b, upper, linear);
            uset = 1;
        }
        if (lset && uset) break;
        rank += b.count;
    }
    if (isnan(h->sum)) {
        for (j++; j < nb; j++)
            count += bs[j].count;
        *nan_info = count < h->count;
    } else {
        count = h->count;
    }
    free(bs);
    if (!lset || lr > count) lr = count;
    if (!uset || ur > count) ur = count;
    return (ur - lr) / h->count;
}

static double h_variance(const mw_histogram *h)
{
    size_t nb;
    qbucket *bs = buckets_of(h, &nb);
    double mean = h->sum / h->count, var = 0, comp = 0;
    for (size_t j = 0; j < nb; j++) {
        const qbucket *b = &bs[j];
        if (b->count == 0) continue;
        double v;
        if (h->schema == MW_HIST_SCHEMA_CUSTOM)
            v = (b->upper + b->lower) / 2;
        else if (b->lower <= 0 && b->upper >= 0)
            v = 0;
        else {
            v = sqrt(b->upper * b->lower);
            if (b->upper < 0) v = -v;
        }
        double d = v - mean;
        pq_kahan_inc(b->count * d * d, &var, &comp);
    }
    free(bs);
    return (var + comp) / h->count;
}

enum { HF_COUNT, HF_SUM, HF_AVG, HF_STDDEV, HF_STDVAR };

typedef struct cbucket {
    double upper, count;
} cbucket;

static int cmp_cbucket(const void *a, const void *b)
{
    double x = ((const cbucket *)a)->upper, y = ((const cbucket *)b)->upper;
    return x < y ? -1 : x > y;
}

/* Prometheus's BucketFraction: classic cumulative buckets b[0..n). */
static double bucket_fraction(double lower, double upper, cbucket *b, size_t n)
{
    qsort(b, n, sizeof(*b), cmp_cbucket);
    if (!n || !(isinf(b[n - 1].upper) && b[n - 1].upper > 0)) return NAN;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (o && b[o - 1].upper == b[i].upper)
            b[o - 1].count += b[i].count;
        else
            b[o++] = b[i];
    }
    n = o;
    double count = b[n - 1].count;
    if (count == 0 || isnan(lower) || isnan(upper)) return NAN;
    if (lower >= upper) return 0;
    double rank = 0, lr = 0, ur = 0, lb = b[0].upper <= 0 ? -INFINITY : 0;
    int lset = 0, uset = 0;
    for (size_t i = 0; i < n; i++) {
        if (i) lb = b[i - 1].upper;
        double ub = b[i].upper;
        if (!lset && lb >= lower) {
            lr = rank;
            lset = 1;
        }
        if (!uset && lb >= upper) {
            ur = rank;
            uset = 1;
        }
        if (lset && uset) break;
        if (!lset && lb < lower && ub > lower) {
            lr = lb == -INFINITY ? b[i].count
                                 : rank + (b[i].count - rank) * (lower - lb) / (ub - lb);
            lset = 1;
        }
        if (!uset && lb < upper && ub > upper) {
            ur = lb == -INFINITY ? b[i].count
                                 : rank + (b[i].count - rank) * (upper - lb) / (ub - lb);
            uset = 1;
        }
        if (lset && uset) break;
        rank = b[i].count;
    }
    if (!lset || lr > count) lr = count;
    if (!uset || ur > count) ur = count;
    return (ur - lr) / count;
}

/* A histogram_fraction answer's series for s: its labels without the
 * name. */
static size_t fraction_series(vbuild *vb, const sv *s)
{
    pq_label *l = lbl_copy(s->labels, s->nlabels);
    size_t nl = s->nlabels;
    lbl_del(&l, &nl, "__name__");
    return vb_series(vb, l, nl);
}

/* histogram_fraction(lower, upper, v): the native histograms' fractions
 * (those with NaN observations, which no bucket holds, said so: they are
 * in no fraction) and the classic buckets', grouped as histogram_quantile
 * groups them, with its warnings (q_hist_split). */
static val fraction(qctx *c, const pq_node *n)
{
    val lo = eval_node(c, n->args[0]);
    val hi = eval_unless_failed(c, n->args[1]);
    int hstats = c->hstats;
    c->hstats = 0; /* fractions need whole histograms (nhist.c) */
    val in = eval_unless_failed(c, n->args[2]);
    c->hstats = hstats;
    vbuild vb;
    vb_init(&vb, c);
    size_t ns = c->nsteps;
    int pos = q_arg_pos(n->args[2]);
    q_hsplit hs;
    q_hist_split(c, &in, pos, &hs);
    for (size_t i = 0; i < in.n && !c->code; i++) {
        size_t si = (size_t)-1;
        for (size_t k = 0; k < ns; k++) {
            if (!hs.hist[i * ns + k]) continue;
            int nan_info;
            double v =
                h_fraction(lo.scalar[k], hi.scalar[k], q_hist_get(c, in.s[i].v[k]), &nan_info);
            if (nan_info) {
                const char *name = lbl_get(in.s[i].labels, in.s[i].nlabels, "__name__");
                q_annot(c, 1, pos,
                        "PromQL info: input to histogram_fraction has NaN observations, which are "
                        "excluded from all fractions%s%s%s",
                        *name ? " for metric name \"" : "", name, *name ? "\"" : "");
            }
            if (si == (size_t)-1 && (si = fraction_series(&vb, &in.s[i])) == (size_t)-1) break;
            if (vb_set(&vb, si, k, v) < 0) break;
        }
    }
    cbucket *b = mw_xcalloc(in.n + 1, sizeof(cbucket));
    for (size_t g = 0; g < hs.nclassic && !c->code; g++) {
        size_t si = (size_t)-1;
        for (size_t k = 0; k < ns; k++) {
            size_t m = 0;
            for (size_t i = 0; !hs.mixed[g * ns + k] && i < in.n; i++)
                if (hs.grp[i] == g && in.s[i].ok[k]) b[m++] = (cbucket){hs.le[i], in.s[i].v[k]};
            if (!m) continue;
            if (si == (size_t)-1 && (si = fraction_series(&vb, &hs.groups.s[g])) == (size_t)-1)
                break;
            if (vb_set(&vb, si, k, bucket_fraction(lo.scalar[k], hi.scalar[k], b, m)) < 0) break;
        }
    }
    free(b);
    q_hist_split_free(&hs);
    val out = vb_finish(&vb);
    val_free(c, &in);
    val_free(c, &lo);
    val_free(c, &hi);
    return out;
}

/* An element-wise function of the histograms of the vector argument
 * (floats are left out); the metric name goes. */
static val hist_map(qctx *c, const pq_node *n, int what)
{
    int hstats = c->hstats;
    c->hstats = what == HF_COUNT || what == HF_SUM || what == HF_AVG;
    val in = eval_unless_failed(c, n->args[0]);
    c->hstats = hstats;
    vbuild vb;
    vb_init(&vb, c);
    for (size_t i = 0; i < in.n && !c->code; i++) {
        size_t si = (size_t)-1;
        for (size_t k = 0; k < c->nsteps; k++) {
            if (!in.s[i].ok[k]) continue;
            const mw_histogram *h = q_hist_get(c, in.s[i].v[k]);
            if (!h) continue;
            double v;
            switch (what) {
            case HF_COUNT:
                v = h->count;
                break;
            case HF_SUM:
                v = h->sum;
                break;
            case HF_AVG:
                v = h->sum / h->count;
                break;
            case HF_STDDEV:
                v = sqrt(h_variance(h));
                break;
            default:
                v = h_variance(h);
                break;
            }
            if (si == (size_t)-1) {
                pq_label *l = lbl_copy(in.s[i].labels, in.s[i].nlabels);
                size_t nl = in.s[i].nlabels;
                lbl_del(&l, &nl, "__name__");
                si = vb_series(&vb, l, nl);
                if (si == (size_t)-1) break;
            }
            if (vb_set(&vb, si, k, v) < 0) break;
        }
    }
    val out = vb_finish(&vb);
    val_free(c, &in);
    return out;
}

val pq_call_histogram_count(qctx *c, const pq_node *n)
{
    return hist_map(c, n, HF_COUNT);
}
val pq_call_histogram_sum(qctx *c, const pq_node *n)
{
    return hist_map(c, n, HF_SUM);
}
val pq_call_histogram_avg(qctx *c, const pq_node *n)
{
    return hist_map(c, n, HF_AVG);
}
val pq_call_histogram_stddev(qctx *c, const pq_node *n)
{
    return hist_map(c, n, HF_STDDEV);
}
val pq_call_histogram_stdvar(qctx *c, const pq_node *n)
{
    return hist_map(c, n, HF_STDVAR);
}
val pq_call_histogram_fraction(qctx *c, const pq_node *n)
{
    return fraction(c, n);
}

void q_hist_quantile(qctx *c, const double *q, const char *label, const val *in,
                     const uint8_t *hist, vbuild *vb, int pos)
{
    for (size_t i = 0; i < in->n && !c->code; i++) {
        size_t si = (size_t)-1;
        double last_q = 0;
        for (size_t k = 0; k < c->nsteps; k++) {
            if (!hist[i * c->nsteps + k]) continue;
            const mw_histogram *h = q_hist_get(c, in->s[i].v[k]);
            int nan_info;
            double v = h_quantile(q[k], h, &nan_info);
            if (nan_info) {
                const char *name = lbl_get(in->s[i].labels, in->s[i].nlabels, "__name__");
                q_annot(c, 1, pos,
                        "PromQL info: input to histogram_quantile has NaN observations, result "
                        "is %s%s%s%s",
                        nan_info == 1 ? "NaN" : "skewed higher", *name ? " for metric name \"" : "",
                        name, *name ? "\"" : "");
            }
            /* The series depends on the step only through the quantile's
             * label value. */
            if (si == (size_t)-1 ||
                (label && !(q[k] == last_q || (isnan(q[k]) && isnan(last_q))))) {
                si = q_quantile_series(c, vb, &in->s[i], label, q[k]);
                if (si == (size_t)-1) return;
                last_q = q[k];
            }
            if (vb_set(vb, si, k, v) < 0) return;
        }
    }
}
