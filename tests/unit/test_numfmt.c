/* test_numfmt.c - pq_format_value (src/query/numfmt.c, the fast shortest
 * round-trip formatting of the query API's values) must write exactly the
 * bytes of the reference algorithm below (the engine's original code: a
 * binary search over printf("%.*e")/strtod, then printf("%.*f")), on edge
 * values and on random doubles of several shapes. MW_NUMFMT_N sets the
 * number of random values per shape (default 20000; a Release build runs
 * tens of millions in a minute), MW_NUMFMT_SEED the seed. */
#include "query/promql.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void reference(double v, char *buf, size_t size)
{
    if (isnan(v)) {
        snprintf(buf, size, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, size, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    char tmp[64];
    int lo = 1, hi = 17;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        snprintf(tmp, sizeof(tmp), "%.*e", mid - 1, v);
        if (strtod(tmp, NULL) == v)
            hi = mid;
        else
            lo = mid + 1;
    }
    int p = lo;
    snprintf(tmp, sizeof(tmp), "%.*e", p - 1, v);
    int exp10 = atoi(strchr(tmp, 'e') + 1);
    int decimals = p - 1 - exp10;
    if (decimals < 0) decimals = 0;
    snprintf(buf, size, "%.*f", decimals, v);
}

static size_t checked, failed;

static void check(double v)
{
    char want[64], got[64];
    reference(v, want, sizeof(want));
    memset(got, 'x', sizeof(got));
    pq_format_value(v, got, sizeof(got));
    checked++;
    if (strcmp(want, got) != 0) {
        if (failed++ < 10) fprintf(stderr, "%a: want %s, got %s\n", v, want, got);
    }
}

static void check_both(double v)
{
    check(v);
    check(-v);
}

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static double from_bits(uint64_t b)
{
    double d;
    memcpy(&d, &b, sizeof(d));
    return d;
}

static size_t count(void)
{
    const char *e = getenv("MW_NUMFMT_N");
    return e && atol(e) > 0 ? (size_t)atol(e) : 20000;
}

static void test_edges(void **state)
{
    (void)state;
    double fixed[] = {0,
                      NAN,
                      INFINITY,
                      DBL_MAX,
                      DBL_MIN,
                      DBL_TRUE_MIN,
                      DBL_EPSILON,
                      0.1,
                      0.2,
                      0.3,
                      0.1 + 0.2,
                      1.0 / 3,
                      2.0 / 3,
                      0.5,
                      1.5,
                      2.5,
                      0.125,
                      1e-5,
                      2.5e-5,
                      123456789.125,
                      9007199254740991.0,
                      9007199254740992.0,
                      9007199254740993.0,
                      4503599627370495.5,
                      4503599627370496.5,
                      1e15,
                      1e16,
                      1e17,
                      1e21,
                      1e22,
                      1e23,
                      5e-324,
                      1e-300,
                      1e300,
                      9.5,
                      99.5,
                      0.95,
                      0.995,
                      9.999999999999999,
                      99999999999999.99,
                      1234567.0000001,
                      6.02214076e23,
                      1.7976931348623157e308};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        check_both(fixed[i]);
    /* Powers of two and ten, their neighbours, integers around 2^53. */
    for (int e = -1074; e <= 1023; e++) {
        double p = ldexp(1, e);
        check_both(p);
        check_both(nextafter(p, 0));
        check_both(nextafter(p, INFINITY));
    }
    for (int e = -323; e <= 308; e++) {
        char s[32];
        snprintf(s, sizeof(s), "1e%d", e);
        double p = strtod(s, NULL);
        for (int k = -3; k <= 3; k++) {
            double q = p;
            for (int j = 0; j < (k < 0 ? -k : k); j++)
                q = nextafter(q, k < 0 ? 0 : INFINITY);
            check_both(q);
        }
    }
    for (int64_t k = -2000; k <= 2000; k++) {
        check_both((double)(9007199254740992ll + k));
        check_both((double)k / 2);
        check_both((double)k / 1000);
        check_both((double)k * 0.1);
    }
    /* Exact halves at every digit position: the rounding ties. */
    for (int d = 1; d <= 17; d++)
        for (int e = -20; e <= 20; e++) {
            char s[64];
            snprintf(s, sizeof(s), "%.*s5e%d", d, "12345678901234567", e);
            check_both(strtod(s, NULL));
        }
    /* A buffer too short for the answer is cut as snprintf cuts it. */
    char want[8], got[8];
    reference(1.0 / 3, want, sizeof(want));
    pq_format_value(1.0 / 3, got, sizeof(got));
    assert_string_equal(want, got);
    assert_int_equal(failed, 0);
}

static void test_random(void **state)
{
    (void)state;
    const char *seed = getenv("MW_NUMFMT_SEED");
    if (seed) rng = strtoull(seed, NULL, 0) | 1;
    size_t n = count();
    for (size_t i = 0; i < n; i++) {
        /* Any bit pattern (NaN and infinities included). */
        check(from_bits(next()));
        /* Short decimals as a store holds them: up to 17 digits, any
         * exponent, and their neighbours. */
        char s[64];
        int digits = 1 + (int)(next() % 17);
        uint64_t m = next() % 100000000000000000ull;
        snprintf(s, sizeof(s), "%llue%d", (unsigned long long)(m % (uint64_t)pow(10, digits)),
                 (int)(next() % 60) - 40);
        double d = strtod(s, NULL);
        check_both(d);
        check(nextafter(d, INFINITY));
        check(nextafter(d, 0));
        /* Query results: ratios, sums and rates of such values. */
        double a = (double)(next() % 1000000) / 1000, b = (double)(next() % 100000 + 1) / 7;
        check_both(a / b);
        check_both(a * b + 0.1);
        check(a / 300 * 1.0333333333333334);
        check((double)(next() % 100000000000ull));
        check(ldexp((double)(next() >> 11), (int)(next() % 200) - 150));
    }
    fprintf(stderr, "numfmt: %zu values checked, %zu different\n", checked, failed);
    assert_int_equal(failed, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
