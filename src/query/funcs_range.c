/* funcs_range.c - PromQL's range-vector functions: rate, increase and delta
 * with Prometheus 2.x extrapolation, irate, idelta, deriv, predict_linear,
 * resets, changes, the *_over_time family and absent_over_time. Each is one
 * window operation (pq_window_fn, named by its row in func_table.c); one
 * evaluation (range_call) slides the windows over every series, in
 * batches split between two threads. */
#include "qinternal.h"

#include "../core/util.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The divisions of extrapolated() that depend only on the window's times
 * and sample count, kept from the previous window: a series scraped at the
 * step's pace meets the same distances at every step, and the same inputs
 * give the same quotients, so the result is unchanged bit for bit. */
struct pq_extrap_cache {
    int valid;
    int64_t d0, d1, d2; /* t[0] - rs, re - t[n-1], t[n-1] - t[0] */
    size_t n;
    double to_start, to_end, sampled, avg, factor; /* factor: interval / sampled */
    double range_s;                                /* (double)range / 1000 */
    int prometheus2; /* closed windows: 2.x's order of the zero-point rule */
};

pq_extrap_cache *pq_extrap_cache_new(int64_t range_ms)
{
    pq_extrap_cache *x = mw_xcalloc(1, sizeof(*x));
    x->range_s = (double)range_ms / 1000;
    return x;
}

/* The raw samples a window stands for: its samples, or with downsampled
 * data the sum of their weights. */
static double weight_of(const pq_window *w)
{
    if (!w->w) return (double)w->n;
    double c = 0;
    for (size_t i = 0; i < w->n; i++)
        c += w->w[i];
    return c;
}

/* Prometheus' extrapolatedRate: 3.x's, or 2.x's with closed windows (they
 * differ in when a counter's zero point limits the extrapolation to the
 * window's start). */
static int extrapolated(const pq_window *w, int resets, int counter, int rate, double *out)
{
    const int64_t *t = w->t;
    const double *v = w->v;
    /* Downsampled: the window's first, last and reset samples, weighted by
     * the raw samples they stand for; the average interval is the raw
     * samples' (the same n as over all of them). */
    size_t n = w->w ? (size_t)weight_of(w) : w->n;
    pq_extrap_cache *xc = w->xc;
    if (n < 2 || w->n < 2) return 0;
    double result = v[w->n - 1] - v[0];
    if (counter && resets) {
        double last = 0;
        for (size_t i = 0; i < w->n; i++) {
            if (v[i] < last) result += last;
            last = v[i];
        }
    }
    int64_t d0 = t[0] - w->start, d1 = w->end - t[w->n - 1], d2 = t[w->n - 1] - t[0];
    if (!xc->valid || d0 != xc->d0 || d1 != xc->d1 || d2 != xc->d2 || n != xc->n) {
        xc->to_start = (double)d0 / 1000;
        xc->to_end = (double)d1 / 1000;
        xc->sampled = (double)d2 / 1000;
        xc->avg = xc->sampled / (double)(n - 1);
        double threshold = xc->avg * 1.1, interval = xc->sampled;
        interval += xc->to_start < threshold ? xc->to_start : xc->avg / 2;
        interval += xc->to_end < threshold ? xc->to_end : xc->avg / 2;
        xc->factor = interval / xc->sampled;
        xc->d0 = d0;
        xc->d1 = d1;
        xc->d2 = d2;
        xc->n = n;
        xc->valid = 1;
    }
    double to_start = xc->to_start, to_end = xc->to_end, sampled = xc->sampled, avg = xc->avg;
    double factor = xc->factor;
    /* With v[0] >= result > 0, v[0] / result rounds to at least 1, so
     * to_zero >= sampled; with sampled >= to_start it cannot shorten
     * to_start. That is the usual case for a counter (its value above its
     * increase in the window), and it skips a division per step. */
    if (counter && result > 0 && v[0] >= 0 && !(v[0] >= result && sampled >= to_start)) {
        double to_zero = sampled * (v[0] / result);
        double threshold = avg * 1.1;
        double end = to_end < threshold ? to_end : avg / 2;
        if (xc->prometheus2) {
            /* 2.x: the zero point shortens the start before the threshold
             * rule looks at it. */
            if (to_zero < to_start) {
                to_start = to_zero;
                factor = (sampled + (to_start < threshold ? to_start : avg / 2) + end) / sampled;
            }
        } else {
            /* 3.x: the threshold rule first, then the zero point caps it. */
            double start = to_start < threshold ? to_start : avg / 2;
            if (to_zero < start) factor = (sampled + to_zero + end) / sampled;
        }
    }
    result = result * factor;
    if (rate) result /= xc->range_s;
    *out = result;
    return 1;
}

int pq_window_rate(const pq_window *w, double *out)
{
    return extrapolated(w, w->counter_resets, 1, 1, out);
}

int pq_window_increase(const pq_window *w, double *out)
{
    return extrapolated(w, w->counter_resets, 1, 0, out);
}

int pq_window_delta(const pq_window *w, double *out)
{
    return extrapolated(w, 0, 0, 0, out);
}

/* irate() and idelta(): the last two samples. */
static int last_two(const pq_window *w, int rate, double *out)
{
    const int64_t *t = w->t;
    const double *v = w->v;
    size_t m = w->n;
    if (m < 2) return 0;
    double d = v[m - 1] - v[m - 2];
    if (rate) {
        if (v[m - 1] < v[m - 2]) d = v[m - 1];
        if (t[m - 1] == t[m - 2]) return 0;
        d /= (double)(t[m - 1] - t[m - 2]) / 1000;
    }
    *out = d;
    return 1;
}

int pq_window_irate(const pq_window *w, double *out)
{
    return last_two(w, 1, out);
}

int pq_window_idelta(const pq_window *w, double *out)
{
    return last_two(w, 0, out);
}

/* Linear regression as Prometheus' linearRegression, times relative to x0. */
static void regression(const int64_t *t, const double *v, size_t n, int64_t x0, double *slope,
                       double *icpt)
{
    double sx = 0, sy = 0, sxy = 0, sx2 = 0;
    int const_y = 1;
    for (size_t i = 0; i < n; i++) {
        if (v[i] != v[0]) const_y = 0;
        double x = (double)(t[i] - x0) / 1000;
        sx += x;
        sy += v[i];
        sxy += x * v[i];
        sx2 += x * x;
    }
    if (const_y) {
        *slope = 0;
        *icpt = v[0];
        return;
    }
    double cn = (double)n, cov = sxy - sx * sy / cn, var = sx2 - sx * sx / cn;
    *slope = cov / var;
    *icpt = sy / cn - *slope * sx / cn;
}

int pq_window_deriv(const pq_window *w, double *out)
{
    if (w->n < 2) return 0;
    double slope, icpt;
    regression(w->t, w->v, w->n, w->t[0], &slope, &icpt);
    *out = slope;
    return 1;
}

/* The value param seconds after the evaluation time (not the window's end:
 * they differ with @, and Prometheus predicts from the evaluation time). */
int pq_window_predict_linear(const pq_window *w, double *out)
{
    if (w->n < 2) return 0;
    double slope, icpt;
    regression(w->t, w->v, w->n, w->ts, &slope, &icpt);
    *out = slope * w->param + icpt;
    return 1;
}

int pq_window_resets(const pq_window *w, double *out)
{
    double c = 0;
    for (size_t i = 1; i < w->n; i++)
        if (w->v[i] < w->v[i - 1]) c++;
    *out = c;
    return 1;
}

int pq_window_changes(const pq_window *w, double *out)
{
    const double *v = w->v;
    double c = 0;
    for (size_t i = 1; i < w->n; i++)
        if (v[i] != v[i - 1] && !(isnan(v[i]) && isnan(v[i - 1]))) c++;
    *out = c;
    return 1;
}

int pq_window_count(const pq_window *w, double *out)
{
    *out = weight_of(w);
    return 1;
}

int pq_window_present(const pq_window *w, double *out)
{
    (void)w; /* never empty */
    *out = 1;
    return 1;
}

int pq_window_last(const pq_window *w, double *out)
{
    *out = w->v[w->n - 1];
    return 1;
}

void pq_kahan_inc(double x, double *sum, double *comp)
{
    double t = *sum + x; /* no multiply here: nothing for a compiler to fuse */
    if (isinf(t))
        *comp = 0;
    else if (fabs(*sum) >= fabs(x))
        *comp += (*sum - t) + x;
    else
        *comp += (x - t) + *sum;
    *sum = t;
}

/* Kahan-Neumaier compensated summation, as Prometheus's sum_over_time. */
int pq_window_sum(const pq_window *w, double *out)
{
    double sum = 0, comp = 0;
    for (size_t i = 0; i < w->n; i++)
        pq_kahan_inc(w->v[i], &sum, &comp);
    *out = isinf(sum) ? sum : sum + comp;
    return 1;
}

/* The compensated sum divided by the count, switching to an incremental
 * (compensated) mean once the sum would overflow, as Prometheus 3. */
int pq_window_avg(const pq_window *w, double *out)
{
    const double *v = w->v;
    if (w->w) { /* downsampled: the windows' sums over their counts */
        double sum = 0, comp = 0, count = weight_of(w);
        for (size_t i = 0; i < w->n; i++)
            pq_kahan_inc(v[i], &sum, &comp);
        *out = sum / count + comp / count;
        return 1;
    }
    double sum = v[0], comp = 0, mean = 0, count = 1;
    int incremental = 0;
    for (size_t i = 1; i < w->n; i++) {
        count = (double)(i + 1);
        if (!incremental) {
            double ns = sum, nc = comp;
            pq_kahan_inc(v[i], &ns, &nc);
            if (!isinf(ns)) {
                sum = ns;
                comp = nc;
                continue;
            }
            incremental = 1;
            mean = sum / (count - 1);
            comp /= count - 1;
        }
        double q = (count - 1) / count;
        mean *= q;
        comp *= q;
        pq_kahan_inc(v[i] / count, &mean, &comp);
    }
    *out = incremental ? mean + comp : sum / count + comp / count;
    return 1;
}

/* double_exponential_smoothing(v, sf, tf) (holt_winters in Prometheus 2):
 * the smoothed value at the window's last sample; at least two samples. */
int pq_window_smoothing(const pq_window *w, double *out)
{
    if (w->n < 2) return 0;
    double sf = w->param, tf = w->param2;
    double s0 = 0, s1 = w->v[0], b = w->v[1] - w->v[0];
    for (size_t i = 1; i < w->n; i++) {
        double x = sf * w->v[i];
        if (i > 1) b = tf * (s1 - s0) + (1 - tf) * b;
        double y = (1 - sf) * (s1 + b);
        s0 = s1;
        s1 = x + y;
    }
    *out = s1;
    return 1;
}

int pq_window_first(const pq_window *w, double *out)
{
    *out = w->v[0];
    return 1;
}

int pq_window_ts_of_first(const pq_window *w, double *out)
{
    *out = (double)w->t[0] / 1000;
    return 1;
}

int pq_window_ts_of_last(const pq_window *w, double *out)
{
    *out = (double)w->t[w->n - 1] / 1000;
    return 1;
}

/* ts_of_max_over_time/ts_of_min_over_time (Prometheus 3, experimental): the
 * time of the extreme, the latest of equal ones; a NaN gives way. */
static int ts_of_extreme(const pq_window *w, int max, double *out)
{
    double x = w->v[0];
    int64_t t = w->t[0];
    for (size_t i = 0; i < w->n; i++)
        if ((max ? w->v[i] >= x : w->v[i] <= x) || isnan(x)) {
            x = w->v[i];
            t = w->t[i];
        }
    *out = (double)t / 1000;
    return 1;
}

int pq_window_ts_of_max(const pq_window *w, double *out)
{
    return ts_of_extreme(w, 1, out);
}

int pq_window_ts_of_min(const pq_window *w, double *out)
{
    return ts_of_extreme(w, 0, out);
}

/* mad_over_time (Prometheus 3, experimental): the median of the absolute
 * deviations from the median; NaN when a sample is NaN. */
int pq_window_mad(const pq_window *w, double *out)
{
    for (size_t i = 0; i < w->n; i++)
        if (isnan(w->v[i])) {
            *out = NAN;
            return 1;
        }
    double *tmp = mw_xmalloc(w->n * sizeof(double));
    memcpy(tmp, w->v, w->n * sizeof(double));
    double median = quantile_of(0.5, tmp, w->n);
    for (size_t i = 0; i < w->n; i++)
        tmp[i] = fabs(w->v[i] - median);
    *out = quantile_of(0.5, tmp, w->n);
    free(tmp);
    return 1;
}

/* min_over_time() and max_over_time(): a NaN gives way to any value. */
static int extreme(const pq_window *w, int max, double *out)
{
    const double *v = w->v;
    double x = v[0];
    for (size_t i = 1; i < w->n; i++)
        if ((max ? v[i] > x : v[i] < x) || isnan(x)) x = v[i];
    *out = x;
    return 1;
}

int pq_window_min(const pq_window *w, double *out)
{
    return extreme(w, 0, out);
}

int pq_window_max(const pq_window *w, double *out)
{
    return extreme(w, 1, out);
}

/* The population variance, by Welford's method as Prometheus. */
static double variance(const pq_window *w)
{
    double count = 0, mean = 0, aux = 0;
    for (size_t i = 0; i < w->n; i++) {
        count++;
        double delta = w->v[i] - mean;
        mean += delta / count;
        aux += delta * (w->v[i] - mean);
    }
    return aux / count;
}

int pq_window_stddev(const pq_window *w, double *out)
{
    *out = sqrt(variance(w));
    return 1;
}

int pq_window_stdvar(const pq_window *w, double *out)
{
    *out = variance(w);
    return 1;
}

int pq_window_quantile(const pq_window *w, double *out)
{
    double *tmp = mw_xmalloc(w->n * sizeof(double));
    memcpy(tmp, w->v, w->n * sizeof(double));
    *out = quantile_of(w->param, tmp, w->n);
    free(tmp);
    return 1;
}

/* Range functions over a batch of series, for one thread. A batch's buffer
 * of 2^17 points (1.1 MiB with the flags) stays in the caches and is
 * reused; 2^20 points (9 MiB, mapped afresh per query) cost page faults
 * and 8 MB of peak memory for no gain in CPU time (measured). */
enum { RF_BATCH_POINTS = 1 << 17, RF_PARALLEL_MIN = 64 };
typedef struct rf_job {
    const pq_func *f;
    const rangearg *ra;
    const double *param, *param2; /* per step, or NULL */
    size_t nsteps;
    int64_t start, step;   /* the grid: evaluation times */
    size_t from, to, base; /* series [from, to); buffers indexed from base */
    double *v;
    uint8_t *ok;
} rf_job;

static void *rf_run(void *arg)
{
    const rf_job *j = arg;
    const rangearg *ra = j->ra;
    pq_window_fn *window = j->f->window;
    int counter = (j->f->flags & PQ_FN_COUNTER) != 0;
    pq_extrap_cache xc = {.range_s = (double)ra->range_ms / 1000, .prometheus2 = ra->closed};
    for (size_t i = j->from; i < j->to; i++) {
        const pq_series *s = &ra->s[i];
        double *v = j->v + (i - j->base) * j->nsteps;
        uint8_t *ok = j->ok + (i - j->base) * j->nsteps;
        /* Without a value below its predecessor or below zero anywhere, the
         * counter-reset correction of rate/increase adds nothing and is
         * skipped (the same result, bit for bit). */
        int resets = 0;
        for (size_t x = 0; counter && x < s->n && !resets; x++)
            resets = s->v[x] < 0 || (x && s->v[x] < s->v[x - 1]);
        pq_window w = {.counter_resets = resets, .xc = &xc};
        const double *wts = ra->w ? ra->w[i] : NULL;
        /* The windows only move forwards (or stay, with @), so [lo, hi)
         * slides over the series instead of being searched per step. */
        size_t lo = 0, hi = 0;
        if (ra->extended) {
            /* anchored/smoothed: the window's points and up to a lookback
             * around it (extended.c). */
            int64_t after = ra->extended == PQ_EXT_SMOOTHED ? ra->lookback_ms : 0;
            for (size_t k = 0; k < j->nsteps; k++) {
                int64_t from = ra->wstart[k] - ra->lookback_ms, to = ra->wend[k] + after;
                if (k && ra->wstart[k] < ra->wstart[k - 1]) lo = hi = 0;
                while (lo < s->n && s->t[lo] <= from)
                    lo++;
                if (hi < lo) hi = lo;
                while (hi < s->n && s->t[hi] <= to)
                    hi++;
                w.t = s->t + lo;
                w.v = s->v + lo;
                w.n = hi - lo;
                w.start = ra->wstart[k];
                w.end = ra->wend[k];
                w.ts = j->start + (int64_t)k * j->step;
                ok[k] = w.n > 0 && q_extended_window(window, ra->extended, &w, &v[k]);
            }
            continue;
        }
        for (size_t k = 0; k < j->nsteps; k++) {
            while (lo < s->n && (ra->closed ? s->t[lo] < ra->wstart[k] : s->t[lo] <= ra->wstart[k]))
                lo++;
            if (hi < lo) hi = lo;
            while (hi < s->n && s->t[hi] <= ra->wend[k])
                hi++;
            w.t = s->t + lo;
            w.v = s->v + lo;
            w.w = wts ? wts + lo : NULL;
            w.n = hi - lo;
            w.start = ra->wstart[k];
            w.end = ra->wend[k];
            w.param = j->param ? j->param[k] : 0;
            w.param2 = j->param2 ? j->param2[k] : 0;
            w.ts = j->start + (int64_t)k * j->step;
            ok[k] = w.n > 0 && window(&w, &v[k]); /* an empty window has no value */
        }
    }
    return NULL;
}

/* double_exponential_smoothing's factors must be in (0, 1), checked as
 * Prometheus does: when there is a series to smooth. -1 (and the context
 * failed) otherwise. */
static int check_factors(qctx *c, const pq_node *n, const rangearg *ra, const val *sf,
                         const val *tf)
{
    if (!(n->func->flags & PQ_FN_FACTORS) || ra->n == 0) return 0;
    for (size_t k = 0; k < c->nsteps; k++) {
        if (!(sf->scalar[k] > 0 && sf->scalar[k] < 1)) {
            qerr(c, PQ_ERR_EXECUTION, "invalid smoothing factor. Expected: 0 < sf < 1, got: %f",
                 sf->scalar[k]);
            return -1;
        }
        if (!(tf->scalar[k] > 0 && tf->scalar[k] < 1)) {
            qerr(c, PQ_ERR_EXECUTION, "invalid trend factor. Expected: 0 < tf < 1, got: %f",
                 tf->scalar[k]);
            return -1;
        }
    }
    return 0;
}

/* The call n over its range argument: the window operation's values, or
 * (absent) 1 at the steps where no series has a window with samples. */
static int per_step_of(const val *param, size_t pi)
{
    return pi != (size_t)-1 && param->scalar;
}

/* Prometheus's PossibleNonCounterInfo, raised per series that gives a
 * value: a name without a counter's or a histogram's suffix. */
static void possible_non_counter(qctx *c, const pq_series *s, const pq_node *arg)
{
    const char *name = lbl_get(s->labels, s->nlabels, "__name__");
    if (!*name) return;
    static const char *const suffixes[] = {"_total", "_sum", "_count", "_bucket"};
    size_t len = strlen(name);
    for (size_t i = 0; i < 4; i++) {
        size_t sl = strlen(suffixes[i]);
        if (len >= sl && !strcmp(name + len - sl, suffixes[i])) return;
    }
    q_annot(c, 1, q_arg_pos(arg),
            "PromQL info: metric might not be a counter, name does not end in "
            "_total/_sum/_count/_bucket: \"%s\"",
            name);
}

/* What a range function reads of downsampled data, and whether it
 * answers from it as from the raw samples (docs/store.md). */
static void ds_hint(qctx *c, pq_window_fn *f)
{
    c->ds_on = 1;
    c->ds_exact = 1;
    if (f == pq_window_sum || f == pq_window_count || f == pq_window_avg)
        c->ds_what = MW_SEL_SUM;
    else if (f == pq_window_min)
        c->ds_what = MW_SEL_MIN;
    else if (f == pq_window_max)
        c->ds_what = MW_SEL_MAX;
    else {
        c->ds_what = MW_SEL_SAMPLES;
        c->ds_exact = f == pq_window_rate || f == pq_window_increase || f == pq_window_delta ||
                      f == pq_window_last || f == pq_window_present;
    }
}

static val range_call(qctx *c, const pq_node *n, int absent)
{
    val out = {0}, param = {0}, param2 = {0};
    /* The range argument, and the scalar ones where there are some
     * (quantile_over_time's first, predict_linear's second,
     * double_exponential_smoothing's second and third). */
    size_t ri = 0, pi = (size_t)-1, pi2 = (size_t)-1;
    for (size_t i = 0; i < n->nargs; i++) {
        if (n->args[i]->type == PQ_T_MATRIX)
            ri = i;
        else if (pi == (size_t)-1)
            pi = i;
        else
            pi2 = i;
    }
    if (pi != (size_t)-1) param = eval_node(c, n->args[pi]);
    if (pi2 != (size_t)-1 && !c->code) param2 = eval_node(c, n->args[pi2]);
    rangearg ra = {0};
    const pq_node *sel = n->args[ri];
    while (sel->kind == PQ_PAREN)
        sel = sel->args[0];
    if (!c->code && sel->kind == PQ_MSEL && sel->args[0]->extended)
        q_extended_check(c, n, sel->args[0]);
    ds_hint(c, n->func->window);
    if (c->code || eval_range_arg(c, n->args[ri], &ra) < 0 ||
        check_factors(c, n, &ra, &param, &param2) < 0) {
        rangearg_free(c, &ra);
        val_free(c, &param);
        val_free(c, &param2);
        return out;
    }
    if (!absent && q_hist_in_range(&ra)) { /* native histograms: funcs_native_range.c */
        out = q_hist_range_call(c, n, &ra, &param, pi);
        rangearg_free(c, &ra);
        val_free(c, &param);
        val_free(c, &param2);
        return out;
    }
    int keep_name = (n->func->flags & PQ_FN_KEEP_NAME) != 0;
    /* Prometheus 3's annotations: rate and increase (not irate) of a name
     * that no counter would have; quantile_over_time's q out of [0, 1]. */
    int counter = n->func->window == pq_window_rate || n->func->window == pq_window_increase;
    int quantile = n->func->window == pq_window_quantile && per_step_of(&param, pi);
    vbuild b;
    vb_init(&b, c);
    uint8_t *any = absent ? mw_xcalloc(c->nsteps, 1) : NULL;
    /* A selection's label sets are distinct; they stay so without
     * __name__ when all series share one name. Then the output series need
     * no collision lookup (a key and a hash per series). */
    int distinct = n->args[ri]->kind == PQ_MSEL && !absent;
    if (distinct && !keep_name && ra.n > 0) {
        const char *name0 = lbl_get(ra.s[0].labels, ra.s[0].nlabels, "__name__");
        for (size_t i = 1; i < ra.n && distinct; i++)
            distinct = !strcmp(lbl_get(ra.s[i].labels, ra.s[i].nlabels, "__name__"), name0);
    }
    /* Series are computed in batches, each split between this thread and
     * a helper, into a buffer of at most RF_BATCH_POINTS points; the
     * results are then added here, in series order, as before. */
    size_t ns = c->nsteps;
    size_t batch = RF_BATCH_POINTS / ns > 16 ? RF_BATCH_POINTS / ns : 16;
    if (batch > ra.n) batch = ra.n ? ra.n : 1;
    double *vals = mw_xmalloc(batch * ns * sizeof(double));
    uint8_t *oks = mw_xmalloc(batch * ns);
    const double *per_step = pi != (size_t)-1 ? param.scalar : NULL;
    const double *per_step2 = pi2 != (size_t)-1 ? param2.scalar : NULL;
    for (size_t b0 = 0; b0 < ra.n && !c->code; b0 += batch) {
        size_t b1 = b0 + batch < ra.n ? b0 + batch : ra.n, mid = b0 + (b1 - b0) / 2;
        rf_job jobs[2] = {
            {n->func, &ra, per_step, per_step2, ns, c->start, c->step, b0, mid, b0, vals, oks},
            {n->func, &ra, per_step, per_step2, ns, c->start, c->step, mid, b1, b0, vals, oks}};
        pthread_t th;
        int threaded =
            b1 - b0 >= RF_PARALLEL_MIN && pthread_create(&th, NULL, rf_run, &jobs[1]) == 0;
        rf_run(&jobs[0]);
        if (threaded)
            pthread_join(th, NULL);
        else
            rf_run(&jobs[1]);
        for (size_t i = b0; i < b1 && !c->code; i++) {
            pq_series *s = &ra.s[i];
            const double *v = vals + (i - b0) * ns;
            const uint8_t *ok = oks + (i - b0) * ns;
            size_t si = (size_t)-1;
            for (size_t k = 0; k < ns; k++) {
                if (!ok[k]) continue;
                if (absent) {
                    any[k] = 1;
                    continue;
                }
                if (quantile) q_annot_quantile(c, per_step[k], q_arg_pos(n->args[pi]));
                if (si == (size_t)-1) {
                    if (counter) possible_non_counter(c, s, n->args[ri]);
                    /* The argument's labels are not needed again: taken
                     * over, not copied. */
                    pq_label *l = s->labels;
                    size_t nl = s->nlabels;
                    s->labels = NULL;
                    s->nlabels = 0;
                    int dn = keep_name ? 0 : q_drop_name(c, &l, &nl);
                    dn |= s->drop_name;
                    si = distinct ? vb_append(&b, l, nl) : vb_series_dn(&b, l, nl, dn);
                    if (si == (size_t)-1) break;
                    b.s[si].drop_name = (uint8_t)dn;
                }
                if (vb_set(&b, si, k, v[k]) < 0) break;
            }
        }
        if (qcheck_time(c) < 0) break;
    }
    free(vals);
    free(oks);
    if (absent && !c->code) {
        size_t nl;
        pq_label *l = absent_labels(n->args[0], &nl);
        size_t si = vb_series(&b, l, nl);
        for (size_t k = 0; si != (size_t)-1 && k < c->nsteps; k++)
            if (!any[k]) {
                b.s[si].ok[k] = 1;
                b.s[si].v[k] = 1;
            }
    }
    free(any);
    rangearg_free(c, &ra);
    val_free(c, &param);
    val_free(c, &param2);
    out = vb_finish(&b);
    return out;
}

val pq_call_range(qctx *c, const pq_node *n)
{
    return range_call(c, n, 0);
}

val pq_call_absent_over_time(qctx *c, const pq_node *n)
{
    return range_call(c, n, 1);
}
