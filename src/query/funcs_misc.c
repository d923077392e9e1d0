/* funcs_misc.c - the PromQL functions of no family: time, vector,
 * scalar, sort, sort_desc, absent and timestamp (and absent_labels, which
 * absent_over_time shares). */
#include "qinternal.h"

#include "../core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

val pq_call_time(qctx *c, const pq_node *n)
{
    (void)n;
    val out = {.type = PQ_T_SCALAR};
    qcharge(c, c->nsteps);
    out.scalar = mw_xcalloc(c->nsteps, sizeof(double));
    for (size_t k = 0; k < c->nsteps; k++)
        out.scalar[k] = (double)qts(c, k) / 1000;
    return out;
}

val pq_call_pi(qctx *c, const pq_node *n)
{
    (void)n;
    val out = {.type = PQ_T_SCALAR};
    qcharge(c, c->nsteps);
    out.scalar = mw_xcalloc(c->nsteps, sizeof(double));
    for (size_t k = 0; k < c->nsteps; k++)
        out.scalar[k] = PQ_PI;
    return out;
}

/* Prometheus 3's start(), end(), range() and step(): the query's own,
 * in seconds, whatever grid (a subquery's) asks; step() of an instant
 * query is 0. */
static val query_constant(qctx *c, double v)
{
    val out = {.type = PQ_T_SCALAR};
    qcharge(c, c->nsteps);
    out.scalar = mw_xcalloc(c->nsteps, sizeof(double));
    for (size_t k = 0; k < c->nsteps; k++)
        out.scalar[k] = v;
    return out;
}

val pq_call_start(qctx *c, const pq_node *n)
{
    (void)n;
    return query_constant(c, (double)c->qstart / 1000);
}

val pq_call_end(qctx *c, const pq_node *n)
{
    (void)n;
    return query_constant(c, (double)c->qend / 1000);
}

val pq_call_range_of_query(qctx *c, const pq_node *n)
{
    (void)n;
    return query_constant(c, (double)(c->qend - c->qstart) / 1000);
}

val pq_call_step(qctx *c, const pq_node *n)
{
    (void)n;
    return query_constant(c, c->qstart != c->qend ? (double)c->qstep / 1000 : 0);
}

/* min_of(a, b), max_of(a, b): Go's math.Min and math.Max, per step (a NaN
 * wins; -0 is below +0). */
static double go_min(double a, double b)
{
    if (isnan(a) || isnan(b)) return NAN;
    if (a == 0 && b == 0) return signbit(a) ? a : b;
    return a < b ? a : b;
}

static double go_max(double a, double b)
{
    if (isnan(a) || isnan(b)) return NAN;
    if (a == 0 && b == 0) return signbit(a) ? b : a;
    return a > b ? a : b;
}

static val min_max_of(qctx *c, const pq_node *n, double (*op)(double, double))
{
    val a = eval_node(c, n->args[0]);
    val b = eval_unless_failed(c, n->args[1]);
    val out = {.type = PQ_T_SCALAR};
    if (!c->code) {
        qcharge(c, c->nsteps);
        out.scalar = mw_xcalloc(c->nsteps, sizeof(double));
        for (size_t k = 0; k < c->nsteps; k++)
            out.scalar[k] = op(a.scalar[k], b.scalar[k]);
    }
    val_free(c, &a);
    val_free(c, &b);
    return out;
}

val pq_call_min_of(qctx *c, const pq_node *n)
{
    return min_max_of(c, n, go_min);
}

val pq_call_max_of(qctx *c, const pq_node *n)
{
    return min_max_of(c, n, go_max);
}

val pq_call_vector(qctx *c, const pq_node *n)
{
    val s = eval_node(c, n->args[0]);
    val out = {.type = PQ_T_VECTOR};
    sv *x = c->code ? NULL : sv_new(c, &out, mw_xcalloc(1, sizeof(pq_label)), 0);
    for (size_t k = 0; x && k < c->nsteps; k++) {
        x->ok[k] = 1;
        x->v[k] = s.scalar[k];
    }
    val_free(c, &s);
    return out;
}

/* The value of the only series with one at a step, else NaN. */
val pq_call_scalar(qctx *c, const pq_node *n)
{
    val in = eval_node(c, n->args[0]);
    val out = {.type = PQ_T_SCALAR};
    qcharge(c, c->nsteps);
    out.scalar = mw_xcalloc(c->nsteps, sizeof(double));
    for (size_t k = 0; k < c->nsteps; k++) {
        size_t m = 0;
        double v = NAN;
        for (size_t i = 0; i < in.n; i++)
            if (in.s[i].ok[k] && !q_hist_get(c, in.s[i].v[k])) { /* histograms do not count */
                m++;
                v = in.s[i].v[k];
            }
        out.scalar[k] = m == 1 ? v : NAN;
    }
    val_free(c, &in);
    return out;
}

/* The order of sort() and sort_desc(): NaN last in both, as Prometheus. Two
 * comparators, so that queries sorting at once on two threads share no
 * state. */
static int cmp_values(double x, double y, int desc)
{
    if (isnan(x) || isnan(y)) return isnan(x) && isnan(y) ? 0 : isnan(x) ? 1 : -1;
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

/* Sorting orders an instant query's answer; a range query's series are
 * ordered by their labels anyway (pq_eval). */
static val sorted(qctx *c, const pq_node *n, int (*cmp)(const void *, const void *))
{
    val out = eval_node(c, n->args[0]);
    /* Histograms are left out, as Prometheus 3's sort filters floats
     * (a series left without values is not answered). */
    for (size_t i = 0; i < out.n; i++)
        for (size_t k = 0; k < c->nsteps; k++)
            if (out.s[i].ok[k] && q_hist_get(c, out.s[i].v[k])) out.s[i].ok[k] = 0;
    if (c->nsteps == 1 && out.n > 1) qsort(out.s, out.n, sizeof(sv), cmp);
    return out;
}

val pq_call_sort(qctx *c, const pq_node *n)
{
    return sorted(c, n, cmp_sv_asc);
}

val pq_call_sort_desc(qctx *c, const pq_node *n)
{
    return sorted(c, n, cmp_sv_desc);
}

/* Natural order of two label values (the natsort Prometheus 3 uses): runs
 * of digits compare as numbers, other runs as bytes; 1 when a sorts
 * before b (also when equal), as natsort.Compare. */
static size_t run_len(const char *s)
{
    int digits = *s >= '0' && *s <= '9';
    size_t n = 0;
    while (s[n] && ((s[n] >= '0' && s[n] <= '9') == digits))
        n++;
    return n;
}

static int nat_before(const char *a, const char *b)
{
    while (*a) {
        if (!*b) return 0;
        size_t na = run_len(a), nb = run_len(b);
        int da = *a >= '0' && *a <= '9', db = *b >= '0' && *b <= '9';
        int c;
        if (da && db && na < 19 && nb < 19) { /* both fit Go's Atoi */
            long long x = strtoll(a, NULL, 10), y = strtoll(b, NULL, 10);
            c = x < y ? -1 : x > y ? 1 : 0;
        } else {
            size_t m = na < nb ? na : nb;
            c = memcmp(a, b, m);
            if (!c) c = na < nb ? -1 : na > nb ? 1 : 0;
        }
        if (c) return c < 0;
        a += na;
        b += nb;
        if (!*a) return 1;
        if (!*b) return 0;
    }
    return 0;
}

/* sort_by_label(_desc)'s labels, per thread: qsort has no context. */
static _Thread_local const pq_node *sort_call;
static _Thread_local int sort_desc;

static int cmp_sv_labels(const void *x, const void *y)
{
    const sv *a = x, *b = y;
    for (size_t i = 1; i < sort_call->nargs; i++) {
        const char *name = string_arg(sort_call->args[i]);
        const char *va = lbl_get(a->labels, a->nlabels, name),
                   *vb = lbl_get(b->labels, b->nlabels, name);
        if (!strcmp(va, vb)) continue;
        int before = nat_before(va, vb);
        return sort_desc ? (before ? 1 : -1) : (before ? -1 : 1);
    }
    int c = lbl_cmp(a->labels, a->nlabels, b->labels, b->nlabels);
    return sort_desc ? -c : c;
}

/* sort_by_label(v, label...) and sort_by_label_desc (Prometheus 3,
 * experimental): by the labels' values in natural order, then by the
 * whole label set. */
static val sorted_by_label(qctx *c, const pq_node *n, int desc)
{
    val out = eval_node(c, n->args[0]);
    if (c->nsteps == 1 && out.n > 1) {
        sort_call = n;
        sort_desc = desc;
        qsort(out.s, out.n, sizeof(sv), cmp_sv_labels);
    }
    return out;
}

val pq_call_sort_by_label(qctx *c, const pq_node *n)
{
    return sorted_by_label(c, n, 0);
}

val pq_call_sort_by_label_desc(qctx *c, const pq_node *n)
{
    return sorted_by_label(c, n, 1);
}

pq_label *absent_labels(const pq_node *arg, size_t *nl)
{
    pq_label *l = mw_xcalloc(1, sizeof(pq_label));
    *nl = 0;
    while (arg->kind == PQ_PAREN)
        arg = arg->args[0];
    if (arg->kind == PQ_MSEL) arg = arg->args[0];
    if (arg->kind != PQ_VSEL) return l;
    /* Prometheus's rule, matcher by matcher in order: the first equality
     * matcher of a label sets it, any other matcher of that label (a second
     * equality included) deletes it; a later first equality sets it again.
     * So {job="x", job=~"y"} has no job, {job=~"y", job="x"} has job="x". */
    for (size_t i = 0; i < arg->nmatchers; i++) {
        const mw_matcher *m = &arg->matchers[i];
        if (!strcmp(m->name, "__name__")) continue;
        int seen = 0; /* an earlier equality matcher of this label */
        for (size_t j = 0; j < i && !seen; j++)
            seen = arg->matchers[j].op == MW_MATCH_EQ && !strcmp(arg->matchers[j].name, m->name);
        if (m->op == MW_MATCH_EQ && !seen)
            lbl_set(&l, nl, m->name, m->value);
        else
            lbl_del(&l, nl, m->name);
    }
    return l;
}

/* 1 at the steps where the argument has no sample. */
val pq_call_absent(qctx *c, const pq_node *n)
{
    val in = eval_node(c, n->args[0]);
    if (c->code) return in;
    val out = {.type = PQ_T_VECTOR};
    size_t nl;
    pq_label *l = absent_labels(n->args[0], &nl);
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

static size_t lower_bound(const int64_t *t, size_t n, int64_t x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (t[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The time a selector reads at step k: with its @ and offset. */
static int64_t selected_at(const qctx *c, const pq_node *sel, size_t k)
{
    int64_t at = qts(c, k);
    if (sel->has_at) at = sel->at_kind == 1 ? c->qstart : sel->at_kind == 2 ? c->qend : sel->at_ms;
    return at - q_offset(c, sel);
}

/* timestamp(v): the time of the sample a selector picked (evaluated as a
 * selector over the grid, but returning times). */
val pq_call_timestamp(qctx *c, const pq_node *n)
{
    const pq_node *arg = n->args[0];
    while (arg->kind == PQ_PAREN)
        arg = arg->args[0];
    val in = eval_node(c, arg);
    if (arg->kind != PQ_VSEL) { /* the evaluation time */
        for (size_t i = 0; i < in.n; i++) {
            in.s[i].drop_name |= (uint8_t)q_drop_name(c, &in.s[i].labels, &in.s[i].nlabels);
            for (size_t k = 0; k < c->nsteps; k++)
                in.s[i].v[k] = (double)qts(c, k) / 1000;
        }
        return in;
    }
    /* Re-select to find the chosen samples' times. */
    val_free(c, &in);
    val out = {0};
    mw_select_result r;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t k = 0; k < c->nsteps; k++) {
        int64_t t = selected_at(c, arg, k);
        if (t < lo) lo = t;
        if (t > hi) hi = t;
    }
    char err[256];
    if (!c->store) return (val){.type = PQ_T_VECTOR};
    if (mw_store_select_scoped(c->store, c->lim.scope, arg->matchers, arg->nmatchers,
                               lo - c->lim.lookback_ms, hi, c->lim.max_samples, &r, err,
                               sizeof(err)) < 0) {
        qerr(c, PQ_ERR_EXECUTION, "%s", err);
        return out;
    }
    c->damaged_chunks += r.damaged_chunks;
    c->loaded += r.nsamples;
    if (qcheck_series(c, r.nseries) < 0) {
        mw_select_result_free(&r);
        return out;
    }
    vbuild vb;
    vb_init(&vb, c);
    for (size_t i = 0; i < r.nseries && !c->code; i++) {
        const mw_series_data *d = &r.series[i];
        pq_label *l = lbl_from_store(d->labels, d->nlabels);
        size_t nl = d->nlabels;
        int dn = q_drop_name(c, &l, &nl);
        size_t si = (size_t)-1;
        for (size_t k = 0; k < c->nsteps; k++) {
            int64_t t = selected_at(c, arg, k);
            size_t j = lower_bound(d->t, d->n, t + 1);
            if (j == 0) continue;
            j--;
            if (!q_after_start(c, d->t[j], t - c->lim.lookback_ms) || is_stale(d->v[j])) continue;
            if (si == (size_t)-1) {
                si = vb_series_dn(&vb, lbl_copy(l, nl), nl, dn);
                if (si == (size_t)-1) break;
            }
            if (vb_set(&vb, si, k, (double)d->t[j] / 1000) < 0) break;
        }
        lbl_free(l, nl);
    }
    mw_select_result_free(&r);
    out = vb_finish(&vb);
    return out;
}
