/* agg.c - PromQL aggregations (sum avg min max count group stddev stdvar
 * topk bottomk quantile count_values) with by/without, per step, with the
 * same numerics as Prometheus 2.x (incremental mean for avg, Welford for
 * stddev/stdvar, NaN handling of min/max/topk). */
#include "qinternal.h"

#include "../core/hash.h"

#include "../core/buf.h"
#include "../core/util.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Labels of the group a series belongs to. */
static pq_label *group_labels(const pq_node *n, const sv *s, size_t *nl)
{
    /* Only the kept labels are copied (copying all and filtering made a
     * dozen allocations per input series), into one block (lbl_copy). */
    int by = !n->has_grouping || !n->without;
    pq_label stack[32];
    pq_label *keep = s->nlabels <= 32 ? stack : mw_xmalloc(s->nlabels * sizeof(pq_label));
    *nl = 0;
    for (size_t i = 0; i < s->nlabels; i++) {
        int listed = 0;
        for (size_t j = 0; j < n->ngrouping && !listed; j++)
            listed = strcmp(s->labels[i].name, n->grouping[j]) == 0;
        if (by ? !listed : listed || strcmp(s->labels[i].name, "__name__") == 0) continue;
        keep[(*nl)++] = s->labels[i]; /* borrowed, copied below */
    }
    pq_label *l = *nl ? lbl_copy(keep, *nl) : mw_xcalloc(1, sizeof(pq_label));
    if (keep != stack) free(keep);
    return l;
}

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

/* Insert series i (value v) into the list best[0..*nb) sorted best first,
 * keeping at most want; as Prometheus' topk/bottomk, NaN sorts last and
 * ties keep the earlier series. */
static void k_insert(const val *in, size_t k, size_t *best, size_t *nb, size_t want, int top,
                     size_t i, double v)
{
    size_t pos = *nb;
    while (pos > 0) {
        double w = in->s[best[pos - 1]].v[k];
        int better = isnan(w) ? !isnan(v) : (top ? v > w : v < w);
        if (!better) break;
        pos--;
    }
    if (pos >= want) return;
    size_t end = *nb < want ? *nb : want - 1;
    memmove(&best[pos + 1], &best[pos], (end - pos) * sizeof(size_t));
    best[pos] = i;
    if (*nb < want) (*nb)++;
}

/* topk/bottomk reading the input series by series (in memory order), with
 * a list of at most kmax per group and step (the caller bounds
 * groups x steps x kmax). Each list sees the series in the same order as
 * the step-major loop of agg_k, so the result is the same; output series
 * are created in the same order too. */
static void agg_k_series_major(qctx *c, int top, const val *in, const double *param,
                               const size_t *grp, size_t ngroups, size_t kmax, vbuild *b)
{
    size_t ns = c->nsteps, nl = ngroups * ns;
    size_t *best = mw_xmalloc(nl * kmax * sizeof(size_t));
    size_t *nb = mw_xcalloc(nl, sizeof(size_t));
    size_t *want = mw_xcalloc(ns, sizeof(size_t));
    for (size_t k = 0; k < ns; k++)
        if (!isnan(param[k]) && param[k] >= 1)
            want[k] = param[k] > (double)in->n ? in->n : (size_t)param[k];
    for (size_t i = 0; i < in->n; i++) {
        const sv *s = &in->s[i];
        size_t base = grp[i] * ns;
        for (size_t k = 0; k < ns; k++)
            if (s->ok[k] && want[k])
                k_insert(in, k, best + (base + k) * kmax, &nb[base + k], want[k], top, i, s->v[k]);
        if ((i & 1023) == 1023 && qcheck_time(c) < 0) break;
    }
    size_t *oidx = mw_xmalloc((in->n ? in->n : 1) * sizeof(size_t));
    for (size_t i = 0; i < in->n; i++)
        oidx[i] = (size_t)-1;
    for (size_t k = 0; k < ns && !c->code; k++)
        for (size_t g = 0; g < ngroups && !c->code; g++) {
            const size_t *l = best + (g * ns + k) * kmax;
            for (size_t j = 0; j < nb[g * ns + k]; j++) {
                const sv *s = &in->s[l[j]];
                if (oidx[l[j]] == (size_t)-1) {
                    oidx[l[j]] =
                        vb_series_dn(b, lbl_copy(s->labels, s->nlabels), s->nlabels, s->drop_name);
                    if (oidx[l[j]] == (size_t)-1) break;
                }
                if (vb_set(b, oidx[l[j]], k, s->v[k]) < 0) break;
            }
        }
    free(oidx);
    free(best);
    free(nb);
    free(want);
}

/* topk/bottomk: per group and step, keep the k best series (original
 * labels). NaN sorts last for both. */
static val agg_k(qctx *c, const pq_node *n, val *in, double *param, size_t *grp, size_t ngroups)
{
    vbuild b;
    vb_init(&b, c);
    int top = n->op == PQ_AGG_TOPK;
    size_t kmax = 0;
    for (size_t k = 0; k < c->nsteps; k++)
        if (!isnan(param[k]) && param[k] >= 1) {
            size_t w = param[k] > (double)in->n ? in->n : (size_t)param[k];
            if (w > kmax) kmax = w;
        }
    if (kmax && ngroups <= SIZE_MAX / c->nsteps / kmax &&
        ngroups * c->nsteps * kmax <= (1u << 22)) {
        agg_k_series_major(c, top, in, param, grp, ngroups, kmax, &b);
        val out;
        out = vb_finish(&b);
        return out;
    }
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
                k_insert(in, k, best, &nb, want, top, i, in->s[i].v[k]);
            }
            for (size_t j = 0; j < nb; j++) {
                sv *s = &in->s[best[j]];
                if (oidx[best[j]] == (size_t)-1) {
                    oidx[best[j]] =
                        vb_series_dn(&b, lbl_copy(s->labels, s->nlabels), s->nlabels, s->drop_name);
                    if (oidx[best[j]] == (size_t)-1) break;
                }
                if (vb_set(&b, oidx[best[j]], k, s->v[k]) < 0) break;
            }
        }
    }
    free(best);
    free(oidx);
    val out;
    out = vb_finish(&b);
    return out;
}

/* Where a series falls in [0, 1) for limit_ratio: a hash of its labels,
 * the same for the same labels in every query (Prometheus uses its own
 * label hash, so which series a ratio keeps differs from Prometheus's, the
 * proportion and the complement rule do not). */
static double ratio_offset(const sv *s, mw_buf *key)
{
    lbl_key(s->labels, s->nlabels, NULL, 0, 0, 1, key);
    uint64_t h = mw_fnv1a64_str(MW_FNV1A64_BASIS, key->data ? key->data : "");
    /* splitmix64's finaliser spreads FNV's nearby values over the range */
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return (double)(h >> 11) / 9007199254740992.0; /* 2^53 */
}

/* limitk(k, v): per group and step, the first k series present (in the
 * input's order), unchanged. limit_ratio(r, v): the series whose offset is
 * below r (r >= 0) or at least 1 + r (r < 0), r capped to [-1, 1], so
 * limit_ratio(r) and limit_ratio(-(1 - r)) are complements. */
static val agg_limit(qctx *c, const pq_node *n, val *in, const double *param, const size_t *grp,
                     size_t ngroups)
{
    vbuild b;
    vb_init(&b, c);
    size_t *oidx = mw_xmalloc((in->n ? in->n : 1) * sizeof(size_t));
    for (size_t i = 0; i < in->n; i++)
        oidx[i] = (size_t)-1;
    double *offset = NULL;
    size_t *taken = NULL;
    if (n->op == PQ_AGG_LIMIT_RATIO) {
        offset = mw_xmalloc((in->n ? in->n : 1) * sizeof(double));
        mw_buf key;
        mw_buf_init(&key, 0);
        for (size_t i = 0; i < in->n; i++)
            offset[i] = ratio_offset(&in->s[i], &key);
        mw_buf_free(&key);
    } else {
        taken = mw_xmalloc((ngroups ? ngroups : 1) * sizeof(size_t));
    }
    for (size_t k = 0; k < c->nsteps && !c->code; k++) {
        double p = param[k];
        if (isnan(p)) continue;
        if (taken) {
            if (p < 1) continue;
            memset(taken, 0, (ngroups ? ngroups : 1) * sizeof(size_t));
        }
        double r = p > 1 ? 1 : p < -1 ? -1 : p;
        for (size_t i = 0; i < in->n && !c->code; i++) {
            sv *s = &in->s[i];
            if (!s->ok[k]) continue;
            if (taken) {
                if ((double)taken[grp[i]] >= p) continue;
                taken[grp[i]]++;
            } else if (!(r >= 0 ? offset[i] < r : offset[i] >= 1 + r)) {
                continue;
            }
            if (oidx[i] == (size_t)-1) {
                oidx[i] =
                    vb_series_dn(&b, lbl_copy(s->labels, s->nlabels), s->nlabels, s->drop_name);
                if (oidx[i] == (size_t)-1) break;
            }
            if (vb_set(&b, oidx[i], k, s->v[k]) < 0) break;
        }
    }
    free(oidx);
    free(offset);
    free(taken);
    return vb_finish(&b);
}

static val agg_count_values(qctx *c, const pq_node *n, val *in, const char *label)
{
    vbuild b;
    vb_init(&b, c);
    char num[PQ_VALUE_BUFSIZE];
    mw_buf text;
    mw_buf_init(&text, 0);
    for (size_t i = 0; i < in->n && !c->code; i++) {
        for (size_t k = 0; k < c->nsteps && !c->code; k++) {
            if (!in->s[i].ok[k]) continue;
            size_t nl;
            pq_label *l = group_labels(n, &in->s[i], &nl);
            const mw_histogram *h = q_hist_get(c, in->s[i].v[k]);
            if (h) { /* a histogram's value is its text (nhist.c) */
                mw_buf_clear(&text);
                q_hist_string(&text, h);
                lbl_set(&l, &nl, label, text.data);
            } else {
                pq_format_value(in->s[i].v[k], num, sizeof(num));
                lbl_set(&l, &nl, label, num);
            }
            size_t si = vb_series(&b, l, nl);
            if (si == (size_t)-1) break;
            b.s[si].drop_name |= in->s[i].drop_name;
            b.s[si].v[k] = b.s[si].ok[k] ? b.s[si].v[k] + 1 : 1;
            b.s[si].ok[k] = 1;
        }
    }
    mw_buf_free(&text);
    val out;
    out = vb_finish(&b);
    return out;
}

/* sum avg min max count group stddev stdvar into the group series of b
 * (created, all steps empty). Series by series, each over all its steps:
 * the input is read in memory order, and each group and step still sees
 * its series in the same order as Prometheus (so the same floating-point
 * result). The running value and "has a value" live in the group's own
 * v/ok arrays; count and mean, where needed, in arrays charged to the
 * query's sample budget. */
static void agg_series_major(qctx *c, const pq_node *n, const val *in, const size_t *grp, vbuild *b)
{
    size_t ns = c->nsteps, ng = b->n;
    int op = n->op;
    int need_mean = op == PQ_AGG_AVG || op == PQ_AGG_STDDEV || op == PQ_AGG_STDVAR;
    int need_count = need_mean || op == PQ_AGG_COUNT;
    int need_comp = op == PQ_AGG_SUM || op == PQ_AGG_AVG; /* Kahan compensation */
    size_t extra = (size_t)(need_mean + need_count + need_comp) * ng * ns;
    if (qcharge(c, extra) < 0) return;
    size_t cells = ng * ns > 0 ? ng * ns : 1;
    double *cnt = need_count ? mw_xcalloc(cells, sizeof(double)) : NULL;
    double *mean = need_mean ? mw_xcalloc(cells, sizeof(double)) : NULL;
    double *comp = need_comp ? mw_xcalloc(cells, sizeof(double)) : NULL;
    /* avg: the group's sum overflowed; its mean is now incremental */
    uint8_t *incr = op == PQ_AGG_AVG ? mw_xcalloc(cells, 1) : NULL;
    for (size_t i = 0; i < in->n; i++) {
        const sv *s = &in->s[i];
        size_t g = grp[i];
        double *acc = b->s[g].v, *cn = cnt ? cnt + g * ns : NULL, *mn = mean ? mean + g * ns : NULL;
        double *cp = comp ? comp + g * ns : NULL;
        uint8_t *has = b->s[g].ok, *inc = incr ? incr + g * ns : NULL;
        for (size_t k = 0; k < ns; k++) {
            if (!s->ok[k]) continue;
            double v = s->v[k];
            if (!has[k]) {
                has[k] = 1;
                /* stddev/stdvar: a group that starts with NaN or ±Inf is
                 * NaN (Prometheus 3; Welford's step keeps it so). */
                acc[k] = op == PQ_AGG_STDDEV || op == PQ_AGG_STDVAR ? (isfinite(v) ? 0 : NAN) : v;
                if (mn) mn[k] = v;
                if (cn) cn[k] = 1;
                continue;
            }
            if (cn) cn[k]++;
            switch (op) {
            case PQ_AGG_SUM:
                pq_kahan_inc(v, &acc[k], &cp[k]);
                break;
            case PQ_AGG_AVG: {
                /* As Prometheus 3: the compensated sum while it does not
                 * overflow, then a compensated incremental mean. */
                if (!inc[k]) {
                    double sum = acc[k], c2 = cp[k];
                    pq_kahan_inc(v, &sum, &c2);
                    if (!isinf(sum)) {
                        acc[k] = sum;
                        cp[k] = c2;
                        break;
                    }
                    inc[k] = 1;
                    mn[k] = acc[k] / (cn[k] - 1);
                    cp[k] /= cn[k] - 1;
                }
                double q = (cn[k] - 1) / cn[k];
                mn[k] *= q;
                cp[k] *= q;
                pq_kahan_inc(v / cn[k], &mn[k], &cp[k]);
                break;
            }
            case PQ_AGG_MIN:
                if (acc[k] > v || isnan(acc[k])) acc[k] = v;
                break;
            case PQ_AGG_MAX:
                if (acc[k] < v || isnan(acc[k])) acc[k] = v;
                break;
            case PQ_AGG_STDDEV:
            case PQ_AGG_STDVAR: {
                double delta = v - mn[k];
                mn[k] += delta / cn[k];
                acc[k] += delta * (v - mn[k]);
                break;
            }
            default:
                break;
            }
        }
        if ((i & 1023) == 1023 && qcheck_time(c) < 0) break;
    }
    for (size_t g = 0; g < ng && op != PQ_AGG_MIN && op != PQ_AGG_MAX; g++) {
        double *acc = b->s[g].v;
        const double *cn = cnt ? cnt + g * ns : NULL, *mn = mean ? mean + g * ns : NULL;
        const double *cp = comp ? comp + g * ns : NULL;
        const uint8_t *inc = incr ? incr + g * ns : NULL;
        for (size_t k = 0; k < ns; k++) {
            if (!b->s[g].ok[k]) continue;
            switch (op) {
            case PQ_AGG_SUM:
                acc[k] += cp[k];
                break;
            case PQ_AGG_AVG:
                acc[k] = inc[k] ? mn[k] + cp[k] : acc[k] / cn[k] + cp[k] / cn[k];
                break;
            case PQ_AGG_COUNT:
                acc[k] = cn[k];
                break;
            case PQ_AGG_GROUP:
                acc[k] = 1;
                break;
            case PQ_AGG_STDVAR:
                acc[k] = acc[k] / cn[k];
                break;
            case PQ_AGG_STDDEV:
                acc[k] = sqrt(acc[k] / cn[k]);
                break;
            default:
                break;
            }
        }
    }
    free(cnt);
    free(mean);
    free(comp);
    free(incr);
    qrelease(c, extra);
}

/* topk, bottomk, limitk and limit_ratio refuse a NaN parameter at any
 * step, as Prometheus 3 does, unless no step asks for anything (every k
 * below 1, every ratio 0). 1 when the context failed. */
static int param_is_nan(qctx *c, const pq_node *n, const val *param)
{
    int ratio = n->op == PQ_AGG_LIMIT_RATIO;
    if (!ratio && n->op != PQ_AGG_TOPK && n->op != PQ_AGG_BOTTOMK && n->op != PQ_AGG_LIMITK)
        return 0;
    int nan = 0, wanted = 0;
    for (size_t k = 0; k < c->nsteps; k++) {
        double p = param->scalar[k];
        nan |= isnan(p);
        wanted |= isnan(p) || (ratio ? p != 0 : p >= 1);
    }
    if (!nan || !wanted) return 0;
    qerr(c, PQ_ERR_EXECUTION, ratio ? "Ratio value is NaN" : "Parameter value is NaN");
    return 1;
}

/* Go's math.Max and math.Min: a NaN stays. */
static double go_max(double a, double b)
{
    return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
}

static double go_min(double a, double b)
{
    return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
}

/* Prometheus 3's warnings of a quantile out of [0, 1] or a ratio out of
 * [-1, 1], from the parameter's least and greatest value over the query's
 * steps (a NaN among them hides both, as there). */
static void param_annots(qctx *c, const pq_node *n, const val *param)
{
    if (n->op != PQ_AGG_QUANTILE && n->op != PQ_AGG_LIMIT_RATIO) return;
    double mx = -DBL_MAX, mn = DBL_MAX;
    int nan = 0;
    for (size_t k = 0; k < c->nsteps; k++) {
        mx = go_max(mx, param->scalar[k]);
        mn = go_min(mn, param->scalar[k]);
        nan |= isnan(param->scalar[k]);
    }
    int pos = q_arg_pos(n->args[0]);
    if (n->op == PQ_AGG_QUANTILE) {
        if (nan) q_annot_quantile(c, NAN, pos);
        if (mx > 1) q_annot_quantile(c, mx, pos);
        if (mn < 0) q_annot_quantile(c, mn, pos);
        return;
    }
    char g[40];
    if (mx > 1) {
        pq_format_go_g(mx, g, sizeof(g));
        q_annot(c, 0, pos,
                "PromQL warning: ratio value should be between -1 and 1, got %s, capping to 1", g);
    }
    if (mn < -1) {
        pq_format_go_g(mn, g, sizeof(g));
        q_annot(c, 0, pos,
                "PromQL warning: ratio value should be between -1 and 1, got %s, capping to -1", g);
    }
}

val eval_agg(qctx *c, const pq_node *n)
{
    val out = {0}, param = {0};
    if (n->nargs == 2) param = eval_node(c, n->args[0]);
    val in = eval_unless_failed(c, n->args[n->nargs - 1]);
    if (c->code) goto done;
    if (n->op == PQ_AGG_COUNT_VALUES) {
        if (!param.str || !lbl_name_valid(param.str)) {
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
    int by = !n->has_grouping || !n->without;
    for (size_t i = 0; i < in.n && !c->code; i++) {
        /* The group's key straight from the series' labels (the same
         * labels, in the same order, as group_labels keeps); labels are
         * built only for a new group. */
        lbl_key(in.s[i].labels, in.s[i].nlabels, n->grouping, n->ngrouping, by, 1, &b.key);
        size_t g = smap_get(&b.idx, b.key.data ? b.key.data : "");
        if (g == (size_t)-1) {
            size_t nl;
            pq_label *l = group_labels(n, &in.s[i], &nl);
            g = vb_series(&b, l, nl);
        }
        /* A group with a marked member is marked (by (__name__)). */
        if (g != (size_t)-1) b.s[g].drop_name |= in.s[i].drop_name;
        grp[i] = g;
    }
    if (c->code) {
        free(grp);
        vb_free(&b);
        goto done;
    }
    size_t ng = b.n;
    if (param_is_nan(c, n, &param)) {
        free(grp);
        vb_free(&b);
        goto done;
    }
    param_annots(c, n, &param);
    q_hagg *ha = q_hist_agg_pre(c, n, &in, grp, ng); /* native histograms: nhist.c */
    if (n->op == PQ_AGG_TOPK || n->op == PQ_AGG_BOTTOMK) {
        q_hist_agg_post(c, ha, NULL);
        vb_free(&b);
        out = agg_k(c, n, &in, param.scalar, grp, ng);
        free(grp);
        goto done;
    }
    if (n->op == PQ_AGG_LIMITK || n->op == PQ_AGG_LIMIT_RATIO) {
        vb_free(&b);
        out = agg_limit(c, n, &in, param.scalar, grp, ng);
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
        agg_series_major(c, n, &in, grp, &b);
    }
    free(grp);
    q_hist_agg_post(c, ha, &b);
    out = vb_finish(&b);
done:
    val_free(c, &in);
    val_free(c, &param);
    return out;
}
