/* funcs_math.c - PromQL's element-wise functions: one operation applied to
 * every sample of an instant vector (abs, ceil, ln..., sgn, clamp,
 * clamp_min, clamp_max, round) and the date functions (hour, month...,
 * which read each value as Unix seconds, in UTC). The result drops
 * __name__, as Prometheus does. */
#include "qinternal.h"

#include "../core/util.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

double pq_math_sgn(double x)
{
    return x > 0 ? 1 : x < 0 ? -1 : x;
}

double pq_math_deg(double x)
{
    return x * (180 / PQ_PI);
}

double pq_math_rad(double x)
{
    return x * (PQ_PI / 180);
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

/* clamp(v, min, max): no samples at all when min > max. */
int pq_math_clamp(double x, const double *arg, size_t narg, double *out)
{
    (void)narg;
    if (arg[0] > arg[1]) return 0;
    *out = go_max(arg[0], go_min(arg[1], x));
    return 1;
}

int pq_math_clamp_min(double x, const double *arg, size_t narg, double *out)
{
    (void)narg;
    *out = go_max(arg[0], x);
    return 1;
}

int pq_math_clamp_max(double x, const double *arg, size_t narg, double *out)
{
    (void)narg;
    *out = go_min(arg[0], x);
    return 1;
}

/* round(v, to_nearest = 1), as Go's math.Floor(v*toNearestInverse+0.5) /
 * toNearestInverse. */
int pq_math_round(double x, const double *arg, size_t narg, double *out)
{
    double to = narg > 0 ? arg[0] : 1;
    double inv = 1.0 / to;
    *out = floor(x * inv + 0.5) / inv;
    return 1;
}

/* The calendar time of Unix seconds x in UTC; 0 where there is none
 * (NaN, infinities, beyond what time_t and gmtime handle). */
static int civil_time(double x, struct tm *tm)
{
    if (isnan(x) || isinf(x) || fabs(x) > 1e15) return 0;
    time_t t = (time_t)floor(x);
    gmtime_r(&t, tm);
    return 1;
}

/* The date functions: one field of the UTC calendar time of x (NaN when x
 * is no time). */
#define DATE_FIELD(name, field)                                                                    \
    double pq_date_##name(double x)                                                                \
    {                                                                                              \
        struct tm tm;                                                                              \
        return civil_time(x, &tm) ? (field) : NAN;                                                 \
    }
DATE_FIELD(day_of_month, tm.tm_mday)
DATE_FIELD(day_of_week, tm.tm_wday)
DATE_FIELD(day_of_year, tm.tm_yday + 1)
DATE_FIELD(hour, tm.tm_hour)
DATE_FIELD(minute, tm.tm_min)
DATE_FIELD(month, tm.tm_mon + 1)
DATE_FIELD(year, tm.tm_year + 1900)
#undef DATE_FIELD

double pq_date_days_in_month(double x)
{
    static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    struct tm tm;
    if (!civil_time(x, &tm)) return NAN;
    int y = tm.tm_year + 1900;
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return days[tm.tm_mon] + (tm.tm_mon == 1 && leap);
}

/* The row's operation on x; 0 drops the sample. */
static int apply(const pq_func *f, double x, const double *arg, size_t narg, double *out)
{
    if (f->unary) {
        *out = f->unary(x);
        return 1;
    }
    return f->math(x, arg, narg, out);
}

val pq_call_math(qctx *c, const pq_node *n)
{
    const pq_func *f = n->func;
    val out = {0};
    /* A date function without its argument: vector(time()). */
    if (n->nargs == 0) {
        sv *s = sv_new(c, &out, mw_xcalloc(1, sizeof(pq_label)), 0);
        out.type = PQ_T_VECTOR;
        for (size_t k = 0; s && k < c->nsteps; k++) {
            s->ok[k] = 1;
            s->v[k] = f->unary((double)qts(c, k) / 1000);
        }
        return out;
    }
    val in = eval_node(c, n->args[0]);
    /* The scalar arguments: clamp's two, round's optional one. */
    enum { MAX_SCALARS = 2 };
    val scalars[MAX_SCALARS] = {{0}};
    size_t narg = n->nargs - 1 < MAX_SCALARS ? n->nargs - 1 : MAX_SCALARS;
    for (size_t a = 0; a < narg && !c->code; a++)
        scalars[a] = eval_node(c, n->args[a + 1]);
    vbuild vb;
    vb_init(&vb, c);
    for (size_t i = 0; i < in.n && !c->code; i++) {
        pq_label *l = lbl_copy(in.s[i].labels, in.s[i].nlabels);
        size_t nl = in.s[i].nlabels;
        int dn = q_drop_name(c, &l, &nl);
        size_t si = (size_t)-1;
        for (size_t k = 0; k < c->nsteps; k++) {
            /* native histograms: float functions leave them out */
            if (!in.s[i].ok[k] || mw_hist_is_ref(in.s[i].v[k])) continue;
            double arg[MAX_SCALARS], v;
            for (size_t a = 0; a < narg; a++)
                arg[a] = scalars[a].scalar ? scalars[a].scalar[k] : 0;
            if (!apply(f, in.s[i].v[k], arg, narg, &v)) continue;
            if (si == (size_t)-1) {
                si = vb_series_dn(&vb, lbl_copy(l, nl), nl, dn);
                if (si == (size_t)-1) break;
            }
            if (vb_set(&vb, si, k, v) < 0) break;
        }
        lbl_free(l, nl);
    }
    val_free(c, &in);
    for (size_t a = 0; a < MAX_SCALARS; a++)
        val_free(c, &scalars[a]);
    out = vb_finish(&vb);
    return out;
}
