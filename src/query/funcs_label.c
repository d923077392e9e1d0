/* funcs_label.c - PromQL's label functions: label_replace (a regular
 * expression over one label, its groups expanded into a template) and
 * label_join (labels joined with a separator). Both set one label of
 * every series and keep its samples; their string arguments are read
 * through string_arg, so parenthesised strings are the same strings. */
#include "qinternal.h"

#include "../core/buf.h"
#include "../core/regex.h"
#include "../core/util.h"

#include <stdio.h>
#include <stdlib.h>

/* The new value of the destination label for series s, into b (ended
 * with a NUL); 0 to leave the series' labels as they are. */
typedef int label_value_fn(const void *how, const sv *s, mw_buf *b);

/* The series of in, each with label dst set by value (consumes in). Two
 * series that end with one label set at one step are an error. */
static val relabel(qctx *c, val *in, const char *dst, label_value_fn *value, const void *how)
{
    vbuild vb;
    vb_init(&vb, c);
    mw_buf b;
    mw_buf_init(&b, 1 << 20);
    for (size_t i = 0; i < in->n && !c->code; i++) {
        if ((i & 1023) == 1023 && qcheck_time(c) < 0) break;
        sv *s = &in->s[i];
        pq_label *l = lbl_copy(s->labels, s->nlabels);
        size_t nl = s->nlabels;
        mw_buf_clear(&b);
        /* Setting __name__ takes back a delayed removal of the name. */
        int dn = s->drop_name;
        if (value(how, s, &b)) {
            lbl_set(&l, &nl, dst, b.data);
            if (!strcmp(dst, "__name__")) dn = 0;
        }
        size_t si = vb_series_dn(&vb, l, nl, dn);
        if (si == (size_t)-1) break;
        for (size_t k = 0; k < c->nsteps; k++) {
            if (!s->ok[k]) continue;
            if (vb_set(&vb, si, k, s->v[k]) < 0) break;
        }
    }
    mw_buf_free(&b);
    val_free(c, in);
    val out;
    out = vb_finish(&vb);
    return out;
}

typedef struct replace_how {
    mw_regex *re; /* anchored, as Prometheus's label_replace compiles it */
    mw_regex_span *spans;
    size_t nspans;
    const char *src, *tpl;
} replace_how;

/* The template expanded with the groups of the source label's value (Go's
 * regexp.Expand), when that value matches. */
static int replace_value(const void *how, const sv *s, mw_buf *b)
{
    const replace_how *h = how;
    const char *value = lbl_get(s->labels, s->nlabels, h->src);
    if (!mw_regex_capture(h->re, value, h->spans, h->nspans)) return 0;
    size_t n = mw_regex_expand(h->re, h->tpl, value, h->spans, h->nspans, NULL, 0);
    if (mw_buf_reserve(b, n) < 0) return 0; /* longer than a label may be */
    mw_regex_expand(h->re, h->tpl, value, h->spans, h->nspans, b->data + b->len, n + 1);
    b->len += n;
    return 1;
}

/* label_replace(v, dst, replacement, src, regex) */
val pq_call_label_replace(qctx *c, const pq_node *n)
{
    val in = eval_node(c, n->args[0]);
    if (c->code) return in;
    replace_how h = {.tpl = string_arg(n->args[2]), .src = string_arg(n->args[3])};
    const char *regex = string_arg(n->args[4]), *dst = string_arg(n->args[1]);
    if (!lbl_name_valid(dst)) {
        qerr(c, PQ_ERR_EXECUTION, "invalid destination label name in label_replace(): %s", dst);
        return in;
    }
    char why[256];
    h.re = mw_regex_compile(regex, why, sizeof(why));
    if (!h.re) { /* Prometheus's message names the pattern, not the reason */
        qerr(c, PQ_ERR_EXECUTION, "invalid regular expression in label_replace(): %s", regex);
        return in;
    }
    h.nspans = mw_regex_ngroups(h.re) + 1;
    h.spans = mw_xcalloc(h.nspans, sizeof(*h.spans));
    val out = relabel(c, &in, dst, replace_value, &h);
    free(h.spans);
    mw_regex_free(h.re);
    return out;
}

typedef struct join_how {
    const char *sep;
    const char **src;
    size_t nsrc;
} join_how;

static int join_value(const void *how, const sv *s, mw_buf *b)
{
    const join_how *h = how;
    for (size_t j = 0; j < h->nsrc; j++) {
        if (j > 0) mw_buf_puts(b, h->sep);
        mw_buf_puts(b, lbl_get(s->labels, s->nlabels, h->src[j]));
    }
    mw_buf_reserve(b, 0);
    return 1;
}

/* label_join(v, dst, separator, src...) */
val pq_call_label_join(qctx *c, const pq_node *n)
{
    val in = eval_node(c, n->args[0]);
    if (c->code) return in;
    join_how h = {.sep = string_arg(n->args[2]), .nsrc = n->nargs - 3};
    const char *dst = string_arg(n->args[1]);
    if (!lbl_name_valid(dst)) {
        qerr(c, PQ_ERR_EXECUTION, "invalid destination label name in label_join(): %s", dst);
        return in;
    }
    h.src = mw_xcalloc(h.nsrc ? h.nsrc : 1, sizeof(*h.src));
    for (size_t j = 0; j < h.nsrc; j++) {
        h.src[j] = string_arg(n->args[3 + j]);
        if (!lbl_name_valid(h.src[j])) {
            qerr(c, PQ_ERR_EXECUTION, "invalid source label name in label_join(): %s", h.src[j]);
            free(h.src);
            return in;
        }
    }
    val out = relabel(c, &in, dst, join_value, &h);
    free(h.src);
    return out;
}
