/* annot.c - Prometheus 3's annotations: the warnings and infos a query's
 * answer carries besides its data (the API's "warnings" and "infos"). The
 * texts are Prometheus's (util/annotations), so that tools matching them
 * (Grafana shows them; Prometheus's own test files compare them exactly)
 * read the same words from mlwatch. */
#include "qinternal.h"

#include "../core/util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *vfmt(const char *fmt, va_list ap)
{
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, aq);
    va_end(aq);
    char *s = mw_xmalloc((size_t)(n > 0 ? n : 0) + 1);
    vsnprintf(s, (size_t)(n > 0 ? n : 0) + 1, fmt, ap);
    return s;
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    char *s = vfmt(f, ap);
    va_end(ap);
    return s;
}

static pq_annot *find(qannots *q, const char *msg)
{
    for (size_t i = 0; i < q->n; i++)
        if (!strcmp(q->a[i].msg, msg)) return &q->a[i];
    return NULL;
}

static pq_annot *add(qctx *c, int info, int pos, char *msg)
{
    qannots *q = c->annots;
    if (!q) { /* a context without a list (never in pq_eval): nothing kept */
        free(msg);
        return NULL;
    }
    pq_annot *a = find(q, msg);
    if (a) {
        free(msg);
        return a;
    }
    if (q->n == q->cap) {
        q->cap = q->cap ? 2 * q->cap : 4;
        q->a = mw_xrealloc(q->a, q->cap * sizeof(pq_annot));
    }
    a = &q->a[q->n++];
    memset(a, 0, sizeof(*a));
    a->info = info;
    a->msg = msg;
    a->pos = pos;
    return a;
}

void q_annot(qctx *c, int info, int pos, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    char *msg = vfmt(f, ap);
    va_end(ap);
    pq_annot *a = add(c, info, pos, msg);
    /* Prometheus's map keeps the last one added under a text. */
    if (a) a->pos = pos;
}

void q_warn_mixed_schemas(qctx *c, int pos, const char *name)
{
    q_annot(c, 0, pos,
            "PromQL warning: vector contains a mix of histograms with exponential and custom "
            "buckets schemas for metric name \"%s\"",
            name);
}

void q_warn_mixed_types(qctx *c, int pos, const char *name)
{
    q_annot(c, 0, pos,
            "PromQL warning: encountered a mix of histograms and floats for metric name \"%s\"",
            name);
}

void q_warn_not_counter(qctx *c, int pos, const char *name)
{
    q_annot(c, 0, pos, "PromQL warning: this native histogram metric is not a counter: \"%s\"",
            name);
}

void q_warn_not_gauge(qctx *c, int pos, const char *name)
{
    q_annot(c, 0, pos, "PromQL warning: this native histogram metric is not a gauge: \"%s\"", name);
}

void q_annot_quantile(qctx *c, double q, int pos)
{
    if (!isnan(q) && q >= 0 && q <= 1) return;
    char g[40];
    pq_format_go_g(q, g, sizeof(g));
    q_annot(c, 0, pos, "PromQL warning: quantile value should be between 0 and 1, got %s", g);
}

void q_annot_mono(qctx *c, const char *metric, int pos, int64_t ts, double min_bucket,
                  double max_bucket, double max_diff)
{
    const char *base = "PromQL info: input to histogram_quantile needed to be fixed for "
                       "monotonicity (see "
                       "https://prometheus.io/docs/prometheus/latest/querying/functions/"
                       "#histogram_quantile)";
    char *msg =
        metric && *metric ? fmt("%s for metric name \"%s\"", base, metric) : fmt("%s", base);
    size_t before = c->annots ? c->annots->n : 0;
    pq_annot *a = add(c, 1, pos, msg);
    if (!a) return;
    if (c->annots->n > before) { /* the first one */
        a->mono = 1;
        a->min_ts = a->max_ts = ts;
        a->min_bucket = min_bucket;
        a->max_bucket = max_bucket;
        a->max_diff = max_diff;
        return;
    }
    /* Merged as Prometheus merges them: the widest spans, one more. */
    if (ts < a->min_ts) a->min_ts = ts;
    if (ts > a->max_ts) a->max_ts = ts;
    if (min_bucket < a->min_bucket) a->min_bucket = min_bucket;
    if (max_bucket > a->max_bucket) a->max_bucket = max_bucket;
    if (max_diff > a->max_diff) a->max_diff = max_diff;
    a->count++;
}

void q_annots_free(qannots *q)
{
    for (size_t i = 0; i < q->n; i++)
        free(q->a[i].msg);
    free(q->a);
    memset(q, 0, sizeof(*q));
}

int q_arg_pos(const pq_node *n)
{
    while (n->kind == PQ_PAREN && n->nargs)
        n = n->args[0];
    if (n->kind == PQ_SUBQ) return 0;
    /* A binary expression starts where its left side does (the parser
     * keeps the operator's offset). */
    while (n->kind == PQ_BINARY && n->nargs)
        n = n->args[0];
    return n->pos;
}

void pq_format_go_g(double v, char *buf, size_t size)
{
    if (isnan(v)) {
        snprintf(buf, size, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, size, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    /* The fewest digits that read back to v, as Go's shortest form. */
    char e[40];
    int p = 0;
    for (; p < 17; p++) {
        snprintf(e, sizeof(e), "%.*e", p, v);
        if (strtod(e, NULL) == v) break;
    }
    int exp = atoi(strchr(e, 'e') + 1);
    /* Go's %g: the exponent form below 1e-4 and from 1e6 (precision 6
     * for the shortest form), both with at least two exponent digits, as
     * C's %e writes them. */
    if (exp < -4 || exp >= 6) {
        snprintf(buf, size, "%s", e);
        return;
    }
    snprintf(buf, size, "%.*f", p - exp > 0 ? p - exp : 0, v);
}

/* Prometheus's posrange.StartPosInput: 1-based line and byte column. */
static void position(const char *query, int pos, char *out, size_t size)
{
    if (!query || !*query) {
        snprintf(out, size, "unknown position");
        return;
    }
    size_t len = strlen(query);
    if (pos < 0 || (size_t)pos > len) {
        snprintf(out, size, "invalid position");
        return;
    }
    int line = 1, last_break = -1;
    for (int i = 0; i < pos; i++)
        if (query[i] == '\n') {
            last_break = i;
            line++;
        }
    snprintf(out, size, "%d:%d", line, pos - last_break);
}

static void rfc3339(int64_t ms, char *out, size_t size)
{
    time_t s = (time_t)(ms / 1000); /* Go's time.Unix(ms/1000, 0): toward zero */
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

char *pq_annot_text(const pq_annot *a, const char *query)
{
    char where[48];
    position(query, a->pos, where, sizeof(where));
    if (!a->mono) return fmt("%s (%s)", a->msg, where);
    char lo[40], hi[40], diff[40], t0[32], t1[32];
    pq_format_go_g(a->min_bucket, lo, sizeof(lo));
    pq_format_go_g(a->max_bucket, hi, sizeof(hi));
    /* Go's %.2g is C's but for infinities and NaN */
    if (isfinite(a->max_diff))
        snprintf(diff, sizeof(diff), "%.2g", a->max_diff);
    else
        pq_format_go_g(a->max_diff, diff, sizeof(diff));
    rfc3339(a->min_ts, t0, sizeof(t0));
    rfc3339(a->max_ts, t1, sizeof(t1));
    return fmt("%s, from buckets %s to %s, with a max diff of %s, over %zu samples from %s "
               "to %s (%s)",
               a->msg, lo, hi, diff, a->count + 1, t0, t1, where);
}
