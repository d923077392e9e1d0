/* qinternal.h - the PromQL evaluator's internal types, shared by eval.c,
 * agg.c, labels.c and the function files (func_table.c lists them), and
 * the prototypes of every function implementation, declared once here.
 *
 * Every expression is evaluated over the whole step grid at once (an
 * instant query is a grid of one step): an instant vector is a set of
 * series with one optional value per step, so a range query selects from
 * the store once per selector instead of once per step. */
#ifndef MW_QINTERNAL_H
#define MW_QINTERNAL_H

#include "../core/buf.h"
#include "../store/histogram.h"
#include "promql.h"

#include <stdint.h>
#include <string.h>

/* A series of an instant vector over the grid: v[i] is valid when ok[i]. */
typedef struct sv {
    pq_label *labels;
    size_t nlabels;
    double *v;
    uint8_t *ok;
    uint8_t drop_name; /* delayed name removal: the name goes at the end */
} sv;

typedef struct val {
    pq_type type;
    double *scalar; /* PQ_T_SCALAR: one value per step */
    char *str;
    sv *s; /* PQ_T_VECTOR */
    size_t n;
    pq_series *ms; /* PQ_T_MATRIX: raw points (instant queries only) */
    size_t nms;
} val;

typedef struct qctx {
    mw_store *store;
    int64_t start, end, step; /* the grid of this (sub)evaluation */
    size_t nsteps;
    int64_t qstart, qend; /* the query's own start and end, for @ start()/end() */
    int64_t qstep;        /* the query's step (0: instant), for step() */
    pq_limits lim;
    int64_t deadline_ns;
    size_t samples; /* in memory now */
    size_t peak;
    size_t loaded;         /* samples read from the store, in all */
    size_t damaged_chunks; /* skipped by the store (bad checksum): a warning */
    /* Annotations raised so far: shared by a subquery's context and its
     * parent's (both point to the query's one list). */
    struct qannots *annots;
    /* The query's native histograms (nhist.c): shared like annots. */
    struct qhtab *ht;
    int code; /* PQ_ERR_* once failed */
    char *err;
    size_t errsize;
    /* Set by a range function for the range selector it evaluates next:
     * that it may read downsampled data (docs/store.md), what it needs of
     * it (MW_SEL_*), and whether it answers exactly from it. */
    int ds_on, ds_what, ds_exact;
    /* Inside histogram_count, _sum or _avg (and no subquery, quantile or
     * fraction between): selectors give their histograms counter-reset
     * hints as Prometheus's HistogramStatsIterator does (nhist.c). */
    int hstats;
} qctx;

void qerr(qctx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Annotations (annot.c), as Prometheus's util/annotations raises them. */
typedef struct qannots {
    pq_annot *a;
    size_t n, cap;
} qannots;
/* A warning (info 0) or an info about the expression at pos; one with the
 * same text as an earlier one replaces it (Prometheus keeps the last). */
void q_annot(qctx *c, int info, int pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "quantile value should be between 0 and 1, got Q" when q is NaN or out of [0, 1]. */
void q_annot_quantile(qctx *c, double q, int pos);
/* The native-histogram warnings Prometheus words the same wherever they
 * arise (name: the metric name, "" when dropped). */
void q_warn_mixed_schemas(qctx *c, int pos, const char *name);
void q_warn_mixed_types(qctx *c, int pos, const char *name);
void q_warn_not_counter(qctx *c, int pos, const char *name);
void q_warn_not_gauge(qctx *c, int pos, const char *name);
/* histogram_quantile's input fixed for monotonicity at step time ts:
 * merged with the earlier ones of the same metric name. */
void q_annot_mono(qctx *c, const char *metric, int pos, int64_t ts, double min_bucket,
                  double max_bucket, double max_diff);
/* Hands the list to the result (pq_eval) or frees it. */
void q_annots_free(qannots *q);
/* The position Prometheus names for a function's or aggregation's argument:
 * inside parentheses (it removes them), and 0 for a subquery, whose
 * evaluated stand-in has no position there. */
int q_arg_pos(const pq_node *n);
/* 0, or -1 (and the context failed) when over the sample budget or time. */
int qcharge(qctx *c, size_t n);
void qrelease(qctx *c, size_t n);
/* 0, or -1 (and the context failed) when one selection holds more series
 * than the limit. */
int qcheck_series(qctx *c, size_t nseries);
int qcheck_time(qctx *c);

static inline int64_t qts(const qctx *c, size_t i)
{
    return c->start + (int64_t)i * c->step;
}

/* Labels: sorted by name, strings owned. */
pq_label *lbl_copy(const pq_label *l, size_t n);
pq_label *lbl_from_store(const mw_label *l, size_t n);
void lbl_free(pq_label *l, size_t n);
const char *lbl_get(const pq_label *l, size_t n, const char *name);
/* Appends {a="b", c="d"} for messages, as Prometheus prints a label set;
 * name_outside: name{a="b"} (the metric name before the braces). */
void lbl_desc(mw_buf *b, const pq_label *l, size_t n, int name_outside);
/* Set (value "" deletes); keeps the order. */
void lbl_set(pq_label **l, size_t *n, const char *name, const char *value);
void lbl_del(pq_label **l, size_t *n, const char *name);
/* What an operation that changes the metric drops: __name__ and, with
 * it, Prometheus 3's __type__ and __unit__ (schema.IsMetadataLabel). */
void lbl_drop_metric_name(pq_label **l, size_t *n);
/* An operation that changes the metric: drops its name from l now and
 * returns 0, or with delayed name removal keeps it and returns 1, the
 * mark for the result series (its drop_name). */
static inline int q_drop_name(const qctx *c, pq_label **l, size_t *n)
{
    if (c->lim.delayed_name_removal) return 1;
    lbl_drop_metric_name(l, n);
    return 0;
}
/* The end of delayed name removal: marked series lose their names, and
 * series left with one label set merge (a range query's, when no step
 * has two values) or are an error. 0, or -1 (the context failed). */
int q_remove_names(qctx *c, val *v);
/* Keep only (keep=1) or drop (keep=0) the given names. */
void lbl_filter(pq_label **l, size_t *n, char *const *names, size_t nnames, int keep);
/* 1 when s is a label name: non-empty UTF-8, as Prometheus 3. */
int lbl_name_valid(const char *s);
/* 1 when s needs no quotes in PromQL: Prometheus 2's rule. */
int lbl_name_legacy(const char *s);
int lbl_cmp(const pq_label *a, size_t na, const pq_label *b, size_t nb);
/* A key for hashing: name\xffvalue\xff... of all labels, or of the given
 * names (on=1) or all but them and __name__ (on=0); into buf. */
void lbl_key(const pq_label *l, size_t n, char *const *names, size_t nnames, int on, int use_names,
             mw_buf *buf);

/* Duration expressions (durations.c): 1 when d reads neither step() nor
 * range(); its value in milliseconds for this query's step and range (0,
 * or -1 with the error: NaN, division by zero, not positive unless
 * allow_negative, out of range); Prometheus's text of it; free. */
int pq_dur_is_const(const pq_dur *d);
int pq_dur_eval(const pq_dur *d, int64_t step_ms, int64_t range_ms, int allow_negative,
                int64_t *out_ms, char *err, size_t errsize);
void pq_dur_format(mw_buf *b, const pq_dur *d);
void pq_dur_free(pq_dur *d);
/* A selector's or subquery's offset, range and step for this query: the
 * folded value, or its expression resolved (pq_eval has checked it). */
int64_t q_offset(const qctx *c, const pq_node *n);
int64_t q_range(const qctx *c, const pq_node *n);
int64_t q_step(const qctx *c, const pq_node *n);

/* Go's math.Pi (M_PI is not C11). */
#define PQ_PI 3.14159265358979323846264338327950288419716939937510582097494459

/* String -> index map. */
typedef struct smap {
    char **keys;
    size_t *vals;
    size_t cap, n;
} smap;
void smap_init(smap *m);
void smap_free(smap *m);
/* Index of key, or (size_t)-1. */
size_t smap_get(const smap *m, const char *key);
void smap_put(smap *m, const char *key, size_t v);

/* Builds an instant vector over the grid, merging series with the same
 * labels; two values for one label set at one step are an error. */
typedef struct vbuild {
    qctx *c;
    smap idx;
    sv *s;
    size_t n, cap;
    mw_buf key;
} vbuild;
void vb_init(vbuild *b, qctx *c);
/* Takes ownership of labels. Returns 0, or -1 on a collision (the context
 * failed with "vector cannot contain metrics with the same labelset"). */
int vb_add(vbuild *b, pq_label *labels, size_t nlabels, size_t step, double v);
/* Index of the series with these labels (created without values). */
size_t vb_series(vbuild *b, pq_label *labels, size_t nlabels);
/* The same for a series marked for delayed name removal (drop_name): it
 * stays apart from an unmarked one with the same labels. */
size_t vb_series_dn(vbuild *b, pq_label *labels, size_t nlabels, int drop_name);
/* Labels that point into a store selection's strings instead of copies:
 * lbl_shared_new takes them over from r (before mw_select_result_free),
 * lbl_share makes a label set of them, lbl_shared_drop gives up the
 * creator's hold; the strings go with the last label. */
void *lbl_shared_new(mw_select_result *r);
pq_label *lbl_share(const mw_label *l, size_t n, void *shared);
void lbl_shared_drop(void *shared);
/* A new series, without the lookup: for label sets known to be distinct
 * from every other of this builder (vb_series must not follow). */
size_t vb_append(vbuild *b, pq_label *labels, size_t nlabels);
/* Set a value of series si; -1 on a collision, as vb_add. */
int vb_set(vbuild *b, size_t si, size_t step, double v);
/* The vector built (the series move into it), and the builder freed. */
val vb_finish(vbuild *b);
void vb_free(vbuild *b); /* without a result: on a failure */

sv *sv_new(qctx *c, val *out, pq_label *labels, size_t nlabels);
void val_free(qctx *c, val *v);
/* The staleness marker's NaN (inline: checked per sample). */
static inline int is_stale(double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof(b));
    return b == 0x7ff0000000000002ULL;
}

val eval_node(qctx *c, const pq_node *n);
/* The store's series for selector vs between mint and maxt, charged to the
 * query's budgets (the namespace scope applied); 0, or -1 (failed). */
int q_store_select(qctx *c, const pq_node *vs, int64_t mint, int64_t maxt, mw_select_result *r);
/* The time selector or subquery n reads at step i: @ fixes it, offset
 * moves it back. */
int64_t q_ref_time(const qctx *c, const pq_node *n, size_t i);
/* The text of a string argument: a literal in any number of parentheses,
 * the only string expressions the parser makes. Functions read their
 * string arguments through it (a parenthesised one has no str itself). */
const char *string_arg(const pq_node *n);
/* eval_node, or an empty value when the context has already failed. */
val eval_unless_failed(qctx *c, const pq_node *n);
val eval_agg(qctx *c, const pq_node *n);
/* Range-vector argument of a function: the points of each series and the
 * window of each step ([wstart[i], wend[i]] inclusive, as Prometheus 2.x). */
typedef struct rangearg {
    pq_series *s;
    size_t n;
    double **w;             /* per series: the weight of each sample (downsampled data), or NULL */
    int64_t *wstart, *wend; /* per step: (wstart, wend], or [wstart, wend] when closed */
    int64_t range_ms;
    int closed;   /* pq_limits.closed_windows */
    int extended; /* the selector's PQ_EXT_*: its points reach a lookback beyond */
    int64_t lookback_ms;
} rangearg;
/* 1 when a sample at time t lies after a window's (or lookback's) start. */
static inline int q_after_start(const qctx *c, int64_t t, int64_t start)
{
    return c->lim.closed_windows ? t >= start : t > start;
}
int eval_range_arg(qctx *c, const pq_node *n, rangearg *out);
void rangearg_free(qctx *c, rangearg *r);
double quantile_of(double q, double *vals, size_t n); /* sorts vals */
/* absent(), absent_over_time(): the labels of their answer, from the
 * equality matchers of a plain selector argument (funcs_misc.c). */
pq_label *absent_labels(const pq_node *arg, size_t *nl);

/* PromQL functions. Each is one row of func_table.c: its name, the
 * signature the parser checks, and its implementation, which eval_call
 * calls. Functions of one family share an implementation (call) and
 * differ in the operation their row names (unary or math, window). */

/* Evaluates the call n (n->func is its row). */
typedef val pq_call_fn(qctx *c, const pq_node *n);
/* An element-wise operation on one value: a libm function, sgn, a date
 * part. */
typedef double pq_unary_fn(double x);
/* An element-wise operation on x with the call's scalar arguments at this
 * step (narg of them: an optional one may be missing). 0 drops the sample
 * from the result. */
typedef int pq_math_fn(double x, const double *arg, size_t narg, double *out);
/* What rate, increase and delta keep from one window to the next. */
typedef struct pq_extrap_cache pq_extrap_cache;
pq_extrap_cache *pq_extrap_cache_new(int64_t range_ms); /* free() it */
/* The samples of one series in one step's window, for a range function
 * (never empty: an empty window has no value). */
typedef struct pq_window {
    const int64_t *t;
    const double *v;
    size_t n;
    int64_t start, end; /* the window, [start, end] */
    int64_t ts;         /* the evaluation time of this step */
    double param;       /* the call's scalar argument at this step, or 0 */
    double param2;      /* its second one (double_exponential_smoothing), or 0 */
    int counter_resets; /* PQ_FN_COUNTER: the series drops somewhere */
    const double *w;    /* raw samples each sample stands for (downsampled), or NULL */
    pq_extrap_cache *xc;
} pq_window;
/* 1 with the window's value in *out, or 0 for no value at this step. */
typedef int pq_window_fn(const pq_window *w, double *out);

enum {
    PQ_FN_COUNTER = 1,   /* a counter: reset corrections (rate, increase) */
    PQ_FN_KEEP_NAME = 2, /* the result keeps __name__ (last_over_time) */
    PQ_FN_FACTORS = 4,   /* both scalar arguments in (0, 1) (smoothing factors) */
};

struct pq_func {
    const char *name;
    pq_type args[5]; /* the required arguments' types, then the optional
                      * ones' (one type, however many: args[nargs]) */
    int nargs;       /* required arguments */
    int variadic;    /* optional arguments after them: how many (-1 = any) */
    pq_type ret;
    pq_call_fn *call;
    pq_unary_fn *unary;   /* for call pq_call_math: its operation, this... */
    pq_math_fn *math;     /* ...or this, with the scalar arguments */
    pq_window_fn *window; /* for call pq_call_range and pq_call_absent_over_time */
    unsigned flags;       /* PQ_FN_* */
};

/* func_table.c: the one dispatch (n->func->call), and row i of the table
 * (NULL past its end) for the test that checks every row. */
val eval_call(qctx *c, const pq_node *n);
const pq_func *pq_func_at(size_t i);

/* funcs_range.c: range-vector functions, one window operation per row. */
pq_call_fn pq_call_range, pq_call_absent_over_time;
pq_window_fn pq_window_rate, pq_window_increase, pq_window_delta, pq_window_irate, pq_window_idelta,
    pq_window_deriv, pq_window_predict_linear, pq_window_resets, pq_window_changes, pq_window_count,
    pq_window_present, pq_window_last, pq_window_sum, pq_window_avg, pq_window_min, pq_window_max,
    pq_window_stddev, pq_window_stdvar, pq_window_quantile, pq_window_smoothing, pq_window_first,
    pq_window_ts_of_first, pq_window_ts_of_last, pq_window_ts_of_max, pq_window_ts_of_min,
    pq_window_mad;
/* Kahan-Neumaier summation: adds x to *sum, the lost low part to *comp
 * (Prometheus's kahansum.Inc; the result is *sum + *comp unless infinite). */
void pq_kahan_inc(double x, double *sum, double *comp);

/* funcs_math.c: element-wise functions, one operation per row (abs, ln...
 * are libm's own); the date functions, whose one argument is optional,
 * default to vector(time()). */
pq_call_fn pq_call_math;
pq_unary_fn pq_math_sgn, pq_math_deg, pq_math_rad, pq_date_day_of_month, pq_date_day_of_week,
    pq_date_day_of_year, pq_date_days_in_month, pq_date_hour, pq_date_minute, pq_date_month,
    pq_date_year;
pq_math_fn pq_math_clamp, pq_math_clamp_min, pq_math_clamp_max, pq_math_round;

/* funcs_label.c */
pq_call_fn pq_call_label_replace, pq_call_label_join;

/* extended.c: Prometheus 3's anchored and smoothed modifiers. 0 when the
 * call (a range function) takes the selector's modifier, else -1 with
 * Prometheus's error. */
int q_extended_check(qctx *c, const pq_node *call, const pq_node *sel);
/* The value of range function fn over w, whose points reach up to a
 * lookback before w's start (and after its end when smoothed). */
int q_extended_window(pq_window_fn *fn, int extended, const pq_window *w, double *out);
/* The same over series s's points [lo, hi) (a lookback beyond the window
 * (ws, we]) when the range argument holds native histograms: their
 * rate/increase/delta, changes and resets of both kinds; a mix of floats
 * and histograms gives none (with a warning). */
int q_hist_extended_window(qctx *c, const pq_node *call, const pq_series *s, size_t lo, size_t hi,
                           int64_t ws, int64_t we, int extended, double *out);
/* A smoothed instant selector's vector from its selection r. */
val q_eval_smoothed_vsel(qctx *c, const pq_node *n, const mw_select_result *r, void *shared);
/* A raw range vector of an anchored or smoothed selector: the points
 * inside (mint, maxt) between one at mint and one at maxt. */
void q_extend_points(pq_series *s, int64_t mint, int64_t maxt, int smoothed);

/* funcs_info.c: Prometheus 3's info(). */
pq_call_fn pq_call_info;

/* nhist.c: native histograms in the evaluator. A histogram value is a NaN
 * that indexes the query's table; q_hist_get gives it (NULL for a float). */
typedef struct qhtab {
    mw_histogram *h;
    size_t n, cap;
} qhtab;
void q_hist_table_free(qhtab *t);
double q_hist_put(qctx *c, mw_histogram *h); /* takes h over */
const mw_histogram *q_hist_get(const qctx *c, double v);
/* The store's references among n values made the query's own. */
void q_hist_import(qctx *c, double *v, size_t n);
int q_hist_any(const qctx *c, const val *v);
double q_hist_bound(int32_t idx, const mw_histogram *h);
void q_hist_reduce(mw_histogram *h, int32_t schema);
/* out = a + sign * b: 0, Q_HIST_RECONCILED (custom bounds that differ,
 * out on the common ones) or Q_HIST_MIXED_SCHEMAS (exponential and
 * custom: no out). */
enum { Q_HIST_MIXED_SCHEMAS = -1, Q_HIST_RECONCILED = 1 };
int q_hist_add(const mw_histogram *a, const mw_histogram *b, double sign, mw_histogram *out);
void q_hist_scale(mw_histogram *h, double f);
int q_hist_equal(const mw_histogram *a, const mw_histogram *b);
int q_hist_detect_reset(const mw_histogram *cur, const mw_histogram *prev);
/* h </ x (below 1) or h >/ x into out (nhist_trim.c). */
void q_hist_trim(const mw_histogram *h, double x, int below, mw_histogram *out);
/* a op b with a histogram on either side: the value, *keep 1 (0: a
 * comparison that is false, -1: dropped, with Prometheus's annotation). */
double q_hist_arith(qctx *c, int pos, pq_binop op, double a, double b, int *keep);
/* Aggregations over vectors holding histograms: before (masks what the
 * float path must not see, computes sum/avg of histograms) and after. */
typedef struct q_hagg q_hagg;
q_hagg *q_hist_agg_pre(qctx *c, const pq_node *n, val *in, const size_t *grp, size_t ngroups);
void q_hist_agg_post(qctx *c, q_hagg *a, vbuild *b);
/* A range function over windows holding histograms (funcs_native_histogram.c). */
val q_hist_range_call(qctx *c, const pq_node *n, rangearg *ra, const val *param, size_t pi);
int q_hist_in_range(const rangearg *ra);
/* A histogram function's vector argument split as Prometheus's
 * resetHistograms splits it (funcs_histogram.c), for histogram_quantile(s)
 * and histogram_fraction alike: native histograms aside (hist, their
 * points taken out of in's ok); classic buckets grouped by their labels
 * without le (grp into groups, the first nclassic of groups.s; le parsed,
 * so two spellings of one bound are one bucket), a missing or bad le
 * ignored with Prometheus's warning; a native histogram and buckets under
 * the same labels at a step both left out there (mixed, per group and
 * step), with Prometheus's warning. pos is the vector argument's. */
typedef struct q_hsplit {
    uint8_t *hist; /* in->n * nsteps: series i's native histogram at step k answers */
    size_t *grp;   /* series i's classic group, or (size_t)-1 */
    double *le;    /* series i's bound */
    vbuild groups; /* the groups' labels (and, past nclassic, the histograms') */
    size_t nclassic;
    uint8_t *mixed; /* groups.n * nsteps: group g gives nothing at step k */
} q_hsplit;
void q_hist_split(qctx *c, val *in, int pos, q_hsplit *hs);
void q_hist_split_free(q_hsplit *hs);
/* histogram_quantile(s)' native part, one quantile (q per step): the
 * histograms hist marks (series i, step k at i * nsteps + k) into vb. */
void q_hist_quantile(qctx *c, const double *q, const char *label, const val *in,
                     const uint8_t *hist, vbuild *vb, int pos);
/* The output series of a histogram_quantile(s) result for series s: its
 * labels without the name, and with label (unless NULL) set to q as
 * Prometheus writes it (FormatOpenMetricsFloat). */
size_t q_quantile_series(qctx *c, vbuild *vb, const sv *s, const char *label, double q);

/* h as Prometheus's FloatHistogram.String writes it (histogram_fmt.c):
 * "{count:C, sum:S, [lo,hi):n, ...}", its non-empty buckets in order. */
void q_hist_string(mw_buf *b, const mw_histogram *h);

/* nhsum.c: compensated sums of histograms (Prometheus 3's KahanAdd) and
 * the reconciliation of custom bounds that differ. same_bounds: 1 when
 * a's and b's custom bounds are the same; common_bounds: those both have,
 * into out (room for a's); map_bucket: where bucket idx of h goes among
 * nb such bounds (nb: the +Inf bucket); reconcile_add: a += sign * b on
 * their common bounds. */
int q_hist_same_bounds(const mw_histogram *a, const mw_histogram *b);
size_t q_hist_common_bounds(const mw_histogram *a, const mw_histogram *b, double *out);
size_t q_hist_map_bucket(const mw_histogram *h, int32_t idx, const double *bounds, size_t nb);
void q_hist_reconcile_add(mw_histogram *a, const mw_histogram *b, double sign);
/* A running sum h with its compensation c (c has h's layout). add: 0, or
 * Q_HIST_MIXED_SCHEMAS (exponential and custom: s is left as it was);
 * *reconciled set when custom bounds had to be reconciled. result: h + c
 * into out (s is spent). */
typedef struct q_hsum {
    mw_histogram h, c;
} q_hsum;
void q_hsum_start(q_hsum *s, const mw_histogram *first);
int q_hsum_add(q_hsum *s, const mw_histogram *o, int *reconciled);
void q_hsum_copy(q_hsum *dst, const q_hsum *src);
void q_hsum_scale(q_hsum *s, double f);
void q_hsum_div(q_hsum *s, double d);
int q_hsum_overflow(const q_hsum *s);
void q_hsum_result(q_hsum *s, mw_histogram *out);
void q_hsum_free(q_hsum *s);
/* A running mean over n histograms: the compensated sum while no field of
 * it overflows, then a compensated incremental mean (as Prometheus 3's
 * avg and avg_over_time). */
typedef struct q_havg {
    q_hsum s;
    double n;
    int incremental;
} q_havg;
void q_havg_start(q_havg *a, const mw_histogram *first);
int q_havg_add(q_havg *a, const mw_histogram *o, int *reconciled);
void q_havg_result(q_havg *a, mw_histogram *out);
void q_havg_free(q_havg *a);
/* The counter-reset hints seen among histograms added up: both a reset
 * and a non-reset give Prometheus's collision warning. */
enum { Q_HINT_SEEN_RESET = 1, Q_HINT_SEEN_NOT_RESET = 2 };
static inline int q_hint_seen(const mw_histogram *h)
{
    return h->hint == MW_HINT_YES  ? Q_HINT_SEEN_RESET
           : h->hint == MW_HINT_NO ? Q_HINT_SEEN_NOT_RESET
                                   : 0;
}

/* funcs_native_histogram.c */
pq_call_fn pq_call_histogram_count, pq_call_histogram_sum, pq_call_histogram_avg,
    pq_call_histogram_stddev, pq_call_histogram_stdvar, pq_call_histogram_fraction;

/* funcs_histogram.c */
pq_call_fn pq_call_histogram_quantile, pq_call_histogram_quantiles;

/* funcs_misc.c */
pq_call_fn pq_call_start, pq_call_end, pq_call_range_of_query, pq_call_step, pq_call_min_of,
    pq_call_max_of;
pq_call_fn pq_call_time, pq_call_pi, pq_call_vector, pq_call_scalar, pq_call_sort,
    pq_call_sort_desc, pq_call_sort_by_label, pq_call_sort_by_label_desc, pq_call_absent,
    pq_call_timestamp;

#endif
