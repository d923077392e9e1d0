/* funcs2.c - PromQL function dispatch and the functions that are neither
 * range-vector nor element-wise: time, vector, scalar, sort, sort_desc,
 * absent, histogram_quantile (classic buckets, as Prometheus 2.x). */
#include "qinternal.h"

#include "../core/buf.h"
#include "../core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* In funcs.c. */
val pq_call_range(qctx *c, const pq_node *n);
val pq_call_elementwise(qctx *c, const pq_node *n);
val pq_call_timestamp(qctx *c, const pq_node *n);
val pq_call_label(qctx *c, const pq_node *n);

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

static val call_histogram_quantile(qctx *c, const pq_node *n)
{
    val q = eval_node(c, n->args[0]);
    val in = eval_unless_failed(c, n->args[1]);
    val out = {0};
    vbuild vb;
    vb_init(&vb, c);
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
        lbl_del(&l, &nl, "__name__");
        grp[i] = vb_series(&vb, l, nl);
    }
    bucket *b = mw_xcalloc(in.n ? in.n : 1, sizeof(bucket));
    for (size_t g = 0; g < vb.n && !c->code; g++)
        for (size_t k = 0; k < c->nsteps; k++) {
            size_t m = 0;
            for (size_t i = 0; i < in.n; i++)
                if (grp[i] == g && in.s[i].ok[k]) b[m++] = (bucket){le[i], in.s[i].v[k]};
            if (!m) continue;
            vb.s[g].ok[k] = 1;
            vb.s[g].v[k] = bucket_quantile(q.scalar[k], b, m);
        }
    free(b);
    free(grp);
    free(le);
    val_free(c, &q);
    val_free(c, &in);
    vb_finish(&vb, &out);
    vb_free(&vb);
    return out;
}

/* The order of sort() and sort_desc(): NaN first in both. Two comparators,
 * so that queries sorting at once on two threads share no state. */
static int cmp_values(double x, double y, int desc)
{
    if (isnan(x) || isnan(y)) return isnan(x) && isnan(y) ? 0 : isnan(x) ? -1 : 1;
    int r = x < y ? -1 : x > y ? 1 : 0;
    return desc ? -r : r;
}
static int cmp_sv_asc(const void *a, const void *b)
{
    return cmp_values(((const sv *)a)->v[0], ((const sv *)b)->v[0], 0);
}
static int cmp_sv_desc(const void *a, const void *b)
{
    return cmp_values(((const sv *)a)->v[0], ((const sv *)b)->v[0], 1);
}

val eval_call(qctx *c, const pq_node *n)
{
    const char *f = n->func->name;
    val out = {0};
    for (size_t i = 0; i < n->nargs; i++)
        if (n->args[i]->type == PQ_T_MATRIX) return pq_call_range(c, n);
    if (!strcmp(f, "time")) {
        out.type = PQ_T_SCALAR;
        qcharge(c, c->nsteps);
        out.scalar = mw_xcalloc(c->nsteps, sizeof(double));
        for (size_t k = 0; k < c->nsteps; k++)
            out.scalar[k] = (double)qts(c, k) / 1000;
        return out;
    }
    if (!strcmp(f, "vector")) {
        val s = eval_node(c, n->args[0]);
        out.type = PQ_T_VECTOR;
        sv *x = c->code ? NULL : sv_new(c, &out, mw_xcalloc(1, sizeof(pq_label)), 0);
        for (size_t k = 0; x && k < c->nsteps; k++) {
            x->ok[k] = 1;
            x->v[k] = s.scalar[k];
        }
        val_free(c, &s);
        return out;
    }
    if (!strcmp(f, "scalar")) {
        val in = eval_node(c, n->args[0]);
        out.type = PQ_T_SCALAR;
        qcharge(c, c->nsteps);
        out.scalar = mw_xcalloc(c->nsteps, sizeof(double));
        for (size_t k = 0; k < c->nsteps; k++) {
            size_t m = 0;
            double v = NAN;
            for (size_t i = 0; i < in.n; i++)
                if (in.s[i].ok[k]) {
                    m++;
                    v = in.s[i].v[k];
                }
            out.scalar[k] = m == 1 ? v : NAN;
        }
        val_free(c, &in);
        return out;
    }
    if (!strcmp(f, "sort") || !strcmp(f, "sort_desc")) {
        out = eval_node(c, n->args[0]);
        if (c->nsteps == 1 && out.n > 1)
            qsort(out.s, out.n, sizeof(sv), strcmp(f, "sort_desc") ? cmp_sv_asc : cmp_sv_desc);
        return out;
    }
    if (!strcmp(f, "absent")) {
        val in = eval_node(c, n->args[0]);
        out.type = PQ_T_VECTOR;
        if (c->code) return in;
        size_t nl;
        pq_label *l = mw_xcalloc(1, sizeof(pq_label));
        nl = 0;
        const pq_node *a = n->args[0];
        while (a->kind == PQ_PAREN)
            a = a->args[0];
        if (a->kind == PQ_VSEL)
            for (size_t i = 0; i < a->nmatchers; i++) {
                const mw_matcher *m = &a->matchers[i];
                if (m->op != MW_MATCH_EQ || !strcmp(m->name, "__name__")) continue;
                int dup = 0;
                for (size_t j = 0; j < a->nmatchers; j++)
                    if (j != i && a->matchers[j].op == MW_MATCH_EQ &&
                        !strcmp(a->matchers[j].name, m->name))
                        dup = 1;
                if (!dup) lbl_set(&l, &nl, m->name, m->value);
            }
        sv *x = sv_new(c, &out, l, nl);
        for (size_t k = 0; x && k < c->nsteps; k++) {
            int any = 0;
            for (size_t i = 0; i < in.n && !any; i++)
                any = in.s[i].ok[k];
            if (!any) {
                x->ok[k] = 1;
                x->v[k] = 1;
            }
        }
        val_free(c, &in);
        return out;
    }
    if (!strcmp(f, "histogram_quantile")) return call_histogram_quantile(c, n);
    if (!strcmp(f, "timestamp")) return pq_call_timestamp(c, n);
    if (!strcmp(f, "label_replace") || !strcmp(f, "label_join")) return pq_call_label(c, n);
    return pq_call_elementwise(c, n);
}
