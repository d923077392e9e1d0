/* funcs_native_range.c - range functions over windows that hold native
 * histograms (range_call hands them here when its argument has one):
 * rate, increase and delta (Prometheus 3's histogramRate: counter resets
 * detected bucket by bucket, the float extrapolation without its
 * zero-floor), irate and idelta, sum_over_time and avg_over_time of
 * histograms; count_over_time, present_over_time and last_over_time take
 * floats and histograms alike; every other function its window's floats.
 * A window of both floats and histograms gives no value where Prometheus
 * gives none, with its warning. */
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

enum { RK_FLOAT, RK_RATE, RK_INCREASE, RK_DELTA, RK_IRATE, RK_IDELTA, RK_SUM, RK_AVG, RK_BOTH };

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
    if (w == pq_window_count || w == pq_window_present || w == pq_window_last) return RK_BOTH;
    return RK_FLOAT;
}

static const char *name_of(const pq_series *s)
{
    return lbl_get(s->labels, s->nlabels, "__name__");
}

/* rate/increase/delta of histograms h[0..n) at times t over the window. */
static int hist_rate(qctx *c, int kind, const mw_histogram *const *h, const int64_t *t, size_t n,
                     int64_t ws, int64_t we, int64_t range_ms, const char *name, int pos,
                     mw_histogram *out)
{
    if (n < 2) return 0;
    int counter = kind != RK_DELTA;
    int custom = h[0]->schema == MW_HIST_SCHEMA_CUSTOM;
    int32_t minschema = h[0]->schema;
    for (size_t i = 1; i < n; i++) {
        if ((h[i]->schema == MW_HIST_SCHEMA_CUSTOM) != custom) {
            q_annot(c, 0, pos,
                    "PromQL warning: vector contains a mix of histograms with exponential and "
                    "custom buckets schemas for metric name \"%s\"",
                    name);
            return 0;
        }
        if (h[i]->schema < minschema) minschema = h[i]->schema;
    }
    if (counter) {
        for (size_t i = 0; i < n; i++)
            if (h[i]->hint == MW_HINT_GAUGE) {
                q_annot(c, 0, pos,
                        "PromQL warning: this native histogram metric is not a counter: \"%s\"",
                        name);
                break;
            }
    } else if (h[0]->hint != MW_HINT_GAUGE || h[n - 1]->hint != MW_HINT_GAUGE) {
        q_annot(c, 0, pos, "PromQL warning: this native histogram metric is not a gauge: \"%s\"",
                name);
    }
    mw_histogram r;
    if (q_hist_add(h[n - 1], h[0], -1, &r) < 0) return 0;
    for (size_t i = 1; counter && i < n; i++) {
        if (!q_hist_detect_reset(h[i], h[i - 1])) continue;
        mw_histogram r2;
        if (q_hist_add(&r, h[i - 1], 1, &r2) < 0) {
            mw_hist_free(&r);
            return 0;
        }
        mw_hist_free(&r);
        r = r2;
    }
    q_hist_reduce(&r, minschema);
    /* The float extrapolation (funcs_range.c), without the zero floor. */
    double to_start = (double)(t[0] - ws) / 1000, to_end = (double)(we - t[n - 1]) / 1000;
    double sampled = (double)(t[n - 1] - t[0]) / 1000, avg = sampled / (double)(n - 1);
    double threshold = avg * 1.1;
    if (to_start >= threshold) to_start = avg / 2;
    if (to_end >= threshold) to_end = avg / 2;
    double factor = (sampled + to_start + to_end) / sampled;
    if (kind == RK_RATE) factor /= (double)range_ms / 1000;
    q_hist_scale(&r, factor);
    r.hint = MW_HINT_GAUGE;
    *out = r;
    return 1;
}

/* One window of series s, [lo, hi) of its points: 1 with its value. */
static int window_value(qctx *c, const pq_node *n, int kind, const pq_series *s, size_t lo,
                        size_t hi, int64_t ws, int64_t we, int64_t ts, double param,
                        const rangearg *ra, double *fv, int64_t *ft, const mw_histogram **hv,
                        pq_extrap_cache *xc, double *out)
{
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
    if (hi == lo) return 0;
    int pos = q_arg_pos(n->args[0]);
    if (kind == RK_BOTH || (kind == RK_FLOAT && nh == 0) || (nh == 0 && kind != RK_FLOAT)) {
        if (kind == RK_BOTH) { /* count, present, last: every sample */
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
        int resets = 0;
        for (size_t x = 1; x < nf && !resets; x++)
            resets = fv[x] < fv[x - 1];
        pq_window w = {.t = ft,
                       .v = fv,
                       .n = nf,
                       .start = ws,
                       .end = we,
                       .ts = ts,
                       .param = param,
                       .counter_resets = resets || (nf && fv[0] < 0),
                       .xc = xc};
        return nf > 0 && n->func->window(&w, out);
    }
    if (kind == RK_FLOAT) { /* histograms left out */
        if (!nf) return 0;
        pq_window w = {
            .t = ft, .v = fv, .n = nf, .start = ws, .end = we, .ts = ts, .param = param, .xc = xc};
        return n->func->window(&w, out);
    }
    const char *name = name_of(s);
    if (nf) {
        q_annot(c, 0, pos,
                "PromQL warning: encountered a mix of histograms and floats for metric name \"%s\"",
                name);
        return 0;
    }
    const int64_t *ht = ft + s->n;
    mw_histogram r;
    switch (kind) {
    case RK_RATE:
    case RK_INCREASE:
    case RK_DELTA:
        if (!hist_rate(c, kind, hv, ht, nh, ws, we, ra->range_ms, name, pos, &r)) return 0;
        break;
    case RK_IRATE:
    case RK_IDELTA: {
        if (nh < 2) return 0;
        const mw_histogram *a = hv[nh - 2], *b = hv[nh - 1];
        if (kind == RK_IRATE && q_hist_detect_reset(b, a))
            mw_hist_copy(&r, b);
        else if (q_hist_add(b, a, -1, &r) < 0)
            return 0;
        if (kind == RK_IRATE) {
            if (ht[nh - 1] == ht[nh - 2]) {
                mw_hist_free(&r);
                return 0;
            }
            q_hist_scale(&r, 1000.0 / (double)(ht[nh - 1] - ht[nh - 2]));
        }
        r.hint = MW_HINT_GAUGE;
        break;
    }
    default: { /* sum, avg */
        mw_hist_copy(&r, hv[0]);
        for (size_t x = 1; x < nh; x++) {
            mw_histogram r2;
            if (q_hist_add(&r, hv[x], 1, &r2) < 0) {
                mw_hist_free(&r);
                return 0;
            }
            mw_hist_free(&r);
            r = r2;
        }
        if (kind == RK_AVG) q_hist_scale(&r, 1 / (double)nh);
        r.hint = MW_HINT_GAUGE;
        break;
    }
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
        for (size_t k = 0; k < c->nsteps && !c->code; k++) {
            while (lo < s->n && (ra->closed ? s->t[lo] < ra->wstart[k] : s->t[lo] <= ra->wstart[k]))
                lo++;
            if (hi < lo) hi = lo;
            while (hi < s->n && s->t[hi] <= ra->wend[k])
                hi++;
            double p = pi != (size_t)-1 && param->scalar ? param->scalar[k] : 0, v;
            if (!window_value(c, n, kind, s, lo, hi, ra->wstart[k], ra->wend[k], qts(c, k), p, ra,
                              fv, ft, hv, xc, &v))
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
