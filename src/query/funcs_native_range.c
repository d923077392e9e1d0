/* funcs_native_range.c - range functions over windows that hold native
 * histograms (range_call hands them here when its argument has one), as
 * Prometheus 3: rate, increase and delta (histogramRate: counter resets
 * detected bucket by bucket, a first sample followed by a reset left out,
 * the extrapolation floored where the count reaches zero; anchored and
 * smoothed selectors go to extended.c), irate and idelta, the
 * compensated sum_over_time and avg_over_time, resets and changes; count,
 * present, first, last and the times of first and last take floats and
 * histograms alike; every other function its window's floats, with an
 * info when it left histograms out. A window of both floats and
 * histograms gives no value where Prometheus gives none, with its
 * warning. */
#include "qinternal.h"

#include "../core/util.h"

#include <math.h>
#include <stdlib.h>

int q_hist_in_range(const rangearg *ra)
{
    for (size_t i = 0; i < ra->n; i++)
        for (size_t k = 0; k < ra->s[i].n; k++)
            if (mw_hist_is_ref(ra->s[i].v[k])) return 1;
    return 0;
}

enum {
    RK_FLOAT,
    RK_RATE,
    RK_INCREASE,
    RK_DELTA,
    RK_IRATE,
    RK_IDELTA,
    RK_SUM,
    RK_AVG,
    RK_BOTH,
    RK_RESETS,
    RK_CHANGES
};

static int kind_of(const pq_func *f)
{
    pq_window_fn *w = f->window;
    if (w == pq_window_rate) return RK_RATE;
    if (w == pq_window_increase) return RK_INCREASE;
    if (w == pq_window_delta) return RK_DELTA;
    if (w == pq_window_irate) return RK_IRATE;
    if (w == pq_window_idelta) return RK_IDELTA;
    if (w == pq_window_sum) return RK_SUM;
    if (w == pq_window_avg) return RK_AVG;
    if (w == pq_window_resets) return RK_RESETS;
    if (w == pq_window_changes) return RK_CHANGES;
    if (w == pq_window_count || w == pq_window_present || w == pq_window_last ||
        w == pq_window_first || w == pq_window_ts_of_first || w == pq_window_ts_of_last)
        return RK_BOTH;
    return RK_FLOAT;
}

static const char *name_of(const pq_series *s)
{
    const char *n = lbl_get(s->labels, s->nlabels, "__name__");
    return n ? n : "";
}

static void info_reconciled(qctx *c, int pos, const char *what)
{
    q_annot(c, 1, pos, "PromQL info: mismatched custom buckets were reconciled during %s", what);
}

/* rate/increase/delta of histograms h[0..n) at times t over the window,
 * as Prometheus 3's histogramRate and extrapolatedRate. */
static int hist_rate(qctx *c, int kind, const mw_histogram *const *h, const int64_t *t, size_t n,
                     int64_t ws, int64_t we, int64_t range_ms, int extended, const char *name,
                     int pos, mw_histogram *out)
{
    if (n < 2) return 0;
    int counter = kind != RK_DELTA;
    const mw_histogram *prev = h[0], *last = h[n - 1];
    mw_histogram empty = {0};
    if (counter && (prev->hint == MW_HINT_GAUGE || last->hint == MW_HINT_GAUGE))
        q_warn_not_counter(c, pos, name);
    /* A reset between the first two: the first is not looked at (beyond
     * its count, below), so its layout may differ. */
    if (counter && !extended && q_hist_detect_reset(h[1], prev)) {
        empty.schema = h[1]->schema;
        empty.custom = h[1]->custom;
        empty.ncustom = h[1]->ncustom;
        prev = &empty;
    }
    int custom = prev->schema == MW_HIST_SCHEMA_CUSTOM;
    if ((last->schema == MW_HIST_SCHEMA_CUSTOM) != custom) {
        q_warn_mixed_schemas(c, pos, name);
        return 0;
    }
    int32_t minschema = last->schema < prev->schema ? last->schema : prev->schema;
    for (size_t i = 1; counter && i + 1 < n; i++) {
        if (h[i]->hint == MW_HINT_GAUGE) q_warn_not_counter(c, pos, name);
        if (h[i]->schema < minschema) minschema = h[i]->schema;
        if ((h[i]->schema == MW_HIST_SCHEMA_CUSTOM) != custom) {
            q_warn_mixed_schemas(c, pos, name);
            return 0;
        }
    }
    if (!counter && (h[0]->hint != MW_HINT_GAUGE || last->hint != MW_HINT_GAUGE))
        q_warn_not_gauge(c, pos, name);
    mw_histogram r;
    int rc = q_hist_add(last, prev, -1, &r);
    if (rc < 0) {
        q_warn_mixed_schemas(c, pos, name);
        return 0;
    }
    if (rc == Q_HIST_RECONCILED) info_reconciled(c, pos, "subtraction");
    for (size_t i = 1; counter && i < n; i++) {
        const mw_histogram *p = i == 1 ? prev : h[i - 1];
        if (!q_hist_detect_reset(h[i], p)) continue;
        mw_histogram r2;
        rc = q_hist_add(&r, p, 1, &r2);
        mw_hist_free(&r);
        if (rc < 0) {
            q_warn_mixed_schemas(c, pos, name);
            return 0;
        }
        if (rc == Q_HIST_RECONCILED) info_reconciled(c, pos, "addition");
        r = r2;
    }
    q_hist_reduce(&r, minschema);
    /* The float extrapolation (funcs_range.c), a counter's floored where
     * its count would reach zero. */
    double to_start = (double)(t[0] - ws) / 1000, to_end = (double)(we - t[n - 1]) / 1000;
    double sampled = (double)(t[n - 1] - t[0]) / 1000, avg = sampled / (double)(n - 1);
    double threshold = avg * 1.1;
    if (to_start >= threshold) to_start = avg / 2;
    if (counter && r.count > 0 && h[0]->count >= 0) {
        double to_zero = sampled * (h[0]->count / r.count);
        if (to_zero < to_start) to_start = to_zero;
    }
    if (to_end >= threshold) to_end = avg / 2;
    double factor = sampled != 0 ? (sampled + to_start + to_end) / sampled : 1;
    if (kind == RK_RATE) factor /= (double)range_ms / 1000;
    q_hist_scale(&r, factor);
    r.hint = MW_HINT_GAUGE;
    *out = r;
    return 1;
}

/* irate and idelta: the last two samples of the window [lo, hi) of s. */
static int hist_instant(qctx *c, const pq_func *fn, int kind, const pq_series *s, size_t lo,
                        size_t hi, int pos, double *out)
{
    if (hi - lo < 2) return 0;
    double va = s->v[hi - 2], vb = s->v[hi - 1];
    const mw_histogram *a = q_hist_get(c, va), *b = q_hist_get(c, vb);
    int64_t dt = s->t[hi - 1] - s->t[hi - 2];
    if (dt == 0) return 0;
    const char *name = name_of(s);
    if (!a != !b) {
        q_warn_mixed_types(c, pos, name);
        return 0;
    }
    if (!a) { /* two floats: the float function */
        pq_window w = {.t = s->t + hi - 2, .v = s->v + hi - 2, .n = 2};
        return fn->window(&w, out);
    }
    int rate = kind == RK_IRATE;
    if (rate && (a->hint == MW_HINT_GAUGE || b->hint == MW_HINT_GAUGE))
        q_warn_not_counter(c, pos, name);
    if (!rate && (a->hint != MW_HINT_GAUGE || b->hint != MW_HINT_GAUGE))
        q_warn_not_gauge(c, pos, name);
    mw_histogram r;
    if (rate && q_hist_detect_reset(b, a)) {
        mw_hist_copy(&r, b);
    } else {
        int rc = q_hist_add(b, a, -1, &r);
        if (rc < 0) {
            q_warn_mixed_schemas(c, pos, name);
            return 0;
        }
        if (rc == Q_HIST_RECONCILED) info_reconciled(c, pos, "subtraction");
    }
    if (rate) q_hist_scale(&r, 1000.0 / (double)dt);
    r.hint = MW_HINT_GAUGE;
    *out = q_hist_put(c, &r);
    return 1;
}

/* resets and changes over every sample of the window, floats and
 * histograms in their order: a change of kind is both. */
static double hist_resets_changes(qctx *c, int kind, const pq_series *s, size_t lo, size_t hi)
{
    double n = 0;
    for (size_t x = lo + 1; x < hi; x++) {
        const mw_histogram *p = q_hist_get(c, s->v[x - 1]), *h = q_hist_get(c, s->v[x]);
        double pv = s->v[x - 1], v = s->v[x];
        if (!p != !h)
            n++;
        else if (!h)
            n += kind == RK_RESETS ? v < pv : v != pv && !(isnan(v) && isnan(pv));
        else
            n += kind == RK_RESETS ? q_hist_detect_reset(h, p) : !q_hist_equal(h, p);
    }
    return n;
}

/* sum_over_time and avg_over_time of histograms hv[0..nh), compensated
 * as Prometheus 3's (and its incremental mean for avg). */
static int hist_sum_avg(qctx *c, int kind, const mw_histogram *const *hv, size_t nh, int pos,
                        const char *name, mw_histogram *out)
{
    q_havg acc;
    q_havg_start(&acc, hv[0]);
    int hints = q_hint_seen(hv[0]), reconciled = 0;
    for (size_t x = 1; x < nh; x++) {
        hints |= q_hint_seen(hv[x]);
        int rc = kind == RK_SUM ? q_hsum_add(&acc.s, hv[x], &reconciled)
                                : q_havg_add(&acc, hv[x], &reconciled);
        if (rc < 0) {
            q_havg_free(&acc);
            q_warn_mixed_schemas(c, pos, name);
            return 0;
        }
    }
    if (hints == (Q_HINT_SEEN_RESET | Q_HINT_SEEN_NOT_RESET))
        q_annot(c, 0, pos,
                "PromQL warning: conflicting counter resets during histogram aggregation");
    if (reconciled) info_reconciled(c, pos, "aggregation");
    if (kind == RK_AVG)
        q_havg_result(&acc, out);
    else
        q_hsum_result(&acc.s, out);
    out->hint = MW_HINT_GAUGE;
    return 1;
}

/* One window of series s, [lo, hi) of its points: 1 with its value. */
/* The float function over the window's floats t, v (n of them). */
static int float_window(const pq_node *n, const int64_t *t, const double *v, size_t nv, int64_t ws,
                        int64_t we, int64_t ts, double param, pq_extrap_cache *xc, double *out)
{
    int resets = 0;
    for (size_t x = 1; x < nv && !resets; x++)
        resets = v[x] < v[x - 1];
    pq_window w = {.t = t,
                   .v = v,
                   .n = nv,
                   .start = ws,
                   .end = we,
                   .ts = ts,
                   .param = param,
                   .counter_resets = resets || v[0] < 0,
                   .xc = xc};
    return n->func->window(&w, out);
}

static int window_value(qctx *c, const pq_node *n, int kind, const pq_series *s, size_t lo,
                        size_t hi, int64_t ws, int64_t we, int64_t ts, double param,
                        const rangearg *ra, double *fv, int64_t *ft, const mw_histogram **hv,
                        pq_extrap_cache *xc, double *out)
{
    int pos = q_arg_pos(n->args[0]);
    if (hi == lo) return 0;
    if (kind == RK_BOTH) { /* count, present, first, last and their times: every sample */
        pq_window w = {.t = s->t + lo,
                       .v = s->v + lo,
                       .n = hi - lo,
                       .start = ws,
                       .end = we,
                       .ts = ts,
                       .param = param,
                       .xc = xc};
        return n->func->window(&w, out);
    }
    if (kind == RK_RESETS || kind == RK_CHANGES) {
        *out = hist_resets_changes(c, kind, s, lo, hi);
        return 1;
    }
    if (kind == RK_IRATE || kind == RK_IDELTA)
        return hist_instant(c, n->func, kind, s, lo, hi, pos, out);
    size_t nf = 0, nh = 0;
    for (size_t x = lo; x < hi; x++) {
        const mw_histogram *h = q_hist_get(c, s->v[x]);
        if (h) {
            hv[nh] = h;
            ft[s->n + nh++] = s->t[x]; /* histogram times after the float ones */
        } else {
            fv[nf] = s->v[x];
            ft[nf++] = s->t[x];
        }
    }
    const char *name = name_of(s);
    if (kind == RK_FLOAT) { /* histograms left out, with an info when both */
        if (!nf) return 0;
        if (nh)
            q_annot(c, 1, pos,
                    "PromQL info: ignored histograms in a range containing both floats and "
                    "histograms for metric name \"%s\"",
                    name);
        return float_window(n, ft, fv, nf, ws, we, ts, param, xc, out);
    }
    if (nf && nh) {
        q_warn_mixed_types(c, pos, name);
        return 0;
    }
    if (!nh) { /* floats only: the float function */
        return float_window(n, ft, fv, nf, ws, we, ts, param, xc, out);
    }
    const int64_t *ht = ft + s->n;
    mw_histogram r;
    if (kind == RK_SUM || kind == RK_AVG) {
        if (!hist_sum_avg(c, kind, hv, nh, pos, name, &r)) return 0;
    } else if (!hist_rate(c, kind, hv, ht, nh, ws, we, ra->range_ms, ra->extended, name, pos, &r)) {
        return 0;
    }
    *out = q_hist_put(c, &r);
    return 1;
}

val q_hist_range_call(qctx *c, const pq_node *n, rangearg *ra, const val *param, size_t pi)
{
    int kind = kind_of(n->func);
    int keep_name = (n->func->flags & PQ_FN_KEEP_NAME) != 0;
    vbuild b;
    vb_init(&b, c);
    pq_extrap_cache *xc = pq_extrap_cache_new(ra->range_ms);
    for (size_t i = 0; i < ra->n && !c->code; i++) {
        pq_series *s = &ra->s[i];
        double *fv = mw_xmalloc((s->n + 1) * sizeof(double));
        int64_t *ft = mw_xmalloc((2 * s->n + 1) * sizeof(int64_t));
        const mw_histogram **hv = mw_xmalloc((s->n + 1) * sizeof(*hv));
        size_t lo = 0, hi = 0, si = (size_t)-1;
        /* anchored/smoothed: the points reach a lookback around the window
         * (extended.c) */
        int64_t before = ra->extended ? ra->lookback_ms : 0;
        int64_t after = ra->extended == PQ_EXT_SMOOTHED ? ra->lookback_ms : 0;
        for (size_t k = 0; k < c->nsteps && !c->code; k++) {
            int64_t from = ra->wstart[k] - before;
            while (lo < s->n && (ra->closed ? s->t[lo] < from : s->t[lo] <= from))
                lo++;
            if (hi < lo) hi = lo;
            while (hi < s->n && s->t[hi] <= ra->wend[k] + after)
                hi++;
            double p = pi != (size_t)-1 && param->scalar ? param->scalar[k] : 0, v;
            if (ra->extended ? !q_hist_extended_window(c, n, s, lo, hi, ra->wstart[k], ra->wend[k],
                                                       ra->extended, &v)
                             : !window_value(c, n, kind, s, lo, hi, ra->wstart[k], ra->wend[k],
                                             qts(c, k), p, ra, fv, ft, hv, xc, &v))
                continue;
            if (si == (size_t)-1) {
                pq_label *l = lbl_copy(s->labels, s->nlabels);
                size_t nl = s->nlabels;
                if (!keep_name) lbl_del(&l, &nl, "__name__");
                si = vb_series(&b, l, nl);
                if (si == (size_t)-1) break;
            }
            if (vb_set(&b, si, k, v) < 0) break;
        }
        free(fv);
        free(ft);
        free(hv);
    }
    free(xc);
    return vb_finish(&b);
}
