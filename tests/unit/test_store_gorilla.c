/* test_store_gorilla.c - Gorilla chunk encoding (src/store/gorilla.c):
 * bit-exact round trips on random and edge values, and on the value
 * families real exporters produce (large counters with small increments,
 * gauges at three decimals, NaN payloads, the stale marker...), both in the
 * codec and through the store, across its chunk boundaries. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "store/gorilla.h"
#include "store/head.h"
#include "store/store.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t bits_of(double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof(b));
    return b;
}

static double from_bits(uint64_t b)
{
    double v;
    memcpy(&v, &b, sizeof(v));
    return v;
}

/* Encode n samples, decode them, and require every timestamp and every
 * value's bits back; also that decoding stops exactly at n. */
static void roundtrip(const int64_t *t, const double *v, size_t n)
{
    uint8_t *buf = calloc(n * MW_GORILLA_MAX_SAMPLE_BYTES + 32, 1);
    memset(buf, 0xa5, n * MW_GORILLA_MAX_SAMPLE_BYTES + 32); /* garbage must not leak in */
    mw_gorilla_enc e;
    mw_gorilla_enc_init(&e);
    for (size_t i = 0; i < n; i++) {
        size_t before = mw_gorilla_bytes(&e);
        uint32_t predicted = mw_gorilla_bits_after(&e, t[i], v[i]);
        mw_gorilla_append(&e, buf, t[i], v[i]);
        assert_int_equal(e.nbits, predicted); /* the head sizes buffers with it */
        assert_true(mw_gorilla_bytes(&e) - before <= MW_GORILLA_MAX_SAMPLE_BYTES);
    }
    assert_int_equal(e.n, n);
    mw_gorilla_dec d;
    mw_gorilla_dec_init(&d, buf, mw_gorilla_bytes(&e), (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        int64_t tt;
        double vv;
        assert_int_equal(mw_gorilla_next(&d, &tt, &vv), 1);
        assert_true(tt == t[i]);
        assert_true(bits_of(vv) == bits_of(v[i]));
    }
    int64_t tt;
    double vv;
    assert_int_equal(mw_gorilla_next(&d, &tt, &vv), 0);
    /* Cut short by one byte: the decoder reports corruption, never reads past. */
    if (mw_gorilla_bytes(&e) > 1) {
        size_t nb = mw_gorilla_bytes(&e) - 1;
        uint8_t *cut = malloc(nb);
        memcpy(cut, buf, nb);
        mw_gorilla_dec_init(&d, cut, nb, (uint32_t)n);
        int rc;
        size_t got = 0;
        while ((rc = mw_gorilla_next(&d, &tt, &vv)) == 1)
            got++;
        /* The last byte may hold only padding bits of the final sample. */
        assert_true(rc == -1 || (rc == 0 && got == n));
        free(cut);
    }
    free(buf);
}

static void edge_values(void **state)
{
    (void)state;
    const double vals[] = {
        0.0,
        -0.0,
        NAN,
        -NAN,
        from_bits(0x7ff0000000000002ull), /* Prometheus stale marker */
        INFINITY,
        -INFINITY,
        1.0,
        from_bits(0x7ff0000000000002ull),
        from_bits(0x7ff0000000000002ull), /* repeated: the "same value" bit */
        from_bits(0x0000000000000001ull), /* smallest subnormal */
        from_bits(0x8000000000000001ull),
        1.7976931348623157e308,
        -1.7976931348623157e308,
        from_bits(0xffffffffffffffffull), /* NaN with every payload bit */
        from_bits(0x7ff8000000000001ull),
        42.0,
        42.0,
        0.1,
        0.2,
    };
    size_t n = sizeof(vals) / sizeof(vals[0]);
    int64_t t[sizeof(vals) / sizeof(vals[0])];
    for (size_t i = 0; i < n; i++)
        t[i] = 1700000000000 + (int64_t)i * 15000;
    roundtrip(t, vals, n);
}

static void timestamp_extremes(void **state)
{
    (void)state;
    /* Equal deltas (dod 0), each bucket's bounds, huge jumps, 64-bit ends,
     * and wrap-around of the delta arithmetic. */
    const int64_t t[] = {
        INT64_MIN,
        INT64_MIN + 1,
        INT64_MIN + 2,
        INT64_MIN + 3,
        -1,
        0,
        1,
        8193 + 1,
        8193 + 1 + 8193 + 8192,        /* dod = +8192 (top of bucket 1) */
        8193 + 1 + 8193 + 8192 + 8193, /* dod = -8191 - 1 */
        1000000,
        1000000 + 65536,
        1000000 + 65536 * 2 + 65536,
        5000000000LL,
        INT64_MAX - 10,
        INT64_MAX - 9,
        INT64_MAX,
    };
    size_t n = sizeof(t) / sizeof(t[0]);
    double v[sizeof(t) / sizeof(t[0])];
    for (size_t i = 0; i < n; i++)
        v[i] = (double)i;
    roundtrip(t, v, n);
    /* Decreasing and equal timestamps are not what the store appends, but
     * the codec must still round-trip them bit for bit. */
    const int64_t odd[] = {100, 100, 100, 50, INT64_MAX, INT64_MIN, 0, 0};
    double ov[8] = {1, 1, 2, 3, 4, 5, 6, 6};
    roundtrip(odd, ov, 8);
    /* First delta just under and at the 14-bit limit. */
    const int64_t fd1[] = {0, 16383, 32766}, fd2[] = {0, 16384, 32768};
    double fv[3] = {1, 2, 3};
    roundtrip(fd1, fv, 3);
    roundtrip(fd2, fv, 3);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void random_values(void **state)
{
    (void)state;
    enum { N = 5000 };
    int64_t *t = malloc(N * sizeof(int64_t));
    double *v = malloc(N * sizeof(double));
    for (int round = 0; round < 40; round++) {
        int64_t cur = (int64_t)next_rand();
        for (int i = 0; i < N; i++) {
            switch (round % 4) {
            case 0: /* regular scrape with jitter */
                cur += 15000 + (int64_t)(next_rand() % 200) - 100;
                v[i] = sin(i * 0.1) * 40 + 50;
                break;
            case 1: /* counters */
                cur += 1000;
                v[i] = (double)(i * 7);
                break;
            case 2: /* anything at all */
                cur = (int64_t)next_rand();
                v[i] = from_bits(next_rand());
                break;
            default: /* bursts of small and large steps, few distinct values */
                cur += (int64_t)(next_rand() % 3 == 0 ? next_rand() % 2000000 : 1);
                v[i] = (double)(next_rand() % 4);
                break;
            }
            t[i] = cur;
        }
        size_t n = 1 + next_rand() % N;
        roundtrip(t, v, n);
    }
    free(t);
    free(v);
}

/* ---- value families of real exporters ---- */

enum { FAMILY_SAMPLES = 3000 }; /* dozens of head chunks each */

typedef struct value_family {
    const char *name;
    void (*fill)(double *v, size_t n);
} value_family;

static void counter_1e10_plus_1(double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = 1e10 + (double)i;
}

static void counter_1e12_plus_1(double *v, size_t n)
{
    /* The review's case: 1e12+1 came back as 1004294967296. */
    for (size_t i = 0; i < n; i++)
        v[i] = 1e12 + (double)i;
}

static void counter_1e15_plus_4096(double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = 1e15 + 4096.0 * (double)i;
}

static void counter_bytes_irregular(double *v, size_t n)
{
    /* A byte counter of 1e11-1e14 growing by a few pages or not at all. */
    double c = 123456789012.0;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = next_rand();
        c += (double)((r % 3) * 4096 + (r >> 60));
        if (i == n / 2) c = 98765432109876.0; /* a jump to another magnitude */
        v[i] = c;
    }
}

static void gauge_three_decimals(double *v, size_t n)
{
    /* A temperature or a load average: k/1000 for a random walk k. */
    int64_t k = 45123;
    for (size_t i = 0; i < n; i++) {
        k += (int64_t)(next_rand() % 201) - 100;
        v[i] = (double)k / 1000.0;
    }
}

static void memory_gauge(double *v, size_t n)
{
    /* Memory in bytes around 80 GB, moving by single pages. */
    double m = 8e10;
    for (size_t i = 0; i < n; i++) {
        m += ((int)(next_rand() % 5) - 2) * 4096.0;
        v[i] = m;
    }
}

static void integers(double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (double)(int64_t)(next_rand() % 2000001) - 1000000.0;
}

static void nan_payloads(double *v, size_t n)
{
    const uint64_t payloads[] = {
        0x7ff8000000000000ull, /* the default quiet NaN */
        0xfff8000000000000ull, /* its negative */
        0x7ff0000000000001ull, /* signalling */
        0x7ff0000000000002ull, /* the stale marker */
        0x7fffffffffffffffull, 0xffffffffffffffffull, 0x7ff8000000000001ull,
        0x7ff4000000000000ull, 0x7ff00000deadbeefull,
    };
    size_t np = sizeof(payloads) / sizeof(payloads[0]);
    for (size_t i = 0; i < n; i++)
        v[i] = from_bits(payloads[(i % 7 == 0) ? next_rand() % np : (i / 3) % np]);
}

static void infinities(double *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        switch (i % 5) {
        case 0:
            v[i] = INFINITY;
            break;
        case 1:
            v[i] = -INFINITY;
            break;
        case 2:
            v[i] = 1e12 + (double)i;
            break;
        case 3:
            v[i] = INFINITY;
            break;
        default:
            v[i] = -0.0;
            break;
        }
    }
}

static void stale_markers(double *v, size_t n)
{
    /* A counter that goes stale now and then (its target disappears) and
     * comes back: stale marker runs between large values. */
    for (size_t i = 0; i < n; i++)
        v[i] = (i % 50) >= 45 ? from_bits(0x7ff0000000000002ull) : 5e11 + (double)i;
}

static void signed_zeros(double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = (i % 3 == 1) ? -0.0 : 0.0;
}

static void subnormals(double *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t mant = i % 4 == 0 ? next_rand() & 0x000fffffffffffffull : i + 1;
        v[i] = from_bits(mant | (i % 2 ? 0x8000000000000000ull : 0));
    }
}

static void identical(double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = 1e12 + 1;
}

static void alternating(double *v, size_t n)
{
    /* Two values one unit apart at 1e12, then two far apart. */
    for (size_t i = 0; i < n; i++)
        v[i] = i < n / 2 ? (i % 2 ? 1e12 + 1 : 1e12) : (i % 2 ? -3.5 : 1e300);
}

static void random_doubles(double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = from_bits(next_rand());
}

static const value_family families[] = {
    {"counter_1e10_plus_1", counter_1e10_plus_1},
    {"counter_1e12_plus_1", counter_1e12_plus_1},
    {"counter_1e15_plus_4096", counter_1e15_plus_4096},
    {"counter_bytes_irregular", counter_bytes_irregular},
    {"gauge_three_decimals", gauge_three_decimals},
    {"memory_gauge", memory_gauge},
    {"integers", integers},
    {"nan_payloads", nan_payloads},
    {"infinities", infinities},
    {"stale_markers", stale_markers},
    {"signed_zeros", signed_zeros},
    {"subnormals", subnormals},
    {"identical", identical},
    {"alternating", alternating},
    {"random_doubles", random_doubles},
};
#define NFAMILIES (sizeof(families) / sizeof(families[0]))

/* Scrape times: 15 s with a few ms of jitter. */
static void scrape_times(int64_t *t, size_t n)
{
    int64_t cur = 1700000000000;
    for (size_t i = 0; i < n; i++) {
        cur += 15000 + (int64_t)(next_rand() % 11) - 5;
        t[i] = cur;
    }
}

/* The first sample of v whose bits differ from want (n when none), for a
 * message that names the family, the index and both values. */
static void expect_bits(const char *family, const char *where, const double *got,
                        const double *want, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (bits_of(got[i]) != bits_of(want[i])) {
            fail_msg("%s (%s): sample %zu is %.17g (0x%016llx), not %.17g (0x%016llx)", family,
                     where, i, got[i], (unsigned long long)bits_of(got[i]), want[i],
                     (unsigned long long)bits_of(want[i]));
        }
    }
}

static void families_roundtrip_codec(void **state)
{
    (void)state;
    int64_t *t = malloc(FAMILY_SAMPLES * sizeof(int64_t));
    double *v = malloc(FAMILY_SAMPLES * sizeof(double));
    double *got = malloc(FAMILY_SAMPLES * sizeof(double));
    int64_t *gt = malloc(FAMILY_SAMPLES * sizeof(int64_t));
    uint8_t *buf = malloc(FAMILY_SAMPLES * MW_GORILLA_MAX_SAMPLE_BYTES + 32);
    for (size_t f = 0; f < NFAMILIES; f++) {
        scrape_times(t, FAMILY_SAMPLES);
        families[f].fill(v, FAMILY_SAMPLES);
        /* One long chunk. */
        mw_gorilla_enc e;
        mw_gorilla_enc_init(&e);
        for (size_t i = 0; i < FAMILY_SAMPLES; i++)
            mw_gorilla_append(&e, buf, t[i], v[i]);
        size_t n = mw_gorilla_decode(buf, mw_gorilla_bytes(&e), FAMILY_SAMPLES, gt, got);
        assert_int_equal(n, FAMILY_SAMPLES);
        expect_bits(families[f].name, "one chunk", got, v, FAMILY_SAMPLES);
        assert_memory_equal(gt, t, FAMILY_SAMPLES * sizeof(int64_t));
        /* Through the other decoder too, with the size predictions. */
        roundtrip(t, v, FAMILY_SAMPLES);
        /* Cut as the head cuts (a new chunk once MW_HEAD_CHUNK_BYTES is
         * reached): each chunk starts from a fresh encoder, in the middle
         * of the family's run. */
        size_t start = 0, chunks = 0;
        while (start < FAMILY_SAMPLES) {
            mw_gorilla_enc_init(&e);
            size_t i = start;
            while (i < FAMILY_SAMPLES && mw_gorilla_bytes(&e) < MW_HEAD_CHUNK_BYTES) {
                mw_gorilla_append(&e, buf, t[i], v[i]);
                i++;
            }
            n = mw_gorilla_decode(buf, mw_gorilla_bytes(&e), (uint32_t)(i - start), gt, got);
            assert_int_equal(n, i - start);
            expect_bits(families[f].name, "head-sized chunks", got, v + start, i - start);
            assert_memory_equal(gt, t + start, (i - start) * sizeof(int64_t));
            start = i;
            chunks++;
        }
        assert_true(chunks > 1);
    }
    free(t);
    free(v);
    free(got);
    free(gt);
    free(buf);
}

/* Every family's samples of the store's series {__name__="family"}, by
 * bits and timestamps. */
static void expect_store_holds(mw_store *s, const char *where, int64_t *const *t, double *const *v)
{
    for (size_t f = 0; f < NFAMILIES; f++) {
        mw_matcher m;
        char err[256];
        assert_int_equal(
            mw_matcher_init(&m, MW_MATCH_EQ, "__name__", families[f].name, err, sizeof(err)), 0);
        mw_select_result r;
        assert_int_equal(mw_store_select(s, &m, 1, INT64_MIN, INT64_MAX, 0, &r, err, sizeof(err)),
                         0);
        assert_int_equal(r.nseries, 1);
        if (r.series[0].n != FAMILY_SAMPLES)
            fail_msg("%s (%s): %zu samples, not %d", families[f].name, where, r.series[0].n,
                     FAMILY_SAMPLES);
        expect_bits(families[f].name, where, r.series[0].v, v[f], FAMILY_SAMPLES);
        assert_memory_equal(r.series[0].t, t[f], FAMILY_SAMPLES * sizeof(int64_t));
        mw_select_result_free(&r);
        mw_matcher_free(&m);
    }
}

static void families_roundtrip_store(void **state)
{
    (void)state;
    char dir[] = "/tmp/mw-gorilla-XXXXXX";
    assert_non_null(mkdtemp(dir));
    mw_store_options o = {.dir = dir, .background_ms = -1, .no_sync = 1};
    mw_store_default_limits(&o.limits);
    char err[256] = "";
    mw_store *s = mw_store_open(&o, err, sizeof(err));
    assert_non_null(s);
    int64_t *t[NFAMILIES];
    double *v[NFAMILIES];
    for (size_t f = 0; f < NFAMILIES; f++) {
        t[f] = malloc(FAMILY_SAMPLES * sizeof(int64_t));
        v[f] = malloc(FAMILY_SAMPLES * sizeof(double));
        scrape_times(t[f], FAMILY_SAMPLES);
        families[f].fill(v[f], FAMILY_SAMPLES);
    }
    /* Appended interleaved, 100 samples of each series per write, as a
     * remote-write sender batches them. */
    for (size_t at = 0; at < FAMILY_SAMPLES; at += 100) {
        mw_label lab[NFAMILIES][1];
        mw_store_sample sm[NFAMILIES][100];
        mw_store_ts ts[NFAMILIES];
        for (size_t f = 0; f < NFAMILIES; f++) {
            lab[f][0] = (mw_label){"__name__", families[f].name};
            for (size_t k = 0; k < 100; k++)
                sm[f][k] = (mw_store_sample){t[f][at + k], v[f][at + k]};
            ts[f] = (mw_store_ts){lab[f], 1, sm[f], 100};
        }
        char msg[512] = "";
        if (mw_store_append(s, ts, NFAMILIES, 0, msg, sizeof(msg)) != 0)
            fail_msg("append at %zu: %s", at, msg);
    }
    expect_store_holds(s, "store head", t, v);
    /* Chunk files and blocks, then a restart from the snapshot and WAL. */
    assert_int_equal(mw_store_compact(s, 1), 0);
    expect_store_holds(s, "store after compaction", t, v);
    mw_store_close(s);
    s = mw_store_open(&o, err, sizeof(err));
    assert_non_null(s);
    expect_store_holds(s, "store reopened", t, v);
    mw_store_close(s);
    for (size_t f = 0; f < NFAMILIES; f++) {
        free(t[f]);
        free(v[f]);
    }
    char cmd[64];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void compression_ratio(void **state)
{
    (void)state;
    /* A steady 15 s scrape of a counter: about 2 bytes per sample. */
    enum { N = 120 };
    uint8_t buf[N * MW_GORILLA_MAX_SAMPLE_BYTES];
    mw_gorilla_enc e;
    mw_gorilla_enc_init(&e);
    for (int i = 0; i < N; i++)
        mw_gorilla_append(&e, buf, 1700000000000 + i * 15000, i * 15.0);
    assert_true(mw_gorilla_bytes(&e) < N * 3);
    /* A constant series: under 2 bits per sample after the first. */
    mw_gorilla_enc_init(&e);
    for (int i = 0; i < N; i++)
        mw_gorilla_append(&e, buf, 1700000000000 + i * 15000, 1.0);
    assert_int_equal(mw_gorilla_bytes(&e), (128 + 15 + 1 + (N - 2) * 2 + 7) / 8);
}

static void corrupt_bytes_never_crash(void **state)
{
    (void)state;
    uint8_t buf[256];
    for (int k = 0; k < 2000; k++) {
        for (size_t i = 0; i < sizeof(buf); i++)
            buf[i] = (uint8_t)next_rand();
        size_t n = next_rand() % sizeof(buf);
        mw_gorilla_dec d;
        mw_gorilla_dec_init(&d, buf, n, (uint32_t)(next_rand() % 1000));
        int64_t t;
        double v;
        int rc;
        size_t got = 0;
        while ((rc = mw_gorilla_next(&d, &t, &v)) == 1)
            got++;
        assert_true(rc == 0 || rc == -1);
        assert_true(got <= n * 8); /* at least one bit per sample */
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(edge_values),
        cmocka_unit_test(timestamp_extremes),
        cmocka_unit_test(random_values),
        cmocka_unit_test(families_roundtrip_codec),
        cmocka_unit_test(families_roundtrip_store),
        cmocka_unit_test(compression_ratio),
        cmocka_unit_test(corrupt_bytes_never_crash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
