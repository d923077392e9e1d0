/* funcs.c - PromQL functions: the range-vector family (rate, increase,
 * delta with Prometheus 2.x extrapolation, irate, idelta, deriv,
 * predict_linear, resets, changes, *_over_time), element-wise math, date
 * functions, and time, timestamp, vector, scalar, sort, label_replace,
 * label_join, absent, absent_over_time, histogram_quantile. */
#include "qinternal.h"

#include "../core/buf.h"
#include "../core/regex_bound.h"
#include "../core/util.h"

#include <math.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define S PQ_T_SCALAR
#define V PQ_T_VECTOR
#define M PQ_T_MATRIX
#define STR PQ_T_STRING

static const pq_func funcs[] = {
    {"abs", {V}, 1, 0, V},
    {"absent", {V}, 1, 0, V},
    {"absent_over_time", {M}, 1, 0, V},
    {"avg_over_time", {M}, 1, 0, V},
    {"ceil", {V}, 1, 0, V},
    {"changes", {M}, 1, 0, V},
    {"clamp", {V, S, S}, 3, 0, V},
    {"clamp_max", {V, S}, 2, 0, V},
    {"clamp_min", {V, S}, 2, 0, V},
    {"count_over_time", {M}, 1, 0, V},
    {"day_of_month", {V}, 0, 1, V},
    {"day_of_week", {V}, 0, 1, V},
    {"day_of_year", {V}, 0, 1, V},
    {"days_in_month", {V}, 0, 1, V},
    {"delta", {M}, 1, 0, V},
    {"deriv", {M}, 1, 0, V},
    {"exp", {V}, 1, 0, V},
    {"floor", {V}, 1, 0, V},
    {"histogram_quantile", {S, V}, 2, 0, V},
    {"hour", {V}, 0, 1, V},
    {"idelta", {M}, 1, 0, V},
    {"increase", {M}, 1, 0, V},
    {"irate", {M}, 1, 0, V},
    {"label_join", {V, STR, STR, STR}, 3, -1, V},
    {"label_replace", {V, STR, STR, STR}, 5, 0, V},
    {"last_over_time", {M}, 1, 0, V},
    {"ln", {V}, 1, 0, V},
    {"log10", {V}, 1, 0, V},
    {"log2", {V}, 1, 0, V},
    {"max_over_time", {M}, 1, 0, V},
    {"min_over_time", {M}, 1, 0, V},
    {"minute", {V}, 0, 1, V},
    {"month", {V}, 0, 1, V},
    {"predict_linear", {M, S}, 2, 0, V},
    {"present_over_time", {M}, 1, 0, V},
    {"quantile_over_time", {S, M}, 2, 0, V},
    {"rate", {M}, 1, 0, V},
    {"resets", {M}, 1, 0, V},
    {"round", {V, S}, 1, 1, V},
    {"scalar", {V}, 1, 0, S},
    {"sgn", {V}, 1, 0, V},
    {"sort", {V}, 1, 0, V},
    {"sort_desc", {V}, 1, 0, V},
    {"sqrt", {V}, 1, 0, V},
    {"stddev_over_time", {M}, 1, 0, V},
    {"stdvar_over_time", {M}, 1, 0, V},
    {"sum_over_time", {M}, 1, 0, V},
    {"time", {S}, 0, 0, S},
    {"timestamp", {V}, 1, 0, V},
    {"vector", {S}, 1, 0, V},
    {"year", {V}, 0, 1, V},
};

const pq_func *pq_func_lookup(const char *name)
{
    for (size_t i = 0; i < sizeof(funcs) / sizeof(funcs[0]); i++)
        if (strcmp(funcs[i].name, name) == 0) return &funcs[i];
    return NULL;
}

static int is(const pq_node *n, const char *name)
{
    return strcmp(n->func->name, name) == 0;
}

/* The divisions of extrapolated() that depend only on the window's times
 * and sample count, kept from the previous window: a series scraped at the
 * step's pace meets the same distances at every step, and the same inputs
 * give the same quotients, so the result is unchanged bit for bit. */
typedef struct xcache {
    int valid;
    int64_t d0, d1, d2; /* t[0] - rs, re - t[n-1], t[n-1] - t[0] */
    size_t n;
    double to_start, to_end, sampled, avg, factor; /* factor: interval / sampled */
    double range_s;                                /* (double)range / 1000 */
} xcache;

/* Prometheus' extrapolatedRate (2.x). */
static int extrapolated(const int64_t *t, const double *v, size_t n, int64_t rs, int64_t re,
                        int resets, int counter, int rate, xcache *xc, double *out)
{
    if (n < 2) return 0;
    double result = v[n - 1] - v[0];
    if (counter && resets) {
        double last = 0;
        for (size_t i = 0; i < n; i++) {
            if (v[i] < last) result += last;
            last = v[i];
        }
    }
    int64_t d0 = t[0] - rs, d1 = re - t[n - 1], d2 = t[n - 1] - t[0];
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
        if (to_zero < to_start) { /* the interval again, with this start */
            to_start = to_zero;
            double threshold = avg * 1.1, interval = sampled;
            interval += to_start < threshold ? to_start : avg / 2;
            interval += to_end < threshold ? to_end : avg / 2;
            factor = interval / sampled;
        }
    }
    result = result * factor;
    if (rate) result /= xc->range_s;
    *out = result;
    return 1;
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

/* The range-vector functions, resolved once per call rather than by name
 * per step. */
typedef enum {
    RF_RATE,
    RF_INCREASE,
    RF_DELTA,
    RF_IRATE,
    RF_IDELTA,
    RF_DERIV,
    RF_PREDICT,
    RF_RESETS,
    RF_CHANGES,
    RF_COUNT,
    RF_PRESENT,
    RF_LAST,
    RF_SUM,
    RF_AVG,
    RF_MIN,
    RF_MAX,
    RF_STDDEV,
    RF_STDVAR,
    RF_QUANTILE,
    RF_ABSENT,
    RF_UNKNOWN
} rf_kind;

static rf_kind rf_lookup(const char *f)
{
    static const char *const names[] = {"rate",
                                        "increase",
                                        "delta",
                                        "irate",
                                        "idelta",
                                        "deriv",
                                        "predict_linear",
                                        "resets",
                                        "changes",
                                        "count_over_time",
                                        "present_over_time",
                                        "last_over_time",
                                        "sum_over_time",
                                        "avg_over_time",
                                        "min_over_time",
                                        "max_over_time",
                                        "stddev_over_time",
                                        "stdvar_over_time",
                                        "quantile_over_time",
                                        "absent_over_time"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcmp(f, names[i])) return (rf_kind)i;
    return RF_UNKNOWN;
}

/* One window [lo, hi) of a series. counter_resets: whether the series has
 * anywhere a value below its predecessor or below zero; without, the
 * counter-reset correction of rate/increase adds nothing and is skipped
 * (the same result, bit for bit). */
static int range_fn(rf_kind f, const pq_series *s, size_t lo, size_t hi, int64_t ws, int64_t we,
                    xcache *xc, double p, int counter_resets, double *out)
{
    const int64_t *t = s->t + lo;
    const double *v = s->v + lo;
    size_t m = hi - lo;
    switch (f) {
    case RF_RATE:
        return extrapolated(t, v, m, ws, we, counter_resets, 1, 1, xc, out);
    case RF_INCREASE:
        return extrapolated(t, v, m, ws, we, counter_resets, 1, 0, xc, out);
    case RF_DELTA:
        return extrapolated(t, v, m, ws, we, 0, 0, 0, xc, out);
    case RF_IRATE:
    case RF_IDELTA: {
        if (m < 2) return 0;
        double d = v[m - 1] - v[m - 2];
        if (f == RF_IRATE) {
            if (v[m - 1] < v[m - 2]) d = v[m - 1];
            if (t[m - 1] == t[m - 2]) return 0;
            d /= (double)(t[m - 1] - t[m - 2]) / 1000;
        }
        *out = d;
        return 1;
    }
    default:
        break;
    }
    if (m == 0) return 0;
    switch (f) {
    case RF_DERIV:
    case RF_PREDICT: {
        if (m < 2) return 0;
        double slope, icpt;
        int64_t x0 = f == RF_DERIV ? t[0] : we;
        regression(t, v, m, x0, &slope, &icpt);
        *out = f == RF_DERIV ? slope : slope * p + icpt;
        return 1;
    }
    case RF_RESETS:
    case RF_CHANGES: {
        double c = 0;
        for (size_t i = 1; i < m; i++) {
            if (f == RF_RESETS ? v[i] < v[i - 1]
                               : (v[i] != v[i - 1] && !(isnan(v[i]) && isnan(v[i - 1]))))
                c++;
        }
        *out = c;
        return 1;
    }
    case RF_COUNT:
        *out = (double)m;
        return 1;
    case RF_PRESENT:
        *out = 1;
        return 1;
    case RF_LAST:
        *out = v[m - 1];
        return 1;
    case RF_SUM: {
        double sum = 0;
        for (size_t i = 0; i < m; i++)
            sum += v[i];
        *out = sum;
        return 1;
    }
    case RF_AVG: {
        double mean = 0, count = 0;
        for (size_t i = 0; i < m; i++) {
            count++;
            if (isinf(mean)) {
                if (isinf(v[i]) && (mean > 0) == (v[i] > 0)) continue;
                if (!isinf(v[i]) && !isnan(v[i])) continue;
            }
            mean += v[i] / count - mean / count;
        }
        *out = mean;
        return 1;
    }
    case RF_MIN:
    case RF_MAX: {
        double x = v[0];
        for (size_t i = 1; i < m; i++)
            if ((f == RF_MIN ? v[i] < x : v[i] > x) || isnan(x)) x = v[i];
        *out = x;
        return 1;
    }
    case RF_STDDEV:
    case RF_STDVAR: {
        double count = 0, mean = 0, aux = 0;
        for (size_t i = 0; i < m; i++) {
            count++;
            double delta = v[i] - mean;
            mean += delta / count;
            aux += delta * (v[i] - mean);
        }
        *out = f == RF_STDDEV ? sqrt(aux / count) : aux / count;
        return 1;
    }
    case RF_QUANTILE: {
        double *tmp = mw_xmalloc(m * sizeof(double));
        memcpy(tmp, v, m * sizeof(double));
        *out = quantile_of(p, tmp, m);
        free(tmp);
        return 1;
    }
    default:
        return 0;
    }
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

/* absent(), absent_over_time(): labels from the equality matchers of a
 * plain selector argument. */
static pq_label *absent_labels(const pq_node *arg, size_t *nl)
{
    pq_label *l = mw_xcalloc(1, sizeof(pq_label));
    *nl = 0;
    while (arg->kind == PQ_PAREN)
        arg = arg->args[0];
    if (arg->kind == PQ_MSEL) arg = arg->args[0];
    if (arg->kind != PQ_VSEL) return l;
    for (size_t i = 0; i < arg->nmatchers; i++) {
        const mw_matcher *m = &arg->matchers[i];
        if (m->op != MW_MATCH_EQ || !strcmp(m->name, "__name__")) continue;
        /* a label matched twice with = gets no value (Prometheus drops it) */
        int dup = 0;
        for (size_t j = 0; j < arg->nmatchers; j++)
            if (j != i && arg->matchers[j].op == MW_MATCH_EQ &&
                !strcmp(arg->matchers[j].name, m->name))
                dup = 1;
        if (!dup) lbl_set(&l, nl, m->name, m->value);
    }
    return l;
}

/* Range functions over a batch of series, for one thread. A batch's buffer
 * of 2^17 points (1.1 MiB with the flags) stays in the caches and is
 * reused; 2^20 points (9 MiB, mapped afresh per query) cost page faults
 * and 8 MB of peak memory for no gain in CPU time (measured). */
enum { RF_BATCH_POINTS = 1 << 17, RF_PARALLEL_MIN = 64 };
typedef struct rf_job {
    rf_kind f;
    const rangearg *ra;
    const double *param; /* per step, or NULL */
    size_t nsteps;
    size_t from, to, base; /* series [from, to); buffers indexed from base */
    double *v;
    uint8_t *ok;
} rf_job;

static void *rf_run(void *arg)
{
    const rf_job *j = arg;
    const rangearg *ra = j->ra;
    int counter = j->f == RF_RATE || j->f == RF_INCREASE;
    xcache xc = {.range_s = (double)ra->range_ms / 1000};
    for (size_t i = j->from; i < j->to; i++) {
        const pq_series *s = &ra->s[i];
        double *v = j->v + (i - j->base) * j->nsteps;
        uint8_t *ok = j->ok + (i - j->base) * j->nsteps;
        int resets = 0;
        for (size_t x = 0; counter && x < s->n && !resets; x++)
            resets = s->v[x] < 0 || (x && s->v[x] < s->v[x - 1]);
        /* The windows only move forwards (or stay, with @), so [lo, hi)
         * slides over the series instead of being searched per step. */
        size_t lo = 0, hi = 0;
        for (size_t k = 0; k < j->nsteps; k++) {
            while (lo < s->n && s->t[lo] < ra->wstart[k])
                lo++;
            if (hi < lo) hi = lo;
            while (hi < s->n && s->t[hi] <= ra->wend[k])
                hi++;
            if (j->f == RF_ABSENT)
                ok[k] = hi > lo;
            else
                ok[k] = (uint8_t)range_fn(j->f, s, lo, hi, ra->wstart[k], ra->wend[k], &xc,
                                          j->param ? j->param[k] : 0, resets, &v[k]);
        }
    }
    return NULL;
}

val pq_call_range(qctx *c, const pq_node *n);
val pq_call_range(qctx *c, const pq_node *n)
{
    val out = {0}, param = {0};
    int pi = -1, ri = 0;
    if (is(n, "quantile_over_time")) {
        pi = 0;
        ri = 1;
    } else if (is(n, "predict_linear")) {
        pi = 1;
    }
    if (pi >= 0) param = eval_node(c, n->args[pi]);
    rangearg ra = {0};
    if (c->code || eval_range_arg(c, n->args[ri], &ra) < 0) {
        rangearg_free(c, &ra);
        val_free(c, &param);
        return out;
    }
    rf_kind f = rf_lookup(n->func->name);
    int absent = f == RF_ABSENT;
    int keep_name = f == RF_LAST;
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
    for (size_t b0 = 0; b0 < ra.n && !c->code; b0 += batch) {
        size_t b1 = b0 + batch < ra.n ? b0 + batch : ra.n, mid = b0 + (b1 - b0) / 2;
        rf_job jobs[2] = {{f, &ra, pi >= 0 ? param.scalar : NULL, ns, b0, mid, b0, vals, oks},
                          {f, &ra, pi >= 0 ? param.scalar : NULL, ns, mid, b1, b0, vals, oks}};
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
                if (si == (size_t)-1) {
                    /* The argument's labels are not needed again: taken
                     * over, not copied. */
                    pq_label *l = s->labels;
                    size_t nl = s->nlabels;
                    s->labels = NULL;
                    s->nlabels = 0;
                    if (!keep_name) lbl_del(&l, &nl, "__name__");
                    si = distinct ? vb_append(&b, l, nl) : vb_series(&b, l, nl);
                    if (si == (size_t)-1) break;
                }
                if (b.s[si].ok[k]) {
                    qerr(c, PQ_ERR_EXECUTION,
                         "vector cannot contain metrics with the same labelset");
                    break;
                }
                b.s[si].ok[k] = 1;
                b.s[si].v[k] = v[k];
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
    vb_finish(&b, &out);
    vb_free(&b);
    return out;
}

static double round_go(double x)
{
    return floor(x + 0.5);
}

static double date_fn(const char *f, double v)
{
    if (isnan(v) || isinf(v) || fabs(v) > 1e15) return NAN;
    time_t t = (time_t)floor(v);
    struct tm tm;
    gmtime_r(&t, &tm);
    if (!strcmp(f, "day_of_month")) return tm.tm_mday;
    if (!strcmp(f, "day_of_week")) return tm.tm_wday;
    if (!strcmp(f, "day_of_year")) return tm.tm_yday + 1;
    if (!strcmp(f, "hour")) return tm.tm_hour;
    if (!strcmp(f, "minute")) return tm.tm_min;
    if (!strcmp(f, "month")) return tm.tm_mon + 1;
    if (!strcmp(f, "year")) return tm.tm_year + 1900;
    /* days_in_month */
    static const int dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y = tm.tm_year + 1900;
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return dm[tm.tm_mon] + (tm.tm_mon == 1 && leap);
}

/* Go's math.Max and math.Min: NaN wins (C's fmax/fmin ignore it). */
static double go_max(double a, double b)
{
    return isnan(a) || isnan(b) ? NAN : fmax(a, b);
}
static double go_min(double a, double b)
{
    return isnan(a) || isnan(b) ? NAN : fmin(a, b);
}

static double math_fn(const pq_node *n, double x, double a, double b)
{
    const char *f = n->func->name;
    if (!strcmp(f, "abs")) return fabs(x);
    if (!strcmp(f, "ceil")) return ceil(x);
    if (!strcmp(f, "floor")) return floor(x);
    if (!strcmp(f, "exp")) return exp(x);
    if (!strcmp(f, "ln")) return log(x);
    if (!strcmp(f, "log2")) return log2(x);
    if (!strcmp(f, "log10")) return log10(x);
    if (!strcmp(f, "sqrt")) return sqrt(x);
    if (!strcmp(f, "sgn")) return x > 0 ? 1 : x < 0 ? -1 : x;
    if (!strcmp(f, "clamp")) return go_max(a, go_min(b, x));
    if (!strcmp(f, "clamp_min")) return go_max(a, x);
    if (!strcmp(f, "clamp_max")) return go_min(a, x);
    if (!strcmp(f, "round")) {
        double to = n->nargs > 1 ? a : 1;
        double inv = 1.0 / to;
        return round_go(x * inv) / inv; /* Go: math.Floor(v*toNearestInverse+0.5)/inverse */
    }
    return date_fn(f, x);
}

val pq_call_elementwise(qctx *c, const pq_node *n);
val pq_call_elementwise(qctx *c, const pq_node *n)
{
    val out = {0};
    int date = n->func->nargs == 0 && n->func->variadic == 1;
    if (date && n->nargs == 0) { /* defaults to vector(time()) */
        sv *s = sv_new(c, &out, mw_xcalloc(1, sizeof(pq_label)), 0);
        out.type = PQ_T_VECTOR;
        for (size_t k = 0; s && k < c->nsteps; k++) {
            s->ok[k] = 1;
            s->v[k] = date_fn(n->func->name, (double)qts(c, k) / 1000);
        }
        return out;
    }
    val in = eval_node(c, n->args[0]);
    val a = {0}, b = {0};
    if (n->nargs > 1 && !c->code) a = eval_node(c, n->args[1]);
    if (n->nargs > 2 && !c->code) b = eval_node(c, n->args[2]);
    vbuild vb;
    vb_init(&vb, c);
    int clamp = is(n, "clamp");
    for (size_t i = 0; i < in.n && !c->code; i++) {
        pq_label *l = lbl_copy(in.s[i].labels, in.s[i].nlabels);
        size_t nl = in.s[i].nlabels;
        lbl_del(&l, &nl, "__name__");
        size_t si = (size_t)-1;
        for (size_t k = 0; k < c->nsteps; k++) {
            if (!in.s[i].ok[k]) continue;
            double x = in.s[i].v[k], av = a.scalar ? a.scalar[k] : 0,
                   bv = b.scalar ? b.scalar[k] : 0;
            if (clamp && av > bv) continue; /* clamp with min > max: empty */
            if (si == (size_t)-1) {
                si = vb_series(&vb, lbl_copy(l, nl), nl);
                if (si == (size_t)-1) break;
            }
            if (vb.s[si].ok[k]) {
                qerr(c, PQ_ERR_EXECUTION, "vector cannot contain metrics with the same labelset");
                break;
            }
            vb.s[si].ok[k] = 1;
            vb.s[si].v[k] = is(n, "timestamp") ? 0 : math_fn(n, x, av, bv);
        }
        lbl_free(l, nl);
    }
    val_free(c, &in);
    val_free(c, &a);
    val_free(c, &b);
    vb_finish(&vb, &out);
    vb_free(&vb);
    return out;
}

/* timestamp(v): the time of the sample a selector picked (evaluated as a
 * selector over the grid, but returning times). */
val pq_call_timestamp(qctx *c, const pq_node *n);
val pq_call_timestamp(qctx *c, const pq_node *n)
{
    const pq_node *arg = n->args[0];
    while (arg->kind == PQ_PAREN)
        arg = arg->args[0];
    val in = eval_node(c, arg);
    if (arg->kind != PQ_VSEL) { /* the evaluation time */
        for (size_t i = 0; i < in.n; i++) {
            lbl_del(&in.s[i].labels, &in.s[i].nlabels, "__name__");
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
        int64_t t = (arg->has_at ? (arg->at_kind == 1   ? c->qstart
                                    : arg->at_kind == 2 ? c->qend
                                                        : arg->at_ms)
                                 : qts(c, k)) -
                    arg->offset_ms;
        if (t < lo) lo = t;
        if (t > hi) hi = t;
    }
    char err[256];
    if (!c->store) return (val){.type = PQ_T_VECTOR};
    if (mw_store_select(c->store, arg->matchers, arg->nmatchers, lo - c->lim.lookback_ms, hi,
                        c->lim.max_samples, &r, err, sizeof(err)) < 0) {
        qerr(c, PQ_ERR_EXECUTION, "%s", err);
        return out;
    }
    vbuild vb;
    vb_init(&vb, c);
    for (size_t i = 0; i < r.nseries && !c->code; i++) {
        const mw_series_data *d = &r.series[i];
        pq_label *l = lbl_from_store(d->labels, d->nlabels);
        size_t nl = d->nlabels;
        lbl_del(&l, &nl, "__name__");
        for (size_t k = 0; k < c->nsteps; k++) {
            int64_t t = (arg->has_at ? (arg->at_kind == 1   ? c->qstart
                                        : arg->at_kind == 2 ? c->qend
                                                            : arg->at_ms)
                                     : qts(c, k)) -
                        arg->offset_ms;
            size_t j = lower_bound(d->t, d->n, t + 1);
            if (j == 0) continue;
            j--;
            if (d->t[j] < t - c->lim.lookback_ms || is_stale(d->v[j])) continue;
            if (vb_add(&vb, lbl_copy(l, nl), nl, k, (double)d->t[j] / 1000) < 0) break;
        }
        lbl_free(l, nl);
    }
    mw_select_result_free(&r);
    vb_finish(&vb, &out);
    vb_free(&vb);
    return out;
}

val pq_call_label(qctx *c, const pq_node *n);
val pq_call_label(qctx *c, const pq_node *n)
{
    val in = eval_node(c, n->args[0]);
    if (c->code) return in;
    const char *dst = string_arg(n->args[1]);
    regex_t re;
    int replace = is(n, "label_replace");
    if (replace) {
        char pat[4096];
        snprintf(pat, sizeof(pat), "^(%s)$", string_arg(n->args[4]));
        char why[256];
        if (mw_regex_check(string_arg(n->args[4]), why, sizeof(why)) < 0 ||
            regcomp(&re, pat, REG_EXTENDED) != 0) {
            qerr(c, PQ_ERR_EXECUTION, "invalid regular expression in label_replace(): %s",
                 string_arg(n->args[4]));
            return in;
        }
    }
    vbuild vb;
    vb_init(&vb, c);
    mw_buf b;
    mw_buf_init(&b, 1 << 20);
    for (size_t i = 0; i < in.n && !c->code; i++) {
        sv *s = &in.s[i];
        pq_label *l = lbl_copy(s->labels, s->nlabels);
        size_t nl = s->nlabels;
        mw_buf_clear(&b);
        if (replace) {
            const char *value = lbl_get(s->labels, s->nlabels, string_arg(n->args[3]));
            regmatch_t m[10];
            if (regexec(&re, value, 10, m, 0) == 0) {
                const char *tpl = string_arg(n->args[2]);
                for (const char *p = tpl; *p; p++) {
                    if (*p == '$' && p[1] >= '0' && p[1] <= '9') {
                        int g = p[1] - '0' + 1; /* our whole-match group shifts by one */
                        if (g < 10 && m[g].rm_so >= 0)
                            mw_buf_append(&b, value + m[g].rm_so,
                                          (size_t)(m[g].rm_eo - m[g].rm_so));
                        p++;
                    } else {
                        mw_buf_putc(&b, *p);
                    }
                }
                mw_buf_reserve(&b, 0);
                lbl_set(&l, &nl, dst, b.data);
            }
        } else {
            const char *sep = string_arg(n->args[2]);
            for (size_t j = 3; j < n->nargs; j++) {
                if (j > 3) mw_buf_puts(&b, sep);
                mw_buf_puts(&b, lbl_get(s->labels, s->nlabels, string_arg(n->args[j])));
            }
            mw_buf_reserve(&b, 0);
            lbl_set(&l, &nl, dst, b.data);
        }
        size_t si = vb_series(&vb, l, nl);
        if (si == (size_t)-1) break;
        for (size_t k = 0; k < c->nsteps; k++) {
            if (!s->ok[k]) continue;
            if (vb.s[si].ok[k]) {
                qerr(c, PQ_ERR_EXECUTION, "vector cannot contain metrics with the same labelset");
                break;
            }
            vb.s[si].ok[k] = 1;
            vb.s[si].v[k] = s->v[k];
        }
    }
    if (replace) regfree(&re);
    mw_buf_free(&b);
    val_free(c, &in);
    val out;
    vb_finish(&vb, &out);
    vb_free(&vb);
    return out;
}
