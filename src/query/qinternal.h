/* qinternal.h - the PromQL evaluator's internal types, shared by eval.c,
 * agg.c, funcs.c and labels.c.
 *
 * Every expression is evaluated over the whole step grid at once (an
 * instant query is a grid of one step): an instant vector is a set of
 * series with one optional value per step, so a range query selects from
 * the store once per selector instead of once per step. */
#ifndef MW_QINTERNAL_H
#define MW_QINTERNAL_H

#include "../core/buf.h"
#include "promql.h"

#include <stdint.h>
#include <string.h>

/* A series of an instant vector over the grid: v[i] is valid when ok[i]. */
typedef struct sv {
    pq_label *labels;
    size_t nlabels;
    double *v;
    uint8_t *ok;
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
    pq_limits lim;
    int64_t deadline_ns;
    size_t samples; /* in memory now */
    size_t peak;
    int code; /* PQ_ERR_* once failed */
    char *err;
    size_t errsize;
} qctx;

void qerr(qctx *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* 0, or -1 (and the context failed) when over the sample budget or time. */
int qcharge(qctx *c, size_t n);
void qrelease(qctx *c, size_t n);
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
/* Set (value "" deletes); keeps the order. */
void lbl_set(pq_label **l, size_t *n, const char *name, const char *value);
void lbl_del(pq_label **l, size_t *n, const char *name);
/* Keep only (keep=1) or drop (keep=0) the given names. */
void lbl_filter(pq_label **l, size_t *n, char *const *names, size_t nnames, int keep);
int lbl_cmp(const pq_label *a, size_t na, const pq_label *b, size_t nb);
/* A key for hashing: name\xffvalue\xff... of all labels, or of the given
 * names (on=1) or all but them and __name__ (on=0); into buf. */
void lbl_key(const pq_label *l, size_t n, char *const *names, size_t nnames, int on, int use_names,
             mw_buf *buf);

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
void vb_finish(vbuild *b, val *out); /* moves the series into out (a vector) */
void vb_free(vbuild *b);

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
/* The text of a string argument: a literal in any number of parentheses,
 * the only string expressions the parser makes. Functions read their
 * string arguments through it (a parenthesised one has no str itself). */
const char *string_arg(const pq_node *n);
/* eval_node, or an empty value when the context has already failed. */
val eval_unless_failed(qctx *c, const pq_node *n);
val eval_call(qctx *c, const pq_node *n);
val eval_agg(qctx *c, const pq_node *n);
/* Range-vector argument of a function: the points of each series and the
 * window of each step ([wstart[i], wend[i]] inclusive, as Prometheus 2.x). */
typedef struct rangearg {
    pq_series *s;
    size_t n;
    int64_t *wstart, *wend; /* per step */
    int64_t range_ms;
} rangearg;
int eval_range_arg(qctx *c, const pq_node *n, rangearg *out);
void rangearg_free(qctx *c, rangearg *r);
double quantile_of(double q, double *vals, size_t n); /* sorts vals */

#endif
