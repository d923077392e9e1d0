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
 * them; other functions are an error, as in Prometheus. */
#include "qinternal.h"

#include "../core/util.h"

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

val q_eval_smoothed_vsel(qctx *c, const pq_node *n, const mw_select_result *r, void *shared)
{
    val out = {.type = PQ_T_VECTOR};
    int64_t lb = c->lim.lookback_ms;
    for (size_t si = 0; si < r->nseries && !c->code; si++) {
        const mw_series_data *d = &r->series[si];
        sv *s = NULL;
        size_t lo = 0; /* the steps' times only grow, unless @ fixes them */
        for (size_t i = 0; i < c->nsteps; i++) {
            int64_t t = q_ref_time(c, n, i);
            /* The samples in (t - lookback, t + lookback], stale markers
             * skipped: the one at t, or between the last before it and
             * the first after it, or the last before it. */
            if (n->has_at) lo = 0;
            while (lo < d->n && d->t[lo] <= t - lb)
                lo++;
            size_t prev = (size_t)-1, next = (size_t)-1;
            for (size_t k = lo; k < d->n && d->t[k] <= t + lb; k++) {
                if (is_stale(d->v[k])) continue;
                if (d->t[k] < t) {
                    prev = k;
                } else {
                    next = k;
                    break;
                }
            }
            double v;
            if (next != (size_t)-1 && d->t[next] == t)
                v = d->v[next];
            else if (prev != (size_t)-1 && next != (size_t)-1)
                v = interpolate(d->t[prev], d->v[prev], d->t[next], d->v[next], t, 0);
            else if (prev != (size_t)-1)
                v = d->v[prev];
            else
                continue;
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
