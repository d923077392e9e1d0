/* nhist_trim.c - the trim operators of Prometheus 3 over native
 * histograms: `h </ x` keeps the observations below x, `h >/ x` those
 * above it. A bucket x falls inside keeps the interpolated part of its
 * count (linearly for custom buckets and the zero bucket, on a log scale
 * for exponential ones, as histogram_fraction estimates); the sum is then
 * re-estimated from what remains, each bucket's kept count at the middle
 * of its kept interval, because the observations' own values are gone.
 * Buckets with an infinite bound keep all or nothing, except the
 * custom-bucket cases where Prometheus takes 0 for the lower bound. */
#include "qinternal.h"

#include "../core/util.h"

#include <math.h>
#include <stdlib.h>

/* Where a bucket's kept observations are assumed to be: the middle of
 * [lo, hi] (geometric for exponential buckets, the sign of the side);
 * an infinite bound leaves the finite one (halved when a positive upper
 * bound is all there is: 0 stands in for -Inf). */
static double kept_middle(double lo, double hi, int positive, int linear)
{
    if (isinf(lo)) {
        if (isinf(hi)) return 0;
        return hi > 0 ? hi / 2 : hi;
    }
    if (isinf(hi)) return lo;
    if (linear) return (lo + hi) / 2;
    double g = sqrt(fabs(lo * hi));
    return positive ? g : -g;
}

/* The part of a finite bucket at or below x (lo < x < hi). */
static double part_below(double lo, double hi, double x, int linear)
{
    if (linear) return (x - lo) / (hi - lo);
    double ll = log2(fabs(lo)), lu = log2(fabs(hi)), lx = log2(fabs(x));
    if (x > 0) return (lx - ll) / (lu - ll);
    return 1 - (lx - lu) / (ll - lu);
}

/* A bucket with an infinite bound that x falls in: what it keeps (*mid
 * where its kept count is assumed). Only custom buckets reach here with a
 * finite other bound, so the interpolation is linear. */
static double infinite_keep(double lo, double hi, double cnt, double x, int below, double *mid)
{
    if (isinf(lo) && lo < 0) {
        int finite_hi = !isinf(hi);
        *mid = finite_hi ? hi : 0; /* unless a case below says otherwise */
        if (below) {
            if (x >= hi) {
                *mid = 0;
                return cnt;
            }
            if (x > 0 && hi > 0 && finite_hi) { /* 0 taken for -Inf */
                *mid = x / 2;
                return cnt * x / hi;
            }
            if (hi <= 0) {
                *mid = x;
                return cnt;
            }
            return 0; /* how much lies above x is unknown: all goes */
        }
        if (x >= 0 && hi > x && finite_hi) {
            *mid = (x + hi) / 2;
            return cnt * (1 - x / hi);
        }
        return 0;
    }
    /* Up to +Inf: below x nothing is known to be kept; above a lower
     * bound under x everything is. */
    if (!below && x >= lo) {
        *mid = x;
        return cnt;
    }
    *mid = isinf(lo) ? 0 : lo;
    return 0;
}

/* What a bucket keeps (*mid where its kept count is assumed), x inside. */
static double bucket_keep(double lo, double hi, double cnt, double x, int below, int positive,
                          int linear, double *mid)
{
    if ((isinf(lo) && lo < 0) || (isinf(hi) && hi > 0))
        return infinite_keep(lo, hi, cnt, x, below, mid);
    double under = cnt * part_below(lo, hi, x, linear);
    if (below) {
        *mid = kept_middle(lo, x, positive, linear);
        return under;
    }
    *mid = kept_middle(x, hi, positive, linear);
    return cnt - under;
}

typedef struct trim_acc {
    double x, count, sum;
    int below, linear, trimmed;
} trim_acc;

/* One side's buckets (counts in place), their bounds from q_hist_bound:
 * positive ones (bound(i-1), bound(i)], negative ones mirrored. Returns
 * whether the side held any observation. */
static int trim_side(trim_acc *a, const mw_histogram *h, const int32_t *idx, double *cnt, size_t n,
                     int positive)
{
    int any = 0;
    for (size_t i = 0; i < n; i++) {
        if (cnt[i] == 0) continue;
        any = 1;
        double lo = q_hist_bound(idx[i] - 1, h), hi = q_hist_bound(idx[i], h);
        if (!positive) {
            double t = lo;
            lo = -hi;
            hi = -t;
        }
        int whole = a->below ? hi <= a->x : lo >= a->x;
        int inside = a->below ? lo < a->x : hi > a->x;
        if (whole) {
            a->count += cnt[i];
            a->sum += kept_middle(lo, hi, positive, a->linear) * cnt[i];
        } else if (inside) {
            double mid,
                keep = bucket_keep(lo, hi, cnt[i], a->x, a->below, positive, a->linear, &mid);
            a->count += keep;
            a->sum += mid * keep;
            if (keep != cnt[i]) a->trimmed = 1;
            cnt[i] = keep;
        } else {
            cnt[i] = 0;
            a->trimmed = 1;
        }
    }
    return any;
}

/* The zero bucket [-zt, zt], narrowed to the side that has observations
 * when only one has; linear inside. */
static void trim_zero(trim_acc *a, mw_histogram *r, int has_neg, int has_pos)
{
    double lo = -r->zero_threshold, hi = r->zero_threshold, x = a->x, keep, mid;
    if (has_neg && !has_pos) hi = 0;
    if (has_pos && !has_neg) lo = 0;
    if (a->below ? x <= lo : x >= hi) {
        keep = 0, mid = 0;
    } else if (a->below ? x >= hi : x <= lo) {
        keep = r->zero_count, mid = (lo + hi) / 2;
    } else if (a->below) {
        keep = r->zero_count * (x - lo) / (hi - lo), mid = (lo + x) / 2;
    } else {
        keep = r->zero_count * (hi - x) / (hi - lo), mid = (x + hi) / 2;
    }
    if (keep != r->zero_count) a->trimmed = 1;
    r->zero_count = keep;
    a->count += keep;
    a->sum += mid * keep;
}

/* Drop the buckets left empty. */
static void compact_side(int32_t *idx, double *cnt, size_t *n)
{
    size_t o = 0;
    for (size_t i = 0; i < *n; i++)
        if (cnt[i] != 0) {
            idx[o] = idx[i];
            cnt[o++] = cnt[i];
        }
    *n = o;
}

void q_hist_trim(const mw_histogram *h, double x, int below, mw_histogram *out)
{
    mw_hist_copy(out, h);
    trim_acc a = {.x = x, .below = below, .linear = h->schema == MW_HIST_SCHEMA_CUSTOM};
    int has_pos = trim_side(&a, out, out->pos_idx, out->pos, out->npos, 1);
    int has_neg = trim_side(&a, out, out->neg_idx, out->neg, out->nneg, 0);
    if (out->zero_count > 0) trim_zero(&a, out, has_neg, has_pos);
    /* Nothing cut: the histogram as it was, its exact sum kept. */
    if (!a.trimmed) return;
    out->count = a.count;
    out->sum = a.sum;
    compact_side(out->pos_idx, out->pos, &out->npos);
    compact_side(out->neg_idx, out->neg, &out->nneg);
}
