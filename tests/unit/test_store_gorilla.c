/* test_store_gorilla.c - Gorilla chunk encoding (src/store/gorilla.c):
 * bit-exact round trips on random and edge values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "store/gorilla.h"

#include <math.h>
#include <stdint.h>
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
        cmocka_unit_test(compression_ratio),
        cmocka_unit_test(corrupt_bytes_never_crash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
