/* extended.c - Prometheus 3's anchored and smoothed selector modifiers
 * (experimental there, on here), as promql/engine.go and functions.go.
 *
 * `x[5m] anchored` gives the window the last sample at or before its start
 * (from up to the lookback before it) as its baseline, without
 * extrapolation: increase is then last - baseline, with counter resets.
 * `x[5m] smoothed` interpolates the value at both edges of the window from
 * the samples around them (up to the lookback outside), and `x smoothed`
 * interpolates the instant value between the samples around the step.
 * Only rate, increase, delta (and for anchored changes and resets) take
 * them; other functions are an error, as in Prometheus. Native histograms
 * take them too (q_hist_extended_window, from funcs_native_range.c, and
 * the smoothed selector), with histogram arithmetic from nhist.c. */
#include "qinternal.h"

#include "../core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const anchored_ok = "changes, delta, increase, rate, resets";
static const char *const smoothed_ok = "delta, increase, rate";

int q_extended_check(qctx *c, const pq_node *call, const pq_node *sel)
{
    pq_window_fn *w = call->func->window;
    int ok = w == pq_window_rate || w == pq_window_increase || w == pq_window_delta;
    if (sel->extended == PQ_EXT_ANCHORED)
        ok = ok || w == pq_window_changes || w == pq_window_resets;
    if (ok && call->func->call == pq_call_range) return 0;
    int anchored = sel->extended == PQ_EXT_ANCHORED;
    qerr(c, PQ_ERR_EXECUTION, "%s modifier can only be used with: %s - not with %s",
         anchored ? "anchored" : "smoothed", anchored ? anchored_ok : smoothed_ok,
         call->func->name);
    return -1;
}

/* Linear interpolation at t between two samples; a counter that dropped
 * between them is taken to restart from 0. */
static double interpolate(int64_t t1, double v1, int64_t t2, double v2, int64_t t, int counter)
{
    if (counter && v2 < v1) v1 = 0;
    return v1 + (v2 - v1) * (double)(t - t1) / (double)(t2 - t1);
}

/* rate, increase and delta over an extended window (Prometheus's
 * extendedRate): w holds the samples from up to the lookback before its
 * start (and after its end when smoothed). */
static int extended_rate(const pq_window *w, int smoothed, int counter, int per_second, double *out)
{
    const int64_t *t = w->t;
    const double *v = w->v;
    int64_t rs = w->start, re = w->end;
    size_t last = w->n - 1, i = 0;
    while (i < last && t[i] <= rs)
        i++;
    size_t first = i > 0 ? i - 1 : 0;
    if (smoothed) {
        size_t j = 0;
        while (j < last && t[j] < re)
            j++;
        last = j;
    }
    if (t[last] <= rs) return 0;
    if (smoothed && t[first] > re) return 0;
    double left = smoothed && t[first] < rs
                      ? interpolate(t[first], v[first], t[first + 1], v[first + 1], rs, counter)
                      : v[first];
    double right = smoothed && last > 0 && t[last] > re
                       ? interpolate(t[last - 1], v[last - 1], t[last], v[last], re, counter)
                       : v[last];
    double r = right - left;
    if (counter) {
        /* Resets strictly inside the window; the edges handled them. */
        size_t a = first, b = last + 1; /* [a, b) */
        if (t[a] <= rs) a++;
        if (t[b - 1] >= re) b--;
        double prev = left, corr = 0;
        for (size_t k = a; k < b; k++) {
            if (v[k] < prev) corr += prev;
            prev = v[k];
        }
        if (right < prev) corr += prev;
        r += corr;
    }
    if (per_second) r /= (double)(re - rs) / 1000;
    *out = r;
    return 1;
}

int q_extended_window(pq_window_fn *fn, int extended, const pq_window *w, double *out)
{
    int smoothed = extended == PQ_EXT_SMOOTHED;
    if (fn == pq_window_rate) return extended_rate(w, smoothed, 1, 1, out);
    if (fn == pq_window_increase) return extended_rate(w, smoothed, 1, 0, out);
    if (fn == pq_window_delta) return extended_rate(w, smoothed, 0, 0, out);
    /* changes, resets (anchored): from the last sample at or before the
     * window's start, when some sample lies after it. */
    size_t le = 0;
    while (le < w->n && w->t[le] <= w->start)
        le++;
    if (le >= w->n) return 0;
    pq_window a = *w;
    size_t from = le > 0 ? le - 1 : 0;
    a.t += from;
    a.v += from;
    a.n -= from;
    return fn(&a, out);
}

void q_extend_points(pq_series *s, int64_t mint, int64_t maxt, int smoothed)
{
    if (s->n == 0) return;
    const int64_t *t = s->t;
    const double *v = s->v;
    size_t last = s->n - 1, i = 0;
    while (i < last && t[i] <= mint)
        i++;
    size_t first = i > 0 ? i - 1 : 0;
    if (smoothed) {
        size_t j = 0;
        while (j < last && t[j] < maxt)
            j++;
        last = j;
    }
    if (t[last] <= mint) {
        s->n = 0;
        return;
    }
    double left = smoothed && t[first] < mint
                      ? interpolate(t[first], v[first], t[first + 1], v[first + 1], mint, 0)
                      : v[first];
    double right = smoothed && last > 0 && t[last] > maxt
                       ? interpolate(t[last - 1], v[last - 1], t[last], v[last], maxt, 0)
                       : v[last];
    size_t a = first, b = last + 1; /* the samples strictly inside: [a, b) */
    if (t[a] <= mint) a++;
    if (b > a && t[b - 1] >= maxt) b--;
    size_t inner = b > a ? b - a : 0;
    int64_t *nt = mw_xmalloc((inner + 2) * sizeof(int64_t));
    double *nv = mw_xmalloc((inner + 2) * sizeof(double));
    nt[0] = mint;
    nv[0] = left;
    memcpy(nt + 1, t + a, inner * sizeof(int64_t));
    memcpy(nv + 1, v + a, inner * sizeof(double));
    nt[inner + 1] = maxt;
    nv[inner + 1] = right;
    free(s->t);
    free(s->v);
    s->t = nt;
    s->v = nv;
    s->n = inner + 2;
}

/* ---- native histograms ---- */

/* The counter-reset hint of a sum or difference of a and b, as
 * Prometheus's histogram arithmetic sets it: kept when both agree, a
 * gauge when either is one, otherwise unknown. */
static uint8_t hint_join(uint8_t a, uint8_t b)
{
    if (a == b) return a;
    if (a == MW_HINT_GAUGE || b == MW_HINT_GAUGE) return MW_HINT_GAUGE;
    return MW_HINT_UNKNOWN;
}

/* Histogram h1 at t1 and h2 at t2 interpolated at t into out: a counter
 * that reset between them restarts from zero (h2 scaled). 0, or
 * q_hist_add's error for incompatible histograms. */
static int hist_interpolate(const mw_histogram *h1, int64_t t1, const mw_histogram *h2, int64_t t2,
                            int64_t t, int counter, mw_histogram *out)
{
    if (t == t1 || t == t2) {
        mw_hist_copy(out, t == t1 ? h1 : h2);
        return 0;
    }
    double f = (double)(t - t1) / (double)(t2 - t1);
    if (counter && q_hist_detect_reset(h2, h1)) {
        mw_hist_copy(out, h2);
        q_hist_scale(out, f);
        return 0;
    }
    mw_histogram d;
    int rc = q_hist_add(h2, h1, -1, &d);
    if (rc < 0) return rc;
    q_hist_scale(&d, f);
    rc = q_hist_add(&d, h1, 1, out);
    mw_hist_free(&d);
    if (rc == 0) out->hint = hint_join(h2->hint, h1->hint);
    return rc;
}

/* acc += h; the first one (*have 0) is copied. -1 for incompatible ones. */
static int hist_accumulate(mw_histogram *acc, int *have, const mw_histogram *h)
{
    if (!*have) {
        mw_hist_copy(acc, h);
        *have = 1;
        return 0;
    }
    mw_histogram r;
    if (q_hist_add(acc, h, 1, &r) < 0) return -1;
    mw_hist_free(acc);
    *acc = r;
    return 0;
}

/* Prometheus's extendedHistogramRate: rate/increase/delta of histograms
 * h[0..n) at t[] over the window (rs, re], the samples reaching a
 * lookback beyond it. The edges are the anchor (last sample at or before
 * rs) or, smoothed, values interpolated at rs and re; a counter's resets
 * between them are corrected. 1 with the result in *out. */
static int hist_extended_rate(qctx *c, const mw_histogram *const *h, const int64_t *t, size_t n,
                              int64_t rs, int64_t re, int smoothed, int counter, int per_second,
                              const char *name, int pos, mw_histogram *out)
{
    long last = (long)n - 1, i = 0;
    while (i < last && t[i] <= rs)
        i++;
    long first = i > 0 ? i - 1 : 0;
    if (smoothed) {
        long j = 0;
        while (j < last && t[j] < re)
            j++;
        last = j;
    }
    if (t[last] <= rs || (smoothed && t[first] > re)) return 0;
    int custom = h[first]->schema == MW_HIST_SCHEMA_CUSTOM, gauge_seen = 0;
    for (long k = first; k <= last; k++) {
        if ((h[k]->schema == MW_HIST_SCHEMA_CUSTOM) != custom) {
            q_warn_mixed_schemas(c, pos, name);
            return 0;
        }
        gauge_seen |= h[k]->hint == MW_HINT_GAUGE;
    }
    if (counter && gauge_seen) q_warn_not_counter(c, pos, name);
    mw_histogram left, right, r;
    int rc = smoothed && t[first] < rs ? hist_interpolate(h[first], t[first], h[first + 1],
                                                          t[first + 1], rs, counter, &left)
                                       : (mw_hist_copy(&left, h[first]), 0);
    if (rc < 0) {
        q_warn_mixed_schemas(c, pos, name);
        return 0;
    }
    rc = smoothed && last > 0 && t[last] > re
             ? hist_interpolate(h[last - 1], t[last - 1], h[last], t[last], re, counter, &right)
             : (mw_hist_copy(&right, h[last]), 0);
    if (rc < 0) {
        mw_hist_free(&left);
        q_warn_mixed_schemas(c, pos, name);
        return 0;
    }
    if (!counter && (left.hint != MW_HINT_GAUGE || right.hint != MW_HINT_GAUGE))
        q_warn_not_gauge(c, pos, name);
    int ok = q_hist_add(&right, &left, -1, &r) == 0;
    if (ok && counter) {
        /* The samples strictly between the edges, each against the one
         * before it; a left edge interpolated across a reset has counted
         * that reset, so the sample after it is the first comparison's
         * base. The right edge (a copy of h[last] or inheriting its hint)
         * is compared last. */
        const mw_histogram *prev = &left;
        long a = first + 1;
        if (smoothed && t[first] < rs && q_hist_detect_reset(h[first + 1], h[first])) {
            prev = h[first + 1];
            a++;
        }
        mw_histogram corr;
        int have = 0;
        if (a <= last) {
            for (long k = a; k < last && ok; k++) {
                if (q_hist_detect_reset(h[k], prev)) ok = hist_accumulate(&corr, &have, prev) == 0;
                prev = h[k];
            }
            if (ok && q_hist_detect_reset(&right, prev))
                ok = hist_accumulate(&corr, &have, prev) == 0;
        }
        if (ok && have) {
            mw_histogram r2;
            ok = q_hist_add(&r, &corr, 1, &r2) == 0;
            if (ok) {
                mw_hist_free(&r);
                r = r2;
            }
        }
        if (have) mw_hist_free(&corr);
        if (!ok) q_warn_mixed_schemas(c, pos, name);
    }
    mw_hist_free(&left);
    mw_hist_free(&right);
    if (!ok) {
        mw_hist_free(&r);
        return 0;
    }
    if (per_second) q_hist_scale(&r, 1000.0 / (double)(re - rs));
    r.hint = MW_HINT_GAUGE;
    *out = r;
    return 1;
}

/* changes and resets (anchored) over floats and histograms alike, from the
 * last sample of either kind at or before the window's start: a change of
 * kind is a change and a reset. */
static int mixed_changes(qctx *c, int resets, const pq_series *s, size_t lo, size_t hi, int64_t ws,
                         double *out)
{
    size_t le = lo;
    while (le < hi && s->t[le] <= ws)
        le++;
    if (le >= hi) return 0;
    size_t from = le > lo ? le - 1 : lo;
    double n = 0;
    for (size_t k = from + 1; k < hi; k++) {
        const mw_histogram *a = q_hist_get(c, s->v[k - 1]), *b = q_hist_get(c, s->v[k]);
        double x = s->v[k - 1], y = s->v[k];
        if (!a != !b)
            n++;
        else if (a)
            n += resets ? q_hist_detect_reset(b, a) : !q_hist_equal(b, a);
        else
            n += resets ? y < x : x != y && !(isnan(x) && isnan(y));
    }
    *out = n;
    return 1;
}

int q_hist_extended_window(qctx *c, const pq_node *call, const pq_series *s, size_t lo, size_t hi,
                           int64_t ws, int64_t we, int extended, double *out)
{
    pq_window_fn *fn = call->func->window;
    if (hi <= lo) return 0;
    if (fn == pq_window_changes || fn == pq_window_resets)
        return mixed_changes(c, fn == pq_window_resets, s, lo, hi, ws, out);
    size_t nh = 0;
    for (size_t k = lo; k < hi; k++)
        nh += q_hist_get(c, s->v[k]) != NULL;
    if (nh == 0) {
        pq_window w = {.t = s->t + lo, .v = s->v + lo, .n = hi - lo, .start = ws, .end = we};
        return q_extended_window(fn, extended, &w, out);
    }
    const char *name = lbl_get(s->labels, s->nlabels, "__name__");
    int pos = q_arg_pos(call->args[0]);
    if (nh != hi - lo) {
        q_warn_mixed_types(c, pos, name);
        return 0;
    }
    const mw_histogram **h = mw_xmalloc(nh * sizeof(*h));
    for (size_t k = lo; k < hi; k++)
        h[k - lo] = q_hist_get(c, s->v[k]);
    mw_histogram r;
    int ok = hist_extended_rate(c, h, s->t + lo, nh, ws, we, extended == PQ_EXT_SMOOTHED,
                                fn != pq_window_delta, fn == pq_window_rate, name, pos, &r);
    free(h);
    if (ok) *out = q_hist_put(c, &r);
    return ok;
}

/* A native histogram's smoothed value at t between prev (at tp) and next
 * (at tn), either absent: 1 with it in *out, 0 (with a warning) when the
 * two cannot be interpolated. */
static int smoothed_hist(qctx *c, const mw_histogram *prev, int64_t tp, const mw_histogram *next,
                         int64_t tn, int64_t t, const char *name, int pos, double *out)
{
    mw_histogram r;
    if (next && tn == t) {
        mw_hist_copy(&r, next);
    } else if (prev && next) {
        if ((prev->schema == MW_HIST_SCHEMA_CUSTOM) != (next->schema == MW_HIST_SCHEMA_CUSTOM) ||
            hist_interpolate(prev, tp, next, tn, t,
                             prev->hint != MW_HINT_GAUGE || next->hint != MW_HINT_GAUGE, &r) < 0) {
            q_warn_mixed_schemas(c, pos, name);
            return 0;
        }
    } else if (prev) {
        /* carried forward: the hint spoke of the sample's predecessor */
        mw_hist_copy(&r, prev);
        r.hint = MW_HINT_UNKNOWN;
    } else {
        return 0; /* neither side holds a histogram */
    }
    *out = q_hist_put(c, &r);
    return 1;
}

val q_eval_smoothed_vsel(qctx *c, const pq_node *n, const mw_select_result *r, void *shared)
{
    val out = {.type = PQ_T_VECTOR};
    int64_t lb = c->lim.lookback_ms;
    int pos = q_arg_pos(n);
    for (size_t si = 0; si < r->nseries && !c->code; si++) {
        const mw_series_data *d = &r->series[si];
        q_hist_import(c, d->v, d->n);
        const char *name = "";
        for (size_t k = 0; k < d->nlabels; k++)
            if (!strcmp(d->labels[k].name, "__name__")) name = d->labels[k].value;
        sv *s = NULL;
        size_t lo = 0; /* the steps' times only grow, unless @ fixes them */
        for (size_t i = 0; i < c->nsteps; i++) {
            int64_t t = q_ref_time(c, n, i);
            /* The samples in (t - lookback, t + lookback], stale markers
             * skipped: the one at t, or between the last before it and
             * the first after it, or the last before it. Floats and
             * histograms both there give none. */
            if (n->has_at) lo = 0;
            while (lo < d->n && d->t[lo] <= t - lb)
                lo++;
            size_t prev = (size_t)-1, next = (size_t)-1;
            int floats = 0, hists = 0;
            for (size_t k = lo; k < d->n && d->t[k] <= t + lb; k++) {
                if (is_stale(d->v[k])) continue;
                if (q_hist_get(c, d->v[k]))
                    hists = 1;
                else
                    floats = 1;
                if (d->t[k] < t)
                    prev = k;
                else if (next == (size_t)-1)
                    next = k;
            }
            if (floats && hists) {
                q_warn_mixed_types(c, pos, name);
                continue;
            }
            if (prev == (size_t)-1 && (next == (size_t)-1 || d->t[next] != t)) continue;
            double v;
            if (hists) {
                const mw_histogram *hp = prev != (size_t)-1 ? q_hist_get(c, d->v[prev]) : NULL;
                const mw_histogram *hn = next != (size_t)-1 ? q_hist_get(c, d->v[next]) : NULL;
                if (!smoothed_hist(c, hp, hp ? d->t[prev] : 0, hn, hn ? d->t[next] : 0, t, name,
                                   pos, &v))
                    continue;
            } else if (next != (size_t)-1 && d->t[next] == t) {
                v = d->v[next];
            } else if (next != (size_t)-1) {
                v = interpolate(d->t[prev], d->v[prev], d->t[next], d->v[next], t, 0);
            } else {
                v = d->v[prev];
            }
            if (!s) {
                s = sv_new(c, &out, lbl_share(d->labels, d->nlabels, shared), d->nlabels);
                if (!s) break;
            }
            s->ok[i] = 1;
            s->v[i] = v;
        }
        if (qcheck_time(c) < 0) break;
    }
    return out;
}
