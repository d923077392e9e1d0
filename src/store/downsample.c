/* downsample.c - downsampling for long retention (docs/store.md,
 * "Downsampling"): `--downsample 5m:30d,1h:1y` keeps raw samples for
 * --retention, then each raw block becomes one block per resolution holding
 * per-window aggregates (count, sum, min, max) and the few raw samples that
 * counter functions and plain selectors need (mw_ds_series), kept for its
 * own time; and the reads of those blocks for a selection, with each
 * sample's weight (how many raw samples it stands for). Native histogram
 * samples are not downsampled (downsample_block).
 *
 * Windows are (k*res, (k+1)*res], as PromQL's left-open range windows: a
 * window of a query whose step and range are multiples of res, evaluated at
 * multiples of res, holds whole windows, and the aggregates then give what
 * the raw samples would (tests/unit/test_store_downsample.c). */
#include "downsample.h"
#include "../core/log.h"
#include "../core/series_memory.h"
#include "../core/units.h"
#include "../core/util.h"
#include "histogram.h"
#include "store_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the option ---- */

int mw_store_parse_downsample(const char *text, mw_store_resolution *out, size_t *n, char *why,
                              size_t whysize)
{
    *n = 0;
    if (!*text) return 0;
    const char *p = text;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[64];
        if (len == 0 || len >= sizeof(item)) {
            snprintf(why, whysize, "'%.*s' is not RES:KEEP (example: 5m:30d,1h:1y)",
                     (int)(len < 40 ? len : 40), p);
            return -1;
        }
        memcpy(item, p, len);
        item[len] = '\0';
        char *colon = strchr(item, ':');
        if (!colon) {
            snprintf(why, whysize, "'%s' is not RES:KEEP (example: 5m:30d,1h:1y)", item);
            return -1;
        }
        *colon = '\0';
        int64_t res, keep;
        if (mw_parse_duration_ms(item, &res) < 0 || res <= 0) {
            snprintf(why, whysize, "invalid resolution '%s' (examples: 5m, 1h)", item);
            return -1;
        }
        if (mw_parse_duration_ms(colon + 1, &keep) < 0 || keep <= 0) {
            snprintf(why, whysize, "invalid time to keep '%s' (examples: 30d, 1y)", colon + 1);
            return -1;
        }
        if (res % 1000) {
            snprintf(why, whysize, "resolution %s is not a whole number of seconds", item);
            return -1;
        }
        if (keep <= res) {
            snprintf(why, whysize, "resolution %s is kept for %s, not longer than itself", item,
                     colon + 1);
            return -1;
        }
        if (*n == MW_STORE_MAX_RESOLUTIONS) {
            snprintf(why, whysize, "at most %d resolutions", MW_STORE_MAX_RESOLUTIONS);
            return -1;
        }
        if (*n && res <= out[*n - 1].res_ms) {
            snprintf(why, whysize, "resolutions must increase: %s after %s", item,
                     "a coarser or equal one");
            return -1;
        }
        if (*n && keep <= out[*n - 1].keep_ms) {
            snprintf(why, whysize, "resolution %s must be kept longer than the finer one before it",
                     item);
            return -1;
        }
        out[(*n)++] = (mw_store_resolution){res, keep};
        if (!end) return 0;
        p = end + 1;
    }
}

/* ---- aggregates ---- */

/* A series that drops at most once per this many windows keeps its drops
 * (counter resets) in the subset. */
#define DROPS_PER_WINDOW 8

/* Kahan-Neumaier, as the query engine's sum_over_time (funcs_range.c). */
static void kahan_inc(double x, double *sum, double *comp)
{
    double t = *sum + x;
    if (isinf(t))
        *comp = 0;
    else if (fabs(*sum) >= fabs(x))
        *comp += (*sum - t) + x;
    else
        *comp += (x - t) + *sum;
    *sum = t;
}

/* The window of t: k with t in (k*res, (k+1)*res]. */
static int64_t window_of(int64_t t, int64_t res)
{
    int64_t x = t - 1;
    int64_t q = x / res;
    if (x % res && x < 0) q--;
    return q;
}

static void grow(void **p, size_t *cap, size_t need, size_t each)
{
    if (need <= *cap) return;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    *p = mw_xrealloc(*p, c * each);
    *cap = c;
}

void mw_ds_compute(const int64_t *t, const double *v, size_t n, int64_t res, mw_ds_series *o)
{
    memset(o, 0, sizeof(*o));
    if (!n) return;
    uint8_t *keep = mw_xcalloc(n, 1);
    size_t acap = 0;
    for (size_t i = 0; i < n;) {
        int64_t k = window_of(t[i], res);
        size_t j = i;
        while (j < n && window_of(t[j], res) == k)
            j++;
        size_t first = (size_t)-1, last = 0, count = 0;
        double sum = 0, comp = 0, mn = 0, mx = 0;
        for (size_t x = i; x < j; x++) {
            if (mw_is_stale_nan(v[x])) continue;
            if (first == (size_t)-1) {
                first = x;
                mn = mx = v[x];
            } else {
                /* min/max_over_time: a NaN gives way to any value. */
                if (v[x] < mn || isnan(mn)) mn = v[x];
                if (v[x] > mx || isnan(mx)) mx = v[x];
            }
            last = x;
            count++;
            kahan_inc(v[x], &sum, &comp);
        }
        if (mw_is_stale_nan(v[j - 1])) keep[j - 1] = 1;
        if (count) {
            keep[first] = keep[last] = 1;
            size_t c0 = acap;
            grow((void **)&o->at, &c0, o->na + 1, sizeof(int64_t));
            c0 = acap;
            grow((void **)&o->cnt, &c0, o->na + 1, sizeof(double));
            c0 = acap;
            grow((void **)&o->sum, &c0, o->na + 1, sizeof(double));
            c0 = acap;
            grow((void **)&o->min, &c0, o->na + 1, sizeof(double));
            grow((void **)&o->max, &acap, o->na + 1, sizeof(double));
            o->at[o->na] = t[last];
            o->cnt[o->na] = (double)count;
            o->sum[o->na] = isinf(sum) ? sum : sum + comp;
            o->min[o->na] = mn;
            o->max[o->na] = mx;
            o->na++;
        }
        i = j;
    }
    /* Over the samples that are not staleness markers (what range vectors
     * hold): both sides of a drop, a NaN and its neighbours. Between two
     * kept samples the values then never drop, so rate's reset correction
     * over the subset adds what it adds over all samples, in the same
     * order. A series that drops more often than once in 8 windows is no
     * counter (a gauge, whose rate means nothing): its drops are not kept,
     * or the subset would hold most of its samples. */
    size_t prev = (size_t)-1, drops = 0;
    for (size_t i = 0; i < n; i++) {
        if (mw_is_stale_nan(v[i])) continue;
        if (prev != (size_t)-1 && v[i] < v[prev]) drops++;
        prev = i;
    }
    int counter = drops * DROPS_PER_WINDOW <= o->na;
    prev = (size_t)-1;
    int after_nan = 0;
    for (size_t i = 0; i < n; i++) {
        if (mw_is_stale_nan(v[i])) continue;
        if (after_nan) keep[i] = 1;
        after_nan = 0;
        if (counter && prev != (size_t)-1 && v[i] < v[prev]) keep[prev] = keep[i] = 1;
        if (isnan(v[i])) {
            keep[i] = 1;
            if (prev != (size_t)-1) keep[prev] = 1;
            after_nan = 1;
        }
        prev = i;
    }
    size_t ns = 0;
    for (size_t i = 0; i < n; i++)
        ns += keep[i];
    o->st = mw_xmalloc(ns * sizeof(int64_t));
    o->sv = mw_xmalloc(ns * sizeof(double));
    for (size_t i = 0; i < n; i++)
        if (keep[i]) {
            o->st[o->ns] = t[i];
            o->sv[o->ns++] = v[i];
        }
    free(keep);
}

void mw_ds_series_free(mw_ds_series *o)
{
    free(o->at);
    free(o->cnt);
    free(o->sum);
    free(o->min);
    free(o->max);
    free(o->st);
    free(o->sv);
    memset(o, 0, sizeof(*o));
}

/* ---- reading ---- */

static void push_w(double **w, size_t *wcap, size_t at, double x)
{
    grow((void **)w, wcap, at + 1, sizeof(double));
    (*w)[at] = x;
}

int mw_ds_read(const mw_block *b, uint32_t id, int what, int64_t mint, int64_t maxt,
               mw_samples *out, double **w, size_t *wcap)
{
    int64_t res = mw_block_get_meta(b)->resolution_ms;
    mw_samples cnt = {0}, val = {0};
    int rc = 0;
    if (what == MW_SEL_SAMPLES) {
        /* Each window's count goes to its last sample (the others count
         * one): read a window more on both sides so that the windows at the
         * range's edges are whole. */
        int64_t lo = mint > INT64_MIN + res ? mint - res : INT64_MIN;
        int64_t hi = maxt < INT64_MAX - res ? maxt + res : INT64_MAX;
        rc = mw_block_read_aggr(b, id, MW_AGGR_COUNT, lo, hi, &cnt);
        if (rc == 0) rc = mw_block_read_aggr(b, id, MW_AGGR_SUBSET, lo, hi, &val);
        size_t r = 0;
        for (size_t i = 0; rc == 0 && i < val.n;) {
            if (mw_is_stale_nan(val.v[i])) {
                if (val.t[i] >= mint && val.t[i] <= maxt) {
                    if (out->max && out->n >= out->max) rc = -1;
                    if (rc == 0) push_w(w, wcap, out->n, 0);
                    if (rc == 0) mw_samples_push(out, val.t[i], val.v[i]);
                }
                i++;
                continue;
            }
            while (r < cnt.n && cnt.t[r] < val.t[i])
                r++;
            /* The window's samples: up to the one at its record's time. */
            size_t j = i, g = 0;
            while (j < val.n && (r >= cnt.n || val.t[j] <= cnt.t[r])) {
                if (!mw_is_stale_nan(val.v[j])) g++;
                j++;
                if (r < cnt.n && val.t[j - 1] == cnt.t[r]) break;
            }
            for (size_t x = i; x < j && rc == 0; x++) {
                if (val.t[x] < mint || val.t[x] > maxt) continue;
                double wx = mw_is_stale_nan(val.v[x]) ? 0 : 1;
                if (r < cnt.n && val.t[x] == cnt.t[r] && wx) wx = cnt.v[r] - (double)(g - 1);
                if (out->max && out->n >= out->max) {
                    rc = -1;
                    break;
                }
                push_w(w, wcap, out->n, wx);
                mw_samples_push(out, val.t[x], val.v[x]);
            }
            i = j;
        }
    } else {
        int aggr = what == MW_SEL_MIN   ? MW_AGGR_MIN
                   : what == MW_SEL_MAX ? MW_AGGR_MAX
                                        : MW_AGGR_SUM;
        rc = mw_block_read_aggr(b, id, MW_AGGR_COUNT, mint, maxt, &cnt);
        if (rc == 0) rc = mw_block_read_aggr(b, id, aggr, mint, maxt, &val);
        if (rc == 0 && (cnt.n != val.n || cnt.damaged || val.damaged)) rc = -2;
        for (size_t i = 0; rc == 0 && i < val.n; i++) {
            if (cnt.t[i] != val.t[i]) {
                rc = -2;
                break;
            }
            if (out->max && out->n >= out->max) {
                rc = -1;
                break;
            }
            push_w(w, wcap, out->n, cnt.v[i]);
            mw_samples_push(out, val.t[i], val.v[i]);
        }
    }
    out->damaged += cnt.damaged + val.damaged;
    free(cnt.t);
    free(cnt.v);
    free(val.t);
    free(val.v);
    return rc;
}

/* ---- writing ---- */

/* A block at resolution res from raw block src. */
static int downsample_block(mw_store *s, mw_block *src, int64_t res)
{
    const mw_block_meta *sm = mw_block_get_meta(src);
    uint64_t seq = s->next_block_seq++;
    char tmp[PATH_MAX + 64], final[PATH_MAX + 64];
    mw_store_block_paths(s, seq, tmp, final, sizeof(tmp));
    int rc = 0;
    mw_block_writer *w = mw_block_writer_new(tmp, &rc);
    if (!w) return rc;
    mw_label lab[256];
    for (uint64_t id = 0; id < sm->nseries && rc == 0; id++) {
        size_t nl;
        if (mw_block_labels(src, (uint32_t)id, lab, 256, &nl) < 0) continue;
        mw_samples raw = {0};
        mw_block_read(src, (uint32_t)id, INT64_MIN, INT64_MAX, &raw);
        /* Native histograms have no float aggregates (their values are the
         * NaNs that refer to them): they are left out, kept raw until
         * --retention only; a series of nothing else is not written. */
        size_t kept = 0;
        for (size_t i = 0; i < raw.n; i++)
            if ((mw_hist_bits(raw.v[i]) & MW_HIST_TAG_MASK) != MW_HIST_REF_TAG) {
                raw.t[kept] = raw.t[i];
                raw.v[kept++] = raw.v[i];
            }
        raw.n = kept;
        if (!raw.n) {
            free(raw.t);
            free(raw.v);
            continue;
        }
        mw_ds_series d;
        mw_ds_compute(raw.t, raw.v, raw.n, res, &d);
        mw_block_stream st[5] = {{MW_AGGR_COUNT, d.at, d.cnt, d.na},
                                 {MW_AGGR_SUM, d.at, d.sum, d.na},
                                 {MW_AGGR_MIN, d.at, d.min, d.na},
                                 {MW_AGGR_MAX, d.at, d.max, d.na},
                                 {MW_AGGR_SUBSET, d.st, d.sv, d.ns}};
        rc = mw_block_writer_add_streams(w, lab, nl, st, 5);
        mw_ds_series_free(&d);
        free(raw.t);
        free(raw.v);
    }
    mw_block_meta meta = {.seq = seq,
                          .level = 1,
                          .chunk_seq_min = sm->chunk_seq_min,
                          .chunk_seq_max = sm->chunk_seq_max,
                          .resolution_ms = res,
                          .nsources = 1,
                          .sources = {sm->seq}};
    if (rc == 0)
        rc = mw_block_writer_finish(w, &meta, final);
    else
        mw_block_writer_abort(w);
    if (rc < 0) {
        mw_log_once(MW_LOG_ERROR, "store", "downsample",
                    "cannot write block %s: %s (retried later)", final, strerror(-rc));
        return rc;
    }
    char err[256];
    mw_block *b = mw_block_open(final, err, sizeof(err));
    if (!b) {
        mw_log(MW_LOG_ERROR, "store", "block %s just written does not open: %s", final, err);
        return -EIO;
    }
    mw_store_add_block(s, b);
    char r[32];
    mw_format_duration(res, r, sizeof(r));
    mw_log(MW_LOG_INFO, "store",
           "downsampled block %010llu to %s resolution in %s: %llu series, %llu samples into %llu "
           "aggregates, %llu bytes into %llu",
           (unsigned long long)sm->seq, r, final, (unsigned long long)meta.nseries,
           (unsigned long long)sm->nsamples, (unsigned long long)meta.nsamples,
           (unsigned long long)sm->size, (unsigned long long)meta.size);
    return 0;
}

/* 1 when a block at resolution res says it was made from block seq. */
static int made_from(mw_store *s, uint64_t seq, int64_t res)
{
    int found = 0;
    pthread_mutex_lock(&s->blocks_mu);
    for (size_t i = 0; i < s->nblocks && !found; i++) {
        const mw_block_meta *m = mw_block_get_meta(s->blocks[i]);
        if (m->resolution_ms != res) continue;
        for (uint32_t k = 0; k < m->nsources; k++)
            if (m->sources[k] == seq) found = 1;
    }
    pthread_mutex_unlock(&s->blocks_mu);
    return found;
}

int mw_downsample_expired(mw_store *s)
{
    if (!s->opt.ndownsample || !s->opt.retention_ms) return 0;
    int64_t now = mw_now_ms(), cutoff = now - s->opt.retention_ms;
    for (;;) {
        /* The oldest raw block past the retention, if any. */
        mw_block *x = NULL;
        pthread_mutex_lock(&s->blocks_mu);
        for (size_t i = 0; i < s->nblocks && !x; i++) {
            const mw_block_meta *m = mw_block_get_meta(s->blocks[i]);
            if (m->resolution_ms == 0 && m->maxt < cutoff) x = s->blocks[i];
        }
        if (x) mw_block_ref(x);
        pthread_mutex_unlock(&s->blocks_mu);
        if (!x) return 0;
        const mw_block_meta *m = mw_block_get_meta(x);
        int rc = 0;
        for (size_t r = 0; r < s->opt.ndownsample && rc == 0; r++) {
            const mw_store_resolution *res = &s->opt.downsample[r];
            if (m->maxt < now - res->keep_ms) continue; /* it would go at once */
            if (made_from(s, m->seq, res->res_ms)) continue;
            rc = downsample_block(s, x, res->res_ms);
        }
        if (rc < 0) {
            mw_block_unref(x);
            return rc; /* the raw block stays until it can be downsampled */
        }
        /* Every resolution holds it now: the raw block goes. */
        pthread_mutex_lock(&s->blocks_mu);
        size_t w = 0;
        for (size_t i = 0; i < s->nblocks; i++) {
            if (s->blocks[i] == x) {
                mw_block_doom(x);
                mw_block_unref(x);
                continue;
            }
            s->blocks[w++] = s->blocks[i];
        }
        s->nblocks = w;
        pthread_mutex_unlock(&s->blocks_mu);
        mw_log(MW_LOG_INFO, "store",
               "retention: raw block %010llu deleted (older than the retention time; "
               "downsampled)",
               (unsigned long long)m->seq);
        mw_block_unref(x);
    }
}
