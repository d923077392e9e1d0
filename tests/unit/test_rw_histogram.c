/* test_rw_histogram.c - native histograms through remote write 1.0: a
 * TimeSeries.histograms message encoded by protobuf-c (from
 * src/proto/remote.proto) and decoded by the receiver's own walk
 * (rw_histogram.c) with exact values; the refusals (spans against
 * buckets, schema); the compact encoding's round trip and size; the
 * store keeping them across a restart (histogram.c); and a resent one
 * skipped as a duplicate without growing the histograms file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/buf.h"
#include "proto/rw_encode.h"
#include "remote.pb-c.h"
#include "store/histogram.h"
#include "store/remote_write.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* One series "h" holding one histogram: schema 3, zero bucket 1 (width
 * 0.001), negative buckets -2, -1 with counts 1, 2 (deltas 1, 1), positive
 * buckets 1 and 3, 4 (two spans) with counts 2, 1, 1 (deltas 2, -1, 0). */
static size_t encode(uint8_t *out, int32_t schema, size_t ndeltas)
{
    Prometheus__BucketSpan ns = PROMETHEUS__BUCKET_SPAN__INIT, ps1 = PROMETHEUS__BUCKET_SPAN__INIT,
                           ps2 = PROMETHEUS__BUCKET_SPAN__INIT;
    ns.offset = -2;
    ns.length = 2;
    ps1.offset = 1;
    ps1.length = 1;
    ps2.offset = 1; /* gap of one bucket after index 1: starts at 3 */
    ps2.length = 2;
    Prometheus__BucketSpan *nsp[] = {&ns}, *psp[] = {&ps1, &ps2};
    int64_t nd[] = {1, 1}, pd[] = {2, -1, 0};
    Prometheus__Histogram h = PROMETHEUS__HISTOGRAM__INIT;
    h.count_case = PROMETHEUS__HISTOGRAM__COUNT_COUNT_INT;
    h.count_int = 8;
    h.sum = -2.5;
    h.schema = schema;
    h.zero_threshold = 0.001;
    h.zero_count_case = PROMETHEUS__HISTOGRAM__ZERO_COUNT_ZERO_COUNT_INT;
    h.zero_count_int = 1;
    h.n_negative_spans = 1;
    h.negative_spans = nsp;
    h.n_negative_deltas = 2;
    h.negative_deltas = nd;
    h.n_positive_spans = 2;
    h.positive_spans = psp;
    h.n_positive_deltas = ndeltas;
    h.positive_deltas = pd;
    h.reset_hint = PROMETHEUS__HISTOGRAM__RESET_HINT__NO;
    h.timestamp = 1700000000123;
    Prometheus__Histogram *hp[] = {&h};
    Prometheus__Label l = PROMETHEUS__LABEL__INIT;
    l.name = (char *)"__name__";
    l.value = (char *)"h";
    Prometheus__Label *lp[] = {&l};
    Prometheus__TimeSeries ts = PROMETHEUS__TIME_SERIES__INIT;
    ts.n_labels = 1;
    ts.labels = lp;
    ts.n_histograms = 1;
    ts.histograms = hp;
    Prometheus__TimeSeries *tsp[] = {&ts};
    Prometheus__WriteRequest req = PROMETHEUS__WRITE_REQUEST__INIT;
    req.n_timeseries = 1;
    req.timeseries = tsp;
    assert_true(prometheus__write_request__get_packed_size(&req) < 512);
    return prometheus__write_request__pack(&req, out);
}

static int decode(const uint8_t *raw, size_t n, mw_rw_request *r, char *err, size_t errsize)
{
    mw_buf body;
    mw_buf_init(&body, 0);
    assert_int_equal(mw_rw_snappy((const char *)raw, n, &body), 0);
    err[0] = '\0';
    int rc = mw_rw_decode((const uint8_t *)body.data, body.len, r, err, errsize);
    mw_buf_free(&body);
    return rc;
}

static void check_decoded(const mw_histogram *h)
{
    assert_int_equal(h->schema, 3);
    assert_true(h->count == 8 && h->sum == -2.5 && h->zero_count == 1);
    assert_true(h->zero_threshold == 0.001);
    assert_int_equal(h->hint, MW_HINT_NO);
    assert_int_equal(h->nneg, 2);
    assert_int_equal(h->neg_idx[0], -2);
    assert_int_equal(h->neg_idx[1], -1);
    assert_true(h->neg[0] == 1 && h->neg[1] == 2);
    assert_int_equal(h->npos, 3);
    assert_int_equal(h->pos_idx[0], 1);
    assert_int_equal(h->pos_idx[1], 3);
    assert_int_equal(h->pos_idx[2], 4);
    assert_true(h->pos[0] == 2 && h->pos[1] == 1 && h->pos[2] == 1);
}

static void decodes_exact_values(void **state)
{
    (void)state;
    uint8_t raw[512];
    size_t n = encode(raw, 3, 3);
    mw_rw_request r;
    char err[256];
    assert_int_equal(decode(raw, n, &r, err, sizeof(err)), 0);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.nhists, 1);
    assert_int_equal(r.ts[0].nsamples, 1);
    assert_int_equal(r.ts[0].samples[0].t, 1700000000123);
    assert_true(mw_hist_is_ref(r.ts[0].samples[0].v));
    check_decoded(&r.hists[0]);
    mw_rw_request_free(&r);
}

static void refusals_say_why(void **state)
{
    (void)state;
    uint8_t raw[512];
    size_t n = encode(raw, 3, 2); /* spans need 3 positive buckets, 2 sent */
    mw_rw_request r;
    char err[256];
    assert_int_equal(decode(raw, n, &r, err, sizeof(err)), -1);
    assert_string_equal(err, "histogram positive spans need 3 buckets, have 2 buckets: spans and "
                             "buckets do not match");
    mw_rw_request_free(&r);
    n = encode(raw, 9, 3);
    assert_int_equal(decode(raw, n, &r, err, sizeof(err)), -1);
    assert_string_equal(err, "histogram schema out of range (-4..8, or -53 for custom buckets)");
    mw_rw_request_free(&r);
    n = encode(raw, -53, 3);
    assert_int_equal(decode(raw, n, &r, err, sizeof(err)), -1);
    assert_string_equal(err, "custom-bucket histogram has negative buckets or a zero bucket");
    mw_rw_request_free(&r);
}

/* A float sample whose bits look like a histogram reference is a plain
 * NaN once decoded: a sender cannot point into the histograms file. */
static void float_refs_cleaned(void **state)
{
    (void)state;
    uint64_t bits = MW_HIST_REF_TAG | 8;
    uint8_t raw[] = {0x0a, 0x0d, 0x12, 0x0b, 0x09, 0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0x01};
    memcpy(raw + 5, &bits, 8);
    mw_rw_request r;
    char err[256];
    assert_int_equal(decode(raw, sizeof(raw), &r, err, sizeof(err)), 0);
    assert_int_equal(r.ts[0].nsamples, 1);
    assert_false(mw_hist_is_ref(r.ts[0].samples[0].v));
    assert_true(isnan(r.ts[0].samples[0].v));
    mw_rw_request_free(&r);
}

static void encoding_round_trip_and_size(void **state)
{
    (void)state;
    uint8_t raw[512];
    size_t n = encode(raw, 3, 3);
    mw_rw_request r;
    char err[256];
    assert_int_equal(decode(raw, n, &r, err, sizeof(err)), 0);
    mw_buf b;
    mw_buf_init(&b, 0);
    mw_hist_encode(&r.hists[0], &b);
    /* version, schema, hint, flags (4), zero threshold and sum (8 + 8),
     * count and zero count (1 + 1), the positive count and 3 (index delta,
     * count delta) pairs (7), the negative ones (5), the custom bounds'
     * count(1): 35 bytes. */
    assert_int_equal(b.len, 35);
    mw_histogram back;
    assert_int_equal(mw_hist_decode((const uint8_t *)b.data, b.len, &back), 0);
    check_decoded(&back);
    mw_hist_free(&back);
    assert_int_equal(mw_hist_decode((const uint8_t *)b.data, b.len - 1, &back), -1);
    mw_buf_free(&b);
    mw_rw_request_free(&r);
}

static void store_keeps_them_across_a_restart(void **state)
{
    (void)state;
    char dir[] = "/tmp/mw-rwh-XXXXXX";
    assert_non_null(mkdtemp(dir));
    mw_store_options o = {.dir = dir, .no_sync = 1, .background_ms = -1};
    mw_store_default_limits(&o.limits);
    char err[256];
    mw_store *s = mw_store_open(&o, err, sizeof(err));
    assert_non_null(s);
    uint8_t raw[512];
    size_t n = encode(raw, 3, 3);
    mw_rw_request r;
    assert_int_equal(decode(raw, n, &r, err, sizeof(err)), 0);
    assert_int_equal(mw_rw_store_histograms(s, &r, 1, err, sizeof(err)), 0);
    assert_int_equal(mw_store_append(s, r.ts, r.n, MW_STORE_WAIT, err, sizeof(err)), 0);
    mw_rw_request_free(&r);
    mw_store_close(s);
    s = mw_store_open(&o, err, sizeof(err));
    assert_non_null(s);
    mw_matcher m;
    assert_int_equal(mw_matcher_init(&m, MW_MATCH_EQ, "__name__", "h", err, sizeof(err)), 0);
    mw_select_result sel;
    assert_int_equal(mw_store_select(s, &m, 1, 0, INT64_MAX / 2, 0, &sel, err, sizeof(err)), 0);
    assert_int_equal(sel.nseries, 1);
    assert_int_equal(sel.series[0].n, 1);
    assert_int_equal(sel.series[0].t[0], 1700000000123);
    mw_histogram h;
    assert_int_equal(mw_store_get_histogram(s, sel.series[0].v[0], &h), 0);
    check_decoded(&h);
    mw_hist_free(&h);
    /* Not one of the store's references: refused. */
    assert_int_equal(mw_store_get_histogram(s, 1.5, &h), -1);
    assert_int_equal(mw_store_get_histogram(s, mw_hist_from_bits(MW_HIST_REF_TAG | 4096), &h), -1);
    mw_select_result_free(&sel);
    mw_matcher_free(&m);
    mw_store_close(s);
    char cmd[64];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static long hist_file_size(const char *dir)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/histograms", dir);
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Store the request raw[0..n) as /api/v1/write does; the store's answer. */
static int write_request(mw_store *s, const uint8_t *raw, size_t n, char *err, size_t errsize)
{
    mw_rw_request r;
    assert_int_equal(decode(raw, n, &r, err, errsize), 0);
    int rc = mw_rw_store_histograms(s, &r, 1, err, errsize) < 0
                 ? 503
                 : mw_store_append(s, r.ts, r.n, MW_STORE_WAIT, err, errsize);
    mw_rw_request_free(&r);
    return rc;
}

/* A resent histogram sample (a retried batch: same series, time and
 * histogram) is an exact duplicate: accepted, counted as one, and the
 * histograms file does not grow; the one sample still reads back whole.
 * A different histogram at that time is refused as for floats. */
static void resent_histogram_is_a_duplicate(void **state)
{
    (void)state;
    char dir[] = "/tmp/mw-rwh-XXXXXX";
    assert_non_null(mkdtemp(dir));
    mw_store_options o = {.dir = dir, .no_sync = 1, .background_ms = -1};
    mw_store_default_limits(&o.limits);
    char err[256];
    mw_store *s = mw_store_open(&o, err, sizeof(err));
    assert_non_null(s);
    uint8_t raw[512];
    size_t n = encode(raw, 3, 3);
    assert_int_equal(write_request(s, raw, n, err, sizeof(err)), 0);
    assert_int_equal(hist_file_size(dir), 8 + 35); /* one record: header and the 35 bytes */
    assert_int_equal(write_request(s, raw, n, err, sizeof(err)), 0);
    assert_int_equal(write_request(s, raw, n, err, sizeof(err)), 0);
    assert_int_equal(hist_file_size(dir), 8 + 35);
    mw_store_stats st;
    mw_store_get_stats(s, &st);
    assert_int_equal(st.samples_appended, 1);
    assert_int_equal(st.samples_duplicate, 2);
    size_t n2 = encode(raw, 2, 3); /* schema 2: another histogram, same time */
    assert_int_equal(write_request(s, raw, n2, err, sizeof(err)), 400);
    assert_string_equal(err, "duplicate sample for timestamp 1700000000123 with a different value "
                             "for series {__name__=\"h\"}; nothing of this request was stored");
    mw_matcher m;
    assert_int_equal(mw_matcher_init(&m, MW_MATCH_EQ, "__name__", "h", err, sizeof(err)), 0);
    mw_select_result sel;
    assert_int_equal(mw_store_select(s, &m, 1, 0, INT64_MAX / 2, 0, &sel, err, sizeof(err)), 0);
    assert_int_equal(sel.nseries, 1);
    assert_int_equal(sel.series[0].n, 1);
    assert_int_equal(mw_hist_bits(sel.series[0].v[0]), MW_HIST_REF_TAG | 0);
    mw_histogram h;
    assert_int_equal(mw_store_get_histogram(s, sel.series[0].v[0], &h), 0);
    check_decoded(&h);
    mw_hist_free(&h);
    mw_select_result_free(&sel);
    mw_matcher_free(&m);
    mw_store_close(s);
    char cmd[64];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(decodes_exact_values),
        cmocka_unit_test(refusals_say_why),
        cmocka_unit_test(float_refs_cleaned),
        cmocka_unit_test(encoding_round_trip_and_size),
        cmocka_unit_test(store_keeps_them_across_a_restart),
        cmocka_unit_test(resent_histogram_is_a_duplicate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
