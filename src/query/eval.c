/* eval.c - the PromQL evaluator: selectors (lookback and staleness as
 * Prometheus 2.x), subqueries, unary and binary operators with vector
 * matching, and the entry point pq_eval. Aggregations are in agg.c,
 * functions in the files func_table.c lists. */
#include "qinternal.h"

#include "../core/buf.h"
#include "../core/units.h"
#include "../core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pq_default_limits(pq_limits *l)
{
    l->max_samples = 20000000;
    l->timeout_ms = 120000;
    l->lookback_ms = 300000;
    l->closed_windows = 0;
    l->scope = NULL;
    l->max_series = 0;
    l->cancel = NULL;
}

static int64_t resolved(const qctx *c, const pq_dur *d, int64_t folded, int allow_negative)
{
    if (!d) return folded;
    int64_t ms = 0;
    char err[64];
    (void)pq_dur_eval(d, c->qstep, c->qend - c->qstart, allow_negative, &ms, err, sizeof(err));
    return ms;
}

int64_t q_offset(const qctx *c, const pq_node *n)
{
    return resolved(c, n->offset_dur, n->offset_ms, 1);
}

int64_t q_range(const qctx *c, const pq_node *n)
{
    return resolved(c, n->range_dur, n->range_ms, 0);
}

int64_t q_step(const qctx *c, const pq_node *n)
{
    return resolved(c, n->step_dur, n->step_ms, 0);
}

/* Before evaluating: every duration expression that reads step() or
 * range() must give a valid duration for this query (as Prometheus's
 * durationVisitor checks them); 0, or -1 with the context failed. */
static int check_durations(qctx *c, const pq_node *n)
{
    const pq_dur *d[3] = {n->offset_dur, n->range_dur, n->step_dur};
    for (int i = 0; i < 3; i++) {
        if (!d[i]) continue;
        int64_t ms;
        char err[128];
        if (pq_dur_eval(d[i], c->qstep, c->qend - c->qstart, i == 0, &ms, err, sizeof(err)) < 0) {
            qerr(c, PQ_ERR_BAD_DATA, "%s", err);
            return -1;
        }
    }
    for (size_t i = 0; i < n->nargs; i++)
        if (check_durations(c, n->args[i]) < 0) return -1;
    return 0;
}

int64_t q_ref_time(const qctx *c, const pq_node *n, size_t i)
{
    int64_t t = qts(c, i);
    if (n->has_at) t = n->at_kind == 1 ? c->qstart : n->at_kind == 2 ? c->qend : n->at_ms;
    return t - q_offset(c, n);
}

/* The selection, from downsampled data where the raw samples are gone
 * when hint is set (docs/store.md "Downsampling"); the answer then says so
 * (an info, or a warning for a function it does not answer exactly). */
static int store_select(qctx *c, const pq_node *vs, int64_t mint, int64_t maxt,
                        const mw_select_hint *hint, int exact, mw_select_result *r);

int q_store_select(qctx *c, const pq_node *vs, int64_t mint, int64_t maxt, mw_select_result *r)
{
    return store_select(c, vs, mint, maxt, NULL, 1, r);
}

static int store_select(qctx *c, const pq_node *vs, int64_t mint, int64_t maxt,
                        const mw_select_hint *hint, int exact, mw_select_result *r)
{
    if (!c->store) {
        memset(r, 0, sizeof(*r));
        return 0;
    }
    size_t budget = c->lim.max_samples
                        ? c->lim.max_samples -
                              (c->samples < c->lim.max_samples ? c->samples : c->lim.max_samples)
                        : 0;
    if (c->lim.max_samples && budget == 0) return qcharge(c, 1);
    char err[256];
    if (c->lim.closed_windows) hint = NULL; /* windows closed on the left: raw only */
    if (mw_store_select_hinted(c->store, c->lim.scope, vs->matchers, vs->nmatchers, mint, maxt,
                               budget, hint, r, err, sizeof(err)) < 0) {
        qerr(c, PQ_ERR_EXECUTION,
             "query processing would load too many samples into memory in query execution (%s)",
             err);
        return -1;
    }
    c->damaged_chunks += r->damaged_chunks;
    c->loaded += r->nsamples;
    if (r->resolution_ms) {
        char res[32];
        mw_format_duration(r->resolution_ms, res, sizeof(res));
        if (exact)
            q_annot(c, 1, q_arg_pos(vs),
                    "PromQL info: samples older than the raw retention were read from the %s "
                    "downsampled resolution",
                    res);
        else
            q_annot(c, 0, q_arg_pos(vs),
                    "PromQL warning: samples older than the raw retention were read from the %s "
                    "downsampled resolution, which this function does not answer exactly",
                    res);
    }
    if (qcheck_series(c, r->nseries) < 0 || qcharge(c, r->nsamples) < 0) {
        mw_select_result_free(r);
        return -1;
    }
    return 0;
}

static val eval_vsel(qctx *c, const pq_node *n)
{
    val out = {.type = PQ_T_VECTOR};
    int64_t lo = q_ref_time(c, n, 0), hi = q_ref_time(c, n, c->nsteps - 1);
    int smoothed = n->extended == PQ_EXT_SMOOTHED;
    mw_select_result r;
    /* A plain selector's value at a step is the last sample before it:
     * each downsampled window keeps its last one (smoothed ones read raw
     * samples only). */
    mw_select_hint hint = {c->step ? c->step : c->lim.lookback_ms, MW_SEL_SAMPLES};
    if (store_select(c, n, lo - c->lim.lookback_ms, hi + (smoothed ? c->lim.lookback_ms : 0),
                     smoothed ? NULL : &hint, 1, &r) < 0)
        return out;
    void *shared = lbl_shared_new(&r);
    if (smoothed) {
        out = q_eval_smoothed_vsel(c, n, &r, shared);
        qrelease(c, r.nsamples);
        mw_select_result_free(&r);
        lbl_shared_drop(shared);
        return out;
    }
    for (size_t si = 0; si < r.nseries && !c->code; si++) {
        const mw_series_data *d = &r.series[si];
        q_hist_import(c, d->v, d->n);
        sv *s = NULL;
        size_t k = 0; /* first sample after the reference time */
        for (size_t i = 0; i < c->nsteps; i++) {
            int64_t t = q_ref_time(c, n, i);
            if (n->has_at) k = 0;
            while (k < d->n && d->t[k] <= t)
                k++;
            if (k == 0) continue;
            size_t j = k - 1;
            if (!q_after_start(c, d->t[j], t - c->lim.lookback_ms) || is_stale(d->v[j])) continue;
            if (!s) {
                s = sv_new(c, &out, lbl_share(d->labels, d->nlabels, shared), d->nlabels);
                if (!s) break;
            }
            s->ok[i] = 1;
            s->v[i] = d->v[j];
        }
        if (qcheck_time(c) < 0) break;
    }
    qrelease(c, r.nsamples);
    mw_select_result_free(&r);
    lbl_shared_drop(shared);
    return out;
}

static int64_t *window_arrays(qctx *c, const pq_node *sel, int64_t range, int64_t **wend)
{
    int64_t *ws = mw_xcalloc(c->nsteps, sizeof(int64_t));
    *wend = mw_xcalloc(c->nsteps, sizeof(int64_t));
    for (size_t i = 0; i < c->nsteps; i++) {
        (*wend)[i] = q_ref_time(c, sel, i);
        ws[i] = (*wend)[i] - range;
    }
    return ws;
}

int eval_range_arg(qctx *c, const pq_node *n, rangearg *out)
{
    memset(out, 0, sizeof(*out));
    int ds_on = c->ds_on, ds_what = c->ds_what, ds_exact = c->ds_exact;
    c->ds_on = 0;               /* not for selectors inside a subquery */
    while (n->kind == PQ_PAREN) /* rate((x[5m])): the range inside */
        n = n->args[0];
    out->range_ms = q_range(c, n);
    out->closed = c->lim.closed_windows;
    if (n->kind == PQ_MSEL) {
        const pq_node *vs = n->args[0];
        out->wstart = window_arrays(c, vs, out->range_ms, &out->wend);
        /* anchored and smoothed read up to a lookback before the windows,
         * smoothed also after them. */
        out->extended = vs->extended;
        out->lookback_ms = c->lim.lookback_ms;
        int64_t before = vs->extended ? out->lookback_ms : 0;
        int64_t after = vs->extended == PQ_EXT_SMOOTHED ? out->lookback_ms : 0;
        mw_select_result r;
        /* The coarsest resolution that fits the window and the step
         * (anchored and smoothed windows read raw samples only). */
        int64_t want = out->range_ms;
        if (c->step && c->step < want) want = c->step;
        mw_select_hint hint = {want, ds_what};
        if (store_select(c, vs, out->wstart[0] - before, out->wend[c->nsteps - 1] + after,
                         ds_on && !vs->extended ? &hint : NULL, ds_exact, &r) < 0)
            return -1;
        out->s = mw_xcalloc(r.nseries ? r.nseries : 1, sizeof(pq_series));
        if (r.resolution_ms) out->w = mw_xcalloc(r.nseries ? r.nseries : 1, sizeof(double *));
        void *shared = lbl_shared_new(&r);
        for (size_t i = 0; i < r.nseries; i++) {
            mw_series_data *d = &r.series[i];
            pq_series *p = &out->s[out->n++];
            p->labels = lbl_share(d->labels, d->nlabels, shared);
            p->nlabels = d->nlabels;
            /* Take the selection's arrays over instead of copying them. */
            p->t = d->t;
            p->v = d->v;
            q_hist_import(c, p->v, d->n);
            d->t = NULL;
            d->v = NULL;
            double *w = d->w;
            d->w = NULL;
            if (out->w) out->w[i] = w;
            /* Range vectors skip stale markers: up to the first one
             * nothing moves. */
            size_t k = 0;
            while (k < d->n && !is_stale(p->v[k]))
                k++;
            p->n = k;
            for (; k < d->n; k++) {
                if (is_stale(p->v[k])) continue;
                p->t[p->n] = p->t[k];
                if (w) w[p->n] = w[k];
                p->v[p->n++] = p->v[k];
            }
            if (!out->w) free(w);
        }
        mw_select_result_free(&r);
        lbl_shared_drop(shared);
        return c->code ? -1 : 0;
    }
    /* Subquery: evaluate the inner expression on its own grid, aligned to
     * multiples of its step, from the first window's start to the last
     * window's end. */
    out->wstart = window_arrays(c, n, out->range_ms, &out->wend);
    int64_t step = q_step(c, n);
    if (!step) step = 60000;
    int64_t lo = out->wstart[0], hi = out->wend[c->nsteps - 1];
    int64_t first = step * (lo / step);
    if (!q_after_start(c, first, lo)) first += step;
    if (first > hi) return 0;
    qctx sub = *c;
    sub.hstats = 0; /* a subquery detects resets from whole histograms */
    sub.start = first;
    sub.end = hi;
    sub.step = step;
    sub.nsteps = (size_t)((hi - first) / step) + 1;
    if (sub.nsteps > 11000000 || (c->lim.max_samples && sub.nsteps > c->lim.max_samples)) {
        qerr(c, PQ_ERR_EXECUTION,
             "query processing would load too many samples into memory in query execution "
             "(a subquery of %zu steps)",
             sub.nsteps);
        return -1;
    }
    val v = eval_node(&sub, n->args[0]);
    c->samples = sub.samples;
    c->peak = sub.peak;
    c->loaded = sub.loaded;
    c->damaged_chunks = sub.damaged_chunks;
    if (sub.code) {
        c->code = sub.code;
        val_free(NULL, &v);
        return -1;
    }
    out->s = mw_xcalloc(v.n ? v.n : 1, sizeof(pq_series));
    for (size_t i = 0; i < v.n; i++) {
        pq_series *p = &out->s[out->n++];
        p->labels = v.s[i].labels;
        p->nlabels = v.s[i].nlabels;
        p->drop_name = v.s[i].drop_name;
        v.s[i].labels = NULL;
        v.s[i].nlabels = 0;
        p->t = mw_xmalloc(sub.nsteps * sizeof(int64_t));
        p->v = mw_xmalloc(sub.nsteps * sizeof(double));
        /* Histograms lose a reset or not-reset hint, as in Prometheus: the
         * subquery may skip the sample after a reset, or repeat the one
         * with it (each repeat would count it again). */
        uint64_t was = 0;
        double now = 0;
        for (size_t k = 0; k < sub.nsteps; k++)
            if (v.s[i].ok[k]) {
                double x = v.s[i].v[k];
                const mw_histogram *h = q_hist_get(c, x);
                if (h && (h->hint == MW_HINT_YES || h->hint == MW_HINT_NO)) {
                    if (mw_hist_bits(x) != was) {
                        mw_histogram u;
                        mw_hist_copy(&u, h);
                        u.hint = MW_HINT_UNKNOWN;
                        was = mw_hist_bits(x);
                        now = q_hist_put(c, &u);
                    }
                    x = now;
                }
                p->t[p->n] = qts(&sub, k);
                p->v[p->n++] = x;
            }
    }
    /* The points stay charged until rangearg_free; the grid is released. */
    val_free(&sub, &v);
    c->samples = sub.samples;
    for (size_t i = 0; i < out->n; i++)
        qcharge(c, out->s[i].n);
    return c->code ? -1 : 0;
}

void rangearg_free(qctx *c, rangearg *r)
{
    for (size_t i = 0; i < r->n; i++) {
        lbl_free(r->s[i].labels, r->s[i].nlabels);
        free(r->s[i].t);
        free(r->s[i].v);
        if (r->w) free(r->w[i]);
        qrelease(c, r->s[i].n);
    }
    free(r->w);
    free(r->s);
    free(r->wstart);
    free(r->wend);
    memset(r, 0, sizeof(*r));
}

static double arith(pq_binop op, double a, double b, int *keep)
{
    *keep = 1;
    switch (op) {
    case PQ_OP_ADD:
        return a + b;
    case PQ_OP_SUB:
        return a - b;
    case PQ_OP_MUL:
        return a * b;
    case PQ_OP_DIV:
        return a / b;
    case PQ_OP_MOD:
        return fmod(a, b);
    case PQ_OP_POW:
        return pow(a, b);
    case PQ_OP_ATAN2:
        return atan2(a, b);
    case PQ_OP_EQ:
        *keep = a == b;
        return a;
    case PQ_OP_NE:
        *keep = a != b;
        return a;
    case PQ_OP_GT:
        *keep = a > b;
        return a;
    case PQ_OP_LT:
        *keep = a < b;
        return a;
    case PQ_OP_GE:
        *keep = a >= b;
        return a;
    case PQ_OP_LE:
        *keep = a <= b;
        return a;
    default:
        return NAN;
    }
}

static int is_cmp(pq_binop op)
{
    return op >= PQ_OP_EQ && op <= PQ_OP_LE;
}

static int is_trim(pq_binop op)
{
    return op == PQ_OP_TRIM_UPPER || op == PQ_OP_TRIM_LOWER;
}

/* Whether the result keeps the metric name: comparisons (without bool)
 * and the trims, which change a histogram's range, not what it counts. */
static int keeps_name(const pq_node *n)
{
    pq_binop op = (pq_binop)n->op;
    return (is_cmp(op) && !n->return_bool) || is_trim(op);
}

/* arith, or nhist.c's when a side is a histogram (*keep -1: dropped);
 * the trims are nhist.c's whatever the sides (floats: dropped, an info). */
static double arith_h(qctx *c, const pq_node *n, pq_binop op, double a, double b, int *keep)
{
    if (mw_hist_is_ref(a) || mw_hist_is_ref(b) || is_trim(op))
        return q_hist_arith(c, q_arg_pos(n), op, a, b, keep);
    return arith(op, a, b, keep);
}

static val scalar_new(qctx *c)
{
    val v = {.type = PQ_T_SCALAR};
    qcharge(c, c->nsteps); /* released by val_free */
    v.scalar = mw_xcalloc(c->nsteps, sizeof(double));
    return v;
}

/* Vector op scalar (or scalar op vector when swap). */
static val vec_scalar(qctx *c, const pq_node *n, val *vec, val *sc, int swap)
{
    pq_binop op = (pq_binop)n->op;
    vbuild b;
    vb_init(&b, c);
    int drop = !keeps_name(n);
    for (size_t i = 0; i < vec->n && !c->code; i++) {
        sv *s = &vec->s[i];
        size_t si = (size_t)-1; /* labels do not depend on the step */
        for (size_t k = 0; k < c->nsteps; k++) {
            if (!s->ok[k]) continue;
            double l = s->v[k], r = sc->scalar[k];
            if (swap) {
                double t = l;
                l = r;
                r = t;
            }
            int keep;
            double v = arith_h(c, n, op, l, r, &keep);
            if (keep < 0) continue;
            if (is_cmp(op)) {
                if (n->return_bool) {
                    v = keep ? 1 : 0;
                    keep = 1;
                } else {
                    v = s->v[k]; /* the vector's value, whichever side */
                }
            }
            if (!keep) continue;
            if (si == (size_t)-1) {
                pq_label *lab = lbl_copy(s->labels, s->nlabels);
                size_t nl = s->nlabels;
                int dn = drop ? q_drop_name(c, &lab, &nl) : 0;
                si = vb_series_dn(&b, lab, nl, dn | s->drop_name);
                if (si == (size_t)-1) break;
            }
            if (vb_set(&b, si, k, v) < 0) break;
        }
    }
    val out;
    out = vb_finish(&b);
    return out;
}

/* Signature of a series for vector matching. */
static void sig(const pq_node *n, const sv *s, mw_buf *key)
{
    lbl_key(s->labels, s->nlabels, n->match_labels, n->nmatch_labels, n->on, 1, key);
}

static val set_op(qctx *c, const pq_node *n, val *l, val *r)
{
    pq_binop op = (pq_binop)n->op;
    mw_buf key;
    mw_buf_init(&key, 0);
    /* For each signature, on which steps the right side (and for `or` the
     * left side) has a value. */
    smap rsig;
    smap_init(&rsig);
    size_t nsig = 0;
    uint8_t **present = NULL;
    val *side = op == PQ_OP_OR ? l : r;
    for (size_t i = 0; i < side->n; i++) {
        sig(n, &side->s[i], &key);
        size_t j = smap_get(&rsig, key.data);
        if (j == (size_t)-1) {
            j = nsig++;
            smap_put(&rsig, key.data, j);
            present = mw_xrealloc(present, nsig * sizeof(*present));
            present[j] = mw_xcalloc(c->nsteps, 1);
        }
        for (size_t k = 0; k < c->nsteps; k++)
            present[j][k] |= side->s[i].ok[k];
    }
    vbuild b;
    vb_init(&b, c);
    val *other = op == PQ_OP_OR ? r : l;
    if (op == PQ_OP_OR) { /* all of the left side */
        for (size_t i = 0; i < l->n && !c->code; i++) {
            size_t si = vb_series_dn(&b, lbl_copy(l->s[i].labels, l->s[i].nlabels), l->s[i].nlabels,
                                     l->s[i].drop_name);
            if (si == (size_t)-1) break;
            for (size_t k = 0; k < c->nsteps; k++)
                if (l->s[i].ok[k]) {
                    b.s[si].ok[k] = 1;
                    b.s[si].v[k] = l->s[i].v[k];
                }
        }
    }
    for (size_t i = 0; i < other->n && !c->code; i++) {
        sig(n, &other->s[i], &key);
        size_t j = smap_get(&rsig, key.data);
        size_t si = (size_t)-1;
        for (size_t k = 0; k < c->nsteps; k++) {
            if (!other->s[i].ok[k]) continue;
            int matched = j != (size_t)-1 && present[j][k];
            int take = op == PQ_OP_AND ? matched : !matched;
            if (!take) continue;
            if (si == (size_t)-1) {
                si = vb_series_dn(&b, lbl_copy(other->s[i].labels, other->s[i].nlabels),
                                  other->s[i].nlabels, other->s[i].drop_name);
                if (si == (size_t)-1) break;
            }
            if (b.s[si].ok[k]) continue; /* `or`: the left side wins */
            b.s[si].ok[k] = 1;
            b.s[si].v[k] = other->s[i].v[k];
        }
    }
    for (size_t j = 0; j < nsig; j++)
        free(present[j]);
    free(present);
    smap_free(&rsig);
    mw_buf_free(&key);
    val out;
    out = vb_finish(&b);
    /* Drop series left without any value. */
    size_t o = 0;
    for (size_t i = 0; i < out.n; i++) {
        int any = 0;
        for (size_t k = 0; k < c->nsteps && !any; k++)
            any = out.s[i].ok[k];
        if (any) {
            out.s[o++] = out.s[i];
        } else {
            lbl_free(out.s[i].labels, out.s[i].nlabels);
            free(out.s[i].v); /* and ok */
            qrelease(c, c->nsteps);
        }
    }
    out.n = o;
    return out;
}

static void sig_desc(const pq_node *n, const sv *s, char *buf, size_t size)
{
    size_t o = 0;
    o += (size_t)snprintf(buf + o, size - o, "{");
    for (size_t i = 0; i < s->nlabels && o < size; i++) {
        int listed = 0;
        for (size_t j = 0; j < n->nmatch_labels; j++)
            if (!strcmp(n->match_labels[j], s->labels[i].name)) listed = 1;
        if (n->on ? !listed : (listed || !strcmp(s->labels[i].name, "__name__"))) continue;
        o += (size_t)snprintf(buf + o, size - o, "%s%s=\"%s\"", o > 1 ? ", " : "",
                              s->labels[i].name, s->labels[i].value);
    }
    if (o < size) snprintf(buf + o, size - o, "}");
}

/* The series a fill modifier stands in for a missing side: the match
 * group's labels (on's, or all but ignoring's and the name), as
 * Prometheus's Labels.MatchLabels. */
static sv fill_series(const pq_node *n, const sv *present)
{
    sv f = {0};
    f.labels = lbl_copy(present->labels, present->nlabels);
    f.nlabels = present->nlabels;
    lbl_filter(&f.labels, &f.nlabels, n->match_labels, n->nmatch_labels, n->on);
    if (!n->on) lbl_del(&f.labels, &f.nlabels, "__name__");
    return f;
}

/* What vec_vec's results share: the builder and the label cache. */
typedef struct vv_out {
    qctx *c;
    const pq_node *n;
    vbuild b;
    int drop;          /* the metric name goes */
    const sv *last_os; /* result labels depend on (ms, os) only */
    size_t last_si;
} vv_out;

/* The result of many-side ms and one-side os at step k, lv op rv. 0, or -1
 * (the context failed). */
static int vv_put(vv_out *o, const sv *ms, const sv *os, double lv, double rv, size_t k)
{
    const pq_node *n = o->n;
    pq_binop op = (pq_binop)n->op;
    int keep;
    double v = arith_h(o->c, n, op, lv, rv, &keep);
    if (keep < 0) return 0;
    if (is_cmp(op) && n->return_bool) {
        v = keep ? 1 : 0;
        keep = 1;
    }
    if (!keep) return 0;
    size_t si = o->last_si;
    if (os != o->last_os) {
        pq_label *lab = lbl_copy(ms->labels, ms->nlabels);
        size_t nl = ms->nlabels;
        int dn = o->drop ? q_drop_name(o->c, &lab, &nl) : 0;
        if (n->card == PQ_CARD_ONE_ONE && n->has_matching)
            lbl_filter(&lab, &nl, n->match_labels, n->nmatch_labels, n->on);
        for (size_t x = 0; x < n->ninclude_labels; x++)
            lbl_set(&lab, &nl, n->include_labels[x],
                    lbl_get(os->labels, os->nlabels, n->include_labels[x]));
        si = vb_series_dn(&o->b, lab, nl, dn | ms->drop_name);
        if (si == (size_t)-1) return -1;
        o->last_os = os;
        o->last_si = si;
    }
    if (o->b.s[si].ok[k]) {
        qerr(o->c, PQ_ERR_EXECUTION,
             n->card == PQ_CARD_ONE_ONE
                 ? "multiple matches for labels: many-to-one matching must be explicit "
                   "(group_left/group_right)"
                 : "multiple matches for labels: grouping labels must ensure unique matches");
        return -1;
    }
    o->b.s[si].ok[k] = 1;
    o->b.s[si].v[k] = v;
    return 0;
}

static val vec_vec(qctx *c, const pq_node *n, val *l, val *r)
{
    pq_binop op = (pq_binop)n->op;
    if (op >= PQ_OP_AND) return set_op(c, n, l, r);
    /* The "one" side is indexed by signature; the "many" side looks up. */
    int swap = n->card == PQ_CARD_ONE_MANY;
    val *many = swap ? r : l, *one = swap ? l : r;
    /* Fill values as Prometheus applies them after its one-to-many swap:
     * fill_right stands in for the "one" side, fill_left for the "many"
     * side (so with group_right, fill_left fills the right-hand side). */
    int fill_one = (n->fill & PQ_FILL_RIGHT) != 0, fill_many = (n->fill & PQ_FILL_LEFT) != 0;
    mw_buf key;
    mw_buf_init(&key, 0);
    smap idx;
    smap_init(&idx);
    size_t ngroups = 0;
    size_t **members = NULL, *nmembers = NULL;
    size_t *group_of = mw_xcalloc(one->n ? one->n : 1, sizeof(size_t));
    for (size_t i = 0; i < one->n; i++) {
        sig(n, &one->s[i], &key);
        size_t j = smap_get(&idx, key.data);
        if (j == (size_t)-1) {
            j = ngroups++;
            smap_put(&idx, key.data, j);
            members = mw_xrealloc(members, ngroups * sizeof(*members));
            nmembers = mw_xrealloc(nmembers, ngroups * sizeof(*nmembers));
            members[j] = NULL;
            nmembers[j] = 0;
        }
        members[j] = mw_xrealloc(members[j], (nmembers[j] + 1) * sizeof(size_t));
        members[j][nmembers[j]++] = i;
        group_of[i] = j;
    }
    /* For one-to-one: which "many" series already matched a group at a step. */
    size_t **used = mw_xcalloc(ngroups ? ngroups : 1, sizeof(size_t *));
    /* With fill_left: which groups a "many" series met at a step. */
    uint8_t **met = fill_many ? mw_xcalloc(ngroups ? ngroups : 1, sizeof(uint8_t *)) : NULL;
    vv_out o = {.c = c, .n = n, .drop = !keeps_name(n)};
    vb_init(&o.b, c);
    char desc[512];
    for (size_t i = 0; i < many->n && !c->code; i++) {
        sv *ms = &many->s[i];
        sv filled = {0}; /* the "one" side fill_right stands in for */
        int have_filled = 0;
        o.last_os = NULL;
        sig(n, ms, &key);
        size_t g = smap_get(&idx, key.data);
        if (g == (size_t)-1 && !fill_one) continue;
        for (size_t k = 0; k < c->nsteps && !c->code; k++) {
            if (!ms->ok[k]) continue;
            sv *os = NULL;
            for (size_t m = 0; g != (size_t)-1 && m < nmembers[g]; m++) {
                sv *cand = &one->s[members[g][m]];
                if (!cand->ok[k]) continue;
                if (os) {
                    mw_buf pair;
                    mw_buf_init(&pair, 1024);
                    sig_desc(n, cand, desc, sizeof(desc));
                    lbl_desc(&pair, os->labels, os->nlabels, 0);
                    mw_buf_append(&pair, ", ", 2);
                    lbl_desc(&pair, cand->labels, cand->nlabels, 0);
                    qerr(c, PQ_ERR_EXECUTION,
                         "found duplicate series for the match group %s on the %s hand-side of "
                         "the operation: [%s];many-to-many matching not allowed: matching "
                         "labels must be unique on one side",
                         desc, swap ? "left" : "right", pair.data ? pair.data : "");
                    mw_buf_free(&pair);
                    break;
                }
                os = cand;
            }
            if (c->code) continue;
            double ov;
            if (os) {
                ov = os->v[k];
            } else {
                if (!fill_one) continue;
                if (!have_filled) filled = fill_series(n, ms), have_filled = 1;
                os = &filled;
                ov = n->fill_right;
            }
            if (n->card == PQ_CARD_ONE_ONE && g != (size_t)-1) {
                if (!used[g]) used[g] = mw_xcalloc(c->nsteps, sizeof(size_t));
                if (used[g][k]) {
                    qerr(c, PQ_ERR_EXECUTION,
                         "multiple matches for labels: many-to-one matching must be explicit "
                         "(group_left/group_right)");
                    break;
                }
                used[g][k] = i + 1;
            }
            if (met && g != (size_t)-1) {
                if (!met[g]) met[g] = mw_xcalloc(c->nsteps, 1);
                met[g][k] = 1;
            }
            double lv = swap ? ov : ms->v[k], rv = swap ? ms->v[k] : ov;
            if (vv_put(&o, ms, os, lv, rv, k) < 0) break;
        }
        lbl_free(filled.labels, filled.nlabels);
    }
    /* fill_left: a "one" series no "many" series met at a step meets the
     * fill value instead, under its match group's labels. */
    for (size_t i = 0; met && i < one->n && !c->code; i++) {
        sv *os = &one->s[i];
        size_t g = group_of[i];
        sv filled = {0};
        int have_filled = 0;
        o.last_os = NULL;
        for (size_t k = 0; k < c->nsteps && !c->code; k++) {
            if (!os->ok[k] || (met[g] && met[g][k])) continue;
            if (!have_filled) filled = fill_series(n, os), have_filled = 1;
            double lv = swap ? os->v[k] : n->fill_left, rv = swap ? n->fill_left : os->v[k];
            if (vv_put(&o, &filled, os, lv, rv, k) < 0) break;
        }
        lbl_free(filled.labels, filled.nlabels);
    }
    for (size_t j = 0; j < ngroups; j++) {
        free(members[j]);
        free(used[j]);
        if (met) free(met[j]);
    }
    free(met);
    free(group_of);
    free(used);
    free(members);
    free(nmembers);
    smap_free(&idx);
    mw_buf_free(&key);
    return vb_finish(&o.b);
}

static val eval_binary(qctx *c, const pq_node *n)
{
    val l = eval_node(c, n->args[0]);
    val r = eval_unless_failed(c, n->args[1]);
    val out = {0};
    if (c->code) goto done;
    if (l.type == PQ_T_SCALAR && r.type == PQ_T_SCALAR && is_trim((pq_binop)n->op)) {
        /* Prometheus fails such a query at run time (its scalarBinop
         * knows no trim); there is no histogram in a scalar to trim. */
        qerr(c, PQ_ERR_EXECUTION, "operator \"%s\" not allowed for Scalar operations",
             n->op == PQ_OP_TRIM_UPPER ? "</" : ">/");
    } else if (l.type == PQ_T_SCALAR && r.type == PQ_T_SCALAR) {
        out = scalar_new(c);
        for (size_t k = 0; k < c->nsteps; k++) {
            int keep;
            double v = arith((pq_binop)n->op, l.scalar[k], r.scalar[k], &keep);
            out.scalar[k] = is_cmp((pq_binop)n->op) ? (keep ? 1 : 0) : v;
        }
    } else if (l.type == PQ_T_VECTOR && r.type == PQ_T_SCALAR) {
        out = vec_scalar(c, n, &l, &r, 0);
    } else if (l.type == PQ_T_SCALAR && r.type == PQ_T_VECTOR) {
        out = vec_scalar(c, n, &r, &l, 1);
    } else {
        out = vec_vec(c, n, &l, &r);
    }
done:
    val_free(c, &l);
    val_free(c, &r);
    return out;
}

static val eval_matrix_instant(qctx *c, const pq_node *n)
{
    val out = {.type = PQ_T_MATRIX};
    rangearg ra;
    if (eval_range_arg(c, n, &ra) < 0) {
        rangearg_free(c, &ra);
        return out;
    }
    out.ms = mw_xcalloc(ra.n ? ra.n : 1, sizeof(pq_series));
    for (size_t i = 0; i < ra.n; i++) {
        pq_series *s = &ra.s[i];
        size_t o = 0;
        if (ra.extended) {
            size_t had = s->n;
            q_extend_points(s, ra.wstart[0], ra.wend[0], ra.extended == PQ_EXT_SMOOTHED);
            if (s->n > had)
                qcharge(c, s->n - had);
            else
                qrelease(c, had - s->n);
            o = s->n;
            goto keep;
        }
        for (size_t k = 0; k < s->n; k++)
            if (q_after_start(c, s->t[k], ra.wstart[0]) && s->t[k] <= ra.wend[0]) {
                s->t[o] = s->t[k];
                s->v[o++] = s->v[k];
            }
        qrelease(c, s->n - o);
        s->n = o;
    keep:
        if (o == 0) {
            lbl_free(s->labels, s->nlabels);
            free(s->t);
            free(s->v);
            continue;
        }
        out.ms[out.nms++] = *s;
    }
    ra.n = 0;
    rangearg_free(c, &ra);
    return out;
}

/* Unary minus on a vector. As Prometheus 2.x, two series left with the
 * same labels are an error even when their steps do not overlap. */
static void negate(qctx *c, val *v)
{
    smap seen;
    mw_buf key;
    smap_init(&seen);
    mw_buf_init(&key, 0);
    for (size_t i = 0; i < v->n; i++) {
        v->s[i].drop_name |= (uint8_t)q_drop_name(c, &v->s[i].labels, &v->s[i].nlabels);
        for (size_t k = 0; k < c->nsteps; k++) {
            int keep; /* a native histogram: scaled by -1 (nhist.c) */
            v->s[i].v[k] = mw_hist_is_ref(v->s[i].v[k])
                               ? q_hist_arith(c, 0, PQ_OP_MUL, v->s[i].v[k], -1, &keep)
                               : -v->s[i].v[k];
        }
        lbl_key(v->s[i].labels, v->s[i].nlabels, NULL, 0, 0, 0, &key);
        if (smap_get(&seen, key.data) != (size_t)-1)
            qerr(c, PQ_ERR_EXECUTION, "vector cannot contain metrics with the same labelset");
        smap_put(&seen, key.data, i);
    }
    smap_free(&seen);
    mw_buf_free(&key);
}

const char *string_arg(const pq_node *n)
{
    while (n->kind == PQ_PAREN)
        n = n->args[0];
    return n->str;
}

val eval_node(qctx *c, const pq_node *n)
{
    val out = {0};
    if (qcheck_time(c) < 0) return out;
    switch (n->kind) {
    case PQ_NUM:
        out = scalar_new(c);
        for (size_t k = 0; k < c->nsteps; k++)
            out.scalar[k] = n->num;
        return out;
    case PQ_STR:
        out.type = PQ_T_STRING;
        out.str = mw_xstrdup(n->str);
        return out;
    case PQ_PAREN:
        return eval_node(c, n->args[0]);
    case PQ_VSEL:
        return eval_vsel(c, n);
    case PQ_MSEL:
    case PQ_SUBQ:
        return eval_matrix_instant(c, n);
    case PQ_UNARY:
        out = eval_node(c, n->args[0]);
        /* A failed operand comes back empty (a zeroed value reads as a
         * scalar without steps): nothing to negate. */
        if (c->code || n->op != '-') return out;
        if (out.type == PQ_T_SCALAR) {
            for (size_t k = 0; k < c->nsteps; k++)
                out.scalar[k] = -out.scalar[k];
            return out;
        }
        negate(c, &out);
        return out;
    case PQ_BINARY:
        return eval_binary(c, n);
    case PQ_AGG:
        return eval_agg(c, n);
    case PQ_CALL:
        return eval_call(c, n);
    }
    return out;
}

val eval_unless_failed(qctx *c, const pq_node *n)
{
    if (c->code) {
        val v = {0};
        return v;
    }
    return eval_node(c, n);
}

static int cmp_series(const void *a, const void *b)
{
    const pq_series *x = a, *y = b;
    return lbl_cmp(x->labels, x->nlabels, y->labels, y->nlabels);
}

int pq_eval(mw_store *store, const pq_node *expr, int64_t start, int64_t end, int64_t step,
            const pq_limits *lim, pq_result *out, char *err, size_t errsize)
{
    memset(out, 0, sizeof(*out));
    qctx c = {.store = store,
              .start = start,
              .end = end,
              .step = step ? step : 1,
              .qstart = start,
              .qend = end,
              .qstep = step,
              .lim = *lim,
              .err = err,
              .errsize = errsize};
    int range = step > 0;
    c.nsteps = range ? (size_t)((end - start) / step) + 1 : 1;
    if (lim->timeout_ms > 0) c.deadline_ns = mw_mono_ns() + lim->timeout_ms * 1000000;
    if (range && expr->type != PQ_T_SCALAR && expr->type != PQ_T_VECTOR) {
        snprintf(err, errsize,
                 "invalid expression type \"%s\" for range query, must be Scalar or instant Vector",
                 expr->type == PQ_T_STRING ? "string" : "range vector");
        return PQ_ERR_BAD_DATA;
    }
    if (check_durations(&c, expr) < 0) return c.code;
    qannots annots = {0};
    c.annots = &annots;
    qhtab ht = {0};
    c.ht = &ht;
    val v = eval_node(&c, expr);
    if (!c.code && v.type == PQ_T_VECTOR) q_remove_names(&c, &v);
    if (c.code) {
        val_free(NULL, &v);
        q_annots_free(&annots);
        q_hist_table_free(&ht);
        return c.code;
    }
    out->hists = ht.h;
    out->nhists = ht.n;
    out->annots = annots.a;
    out->nannots = annots.n;
    out->t = start;
    out->damaged_chunks = c.damaged_chunks;
    out->total_samples = c.loaded;
    out->peak_samples = c.peak;
    if (v.type == PQ_T_SCALAR && !range) {
        out->type = PQ_T_SCALAR;
        out->scalar = v.scalar[0];
    } else if (v.type == PQ_T_STRING) {
        out->type = PQ_T_STRING;
        out->str = v.str;
        v.str = NULL;
    } else if (v.type == PQ_T_MATRIX) {
        out->type = PQ_T_MATRIX;
        out->series = v.ms;
        out->nseries = v.nms;
        v.ms = NULL;
        v.nms = 0;
        for (size_t i = 0; i < out->nseries; i++)
            if (out->series[i].drop_name) {
                lbl_drop_metric_name(&out->series[i].labels, &out->series[i].nlabels);
                out->series[i].drop_name = 0;
            }
        qsort(out->series, out->nseries, sizeof(pq_series), cmp_series);
    } else {
        out->type = range ? PQ_T_MATRIX : PQ_T_VECTOR;
        size_t ns = v.type == PQ_T_SCALAR ? 1 : v.n;
        out->series = mw_xcalloc(ns ? ns : 1, sizeof(pq_series));
        for (size_t i = 0; i < ns; i++) {
            pq_series *p = &out->series[out->nseries];
            p->t = mw_xmalloc(c.nsteps * sizeof(int64_t));
            p->v = mw_xmalloc(c.nsteps * sizeof(double));
            for (size_t k = 0; k < c.nsteps; k++) {
                int ok = v.type == PQ_T_SCALAR ? 1 : v.s[i].ok[k];
                if (!ok) continue;
                p->t[p->n] = qts(&c, k);
                p->v[p->n++] = v.type == PQ_T_SCALAR ? v.scalar[k] : v.s[i].v[k];
            }
            if (p->n == 0) {
                free(p->t);
                free(p->v);
                continue;
            }
            if (v.type == PQ_T_VECTOR) {
                p->labels = v.s[i].labels;
                p->nlabels = v.s[i].nlabels;
                v.s[i].labels = NULL;
                v.s[i].nlabels = 0;
            } else {
                p->labels = mw_xcalloc(1, sizeof(pq_label));
            }
            out->nseries++;
        }
        if (range) qsort(out->series, out->nseries, sizeof(pq_series), cmp_series);
    }
    val_free(NULL, &v);
    return 0;
}

void pq_result_free(pq_result *r)
{
    for (size_t i = 0; i < r->nseries; i++) {
        lbl_free(r->series[i].labels, r->series[i].nlabels);
        free(r->series[i].t);
        free(r->series[i].v);
    }
    free(r->series);
    free(r->str);
    for (size_t i = 0; i < r->nannots; i++)
        free(r->annots[i].msg);
    free(r->annots);
    qhtab ht = {r->hists, r->nhists, r->nhists};
    q_hist_table_free(&ht);
    memset(r, 0, sizeof(*r));
}
