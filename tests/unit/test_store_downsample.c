/* test_store_downsample.c - downsampling (src/store/downsample.c,
 * docs/store.md "Downsampling"): PromQL over downsampled blocks answers as
 * over the raw samples, bit for bit, for rate, increase, delta,
 * sum/count/min/max/avg/last_over_time and plain selectors at steps and
 * ranges that are multiples of the resolution (counter resets, negative
 * values, a staleness marker and a gap included); the answer names the
 * resolution; retention per resolution; kill -9 during downsampling loses
 * and doubles nothing; native histograms left out; --downsample's
 * errors. */
#include "core/series_memory.h"
#include "core/util.h"
#include "query/promql.h"
#include "store/block.h"
#include "store/histogram.h"
#include "store/inspect.h"
#include "store/store.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define N 1440 /* 6 h at 15 s */
#define BULK 64

static int64_t base_ms; /* 20 days ago, on the hour */

static uint32_t lcg(uint32_t *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

static void append(mw_store *s, const char *name, const char *kind, const int64_t *t,
                   const double *v, size_t n)
{
    mw_label l[2] = {{"__name__", name}, {"kind", kind}};
    mw_store_sample *sm = mw_xmalloc(n * sizeof(*sm));
    for (size_t i = 0; i < n; i++)
        sm[i] = (mw_store_sample){t[i], v[i]};
    mw_store_ts ts = {l, 2, sm, n};
    char msg[256];
    assert_int_equal(mw_store_append(s, &ts, 1, 0, msg, sizeof(msg)), 0);
    free(sm);
}

/* The same data into any store: a counter with resets (one at a window's
 * first sample, two in one 5-minute window), integer gauges with negative
 * values, one going stale for 15 minutes, decimals, and BULK more series
 * for the kill test's rewrite to take a while. Timestamps jitter. */
static void fill(mw_store *s)
{
    static int64_t t[N];
    static double v[N];
    uint32_t r = 42;
    for (size_t i = 0; i < N; i++)
        t[i] = base_ms + (int64_t)i * 15000 + (int64_t)(lcg(&r) % 900) + 1;
    double c = 1000;
    for (size_t i = 0; i < N; i++) {
        c += lcg(&r) % 10;
        if (i == 300 || i == 600 || i == 605) c = lcg(&r) % 5; /* resets */
        if (i == 480) c = 3; /* t[480] is the first sample of a window */
        v[i] = c;
    }
    append(s, "ds_total", "counter", t, v, N);
    for (size_t i = 0; i < N; i++)
        v[i] = (double)(int)(lcg(&r) % 100) - 50;
    append(s, "ds_gauge", "gauge", t, v, N);
    /* Stale at sample 700, nothing for 15 minutes, then again. */
    int64_t ts[N];
    double vs[N];
    size_t n = 0;
    for (size_t i = 0; i < N; i++) {
        if (i > 700 && i < 760) continue;
        ts[n] = t[i];
        vs[n++] = i == 700 ? mw_stale_nan() : (double)(lcg(&r) % 1000);
    }
    append(s, "ds_gauge", "stale", ts, vs, n);
    for (size_t i = 0; i < N; i++)
        v[i] = (double)(int)(lcg(&r) % 100000) / 1000;
    append(s, "ds_dec", "decimal", t, v, N);
    /* A counter with NaNs in the middle of a window (one before a reset)
     * and at a window's first sample, as a broken exporter writes them. */
    c = 50;
    for (size_t i = 0; i < N; i++) {
        c += lcg(&r) % 7;
        if (i == 882) c = 1; /* a reset right after a NaN: rate adds nothing */
        v[i] = i == 207 || i == 400 || i == 881 ? NAN : c;
    }
    append(s, "ds_nan_total", "nan", t, v, N);
    for (int k = 0; k < BULK; k++) {
        char kind[16];
        snprintf(kind, sizeof(kind), "b%d", k);
        for (size_t i = 0; i < N; i++)
            v[i] = (double)(lcg(&r) % 50);
        append(s, "ds_bulk", kind, t, v, N);
    }
}

static mw_store *open_store(const char *dir, const char *downsample)
{
    mw_store_options o = {.dir = dir, .background_ms = -1, .no_sync = 1};
    mw_store_default_limits(&o.limits);
    char why[256], err[512];
    if (downsample) {
        o.retention_ms = 10 * 86400000LL;
        assert_int_equal(
            mw_store_parse_downsample(downsample, o.downsample, &o.ndownsample, why, sizeof(why)),
            0);
    }
    mw_store *s = mw_store_open(&o, err, sizeof(err));
    if (!s) fail_msg("open %s: %s", dir, err);
    return s;
}

/* Blocks in dir/blocks by resolution: raw, 1m, 5m. */
static void count_blocks(const char *dir, int *raw, int *m1, int *m5)
{
    char bdir[600], path[1200], err[256];
    snprintf(bdir, sizeof(bdir), "%s/blocks", dir);
    *raw = *m1 = *m5 = 0;
    DIR *d = opendir(bdir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".blk") != 0) continue;
        snprintf(path, sizeof(path), "%s/%s", bdir, e->d_name);
        mw_block *b = mw_block_open(path, err, sizeof(err));
        assert_non_null(b);
        int64_t res = mw_block_get_meta(b)->resolution_ms;
        if (res == 0)
            (*raw)++;
        else if (res == 60000)
            (*m1)++;
        else if (res == 300000)
            (*m5)++;
        else
            fail_msg("block %s at resolution %lld", path, (long long)res);
        mw_block_unref(b);
    }
    closedir(d);
}

static void rmdir_all(const char *dir)
{
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static int eval_at(mw_store *s, const char *q, int64_t start, int64_t end, int64_t step,
                   pq_result *res)
{
    char err[512];
    pq_node *n = pq_parse(q, err, sizeof(err));
    if (!n) fail_msg("%s: %s", q, err);
    pq_limits lim;
    pq_default_limits(&lim);
    memset(res, 0, sizeof(*res));
    int rc = pq_eval(s, n, start, end, step, &lim, res, err, sizeof(err));
    pq_node_free(n);
    if (rc) fail_msg("%s: %s", q, err);
    return rc;
}

static int eval(mw_store *s, const char *q, int64_t step, pq_result *res)
{
    return eval_at(s, q, base_ms + 3600000, base_ms + 5 * 3600000, step, res);
}

/* The same series with the same points, value bits included. */
static void assert_same(const char *q, const pq_result *a, const pq_result *b)
{
    if (a->nseries != b->nseries) fail_msg("%s: %zu series, raw %zu", q, a->nseries, b->nseries);
    for (size_t i = 0; i < a->nseries; i++) {
        const pq_series *x = &a->series[i], *y = &b->series[i];
        assert_int_equal(x->nlabels, y->nlabels);
        for (size_t k = 0; k < x->nlabels; k++) {
            assert_string_equal(x->labels[k].name, y->labels[k].name);
            assert_string_equal(x->labels[k].value, y->labels[k].value);
        }
        if (x->n != y->n) fail_msg("%s: series %zu has %zu points, raw %zu", q, i, x->n, y->n);
        for (size_t k = 0; k < x->n; k++) {
            uint64_t bx, by;
            memcpy(&bx, &x->v[k], 8);
            memcpy(&by, &y->v[k], 8);
            if (x->t[k] != y->t[k] || bx != by)
                fail_msg("%s: series %zu point %zu: %lld %.17g, raw %lld %.17g", q, i, k,
                         (long long)x->t[k], x->v[k], (long long)y->t[k], y->v[k]);
        }
    }
}

static const char *const exprs[] = {
    "rate({__name__=~\"ds_total|ds_nan_total\"}[%s])",
    "increase({__name__=~\"ds_total|ds_nan_total\"}[%s])",
    "delta({__name__=~\"ds_gauge|ds_dec\"}[%s])",
    "sum_over_time(ds_gauge[%s])",
    "sum_over_time(ds_total[%s])",
    "count_over_time({__name__=~\"ds_.*\"}[%s])",
    "min_over_time({__name__=~\"ds_gauge|ds_dec|ds_total|ds_nan_total\"}[%s])",
    "max_over_time({__name__=~\"ds_gauge|ds_dec|ds_total|ds_nan_total\"}[%s])",
    "avg_over_time(ds_gauge[%s])",
    "last_over_time({__name__=~\"ds_.*\"}[%s])",
    "present_over_time(ds_gauge[%s])",
    "{__name__=~\"ds_.*\"}",
};

/* Range, step, and the resolution that should answer. */
static const struct {
    const char *range;
    int64_t step;
    const char *res;
} grids[] = {
    {"5m", 300000, "5m"}, {"10m", 300000, "5m"}, {"1h", 900000, "5m"},
    {"2m", 60000, "1m"},  {"1m", 60000, "1m"},
};

static void compare_span(mw_store *ds, mw_store *raw, int only_5m, int64_t start, int64_t end)
{
    int compared = 0;
    for (size_t g = 0; g < sizeof(grids) / sizeof(grids[0]); g++) {
        if (only_5m && grids[g].step % 300000) continue;
        for (size_t e = 0; e < sizeof(exprs) / sizeof(exprs[0]); e++) {
            char q[256], info[256];
            snprintf(q, sizeof(q), exprs[e], grids[g].range);
            pq_result a, b;
            eval_at(ds, q, start, end, grids[g].step, &a);
            eval_at(raw, q, start, end, grids[g].step, &b);
            assert_true(a.nseries > 0);
            assert_same(q, &a, &b);
            snprintf(info, sizeof(info),
                     "PromQL info: samples older than the raw retention were read from the %s "
                     "downsampled resolution",
                     grids[g].res);
            if (a.nannots != 1 || !a.annots[0].info || strcmp(a.annots[0].msg, info) != 0)
                fail_msg("%s step %lld: annotations %zu, first '%s'", q, (long long)grids[g].step,
                         a.nannots, a.nannots ? a.annots[0].msg : "");
            assert_int_equal(b.nannots, 0);
            pq_result_free(&a);
            pq_result_free(&b);
            compared++;
        }
    }
    assert_int_equal(compared, (only_5m ? 3 : 5) * (int)(sizeof(exprs) / sizeof(exprs[0])));
}

static void compare_all(mw_store *ds, mw_store *raw, int only_5m)
{
    compare_span(ds, raw, only_5m, base_ms + 3600000, base_ms + 5 * 3600000);
}

typedef struct fixture {
    char raw[64], ds[64];
    mw_store *r;
} fixture;

static int setup(void **state)
{
    base_ms = (mw_now_ms() - 20 * 86400000LL) / 3600000 * 3600000;
    fixture *f = calloc(1, sizeof(*f));
    snprintf(f->raw, sizeof(f->raw), "/tmp/mw-ds-raw-XXXXXX");
    assert_non_null(mkdtemp(f->raw));
    f->r = open_store(f->raw, NULL);
    fill(f->r);
    assert_int_equal(mw_store_compact(f->r, 1), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    mw_store_close(f->r);
    rmdir_all(f->raw);
    free(f);
    return 0;
}

/* Downsampled at 1m and 5m (the raw block goes), answers equal the raw
 * store's; after a restart too. */
static void answers_equal_raw(void **state)
{
    fixture *f = *state;
    char dir[] = "/tmp/mw-ds-XXXXXX";
    assert_non_null(mkdtemp(dir));
    mw_store *s = open_store(dir, "1m:1000d,5m:2000d");
    fill(s);
    assert_int_equal(mw_store_compact(s, 1), 0);
    int raw, m1, m5;
    count_blocks(dir, &raw, &m1, &m5);
    assert_int_equal(raw, 0);
    assert_int_equal(m1, 1);
    assert_int_equal(m5, 1);
    compare_all(s, f->r, 0);
    /* A function it does not answer exactly says so. */
    pq_result a;
    eval(s, "irate(ds_total[5m])", 300000, &a);
    assert_int_equal(a.nannots, 1);
    assert_false(a.annots[0].info);
    assert_string_equal(a.annots[0].msg,
                        "PromQL warning: samples older than the raw retention were read from the "
                        "5m downsampled resolution, which this function does not answer exactly");
    pq_result_free(&a);
    mw_store_close(s);
    s = open_store(dir, "1m:1000d,5m:2000d");
    compare_all(s, f->r, 0);
    mw_store_close(s);
    rmdir_all(dir);
}

/* Each resolution has its own retention: 1m kept 15 days goes (the data
 * is 20 days old), 5m stays and answers the 1m steps too. */
static void retention_per_resolution(void **state)
{
    fixture *f = *state;
    char dir[] = "/tmp/mw-ds-XXXXXX";
    assert_non_null(mkdtemp(dir));
    mw_store *s = open_store(dir, "1m:1000d,5m:2000d");
    fill(s);
    assert_int_equal(mw_store_compact(s, 1), 0);
    mw_store_close(s);
    s = open_store(dir, "1m:15d,5m:2000d");
    assert_int_equal(mw_store_compact(s, 0), 0);
    int raw, m1, m5;
    count_blocks(dir, &raw, &m1, &m5);
    assert_int_equal(raw, 0);
    assert_int_equal(m1, 0);
    assert_int_equal(m5, 1);
    compare_all(s, f->r, 1);
    pq_result a;
    eval(s, "count_over_time(ds_gauge[1m])", 60000, &a);
    assert_int_equal(a.nannots, 1);
    assert_string_equal(a.annots[0].msg,
                        "PromQL info: samples older than the raw retention were read from the 5m "
                        "downsampled resolution");
    pq_result_free(&a);
    mw_store_close(s);
    /* A resolution whose samples are already too old is not made: with
     * both kept less than the data's 20 days, the raw block just goes. */
    char dir2[] = "/tmp/mw-ds-XXXXXX";
    assert_non_null(mkdtemp(dir2));
    s = open_store(dir2, "1m:18d,5m:19d");
    fill(s);
    assert_int_equal(mw_store_compact(s, 1), 0);
    count_blocks(dir2, &raw, &m1, &m5);
    assert_int_equal(raw + m1 + m5, 0);
    mw_store_close(s);
    rmdir_all(dir);
    rmdir_all(dir2);
}

/* Four raw blocks, each downsampled as it expires, the last sample of each
 * and the first of the next in one 5-minute window: the downsampled blocks
 * merge (level 2, one per resolution) and still answer as the raw store,
 * across the joins. */
static void merged_downsampled_blocks(void **state)
{
    (void)state;
    int64_t b0 = (mw_now_ms() - 20 * 86400000LL) / 3600000 * 3600000;
    char rdir[] = "/tmp/mw-ds-raw-XXXXXX", dir[] = "/tmp/mw-ds-XXXXXX";
    assert_non_null(mkdtemp(rdir));
    assert_non_null(mkdtemp(dir));
    mw_store *r = open_store(rdir, NULL), *s = open_store(dir, "1m:1000d,5m:2000d");
    for (int k = 0; k < 4; k++) {
        base_ms = b0 + 150000 + k * (6 * 3600000LL + 15000);
        fill(r);
        fill(s);
        assert_int_equal(mw_store_compact(r, 1), 0);
        assert_int_equal(mw_store_compact(s, 1), 0);
    }
    int raw, m1, m5;
    count_blocks(dir, &raw, &m1, &m5);
    assert_int_equal(raw * 100 + m1 * 10 + m5, 11);
    base_ms = b0;
    compare_span(s, r, 0, b0 + 3600000, b0 + 23 * 3600000);
    mw_store_close(s);
    mw_store_close(r);
    rmdir_all(dir);
    rmdir_all(rdir);
}

/* Size retention deletes the blocks with the oldest samples first, of any
 * resolution, and spares the newest raw block. */
static void size_retention_across_resolutions(void **state)
{
    (void)state;
    base_ms = (mw_now_ms() - 20 * 86400000LL) / 3600000 * 3600000;
    char dir[] = "/tmp/mw-ds-XXXXXX";
    assert_non_null(mkdtemp(dir));
    mw_store *s = open_store(dir, "1m:1000d,5m:2000d");
    fill(s);
    assert_int_equal(mw_store_compact(s, 1), 0);
    /* An hour of recent samples: a raw block. */
    int64_t t[240];
    double v[240];
    for (int i = 0; i < 240; i++) {
        t[i] = mw_now_ms() - 3600000 + i * 15000;
        v[i] = i;
    }
    append(s, "recent", "gauge", t, v, 240);
    assert_int_equal(mw_store_compact(s, 1), 0);
    int raw, m1, m5;
    count_blocks(dir, &raw, &m1, &m5);
    assert_int_equal(raw * 100 + m1 * 10 + m5, 111);
    mw_store_close(s);
    mw_store_options o = {.dir = dir, .background_ms = -1, .no_sync = 1, .retention_bytes = 1};
    mw_store_default_limits(&o.limits);
    o.retention_ms = 10 * 86400000LL;
    char why[256], err[256];
    assert_int_equal(
        mw_store_parse_downsample("1m:1000d,5m:2000d", o.downsample, &o.ndownsample, why, 256), 0);
    s = mw_store_open(&o, err, sizeof(err));
    assert_non_null(s);
    assert_int_equal(mw_store_compact(s, 0), 0);
    count_blocks(dir, &raw, &m1, &m5);
    assert_int_equal(raw * 100 + m1 * 10 + m5, 100);
    mw_store_close(s);
    rmdir_all(dir);
}

/* kill -9 at random moments while a raw block is downsampled: after each,
 * the store opens, finishes, and answers as the raw store, with one block
 * per resolution (nothing lost, nothing made twice). */
static void kill9_during_downsampling(void **state)
{
    fixture *f = *state;
    char tmpl[] = "/tmp/mw-ds-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    char seed[600];
    snprintf(seed, sizeof(seed), "%s/seed", tmpl);
    mw_store *s = open_store(seed, NULL);
    fill(s);
    assert_int_equal(mw_store_compact(s, 1), 0);
    mw_store_close(s);
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    int before = 0, mid = 0, after = 0;
    for (int round = 0; round < 12; round++) {
        char dir[700], cmd[1600];
        snprintf(dir, sizeof(dir), "%s/r%d", tmpl, round);
        snprintf(cmd, sizeof(cmd), "cp -r '%s' '%s'", seed, dir);
        assert_int_equal(system(cmd), 0);
        int p[2];
        assert_int_equal(pipe(p), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(p[0]);
            mw_store *c = open_store(dir, "1m:1000d,5m:2000d");
            if (write(p[1], "o", 1) != 1) _exit(4);
            int64_t t0 = mw_mono_ns();
            if (mw_store_compact(c, 0) != 0) _exit(5);
            if (getenv("DS_TIMING"))
                fprintf(stderr, "downsampling %.1f ms\n", (double)(mw_mono_ns() - t0) / 1e6);
            if (write(p[1], "c", 1) != 1) _exit(4);
            for (;;)
                pause();
        }
        close(p[1]);
        char ch;
        assert_int_equal(read(p[0], &ch, 1), 1);
        long us = getenv("DS_DELAY_US") ? atol(getenv("DS_DELAY_US")) : rand() % 250000;
        struct timespec d = {us / 1000000, (us % 1000000) * 1000L};
        nanosleep(&d, NULL);
        kill(pid, SIGKILL);
        int st;
        waitpid(pid, &st, 0);
        int done = read(p[0], &ch, 1) == 1;
        close(p[0]);
        int raw, m1, m5;
        count_blocks(dir, &raw, &m1, &m5);
        if (done)
            after++;
        else if (m1 || m5)
            mid++;
        else
            before++;
        s = open_store(dir, "1m:1000d,5m:2000d");
        assert_int_equal(mw_store_compact(s, 0), 0);
        count_blocks(dir, &raw, &m1, &m5);
        assert_int_equal(raw, 0);
        assert_int_equal(m1, 1);
        assert_int_equal(m5, 1);
        compare_all(s, f->r, 0);
        mw_store_close(s);
    }
    fprintf(stderr, "kill -9: %d before downsampling, %d during it, %d after\n", before, mid,
            after);
    rmdir_all(tmpl);
}

/* A block of format 2 (tests/fixtures/store-blocks-v2, written by the
 * build before format 3) reads as it did, and downsamples: the answers over
 * its 5m block equal those over it. */
static void old_format_block_reads_and_downsamples(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/mw-ds-XXXXXX";
    assert_non_null(mkdtemp(tmpl));
    const char *fx = getenv("MLWATCH_FIXTURES");
    if (!fx) fx = "tests/fixtures";
    char raw[600], ds[600], cmd[8192];
    snprintf(raw, sizeof(raw), "%s/raw", tmpl);
    snprintf(ds, sizeof(ds), "%s/ds", tmpl);
    snprintf(
        cmd, sizeof(cmd),
        "mkdir -p '%s/blocks' '%s/blocks' && cp '%s/store-blocks-v2/blocks/'*.blk '%s/blocks/' "
        "&& cp '%s/store-blocks-v2/blocks/'*.blk '%s/blocks/'",
        raw, ds, fx, raw, fx, ds);
    assert_int_equal(system(cmd), 0);
    mw_store *r = open_store(raw, NULL);
    /* Its values, bit for bit: m0 of the first pod is floor(80 + 20 sin). */
    mw_matcher m[2];
    char err[256];
    assert_int_equal(mw_matcher_init(&m[0], MW_MATCH_EQ, "__name__", "m0", err, sizeof(err)), 0);
    assert_int_equal(
        mw_matcher_init(&m[1], MW_MATCH_EQ, "pod", "train-0-worker-0", err, sizeof(err)), 0);
    mw_select_result sel;
    assert_int_equal(mw_store_select(r, m, 2, INT64_MIN, INT64_MAX, 0, &sel, err, sizeof(err)), 0);
    assert_int_equal(sel.nseries, 1);
    assert_int_equal(sel.series[0].n, 600);
    for (size_t i = 0; i < 600; i++) {
        assert_int_equal(sel.series[0].t[i], 1700000000000LL + (int64_t)i * 15000);
        double want = floor(80 + 20 * sin((double)i * 0.05));
        assert_memory_equal(&sel.series[0].v[i], &want, 8);
    }
    mw_select_result_free(&sel);
    mw_matcher_free(&m[0]);
    mw_matcher_free(&m[1]);
    mw_store *d = open_store(ds, "5m:100000d");
    assert_int_equal(mw_store_compact(d, 0), 0);
    int nr, m1, m5;
    count_blocks(ds, &nr, &m1, &m5);
    assert_int_equal(nr, 0);
    assert_int_equal(m5, 1);
    /* `mlwatch store inspect` names the resolution. */
    char *text = NULL;
    size_t tlen = 0;
    FILE *out = open_memstream(&text, &tlen);
    assert_int_equal(mw_store_inspect(ds, out, stderr), 0);
    fclose(out);
    if (getenv("DS_PRINT")) fputs(text, stderr);
    assert_non_null(strstr(text, "0000000002.blk        3     1         5m 2023-11-14T22:13:20Z "
                                 "2023-11-15T00:43:05Z        20       100         3720\n") ||
                    strstr(text, "0000000002.blk        3     1         5m 2023-11-14T22:13:20Z "
                                 "2023-11-15T00:43:05Z        20       100         3720 "));
    assert_non_null(strstr(text, "\n0 blocks (0 not readable), raw resolution, - to -: 0 series"));
    assert_non_null(strstr(text, "\n1 blocks, 5m resolution, 2023-11-14T22:13:20Z to "
                                 "2023-11-15T00:43:05Z: 20 series (summed over blocks), 3720 "
                                 "stored values, "));
    free(text);
    if (getenv("DS_KEEP_BLOCK")) { /* fuzz/corpus/store_block's format-3 seed */
        snprintf(cmd, sizeof(cmd), "cp '%s'/blocks/*.blk '%s'", ds, getenv("DS_KEEP_BLOCK"));
        assert_int_equal(system(cmd), 0);
    }
    static const char *const q[] = {
        "rate(m5[10m])",          "increase(m7[5m])",      "sum_over_time(m0[5m])",
        "min_over_time(m1[15m])", "max_over_time(m3[5m])", "count_over_time(m2[5m])",
        "{__name__=~\"m.\"}",
    };
    for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
        pq_result a, b;
        /* At multiples of 5m (the fixture starts between two). */
        int64_t t0 = (1700000000000LL + 1800000) / 300000 * 300000, t1 = t0 + 6600000;
        eval_at(d, q[i], t0, t1, 300000, &a);
        eval_at(r, q[i], t0, t1, 300000, &b);
        assert_true(a.nseries > 0);
        assert_same(q[i], &a, &b);
        /* The downsampled one's besides rate's non-counter info. */
        assert_int_equal(a.nannots, b.nannots + 1);
        pq_result_free(&a);
        pq_result_free(&b);
    }
    mw_store_close(d);
    mw_store_close(r);
    rmdir_all(tmpl);
}

static void expect_error(const char *text, const char *want)
{
    mw_store_resolution r[MW_STORE_MAX_RESOLUTIONS];
    size_t n;
    char why[256];
    assert_int_equal(mw_store_parse_downsample(text, r, &n, why, sizeof(why)), -1);
    assert_string_equal(why, want);
}

static void option_values(void **state)
{
    (void)state;
    mw_store_resolution r[MW_STORE_MAX_RESOLUTIONS];
    size_t n = 9;
    char why[256];
    assert_int_equal(mw_store_parse_downsample("", r, &n, why, sizeof(why)), 0);
    assert_int_equal(n, 0);
    assert_int_equal(mw_store_parse_downsample("5m:30d,1h:1y", r, &n, why, sizeof(why)), 0);
    assert_int_equal(n, 2);
    assert_int_equal(r[0].res_ms, 300000);
    assert_int_equal(r[0].keep_ms, 30 * 86400000LL);
    assert_int_equal(r[1].res_ms, 3600000);
    assert_int_equal(r[1].keep_ms, 365 * 86400000LL);
    expect_error("5m", "'5m' is not RES:KEEP (example: 5m:30d,1h:1y)");
    expect_error("5m:30d,", "'' is not RES:KEEP (example: 5m:30d,1h:1y)");
    expect_error("5x:30d", "invalid resolution '5x' (examples: 5m, 1h)");
    expect_error("5m:forever", "invalid time to keep 'forever' (examples: 30d, 1y)");
    expect_error("1500ms:30d", "resolution 1500ms is not a whole number of seconds");
    expect_error("1h:30m", "resolution 1h is kept for 30m, not longer than itself");
    expect_error("1h:30d,5m:1y", "resolutions must increase: 5m after a coarser or equal one");
    expect_error("5m:30d,1h:7d", "resolution 1h must be kept longer than the finer one before it");
    expect_error("1m:2d,2m:3d,3m:4d,4m:5d,5m:6d", "at most 4 resolutions");
}

/* Native histogram samples are not downsampled (their values are the
 * NaNs that refer to them): a series of histograms has no downsampled
 * data, and one mixing floats and histograms keeps its floats' aggregates
 * only. Raw, both count 20 samples in the window. */
static void histograms_not_downsampled(void **state)
{
    (void)state;
    char dir[] = "/tmp/mw-ds-XXXXXX";
    assert_non_null(mkdtemp(dir));
    mw_store *s = open_store(dir, "1m:1000d,5m:2000d");
    int32_t idx[1] = {0};
    double cnt[1] = {3};
    mw_histogram h = {.schema = 0, .count = 3, .sum = 1.5, .npos = 1, .pos_idx = idx, .pos = cnt};
    int64_t t[20];
    double vh[20], vm[20];
    char err[256];
    for (int i = 0; i < 20; i++) {
        t[i] = base_ms + 1 + (int64_t)i * 15000; /* all in (base, base + 5m] */
        assert_int_equal(mw_store_put_histogram(s, &h, &vh[i], err, sizeof(err)), 0);
        vm[i] = i % 2 ? vh[i] : (double)i; /* floats 0, 2, ..., 18: sum 90 */
    }
    append(s, "ds_h", "hist", t, vh, 20);
    append(s, "ds_h", "mixed", t, vm, 20);
    assert_int_equal(mw_store_compact(s, 1), 0);
    int raw, m1, m5;
    count_blocks(dir, &raw, &m1, &m5);
    assert_int_equal(raw, 0);
    assert_int_equal(m5, 1);
    const char *q[] = {"count_over_time(ds_h[5m])", "sum_over_time(ds_h[5m])"};
    const double want[] = {10, 90};
    for (int k = 0; k < 2; k++) {
        pq_result a;
        eval_at(s, q[k], base_ms + 300000, base_ms + 300000, 300000, &a);
        assert_int_equal(a.nseries, 1);
        assert_int_equal(a.series[0].nlabels, 1);
        assert_string_equal(a.series[0].labels[0].value, "mixed");
        assert_int_equal(a.series[0].n, 1);
        if (a.series[0].v[0] != want[k]) fail_msg("%s: %.17g", q[k], a.series[0].v[0]);
        assert_int_equal(a.nannots, 1);
        assert_string_equal(a.annots[0].msg, "PromQL info: samples older than the raw retention "
                                             "were read from the 5m downsampled resolution");
        pq_result_free(&a);
    }
    mw_store_close(s);
    rmdir_all(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(option_values),
        cmocka_unit_test(old_format_block_reads_and_downsamples),
        cmocka_unit_test_setup_teardown(answers_equal_raw, setup, teardown),
        cmocka_unit_test_setup_teardown(retention_per_resolution, setup, teardown),
        cmocka_unit_test_setup_teardown(kill9_during_downsampling, setup, teardown),
        cmocka_unit_test(size_retention_across_resolutions),
        cmocka_unit_test(merged_downsampled_blocks),
        cmocka_unit_test(histograms_not_downsampled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
