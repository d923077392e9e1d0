/* nhist.c - native histograms in the evaluator: the query's table of
 * histograms, their arithmetic (sum, difference, scaling, schema
 * reduction, counter-reset detection) and what binary operators and
 * aggregations do with them.
 *
 * A histogram value in an instant vector or a range argument is a NaN
 * whose payload is an index into the query's table (MW_HIST_QREF_TAG,
 * store/histogram.h): selectors import the store's references into it
 * (q_hist_import), operations add their results. The functions that read
 * or make histograms are in funcs_native_histogram.c. */
#include "qinternal.h"

#include "../core/util.h"

#include <math.h>
#include <stdlib.h>

void q_hist_table_free(qhtab *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->n; i++)
        mw_hist_free(&t->h[i]);
    free(t->h);
    memset(t, 0, sizeof(*t));
}

double q_hist_put(qctx *c, mw_histogram *h)
{
    qhtab *t = c->ht;
    if (!t) {
        mw_hist_free(h);
        return NAN;
    }
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 64;
        t->h = mw_xrealloc(t->h, t->cap * sizeof(mw_histogram));
    }
    t->h[t->n] = *h;
    memset(h, 0, sizeof(*h));
    return mw_hist_from_bits(MW_HIST_QREF_TAG | (uint64_t)t->n++);
}

const mw_histogram *q_hist_get(const qctx *c, double v)
{
    uint64_t b = mw_hist_bits(v);
    if ((b & MW_HIST_TAG_MASK) != MW_HIST_QREF_TAG || !c->ht) return NULL;
    uint64_t i = b & MW_HIST_PAYLOAD_MASK;
    return i < c->ht->n ? &c->ht->h[i] : NULL;
}

/* As Prometheus's HistogramStatsIterator: a histogram of unknown
 * counter-reset hint read after another one of its series gets the hint
 * its counter-reset detection gives (reset or not_reset). v: one series'
 * values in time order. */
static void stats_hints(qctx *c, const double *v, size_t n)
{
    const mw_histogram *prev = NULL;
    for (size_t i = 0; i < n; i++) {
        const mw_histogram *h = q_hist_get(c, v[i]);
        if (!h) continue;
        if (h->hint == MW_HINT_UNKNOWN && prev) {
            mw_histogram *m = &c->ht->h[h - c->ht->h]; /* the query's own copy */
            m->hint = q_hist_detect_reset(h, prev) ? MW_HINT_YES : MW_HINT_NO;
        }
        prev = h;
    }
}

void q_hist_import(qctx *c, double *v, size_t n)
{
    static const uint64_t stale = 0x7ff0000000000002ULL;
    for (size_t i = 0; i < n; i++) {
        if (!mw_hist_is_ref(v[i])) continue;
        mw_histogram h;
        if ((mw_hist_bits(v[i]) & MW_HIST_TAG_MASK) != MW_HIST_REF_TAG || !c->store ||
            mw_store_get_histogram(c->store, v[i], &h) < 0) {
            v[i] = mw_hist_from_bits(stale); /* unreadable: as if absent */
            continue;
        }
        if (qcharge(c, 1 + (h.npos + h.nneg) / 8) < 0) {
            mw_hist_free(&h);
            return;
        }
        v[i] = q_hist_put(c, &h);
    }
    if (c->hstats) stats_hints(c, v, n);
}

int q_hist_any(const qctx *c, const val *v)
{
    for (size_t i = 0; i < v->n; i++)
        for (size_t k = 0; v->s[i].v && k < c->nsteps; k++)
            if (v->s[i].ok[k] && mw_hist_is_ref(v->s[i].v[k])) return 1;
    return 0;
}

/* ---- bucket arithmetic ---- */

double q_hist_bound(int32_t idx, const mw_histogram *h)
{
    if (h->schema == MW_HIST_SCHEMA_CUSTOM) {
        if (idx < 0) return -INFINITY;
        if ((size_t)idx >= h->ncustom) return INFINITY;
        return h->custom[idx];
    }
    if (h->schema <= 0) {
        int64_t e = (int64_t)idx * ((int64_t)1 << (-h->schema));
        if (e >= 1024) return e == 1024 ? 1.7976931348623157e308 : INFINITY;
        if (e < -1100) return 0;
        return ldexp(1, (int)e);
    }
    int32_t frac_idx = idx & ((1 << h->schema) - 1);
    int64_t e = ((int64_t)idx >> h->schema) + 1;
    double frac = exp2((double)frac_idx / (double)(1 << h->schema)) / 2;
    if (frac == 0.5 && e == 1025) return 1.7976931348623157e308;
    if (e > 1100) return INFINITY;
    if (e < -1100) return 0;
    return ldexp(frac, (int)e);
}

/* Buckets (idx, c) at schema from, merged down to schema to (< from):
 * in place, n updated; the mapping keeps the order. */
static void reduce_side(int32_t *idx, double *c, size_t *n, int32_t from, int32_t to)
{
    int d = from - to;
    size_t o = 0;
    for (size_t i = 0; i < *n; i++) {
        int32_t t = (int32_t)((((int64_t)idx[i] - 1) >> d) + 1);
        if (o && idx[o - 1] == t) {
            c[o - 1] += c[i];
        } else {
            idx[o] = t;
            c[o++] = c[i];
        }
    }
    *n = o;
}

void q_hist_reduce(mw_histogram *h, int32_t schema)
{
    if (h->schema == MW_HIST_SCHEMA_CUSTOM || schema >= h->schema) return;
    reduce_side(h->pos_idx, h->pos, &h->npos, h->schema, schema);
    reduce_side(h->neg_idx, h->neg, &h->nneg, h->schema, schema);
    h->schema = schema;
}

/* Buckets entirely within a wider zero threshold go to the zero bucket. */
static void widen_zero(mw_histogram *h, double zt)
{
    if (h->schema == MW_HIST_SCHEMA_CUSTOM || zt <= h->zero_threshold) return;
    size_t o = 0;
    for (size_t i = 0; i < h->npos; i++) {
        if (q_hist_bound(h->pos_idx[i], h) <= zt) {
            h->zero_count += h->pos[i];
            continue;
        }
        h->pos_idx[o] = h->pos_idx[i];
        h->pos[o++] = h->pos[i];
    }
    h->npos = o;
    o = 0;
    for (size_t i = 0; i < h->nneg; i++) {
        if (q_hist_bound(h->neg_idx[i], h) <= zt) {
            h->zero_count += h->neg[i];
            continue;
        }
        h->neg_idx[o] = h->neg_idx[i];
        h->neg[o++] = h->neg[i];
    }
    h->nneg = o;
    h->zero_threshold = zt;
}

/* Merge sorted sides: out = a + sign * b. */
static size_t merge_side(const int32_t *ai, const double *ac, size_t an, const int32_t *bi,
                         const double *bc, size_t bn, double sign, int32_t *oi, double *oc)
{
    size_t i = 0, j = 0, o = 0;
    while (i < an || j < bn) {
        if (j >= bn || (i < an && ai[i] < bi[j])) {
            oi[o] = ai[i];
            oc[o++] = ac[i++];
        } else if (i >= an || bi[j] < ai[i]) {
            oi[o] = bi[j];
            oc[o++] = sign * bc[j++];
        } else {
            oi[o] = ai[i];
            oc[o++] = ac[i++] + sign * bc[j++];
        }
    }
    return o;
}

int q_hist_add(const mw_histogram *a0, const mw_histogram *b0, double sign, mw_histogram *out)
{
    int ca = a0->schema == MW_HIST_SCHEMA_CUSTOM, cb = b0->schema == MW_HIST_SCHEMA_CUSTOM;
    memset(out, 0, sizeof(*out));
    if (ca != cb) return Q_HIST_MIXED_SCHEMAS;
    if (ca && !q_hist_same_bounds(a0, b0)) {
        mw_hist_copy(out, a0);
        out->count += sign * b0->count;
        out->sum += sign * b0->sum;
        q_hist_reconcile_add(out, b0, sign);
        out->hint = MW_HINT_UNKNOWN;
        return Q_HIST_RECONCILED;
    }
    mw_histogram a, b;
    mw_hist_copy(&a, a0);
    mw_hist_copy(&b, b0);
    int32_t s = a.schema < b.schema ? a.schema : b.schema;
    q_hist_reduce(&a, s);
    q_hist_reduce(&b, s);
    double zt = a.zero_threshold > b.zero_threshold ? a.zero_threshold : b.zero_threshold;
    widen_zero(&a, zt);
    widen_zero(&b, zt);
    mw_histogram r = {.schema = s, .zero_threshold = zt, .hint = MW_HINT_UNKNOWN};
    mw_hist_alloc(&r, a.npos + b.npos, a.nneg + b.nneg, a.ncustom);
    r.npos = merge_side(a.pos_idx, a.pos, a.npos, b.pos_idx, b.pos, b.npos, sign, r.pos_idx, r.pos);
    r.nneg = merge_side(a.neg_idx, a.neg, a.nneg, b.neg_idx, b.neg, b.nneg, sign, r.neg_idx, r.neg);
    memcpy(r.custom, a.custom, a.ncustom * sizeof(double));
    r.count = a.count + sign * b.count;
    r.sum = a.sum + sign * b.sum;
    r.zero_count = a.zero_count + sign * b.zero_count;
    mw_hist_free(&a);
    mw_hist_free(&b);
    *out = r;
    return 0;
}

void q_hist_scale(mw_histogram *h, double f)
{
    h->count *= f;
    h->sum *= f;
    h->zero_count *= f;
    for (size_t i = 0; i < h->npos; i++)
        h->pos[i] *= f;
    for (size_t i = 0; i < h->nneg; i++)
        h->neg[i] *= f;
}

/* Equal as Prometheus's FloatHistogram.Equals after compaction: the same
 * layout and values, empty buckets ignored. */
static int side_equal(const int32_t *ai, const double *ac, size_t an, const int32_t *bi,
                      const double *bc, size_t bn)
{
    size_t i = 0, j = 0;
    for (;;) {
        while (i < an && ac[i] == 0)
            i++;
        while (j < bn && bc[j] == 0)
            j++;
        if (i >= an || j >= bn) return i >= an && j >= bn;
        if (ai[i] != bi[j] || ac[i] != bc[j]) return 0;
        i++;
        j++;
    }
}

int q_hist_equal(const mw_histogram *a, const mw_histogram *b)
{
    if (a->schema != b->schema || a->zero_threshold != b->zero_threshold) return 0;
    if (a->count != b->count || a->zero_count != b->zero_count) return 0;
    if (!(a->sum == b->sum || (isnan(a->sum) && isnan(b->sum)))) return 0;
    if (a->schema == MW_HIST_SCHEMA_CUSTOM && !q_hist_same_bounds(a, b)) return 0;
    return side_equal(a->pos_idx, a->pos, a->npos, b->pos_idx, b->pos, b->npos) &&
           side_equal(a->neg_idx, a->neg, a->nneg, b->neg_idx, b->neg, b->nneg);
}

/* A count of index i in a side, or -1 when absent. */
static double side_at(const int32_t *idx, const double *c, size_t n, int32_t i)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t m = (lo + hi) / 2;
        if (idx[m] < i)
            lo = m + 1;
        else
            hi = m;
    }
    return lo < n && idx[lo] == i ? c[lo] : -1;
}

/* Custom bounds that differ: a reset when a bucket on the bounds both
 * have holds less now than before. */
static int reset_on_common_bounds(const mw_histogram *cur, const mw_histogram *prev)
{
    double *bounds = mw_xmalloc((cur->ncustom + 1) * sizeof(double));
    size_t nb = q_hist_common_bounds(cur, prev, bounds);
    double *d = mw_xcalloc(nb + 1, sizeof(double));
    for (size_t i = 0; i < cur->npos; i++)
        d[q_hist_map_bucket(cur, cur->pos_idx[i], bounds, nb)] += cur->pos[i];
    for (size_t i = 0; i < prev->npos; i++)
        d[q_hist_map_bucket(prev, prev->pos_idx[i], bounds, nb)] -= prev->pos[i];
    int reset = 0;
    for (size_t i = 0; i <= nb && !reset; i++)
        reset = d[i] < 0;
    free(d);
    free(bounds);
    return reset;
}

int q_hist_detect_reset(const mw_histogram *cur, const mw_histogram *prev)
{
    if (cur->hint == MW_HINT_YES) return 1;
    if (cur->hint == MW_HINT_NO || cur->hint == MW_HINT_GAUGE) return 0;
    if (cur->count < prev->count) return 1;
    if ((cur->schema == MW_HIST_SCHEMA_CUSTOM) != (prev->schema == MW_HIST_SCHEMA_CUSTOM)) return 1;
    if (cur->schema == MW_HIST_SCHEMA_CUSTOM && !q_hist_same_bounds(cur, prev))
        return reset_on_common_bounds(cur, prev);
    if (cur->schema > prev->schema) return 1;
    if (cur->zero_threshold < prev->zero_threshold) return 1;
    if (cur->zero_threshold == prev->zero_threshold && cur->zero_count < prev->zero_count) return 1;
    mw_histogram p;
    mw_hist_copy(&p, prev);
    q_hist_reduce(&p, cur->schema);
    widen_zero(&p, cur->zero_threshold);
    int reset = cur->zero_count < p.zero_count;
    for (size_t i = 0; i < p.npos && !reset; i++)
        if (p.pos[i] > 0 && side_at(cur->pos_idx, cur->pos, cur->npos, p.pos_idx[i]) < p.pos[i])
            reset = 1;
    for (size_t i = 0; i < p.nneg && !reset; i++)
        if (p.neg[i] > 0 && side_at(cur->neg_idx, cur->neg, cur->nneg, p.neg_idx[i]) < p.neg[i])
            reset = 1;
    mw_hist_free(&p);
    return reset;
}

/* ---- binary operators ---- */

static const char *op_text(pq_binop op)
{
    static const char *const t[] = {"?",  "+",  "-", "*", "/",  "%",  "^",  "atan2",
                                    "==", "!=", ">", "<", ">=", "<=", "</", ">/"};
    return (int)op >= 0 && op <= PQ_OP_TRIM_LOWER ? t[op] : "?";
}

double q_hist_arith(qctx *c, int pos, pq_binop op, double a, double b, int *keep)
{
    const mw_histogram *ha = q_hist_get(c, a), *hb = q_hist_get(c, b);
    *keep = -1;
    mw_histogram r;
    if (ha && hb) {
        if (op == PQ_OP_EQ || op == PQ_OP_NE) {
            int eq = q_hist_equal(ha, hb);
            *keep = op == PQ_OP_EQ ? eq : !eq;
            return a;
        }
        if (op == PQ_OP_ADD || op == PQ_OP_SUB) {
            int rc = q_hist_add(ha, hb, op == PQ_OP_ADD ? 1 : -1, &r);
            if (rc == Q_HIST_RECONCILED)
                q_annot(c, 1, pos,
                        "PromQL info: mismatched custom buckets were reconciled during %s",
                        op == PQ_OP_ADD ? "addition" : "subtraction");
            if (rc >= 0) {
                *keep = 1;
                return q_hist_put(c, &r);
            }
            if (rc == Q_HIST_MIXED_SCHEMAS)
                q_annot(c, 0, pos,
                        "PromQL warning: vector contains a mix of histograms with exponential "
                        "and custom buckets schemas");
            return NAN;
        }
    } else if (ha && (op == PQ_OP_TRIM_UPPER || op == PQ_OP_TRIM_LOWER)) {
        q_hist_trim(ha, b, op == PQ_OP_TRIM_UPPER, &r);
        *keep = 1;
        return q_hist_put(c, &r);
    } else if ((ha && (op == PQ_OP_MUL || op == PQ_OP_DIV)) || (hb && op == PQ_OP_MUL)) {
        const mw_histogram *h = ha ? ha : hb;
        double f = ha ? b : a;
        mw_hist_copy(&r, h);
        q_hist_scale(&r, op == PQ_OP_DIV ? 1 / f : f);
        if (op == PQ_OP_DIV && f == 0) r.npos = r.nneg = 0; /* as Prometheus's Div(0) */
        *keep = 1;
        return q_hist_put(c, &r);
    }
    q_annot(c, 1, pos,
            "PromQL info: incompatible sample types encountered for binary operator \"%s\": %s %s "
            "%s",
            op_text(op), ha ? "histogram" : "float", op_text(op), hb ? "histogram" : "float");
    return NAN;
}

const mw_histogram *pq_result_histogram(const pq_result *r, double v)
{
    uint64_t b = mw_hist_bits(v);
    if ((b & MW_HIST_TAG_MASK) != MW_HIST_QREF_TAG) return NULL;
    uint64_t i = b & MW_HIST_PAYLOAD_MASK;
    return i < r->nhists ? &r->hists[i] : NULL;
}

/* ---- aggregations ---- */

struct q_hagg {
    int op, pos;
    size_t ng, ns;
    /* per group and step: 0 nothing, 1 floats, 2 histograms, 3 both;
     * sum and avg: the running sum or mean of the histograms (started
     * when the cell's first sample is one, as Prometheus accumulates only
     * then), whether two could not be added, the hints seen */
    uint8_t *kind;
    q_havg *acc;
    uint8_t *started, *failed, *hints;
};

q_hagg *q_hist_agg_pre(qctx *c, const pq_node *n, val *in, const size_t *grp, size_t ng)
{
    if (!q_hist_any(c, in)) return NULL;
    int op = n->op;
    if (op == PQ_AGG_COUNT || op == PQ_AGG_GROUP || op == PQ_AGG_LIMITK ||
        op == PQ_AGG_LIMIT_RATIO || op == PQ_AGG_COUNT_VALUES)
        return NULL; /* these take histograms as they are */
    size_t ns = c->nsteps;
    q_hagg *a = mw_xcalloc(1, sizeof(*a));
    a->op = op;
    a->pos = q_arg_pos(n->args[n->nargs - 1]);
    a->ng = ng;
    a->ns = ns;
    int sums = op == PQ_AGG_SUM || op == PQ_AGG_AVG;
    a->kind = mw_xcalloc(ng * ns + 1, 1);
    if (sums) {
        a->acc = mw_xcalloc(ng * ns + 1, sizeof(q_havg));
        a->started = mw_xcalloc(ng * ns + 1, 1);
        a->failed = mw_xcalloc(ng * ns + 1, 1);
        a->hints = mw_xcalloc(ng * ns + 1, 1);
    }
    int ignored = 0, reconciled = 0;
    for (size_t i = 0; i < in->n; i++) {
        sv *s = &in->s[i];
        if (grp[i] == (size_t)-1) continue;
        for (size_t k = 0; k < ns; k++) {
            if (!s->ok[k]) continue;
            size_t cell = grp[i] * ns + k;
            const mw_histogram *h = q_hist_get(c, s->v[k]);
            int first = a->kind[cell] == 0;
            if (!h) {
                a->kind[cell] |= 1;
                continue;
            }
            s->ok[k] = 0; /* the float path does not see it */
            if (!sums) {
                ignored = 1;
                continue;
            }
            a->kind[cell] |= 2;
            if (a->failed[cell]) continue;
            if (first) {
                q_havg_start(&a->acc[cell], h);
                a->started[cell] = 1;
                a->hints[cell] |= q_hint_seen(h);
                continue;
            }
            if (!a->started[cell]) continue; /* floats came first: no value */
            a->hints[cell] |= q_hint_seen(h);
            int rc = op == PQ_AGG_SUM ? q_hsum_add(&a->acc[cell].s, h, &reconciled)
                                      : q_havg_add(&a->acc[cell], h, &reconciled);
            if (rc < 0) {
                a->failed[cell] = 1;
                const char *name = lbl_get(s->labels, s->nlabels, "__name__");
                q_warn_mixed_schemas(c, a->pos, name ? name : "");
            }
        }
    }
    if (reconciled)
        q_annot(c, 1, a->pos,
                "PromQL info: mismatched custom buckets were reconciled during aggregation");
    if (ignored) {
        static const char *const names[] = {
            "sum",    "avg",  "min",     "max",      "count",        "group",  "stddev",
            "stdvar", "topk", "bottomk", "quantile", "count_values", "limitk", "limit_ratio"};
        q_annot(c, 1, a->pos, "PromQL info: ignored histogram in %s aggregation", names[op]);
    }
    return a;
}

void q_hist_agg_post(qctx *c, q_hagg *a, vbuild *b)
{
    if (!a) return;
    int sums = a->acc != NULL && b;
    int mixed = 0, collision = 0;
    for (size_t g = 0; sums && g < a->ng && g < b->n; g++)
        for (size_t k = 0; k < a->ns; k++) {
            size_t cell = g * a->ns + k;
            if (a->kind[cell] == 3) {
                mixed = 1;
                b->s[g].ok[k] = 0;
            } else if (a->kind[cell] == 2 && !a->failed[cell]) {
                mw_histogram h;
                if (a->op == PQ_AGG_AVG)
                    q_havg_result(&a->acc[cell], &h);
                else
                    q_hsum_result(&a->acc[cell].s, &h);
                h.hint = MW_HINT_UNKNOWN;
                b->s[g].ok[k] = 1;
                b->s[g].v[k] = q_hist_put(c, &h);
                collision |= a->hints[cell] == (Q_HINT_SEEN_RESET | Q_HINT_SEEN_NOT_RESET);
            }
        }
    if (mixed)
        q_annot(c, 0, a->pos,
                "PromQL warning: encountered a mix of histograms and floats for aggregation");
    if (collision)
        q_annot(c, 0, a->pos,
                "PromQL warning: conflicting counter resets during histogram aggregation");
    if (a->acc)
        for (size_t i = 0; i < a->ng * a->ns; i++)
            if (a->started[i]) q_havg_free(&a->acc[i]);
    free(a->acc);
    free(a->started);
    free(a->failed);
    free(a->hints);
    free(a->kind);
    free(a);
}
