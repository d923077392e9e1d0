/* promql_hist.h - native histograms in test_promql.c's test files, in
 * promqltest's notation:
 *
 *   {{schema:0 sum:5 count:4 z_bucket:1 z_bucket_w:0.001 buckets:[1 2 1]
 *     offset:0 n_buckets:[1] n_offset:0 custom_values:[1 2]
 *     counter_reset_hint:gauge|reset|not_reset|unknown}}
 *
 * every key optional; `{{A}}xN` repeats A N+1 times, `{{A}}+{{B}}xN`
 * (or -) gives A, A+B, ..., A+N*B. A histogram value of a series line is
 * a NaN with MW_HIST_QREF_TAG and an index into th_vals: load puts it in
 * the store, an expected line compares it with the result's histogram
 * (values within 1e-9 relative, empty buckets ignored, the hint only when
 * the literal names it). */
#ifndef MW_PROMQL_HIST_H
#define MW_PROMQL_HIST_H

#include "query/qinternal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TH_MAX 4096
static mw_histogram th_vals[TH_MAX];
static int th_hint_set[TH_MAX];
static size_t th_n;

static void th_reset(void)
{
    for (size_t i = 0; i < th_n; i++)
        mw_hist_free(&th_vals[i]);
    th_n = 0;
}

static double th_add(mw_histogram *h, int *hint_set)
{
    if (th_n >= TH_MAX) {
        mw_hist_free(h);
        return NAN;
    }
    th_hint_set[th_n] = *hint_set;
    th_vals[th_n] = *h;
    return mw_hist_from_bits(MW_HIST_QREF_TAG | (uint64_t)th_n++);
}

static const mw_histogram *th_get(double v, int *hint_set)
{
    uint64_t b = mw_hist_bits(v);
    if ((b & MW_HIST_TAG_MASK) != MW_HIST_QREF_TAG) return NULL;
    uint64_t i = b & MW_HIST_PAYLOAD_MASK;
    if (i >= th_n) return NULL;
    if (hint_set) *hint_set = th_hint_set[i];
    return &th_vals[i];
}

static size_t th_list(const char **s, double *out, size_t max)
{
    size_t n = 0;
    const char *p = *s;
    if (*p != '[') return 0;
    p++;
    while (*p && *p != ']') {
        char *e;
        double v = strtod(p, &e);
        if (e == p) break;
        if (n < max) out[n++] = v;
        p = e;
        while (*p == ' ' || *p == ',')
            p++;
    }
    if (*p == ']') p++;
    *s = p;
    return n;
}

/* One {{...}} at *s: 0 and *s after it, or -1. */
static int th_parse_one(const char **s, mw_histogram *h, int *hint_set)
{
    const char *p = *s;
    if (strncmp(p, "{{", 2)) return -1;
    p += 2;
    static double pos[1024], neg[1024], cust[1024];
    size_t np = 0, nn = 0, nc = 0;
    long off = 0, noff = 0;
    mw_histogram t = {0};
    *hint_set = 0;
    while (*p && strncmp(p, "}}", 2)) {
        while (*p == ' ')
            p++;
        if (!strncmp(p, "}}", 2)) break;
        const char *colon = strchr(p, ':');
        if (!colon) return -1;
        char key[32];
        snprintf(key, sizeof(key), "%.*s", (int)(colon - p), p);
        p = colon + 1;
        char *e;
        if (!strcmp(key, "buckets"))
            np = th_list(&p, pos, 1024);
        else if (!strcmp(key, "n_buckets"))
            nn = th_list(&p, neg, 1024);
        else if (!strcmp(key, "custom_values"))
            nc = th_list(&p, cust, 1024);
        else if (!strcmp(key, "counter_reset_hint")) {
            *hint_set = 1;
            if (!strncmp(p, "gauge", 5)) t.hint = MW_HINT_GAUGE;
            if (!strncmp(p, "reset", 5)) t.hint = MW_HINT_YES;
            if (!strncmp(p, "not_reset", 9)) t.hint = MW_HINT_NO;
            while (*p && *p != ' ' && *p != '}')
                p++;
        } else {
            double v = strtod(p, &e);
            if (e == p) return -1;
            p = e;
            if (!strcmp(key, "schema"))
                t.schema = (int32_t)v;
            else if (!strcmp(key, "sum"))
                t.sum = v;
            else if (!strcmp(key, "count"))
                t.count = v;
            else if (!strcmp(key, "z_bucket"))
                t.zero_count = v;
            else if (!strcmp(key, "z_bucket_w"))
                t.zero_threshold = v;
            else if (!strcmp(key, "offset"))
                off = (long)v;
            else if (!strcmp(key, "n_offset"))
                noff = (long)v;
            else
                return -1;
        }
    }
    if (strncmp(p, "}}", 2)) return -1;
    *s = p + 2;
    mw_histogram r = t;
    mw_hist_alloc(&r, np, nn, nc);
    for (size_t i = 0; i < np; i++) {
        r.pos_idx[i] = (int32_t)(off + (long)i);
        r.pos[i] = pos[i];
    }
    for (size_t i = 0; i < nn; i++) {
        r.neg_idx[i] = (int32_t)(noff + (long)i);
        r.neg[i] = neg[i];
    }
    memcpy(r.custom, cust, nc * sizeof(double));
    *h = r;
    return 0;
}

/* A histogram item of a series line at *s into v[*n...]: 0, or -1. */
static int th_parse_item(const char **s, double *v, int *present, size_t *n, size_t max)
{
    mw_histogram a, b = {0};
    int ha, hb = 0;
    if (th_parse_one(s, &a, &ha) < 0) return -1;
    double sign = 0;
    long cnt = 0;
    const char *p = *s;
    if ((*p == '+' || *p == '-') && p[1] == '{') {
        sign = *p == '+' ? 1 : -1;
        p++;
        if (th_parse_one(&p, &b, &hb) < 0) {
            mw_hist_free(&a);
            return -1;
        }
    }
    if (*p == 'x') cnt = strtol(p + 1, (char **)&p, 10);
    *s = p;
    mw_histogram cur = a;
    for (long i = 0; i <= cnt && *n < max; i++) {
        mw_histogram keep;
        mw_hist_copy(&keep, &cur);
        present[*n] = 1;
        v[(*n)++] = th_add(&keep, &ha);
        if (sign != 0) {
            mw_histogram nx;
            if (q_hist_add(&cur, &b, sign, &nx) == 0) {
                nx.hint = cur.hint;
                mw_hist_free(&cur);
                cur = nx;
            }
        }
    }
    mw_hist_free(&cur);
    mw_hist_free(&b);
    return 0;
}

static int th_close(double a, double b)
{
    if (isnan(a) && isnan(b)) return 1;
    if (a == b) return 1;
    if (isinf(a) || isinf(b)) return 0;
    return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)) || fabs(a - b) < 1e-12;
}

static int th_side_same(const int32_t *ai, const double *ac, size_t an, const int32_t *bi,
                        const double *bc, size_t bn)
{
    size_t i = 0, j = 0;
    for (;;) {
        while (i < an && ac[i] == 0)
            i++;
        while (j < bn && bc[j] == 0)
            j++;
        if (i >= an || j >= bn) return i >= an && j >= bn;
        if (ai[i] != bi[j] || !th_close(ac[i], bc[j])) return 0;
        i++;
        j++;
    }
}

static int th_same(const mw_histogram *exp, int hint_set, const mw_histogram *got)
{
    if (!got) return 0;
    if (exp->schema != got->schema || !th_close(exp->count, got->count) ||
        !th_close(exp->sum, got->sum) || !th_close(exp->zero_count, got->zero_count) ||
        !th_close(exp->zero_threshold, got->zero_threshold))
        return 0;
    if (hint_set && exp->hint != got->hint) return 0;
    if (exp->ncustom != got->ncustom) return 0;
    for (size_t i = 0; i < exp->ncustom; i++)
        if (exp->custom[i] != got->custom[i]) return 0;
    return th_side_same(exp->pos_idx, exp->pos, exp->npos, got->pos_idx, got->pos, got->npos) &&
           th_side_same(exp->neg_idx, exp->neg, exp->nneg, got->neg_idx, got->neg, got->nneg);
}

static void th_print(const mw_histogram *h)
{
    fprintf(stderr, "{{schema:%d count:%.17g sum:%.17g z:%.17g zt:%g hint:%d", h->schema, h->count,
            h->sum, h->zero_count, h->zero_threshold, h->hint);
    for (size_t i = 0; i < h->npos; i++)
        fprintf(stderr, " +%d:%.17g", h->pos_idx[i], h->pos[i]);
    for (size_t i = 0; i < h->nneg; i++)
        fprintf(stderr, " -%d:%.17g", h->neg_idx[i], h->neg[i]);
    fprintf(stderr, "}}");
}

#endif
