/* funcs_histogram.c - PromQL's histogram_quantile over classic histograms
 * (cumulative buckets with an le label), as Prometheus 2.x computes it. */
#include "qinternal.h"

#include "../core/util.h"

#include <float.h>
#include <math.h>
#include <ctype.h>
#include <stdlib.h>

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

/* histogram_quantile(q, buckets): per label set without le (the metric name
 * included, as Prometheus groups), the quantile interpolated in the bucket
 * it falls in. The answer drops the name: two histograms whose labels differ
 * only in their names collide, an error as in Prometheus. */
val pq_call_histogram_quantile(qctx *c, const pq_node *n)
{
    val q = eval_node(c, n->args[0]);
    val in = eval_unless_failed(c, n->args[1]);
    val out = {0};
    vbuild vb, groups;
    vb_init(&vb, c);
    vb_init(&groups, c);
    size_t *grp = mw_xcalloc(in.n ? in.n : 1, sizeof(size_t));
    double *le = mw_xcalloc(in.n ? in.n : 1, sizeof(double));
    int qpos = q_arg_pos(n->args[0]), bpos = q_arg_pos(n->args[1]);
    /* Prometheus warns of q out of [0, 1] at every step, input or none. */
    for (size_t k = 0; k < c->nsteps && q.scalar; k++)
        q_annot_quantile(c, q.scalar[k], qpos);
    q_hist_quantile(c, &q, &in, &vb, bpos); /* native histograms: funcs_native_histogram.c */
    for (size_t i = 0; i < in.n && !c->code; i++) {
        const char *ls = lbl_get(in.s[i].labels, in.s[i].nlabels, "le");
        char *end;
        le[i] = strtod(ls, &end);
        /* Go's ParseFloat takes no leading space, which strtod skips */
        if (!*ls || *end || isspace((unsigned char)*ls)) {
            grp[i] = (size_t)-1; /* no or bad le: ignored, with a warning */
            bad_le(c, &in.s[i], ls, c->nsteps, bpos);
            continue;
        }
        pq_label *l = lbl_copy(in.s[i].labels, in.s[i].nlabels);
        size_t nl = in.s[i].nlabels;
        lbl_del(&l, &nl, "le");
        grp[i] = vb_series(&groups, l, nl);
    }
    bucket *b = mw_xcalloc(in.n ? in.n : 1, sizeof(bucket));
    for (size_t g = 0; g < groups.n && !c->code; g++) {
        pq_label *l = lbl_copy(groups.s[g].labels, groups.s[g].nlabels);
        size_t nl = groups.s[g].nlabels;
        int dn = q_drop_name(c, &l, &nl);
        size_t si = vb_series_dn(&vb, l, nl, dn);
        for (size_t k = 0; si != (size_t)-1 && k < c->nsteps; k++) {
            size_t m = 0;
            for (size_t i = 0; i < in.n; i++)
                if (grp[i] == g && in.s[i].ok[k]) b[m++] = (bucket){le[i], in.s[i].v[k]};
            if (!m) continue;
            mono_fix fix;
            double v = bucket_quantile(q.scalar[k], b, m, &fix);
            if (fix.forced)
                q_annot_mono(c, lbl_get(groups.s[g].labels, groups.s[g].nlabels, "__name__"), bpos,
                             qts(c, k), fix.min_bucket, fix.max_bucket, fix.max_diff);
            if (vb_set(&vb, si, k, v) < 0) break;
        }
    }
    free(b);
    vb_free(&groups);
    free(grp);
    free(le);
    val_free(c, &q);
    val_free(c, &in);
    out = vb_finish(&vb);
    return out;
}
