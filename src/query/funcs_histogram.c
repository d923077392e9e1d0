/* funcs_histogram.c - PromQL's histogram_quantile over classic histograms
 * (cumulative buckets with an le label), as Prometheus 2.x computes it. */
#include "qinternal.h"

#include "../core/util.h"

#include <math.h>
#include <stdlib.h>

typedef struct bucket {
    double upper, count;
} bucket;

static int cmp_bucket(const void *a, const void *b)
{
    double x = ((const bucket *)a)->upper, y = ((const bucket *)b)->upper;
    return x < y ? -1 : x > y ? 1 : 0;
}

static double bucket_quantile(double q, bucket *b, size_t n)
{
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
    double max = -INFINITY; /* ensure monotonic */
    for (size_t i = 0; i < n; i++) {
        if (b[i].count > max)
            max = b[i].count;
        else
            b[i].count = max;
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
    for (size_t i = 0; i < in.n && !c->code; i++) {
        const char *ls = lbl_get(in.s[i].labels, in.s[i].nlabels, "le");
        char *end;
        le[i] = strtod(ls, &end);
        if (!*ls || *end) {
            grp[i] = (size_t)-1; /* no or bad le: ignored */
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
        lbl_del(&l, &nl, "__name__");
        size_t si = vb_series(&vb, l, nl);
        for (size_t k = 0; si != (size_t)-1 && k < c->nsteps; k++) {
            size_t m = 0;
            for (size_t i = 0; i < in.n; i++)
                if (grp[i] == g && in.s[i].ok[k]) b[m++] = (bucket){le[i], in.s[i].v[k]};
            if (!m) continue;
            if (vb_set(&vb, si, k, bucket_quantile(q.scalar[k], b, m)) < 0) break;
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
