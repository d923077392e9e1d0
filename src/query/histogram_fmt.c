/* histogram_fmt.c - native histograms in the query API's answers, as
 * Prometheus writes them (util/jsonutil): a vector sample is
 * "histogram":[ts,{"count":"C","sum":"S","buckets":[[rule,"lo","hi","n"],...]}]
 * instead of "value"; a matrix series has "values" for its floats and
 * "histograms" for its histograms, each left out when empty. Buckets come
 * negative (most negative first), zero, positive; empty ones are left out;
 * rule 0 is (lo, hi], 1 [lo, hi), 3 [lo, hi]. Numbers as every value
 * (numfmt.c). And a histogram as text, as Prometheus's
 * FloatHistogram.String (count_values' label values). */
#include "api_internal.h"
#include "qinternal.h"

#include <math.h>

static void put_num(mw_buf *b, double v)
{
    char num[PQ_VALUE_BUFSIZE];
    pq_format_value(v, num, sizeof(num));
    mw_buf_putc(b, '"');
    mw_buf_puts(b, num);
    mw_buf_putc(b, '"');
}

static void put_bucket(mw_buf *b, int *first, int rule, double lo, double hi, double n)
{
    if (n == 0) return;
    mw_buf_puts(b, *first ? ",\"buckets\":[[" : ",[");
    *first = 0;
    mw_buf_printf(b, "%d,", rule);
    put_num(b, lo);
    mw_buf_putc(b, ',');
    put_num(b, hi);
    mw_buf_putc(b, ',');
    put_num(b, n);
    mw_buf_putc(b, ']');
}

void pq_hist_json(mw_buf *b, const mw_histogram *h)
{
    mw_buf_puts(b, "{\"count\":");
    put_num(b, h->count);
    mw_buf_puts(b, ",\"sum\":");
    put_num(b, h->sum);
    int first = 1;
    if (h->schema == MW_HIST_SCHEMA_CUSTOM) {
        for (size_t i = 0; i < h->npos; i++) {
            int32_t x = h->pos_idx[i];
            put_bucket(b, &first, 0, q_hist_bound(x - 1, h), q_hist_bound(x, h), h->pos[i]);
        }
    } else {
        for (size_t i = h->nneg; i-- > 0;) {
            int32_t x = h->neg_idx[i];
            put_bucket(b, &first, 1, -q_hist_bound(x, h), -q_hist_bound(x - 1, h), h->neg[i]);
        }
        if (h->zero_count > 0) /* as Prometheus's bucket iterator */
            put_bucket(b, &first, 3, -h->zero_threshold, h->zero_threshold, h->zero_count);
        for (size_t i = 0; i < h->npos; i++) {
            int32_t x = h->pos_idx[i];
            put_bucket(b, &first, 0, q_hist_bound(x - 1, h), q_hist_bound(x, h), h->pos[i]);
        }
    }
    if (!first) mw_buf_putc(b, ']');
    mw_buf_putc(b, '}');
}

static void put_text_bucket(mw_buf *b, char open, double lo, double hi, char close, double n)
{
    char l[40], u[40], c[40];
    if (n == 0) return;
    pq_format_go_g(lo, l, sizeof(l));
    pq_format_go_g(hi, u, sizeof(u));
    pq_format_go_g(n, c, sizeof(c));
    mw_buf_printf(b, ", %c%s,%s%c:%s", open, l, u, close, c);
}

void q_hist_string(mw_buf *b, const mw_histogram *h)
{
    char count[40], sum[40];
    pq_format_go_g(h->count, count, sizeof(count));
    pq_format_go_g(h->sum, sum, sizeof(sum));
    mw_buf_printf(b, "{count:%s, sum:%s", count, sum);
    if (h->schema != MW_HIST_SCHEMA_CUSTOM) {
        for (size_t i = h->nneg; i-- > 0;) {
            int32_t x = h->neg_idx[i];
            put_text_bucket(b, '[', -q_hist_bound(x, h), -q_hist_bound(x - 1, h), ')', h->neg[i]);
        }
        put_text_bucket(b, '[', -h->zero_threshold, h->zero_threshold, ']', h->zero_count);
    }
    for (size_t i = 0; i < h->npos; i++) {
        int32_t x = h->pos_idx[i];
        put_text_bucket(b, '(', q_hist_bound(x - 1, h), q_hist_bound(x, h), ']', h->pos[i]);
    }
    mw_buf_putc(b, '}');
}

static void put_ts_json(mw_buf *b, int64_t t)
{
    if (t % 1000 == 0)
        mw_buf_printf(b, "%lld", (long long)(t / 1000));
    else
        mw_buf_printf(b, "%.16g", (double)t / 1000); /* as jansson writes it (api.c) */
}

int pq_hist_put_points(mw_buf *b, const pq_result *r, const pq_series *s)
{
    size_t nh = 0;
    for (size_t k = 0; k < s->n; k++)
        if (pq_result_histogram(r, s->v[k])) nh++;
    if (!nh) return 0; /* floats only: the caller's fast path */
    if (r->type == PQ_T_VECTOR) {
        mw_buf_puts(b, ",\"histogram\":[");
        put_ts_json(b, s->t[0]);
        mw_buf_putc(b, ',');
        pq_hist_json(b, pq_result_histogram(r, s->v[0]));
        mw_buf_putc(b, ']');
        return 1;
    }
    int first = 1;
    for (size_t k = 0; k < s->n; k++) {
        if (pq_result_histogram(r, s->v[k])) continue;
        mw_buf_puts(b, first ? ",\"values\":[[" : ",[");
        first = 0;
        put_ts_json(b, s->t[k]);
        mw_buf_putc(b, ',');
        put_num(b, s->v[k]);
        mw_buf_putc(b, ']');
    }
    if (!first) mw_buf_putc(b, ']');
    first = 1;
    for (size_t k = 0; k < s->n; k++) {
        const mw_histogram *h = pq_result_histogram(r, s->v[k]);
        if (!h) continue;
        mw_buf_puts(b, first ? ",\"histograms\":[[" : ",[");
        first = 0;
        put_ts_json(b, s->t[k]);
        mw_buf_putc(b, ',');
        pq_hist_json(b, h);
        mw_buf_putc(b, ']');
    }
    mw_buf_putc(b, ']');
    return 1;
}
