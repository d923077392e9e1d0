/* test_numfmt.c - pq_format_value (src/query/numfmt.c), the query API's
 * value formatting, must write what Go's strconv.FormatFloat(v, 'f', -1, 64)
 * writes, as Prometheus does. Every answer is checked for its properties
 * against printf and strtod: fixed notation without an exponent, it reads
 * back to the same double as printf("%.17g") of it does, no decimal with
 * fewer significant digits reads back, and of the decimals with as many
 * digits it is the nearest that does; on edge values (powers of two and ten
 * from the subnormals to DBL_MAX, their neighbours, ties) and on random
 * doubles of several shapes. Exact strings (computed with Python's
 * shortest repr, which Go's Ryu agrees with) pin the answers that need the
 * far side of a power of two and the ones longer than 64 bytes.
 * MW_NUMFMT_N sets the number of random values per shape (default 20000; a
 * Release build runs tens of millions in a minute), MW_NUMFMT_SEED the
 * seed. */
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

static int same_double(double a, double b)
{
    return memcmp(&a, &b, sizeof(a)) == 0;
}

/* Whether the decimal m * 10^x (with v's sign) reads back as v. */
static int decimal_reads_back(uint64_t m, int x, double v)
{
    char s[64];
    snprintf(s, sizeof(s), "%s%llue%d", signbit(v) ? "-" : "", (unsigned long long)m, x);
    return same_double(strtod(s, NULL), v);
}

/* The correctly rounded p significant digits of |v| as an integer, and the
 * exponent of their last digit (printf rounds exactly). */
static uint64_t rounded(double v, int p, int *x)
{
    char s[64];
    snprintf(s, sizeof(s), "%.*e", p - 1, fabs(v));
    uint64_t m = (uint64_t)(s[0] - '0');
    for (int i = 0; i < p - 1; i++)
        m = m * 10 + (uint64_t)(s[2 + i] - '0');
    *x = atoi(strchr(s, 'e') + 1) - (p - 1);
    return m;
}

/* What is wrong with out as the answer for v, or NULL. */
static const char *wrong(double v, const char *out)
{
    if (isnan(v)) return strcmp(out, "NaN") ? "not NaN" : NULL;
    if (isinf(v)) return strcmp(out, v > 0 ? "+Inf" : "-Inf") ? "not +Inf/-Inf" : NULL;
    size_t len = strlen(out);
    if (len >= PQ_VALUE_BUFSIZE) return "longer than PQ_VALUE_BUFSIZE";
    /* -?(0|[1-9][0-9]*)(\.[0-9]*[1-9])? */
    const char *c = out + (*out == '-');
    if (*c < '0' || *c > '9' || (c[0] == '0' && c[1] >= '0' && c[1] <= '9')) return "syntax";
    while (*c >= '0' && *c <= '9')
        c++;
    if (*c == '.') {
        if (c[1] < '0' || c[1] > '9' || out[len - 1] == '0') return "syntax of the decimals";
        for (c++; *c >= '0' && *c <= '9';)
            c++;
    }
    if (*c) return "not fixed notation";
    char ref[32];
    snprintf(ref, sizeof(ref), "%.17g", v);
    if (!same_double(strtod(out, NULL), strtod(ref, NULL)) || !same_double(strtod(out, NULL), v))
        return "does not read back";
    if (v == 0) return NULL; /* "0" or "-0" */
    /* Its significant digits: p of them, the last at 10^x. */
    char dg[PQ_VALUE_BUFSIZE];
    int p = 0, x = 0, point = 0;
    for (c = out + (*out == '-'); *c; c++) {
        if (*c == '.') {
            point = 1;
            continue;
        }
        if (point) x--;
        if (*c != '0' || p) dg[p++] = *c;
    }
    while (p > 0 && dg[p - 1] == '0') { /* the zeros that pad a large integer */
        p--;
        x++;
    }
    if (p > 17) return "more than 17 significant digits";
    uint64_t m = 0;
    for (int i = 0; i < p; i++)
        m = m * 10 + (uint64_t)(dg[i] - '0');
    /* No p-1 digits read back: the correctly rounded ones and the two
     * decimals beside them (v lies between two of the three) would be the
     * candidates. */
    if (p > 1) {
        int rx;
        uint64_t r = rounded(v, p - 1, &rx);
        if (decimal_reads_back(r, rx, v) || decimal_reads_back(r + 1, rx, v) ||
            decimal_reads_back(r - 1, rx, v))
            return "not the shortest";
    }
    /* The nearest p-digit decimal is the answer when it reads back. */
    int nx;
    uint64_t n = rounded(v, p, &nx);
    while (n % 10 == 0) {
        n /= 10;
        nx++;
    }
    if ((n != m || nx != x) && decimal_reads_back(n, nx, v)) return "not the nearest";
    return NULL;
}

static size_t checked, failed;

static void check(double v)
{
    char got[PQ_VALUE_BUFSIZE + 8];
    memset(got, 'x', sizeof(got));
    pq_format_value(v, got, sizeof(got));
    checked++;
    const char *why = wrong(v, got);
    if (why && failed++ < 10) fprintf(stderr, "%a (%.17g): %s: %s\n", v, v, got, why);
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
    for (int e = -324; e <= 308; e++) {
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
    /* Every subnormal of the form k * 2^-1074 with small k. */
    for (int k = 1; k < 5000; k++)
        check_both(ldexp(k, -1074));
    /* A buffer too short for the answer is cut as snprintf cuts it. */
    char cut[8];
    pq_format_value(1.0 / 3, cut, sizeof(cut));
    assert_string_equal(cut, "0.33333");
    pq_format_value(1e100, cut, sizeof(cut));
    assert_string_equal(cut, "1000000");
    assert_int_equal(failed, 0);
}

static void test_random(void **state)
{
    (void)state;
    const char *seed = getenv("MW_NUMFMT_SEED");
    if (seed) rng = strtoull(seed, NULL, 0) | 1;
    size_t n = count();
    for (size_t i = 0; i < n; i++) {
        /* Any bit pattern (NaN and infinities included), and any
         * subnormal. */
        check(from_bits(next()));
        check_both(from_bits(next() & 0xFFFFFFFFFFFFFull));
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

/* Exact answers: beyond 64 bytes, padded integers, the far side of a power
 * of two (2^-24 is 5.9604644775390625e-8: 16 digits, ...063, read back
 * where the nearest 16 digits, ...062, do not). */
static void test_exact(void **state)
{
    (void)state;
    char z300[400], big[400];
    memset(z300, '0', sizeof(z300));
    struct {
        double v;
        const char *want;
    } cases[] = {
        {1e100, NULL},
        {1.5e-300, NULL},
        {5e-324, NULL},
        {0, "0"},
        {-0.0, "-0"},
        {1, "1"},
        {-1.5e-7, "-0.00000015"},
        {0.1, "0.1"},
        {1.0 / 3, "0.3333333333333333"},
        {1e21, "1000000000000000000000"},
        {1e23, "100000000000000000000000"},
        {9007199254740993.0, "9007199254740992"},
        {18446744073709551616.0, "18446744073709552000"},
        {123456789012345678901234567890.0, "123456789012345680000000000000"},
        {0x1p-24, "0.00000005960464477539063"},
        {0x1p-44, "0.00000000000005684341886080802"},
        {0x1p89, "618970019642690200000000000"},
        {NAN, "NaN"},
        {INFINITY, "+Inf"},
        {-INFINITY, "-Inf"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char got[PQ_VALUE_BUFSIZE];
        pq_format_value(cases[i].v, got, sizeof(got));
        if (cases[i].want) {
            assert_string_equal(got, cases[i].want);
            continue;
        }
        if (cases[i].v == 1e100) { /* 1 and 100 zeros */
            snprintf(big, sizeof(big), "1%.*s", 100, z300);
        } else if (cases[i].v == 1.5e-300) { /* "0.", 299 zeros, 15 */
            snprintf(big, sizeof(big), "0.%.*s15", 299, z300);
        } else { /* 5e-324: "0.", 323 zeros, 5 */
            snprintf(big, sizeof(big), "0.%.*s5", 323, z300);
        }
        assert_string_equal(got, big);
    }
    /* The longest answers: DBL_MAX's 309 digits, -3 * 2^-1074 in 327
     * characters, one short of PQ_VALUE_BUFSIZE. */
    char got[PQ_VALUE_BUFSIZE];
    pq_format_value(DBL_MAX, got, sizeof(got));
    snprintf(big, sizeof(big), "17976931348623157%.*s", 292, z300);
    assert_string_equal(got, big);
    pq_format_value(-3 * DBL_TRUE_MIN, got, sizeof(got));
    snprintf(big, sizeof(big), "-0.%.*s15", 322, z300);
    assert_string_equal(got, big);
    assert_int_equal(strlen(got), PQ_VALUE_BUFSIZE - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
