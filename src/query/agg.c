/* agg.c - PromQL aggregations (sum avg min max count group stddev stdvar
 * topk bottomk quantile count_values) with by/without, per step, with the
 * same numerics as Prometheus 2.x (incremental mean for avg, Welford for
 * stddev/stdvar, NaN handling of min/max/topk). */
#include "qinternal.h"

#include "../core/buf.h"
#include "../core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Labels of the group a series belongs to. */
static pq_label *group_labels(const pq_node *n, const sv *s, size_t *nl)
{
    pq_label *l = lbl_copy(s->labels, s->nlabels);
    *nl = s->nlabels;
    if (!n->has_grouping || !n->without) {
        lbl_filter(&l, nl, n->grouping, n->ngrouping, 1);
    } else {
        lbl_filter(&l, nl, n->grouping, n->ngrouping, 0);
        lbl_del(&l, nl, "__name__");
    }
    return l;
}

typedef struct acc {
    double value, mean, count;
    int has;
} acc;

static int cmp_dbl(const void *a, const void *b)
{
    /* As Go's sort.Float64s: NaN first. */
    double x = *(const double *)a, y = *(const double *)b;
    if (isnan(x) || isnan(y)) return isnan(x) && isnan(y) ? 0 : isnan(x) ? -1 : 1;
    return x < y ? -1 : x > y ? 1 : 0;
}

double quantile_of(double q, double *vals, size_t n)
{
    if (n == 0 || isnan(q)) return NAN;
    if (q < 0) return -INFINITY;
    if (q > 1) return INFINITY;
    qsort(vals, n, sizeof(double), cmp_dbl);
    double rank = q * (double)(n - 1);
    size_t lower = rank > 0 ? (size_t)floor(rank) : 0;
    size_t upper = lower + 1 < n ? lower + 1 : n - 1;
    double w = rank - floor(rank);
    return vals[lower] * (1 - w) + vals[upper] * w;
}

/* topk/bottomk: per group and step, keep the k best series (original
 * labels). NaN sorts last for both. */
static val agg_k(qctx *c, const pq_node *n, val *in, double *param, size_t *grp, size_t ngroups)
{
    vbuild b;
    vb_init(&b, c);
    int top = n->op == PQ_AGG_TOPK;
    size_t *best = mw_xcalloc(in->n ? in->n : 1, sizeof(size_t));
    size_t *oidx =
        mw_xmalloc((in->n ? in->n : 1) * sizeof(size_t)); /* output series of each input */
    for (size_t i = 0; i < in->n; i++)
        oidx[i] = (size_t)-1;
    for (size_t k = 0; k < c->nsteps && !c->code; k++) {
        double kk = param[k];
        if (isnan(kk) || kk < 1) continue;
        size_t want = kk > (double)in->n ? in->n : (size_t)kk;
        for (size_t g = 0; g < ngroups && !c->code; g++) {
            size_t nb = 0;
            for (size_t i = 0; i < in->n; i++) {
                if (grp[i] != g || !in->s[i].ok[k]) continue;
                double v = in->s[i].v[k];
                /* insertion into a sorted list of at most `want` */
                size_t pos = nb;
                while (pos > 0) {
                    double w = in->s[best[pos - 1]].v[k];
                    int better = isnan(w) ? !isnan(v) : (top ? v > w : v < w);
                    if (!better) break;
                    pos--;
                }
                if (pos >= want) continue;
                size_t end = nb < want ? nb : want - 1;
                memmove(&best[pos + 1], &best[pos], (end - pos) * sizeof(size_t));
                best[pos] = i;
                if (nb < want) nb++;
            }
            for (size_t j = 0; j < nb; j++) {
                sv *s = &in->s[best[j]];
                if (oidx[best[j]] == (size_t)-1) {
                    oidx[best[j]] = vb_series(&b, lbl_copy(s->labels, s->nlabels), s->nlabels);
                    if (oidx[best[j]] == (size_t)-1) break;
                }
                if (vb_set(&b, oidx[best[j]], k, s->v[k]) < 0) break;
            }
        }
    }
    free(best);
    free(oidx);
    val out;
    vb_finish(&b, &out);
    vb_free(&b);
    return out;
}

static val agg_count_values(qctx *c, const pq_node *n, val *in, const char *label)
{
    vbuild b;
    vb_init(&b, c);
    char num[64];
    for (size_t i = 0; i < in->n && !c->code; i++) {
        for (size_t k = 0; k < c->nsteps && !c->code; k++) {
            if (!in->s[i].ok[k]) continue;
            size_t nl;
            pq_label *l = group_labels(n, &in->s[i], &nl);
            pq_format_value(in->s[i].v[k], num, sizeof(num));
            lbl_set(&l, &nl, label, num);
            size_t si = vb_series(&b, l, nl);
            if (si == (size_t)-1) break;
            b.s[si].v[k] = b.s[si].ok[k] ? b.s[si].v[k] + 1 : 1;
            b.s[si].ok[k] = 1;
        }
    }
    val out;
    vb_finish(&b, &out);
    vb_free(&b);
    return out;
}

val eval_agg(qctx *c, const pq_node *n)
{
    val out = {0}, param = {0};
    if (n->nargs == 2) param = eval_node(c, n->args[0]);
    val in = eval_unless_failed(c, n->args[n->nargs - 1]);
    if (c->code) goto done;
    if (n->op == PQ_AGG_COUNT_VALUES) {
        if (!param.str || !*param.str) {
            qerr(c, PQ_ERR_EXECUTION, "invalid label name \"%s\"", param.str ? param.str : "");
            goto done;
        }
        out = agg_count_values(c, n, &in, param.str);
        goto done;
    }
    /* Group index of each input series. */
    vbuild b;
    vb_init(&b, c);
    size_t *grp = mw_xcalloc(in.n ? in.n : 1, sizeof(size_t));
    for (size_t i = 0; i < in.n && !c->code; i++) {
        size_t nl;
        pq_label *l = group_labels(n, &in.s[i], &nl);
        grp[i] = vb_series(&b, l, nl);
    }
    if (c->code) {
        free(grp);
        vb_free(&b);
        goto done;
    }
    size_t ng = b.n;
    if (n->op == PQ_AGG_TOPK || n->op == PQ_AGG_BOTTOMK) {
        vb_free(&b);
        out = agg_k(c, n, &in, param.scalar, grp, ng);
        free(grp);
        goto done;
    }
    if (n->op == PQ_AGG_QUANTILE) {
        double *vals = mw_xcalloc(in.n ? in.n : 1, sizeof(double));
        for (size_t k = 0; k < c->nsteps; k++)
            for (size_t g = 0; g < ng; g++) {
                size_t m = 0;
                for (size_t i = 0; i < in.n; i++)
                    if (grp[i] == g && in.s[i].ok[k]) vals[m++] = in.s[i].v[k];
                if (!m) continue;
                b.s[g].ok[k] = 1;
                b.s[g].v[k] = quantile_of(param.scalar[k], vals, m);
            }
        free(vals);
    } else {
        acc *a = mw_xcalloc(ng ? ng : 1, sizeof(acc));
        for (size_t k = 0; k < c->nsteps; k++) {
            memset(a, 0, ng * sizeof(acc));
            for (size_t i = 0; i < in.n; i++) {
                if (!in.s[i].ok[k]) continue;
                acc *x = &a[grp[i]];
                double v = in.s[i].v[k];
                if (!x->has) {
                    x->has = 1;
                    x->value = v;
                    x->mean = v;
                    x->count = 1;
                    if (n->op == PQ_AGG_STDDEV || n->op == PQ_AGG_STDVAR) x->value = 0;
                    continue;
                }
                x->count++;
                switch (n->op) {
                case PQ_AGG_SUM:
                    x->value += v;
                    break;
                case PQ_AGG_AVG:
                    if (isinf(x->mean)) {
                        if (isinf(v) && (x->mean > 0) == (v > 0)) break;
                        if (!isinf(v) && !isnan(v)) break;
                    }
                    x->mean += v / x->count - x->mean / x->count;
                    break;
                case PQ_AGG_MIN:
                    if (x->value > v || isnan(x->value)) x->value = v;
                    break;
                case PQ_AGG_MAX:
                    if (x->value < v || isnan(x->value)) x->value = v;
                    break;
                case PQ_AGG_STDDEV:
                case PQ_AGG_STDVAR: {
                    double delta = v - x->mean;
                    x->mean += delta / x->count;
                    x->value += delta * (v - x->mean);
                    break;
                }
                default:
                    break;
                }
            }
            for (size_t g = 0; g < ng; g++) {
                if (!a[g].has) continue;
                double v = a[g].value;
                switch (n->op) {
                case PQ_AGG_AVG:
                    v = a[g].mean;
                    break;
                case PQ_AGG_COUNT:
                    v = a[g].count;
                    break;
                case PQ_AGG_GROUP:
                    v = 1;
                    break;
                case PQ_AGG_STDVAR:
                    v = a[g].value / a[g].count;
                    break;
                case PQ_AGG_STDDEV:
                    v = sqrt(a[g].value / a[g].count);
                    break;
                default:
                    break;
                }
                b.s[g].ok[k] = 1;
                b.s[g].v[k] = v;
            }
        }
        free(a);
    }
    free(grp);
    vb_finish(&b, &out);
    vb_free(&b);
done:
    val_free(c, &in);
    val_free(c, &param);
    return out;
}
