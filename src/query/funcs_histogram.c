/* funcs_histogram.c - PromQL's histogram_quantile and Prometheus 3's
 * histogram_quantiles (several quantiles, one output series each, told
 * apart by a label) over classic histograms (cumulative buckets with an le
 * label), as Prometheus computes them, and the split of a histogram
 * function's vector argument into native histograms and classic bucket
 * groups that histogram_fraction shares; the native histograms' part is in
 * funcs_native_histogram.c. */
#include "qinternal.h"

#include "../core/util.h"

#include <float.h>
#include <math.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bucket {
    double upper, count;
} bucket;

static int cmp_bucket(const void *a, const void *b)
{
    double x = ((const bucket *)a)->upper, y = ((const bucket *)b)->upper;
    return x < y ? -1 : x > y ? 1 : 0;
}

/* Prometheus's almost.Equal: within eps relative, or near zero absolute. */
static int almost_equal(double a, double b, double eps)
{
    const double min_normal = 2.2250738585072014e-308;
    if (a == b) return 1;
    double abs_sum = fabs(a) + fabs(b), diff = fabs(a - b);
    if (a == 0 || b == 0 || abs_sum < min_normal) return diff < eps * min_normal;
    return diff / fmin(abs_sum, DBL_MAX) < eps;
}

/* What forcing the buckets monotonic changed, for the info it raises. */
typedef struct mono_fix {
    int forced;
    double min_bucket, max_bucket, max_diff;
} mono_fix;

static double bucket_quantile(double q, bucket *b, size_t n, mono_fix *fix)
{
    fix->forced = 0;
    if (isnan(q)) return NAN;
    if (q < 0) return -INFINITY;
    if (q > 1) return INFINITY;
    qsort(b, n, sizeof(bucket), cmp_bucket);
    if (n == 0 || !(isinf(b[n - 1].upper) && b[n - 1].upper > 0)) return NAN;
    /* coalesce equal bounds */
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (o && b[o - 1].upper == b[i].upper) {
            b[o - 1].count += b[i].count;
        } else {
            b[o++] = b[i];
        }
    }
    n = o;
    /* Ensure monotonic counts, as Prometheus 3: a difference within 1e-12
     * relative is floating-point noise, taken away silently; a real
     * decrease is removed too, and said so (an info). */
    fix->min_bucket = INFINITY;
    fix->max_bucket = -INFINITY;
    fix->max_diff = 0;
    double prev = b[0].count;
    for (size_t i = 1; i < n; i++) {
        double cur = b[i].count;
        if (cur == prev) continue;
        if (almost_equal(prev, cur, 1e-12)) {
            b[i].count = prev;
            continue;
        }
        if (cur < prev) {
            b[i].count = prev;
            fix->forced = 1;
            if (b[i].upper < fix->min_bucket) fix->min_bucket = b[i].upper;
            if (b[i].upper > fix->max_bucket) fix->max_bucket = b[i].upper;
            if (prev - cur > fix->max_diff) fix->max_diff = prev - cur;
            continue;
        }
        prev = cur;
    }
    if (n < 2) return NAN;
    double obs = b[n - 1].count;
    if (obs == 0) return NAN;
    double rank = q * obs;
    size_t i = 0;
    while (i < n - 1 && !(b[i].count >= rank))
        i++;
    if (i == n - 1) return b[n - 2].upper;
    if (i == 0 && b[0].upper <= 0) return b[0].upper;
    double start = 0, end = b[i].upper, count = b[i].count;
    if (i > 0) {
        start = b[i - 1].upper;
        count -= b[i - 1].count;
        rank -= b[i - 1].count;
    }
    return start + (end - start) * (rank / count);
}

/* A bucket without a readable le, present at some step: Prometheus's
 * warning (with the metric name, as its evaluator names it when it keeps
 * names to the end, as its test engine does). */
static void bad_le(qctx *c, const sv *s, const char *le, size_t nsteps, int pos)
{
    size_t k = 0;
    while (k < nsteps && !s->ok[k])
        k++;
    if (k == nsteps) return;
    const char *name = lbl_get(s->labels, s->nlabels, "__name__");
    if (*name)
        q_annot(c, 0, pos,
                "PromQL warning: bucket label \"le\" is missing or has a malformed value of \"%s\" "
                "for metric name \"%s\"",
                le, name);
    else
        q_annot(c, 0, pos,
                "PromQL warning: bucket label \"le\" is missing or has a malformed value of \"%s\"",
                le);
}

/* A quantile as a label value: Prometheus's FormatOpenMetricsFloat (Go's
 * shortest %g, ".0" added to an integer). */
static void om_float(double q, char *buf, size_t size)
{
    if (isnan(q)) {
        snprintf(buf, size, "NaN");
        return;
    }
    if (isinf(q)) {
        snprintf(buf, size, q > 0 ? "+Inf" : "-Inf");
        return;
    }
    pq_format_go_g(q, buf, size);
    if (!strpbrk(buf, "e.")) strncat(buf, ".0", size - strlen(buf) - 1);
}

size_t q_quantile_series(qctx *c, vbuild *vb, const sv *s, const char *label, double q)
{
    pq_label *l = lbl_copy(s->labels, s->nlabels);
    size_t nl = s->nlabels;
    int dn = q_drop_name(c, &l, &nl);
    if (label) {
        char v[48];
        om_float(q, v, sizeof(v));
        lbl_set(&l, &nl, label, v);
    }
    return vb_series_dn(vb, l, nl, dn);
}

void q_hist_split(qctx *c, val *in, int pos, q_hsplit *hs)
{
    size_t ns = c->nsteps;
    vb_init(&hs->groups, c);
    hs->grp = mw_xcalloc(in->n ? in->n : 1, sizeof(size_t));
    hs->le = mw_xcalloc(in->n ? in->n : 1, sizeof(double));
    hs->hist = mw_xcalloc(in->n * ns + 1, 1);
    size_t *hgrp = mw_xcalloc(in->n ? in->n : 1, sizeof(size_t));
    /* Native histograms aside (not classic buckets, whatever their le). */
    for (size_t i = 0; i < in->n && !c->code; i++)
        for (size_t k = 0; k < ns; k++)
            if (in->s[i].ok[k] && q_hist_get(c, in->s[i].v[k])) {
                hs->hist[i * ns + k] = 1;
                in->s[i].ok[k] = 0;
            }
    for (size_t i = 0; i < in->n && !c->code; i++) {
        const char *ls = lbl_get(in->s[i].labels, in->s[i].nlabels, "le");
        char *end;
        hs->le[i] = strtod(ls, &end);
        /* Go's ParseFloat takes no leading space, which strtod skips */
        if (!*ls || *end || isspace((unsigned char)*ls)) {
            hs->grp[i] = (size_t)-1; /* no or bad le: ignored, with a warning */
            bad_le(c, &in->s[i], ls, ns, pos);
            continue;
        }
        pq_label *l = lbl_copy(in->s[i].labels, in->s[i].nlabels);
        size_t nl = in->s[i].nlabels;
        lbl_del(&l, &nl, "le");
        /* grouped by these labels, so le="1" and le="1.0" (one float)
         * are one bucket, which the interpolations coalesce */
        hs->grp[i] = vb_series(&hs->groups, l, nl);
    }
    /* The group a histogram's labels would be classic buckets of (for
     * series that hold one; the others none). */
    hs->nclassic = hs->groups.n;
    for (size_t i = 0; i < in->n && !c->code; i++) {
        hgrp[i] = (size_t)-1;
        int any = 0;
        for (size_t k = 0; k < ns && !any; k++)
            any = hs->hist[i * ns + k];
        if (any)
            hgrp[i] = vb_series(&hs->groups, lbl_copy(in->s[i].labels, in->s[i].nlabels),
                                in->s[i].nlabels);
    }
    hs->mixed = mw_xcalloc(hs->groups.n * ns + 1, 1);
    for (size_t i = 0; i < in->n && !c->code; i++) {
        size_t g = hgrp[i];
        for (size_t k = 0; g < hs->nclassic && k < ns; k++) {
            if (!hs->hist[i * ns + k]) continue;
            int classic = 0;
            for (size_t m = 0; m < in->n && !classic; m++)
                classic = hs->grp[m] == g && in->s[m].ok[k];
            if (!classic) continue;
            hs->hist[i * ns + k] = 0;
            hs->mixed[g * ns + k] = 1;
            const char *name = lbl_get(in->s[i].labels, in->s[i].nlabels, "__name__");
            q_annot(c, 0, pos,
                    "PromQL warning: vector contains a mix of classic and native histograms%s%s%s",
                    *name ? " for metric name \"" : "", name, *name ? "\"" : "");
        }
    }
    free(hgrp);
}

void q_hist_split_free(q_hsplit *hs)
{
    vb_free(&hs->groups);
    free(hs->grp);
    free(hs->le);
    free(hs->hist);
    free(hs->mixed);
}

/* The most quantiles histogram_quantiles takes (Prometheus's limit). */
#define MAX_QUANTILES 10

/* histogram_quantile(q, v) and histogram_quantiles(v, label, q...): per
 * label set without le (the metric name included, as Prometheus groups)
 * and per quantile, the quantile interpolated in the bucket it falls in;
 * native histograms are their own series. The answer drops the name (two
 * histograms whose labels differ only in their names collide, an error as
 * in Prometheus) and, for histogram_quantiles, sets label to the quantile.
 * A native histogram and classic buckets under the same labels at a step
 * give nothing there, with Prometheus's warning (q_hist_split). */
static val quantiles(qctx *c, const pq_node *vec, pq_node *const *qargs, size_t nq,
                     const char *label)
{
    val q[MAX_QUANTILES] = {{0}};
    for (size_t j = 0; j < nq; j++)
        q[j] = eval_unless_failed(c, qargs[j]);
    int hstats = c->hstats;
    c->hstats = 0; /* quantiles need whole histograms (nhist.c) */
    val in = eval_unless_failed(c, vec);
    c->hstats = hstats;
    val out = {0};
    size_t ns = c->nsteps;
    vbuild vb;
    vb_init(&vb, c);
    int bpos = q_arg_pos(vec);
    /* Prometheus warns of q out of [0, 1] at every step, input or none. */
    for (size_t j = 0; j < nq && !c->code; j++)
        for (size_t k = 0; k < ns && q[j].scalar; k++)
            q_annot_quantile(c, q[j].scalar[k], q_arg_pos(qargs[j]));
    q_hsplit hs;
    q_hist_split(c, &in, bpos, &hs);
    const size_t *grp = hs.grp;
    const double *le = hs.le;
    const uint8_t *hist = hs.hist, *mixed = hs.mixed;
    size_t nclassic = hs.nclassic;
    const vbuild *groups = &hs.groups;
    bucket *b = mw_xcalloc(in.n ? in.n : 1, sizeof(bucket));
    for (size_t j = 0; j < nq && !c->code; j++) {
        const double *qv = q[j].scalar;
        q_hist_quantile(c, qv, label, &in, hist, &vb, bpos); /* funcs_native_histogram.c */
        for (size_t g = 0; g < nclassic && !c->code; g++) {
            size_t si = (size_t)-1;
            double last_q = 0;
            for (size_t k = 0; k < ns; k++) {
                size_t m = 0;
                for (size_t i = 0; !mixed[g * ns + k] && i < in.n; i++)
                    if (grp[i] == g && in.s[i].ok[k]) b[m++] = (bucket){le[i], in.s[i].v[k]};
                if (!m) continue;
                mono_fix fix;
                double v = bucket_quantile(qv[k], b, m, &fix);
                if (fix.forced)
                    q_annot_mono(c, lbl_get(groups->s[g].labels, groups->s[g].nlabels, "__name__"),
                                 bpos, qts(c, k), fix.min_bucket, fix.max_bucket, fix.max_diff);
                /* The series depends on the step only through the
                 * quantile's label value. */
                if (si == (size_t)-1 ||
                    (label && !(qv[k] == last_q || (isnan(qv[k]) && isnan(last_q))))) {
                    si = q_quantile_series(c, &vb, &groups->s[g], label, qv[k]);
                    if (si == (size_t)-1) break;
                    last_q = qv[k];
                }
                if (vb_set(&vb, si, k, v) < 0) break;
            }
        }
    }
    free(b);
    q_hist_split_free(&hs);
    for (size_t j = 0; j < nq; j++)
        val_free(c, &q[j]);
    val_free(c, &in);
    out = vb_finish(&vb);
    return out;
}

val pq_call_histogram_quantile(qctx *c, const pq_node *n)
{
    return quantiles(c, n->args[1], &n->args[0], 1, NULL);
}

val pq_call_histogram_quantiles(qctx *c, const pq_node *n)
{
    size_t nq = n->nargs - 2;
    if (nq > MAX_QUANTILES) nq = MAX_QUANTILES; /* the parser's limit */
    return quantiles(c, n->args[0], &n->args[2], nq, string_arg(n->args[1]));
}
