/* test_parse.c - the strict number and line parsers (src/core/parse.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/parse.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static void u64(void **state)
{
    (void)state;
    const char *s = "18446744073709551615 rest";
    const char *p = s;
    uint64_t v = 0;
    assert_int_equal(mw_parse_u64(&p, &v), 0);
    assert_true(v == UINT64_MAX);
    assert_ptr_equal(p, s + 20); /* stops at the first non-digit */

    p = "007x";
    assert_int_equal(mw_parse_u64(&p, &v), 0);
    assert_true(v == 7);
    assert_string_equal(p, "x");

    /* Rejected input leaves the pointer and the output alone. */
    const char *bad[] = {
        "", " 1", "-1", "+1", "x1", "18446744073709551616", "99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        p = bad[i];
        v = 42;
        assert_int_equal(mw_parse_u64(&p, &v), -1);
        assert_ptr_equal(p, bad[i]);
        assert_true(v == 42);
    }
}

static void i64(void **state)
{
    (void)state;
    const char *p = "-9223372036854775808,";
    int64_t v = 0;
    assert_int_equal(mw_parse_i64(&p, &v), 0);
    assert_true(v == INT64_MIN);
    assert_string_equal(p, ",");
    p = "9223372036854775807";
    assert_int_equal(mw_parse_i64(&p, &v), 0);
    assert_true(v == INT64_MAX);
    p = "+12";
    assert_int_equal(mw_parse_i64(&p, &v), 0);
    assert_true(v == 12);
    p = "-0";
    assert_int_equal(mw_parse_i64(&p, &v), 0);
    assert_true(v == 0);

    const char *bad[] = {"",
                         "-",
                         "+",
                         "--1",
                         "- 1",
                         "9223372036854775808",
                         "-9223372036854775809",
                         "18446744073709551615"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        p = bad[i];
        v = 42;
        assert_int_equal(mw_parse_i64(&p, &v), -1);
        assert_ptr_equal(p, bad[i]);
        assert_true(v == 42);
    }
}

static void dbl(void **state)
{
    (void)state;
    const char *p = "0.52 0.58";
    double v = 0;
    assert_int_equal(mw_parse_double(&p, &v), 0);
    assert_true(v == 0.52);
    assert_string_equal(p, " 0.58");
    p = "-1.5e3\n";
    assert_int_equal(mw_parse_double(&p, &v), 0);
    assert_true(v == -1500.0);
    assert_string_equal(p, "\n");
    p = "12";
    assert_int_equal(mw_parse_double(&p, &v), 0);
    assert_true(v == 12.0);
    assert_string_equal(p, "");

    const char *bad[] = {"", " 1", "\t1", "\n1", "x", "-", ".", "1e999", "-1e999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        p = bad[i];
        v = 42;
        if (mw_parse_double(&p, &v) != -1) fail_msg("'%s' was accepted", bad[i]);
        assert_ptr_equal(p, bad[i]);
        assert_true(v == 42);
    }
}

static void blanks_and_lines(void **state)
{
    (void)state;
    const char *p = " \t \tx y";
    mw_skip_blanks(&p);
    assert_string_equal(p, "x y");
    mw_skip_blanks(&p); /* nothing to skip */
    assert_string_equal(p, "x y");
    p = "\nx"; /* a newline is not a blank */
    mw_skip_blanks(&p);
    assert_string_equal(p, "\nx");

    p = "line one\nline two\n";
    mw_skip_line(&p);
    assert_string_equal(p, "line two\n");
    mw_skip_line(&p);
    assert_string_equal(p, "");
    mw_skip_line(&p); /* at the end: stays there */
    assert_string_equal(p, "");
    p = "no newline";
    mw_skip_line(&p);
    assert_string_equal(p, "");
}

static void kv(void **state)
{
    (void)state;
    const char *text = "usage_usec 100\n"
                       "user_usec\t\t 60 \n"
                       "usage 7\n"
                       "nr_periods 3\n"
                       "bad -1\n"
                       "trailing 5 x\n"
                       "empty \n"
                       "last 9";
    uint64_t v = 0;
    assert_int_equal(mw_kv_u64(text, "usage_usec", &v), 0);
    assert_true(v == 100);
    assert_int_equal(mw_kv_u64(text, "user_usec", &v), 0);
    assert_true(v == 60);
    /* "usage" is a prefix of "usage_usec": only the exact key matches. */
    assert_int_equal(mw_kv_u64(text, "usage", &v), 0);
    assert_true(v == 7);
    assert_int_equal(mw_kv_u64(text, "last", &v), 0);
    assert_true(v == 9);
    /* "periods" occurs only inside another key. */
    v = 42;
    assert_int_equal(mw_kv_u64(text, "periods", &v), -1);
    assert_int_equal(mw_kv_u64(text, "missing", &v), -1);
    assert_true(v == 42);
    assert_int_equal(mw_kv_u64(text, "bad", &v), -2);
    assert_int_equal(mw_kv_u64(text, "trailing", &v), -2);
    assert_int_equal(mw_kv_u64(text, "empty", &v), -2);
    assert_int_equal(mw_kv_u64("", "x", &v), -1);
    assert_int_equal(mw_kv_u64("x\n", "x", &v), -1); /* key without a value */
}

static int bit(const uint64_t *bits, unsigned i)
{
    return (int)((bits[i / 64] >> (i % 64)) & 1);
}

/* Lines without their newline and leading blanks, the last one without a
 * newline too; tokens split on spaces and tabs. */
static void lines_and_tokens(void **state)
{
    (void)state;
    const char *text = "a b\n \t key:  v1\tv2\n\n  last";
    const char *p = text, *s, *e;
    assert_int_equal(mw_next_line(&p, &s, &e), 1);
    assert_int_equal(e - s, 3);
    assert_memory_equal(s, "a b", 3);
    assert_int_equal(mw_next_line(&p, &s, &e), 1);
    assert_int_equal(e - s, 11);
    assert_memory_equal(s, "key:  v1\tv2", 11);
    const char *q = s, *t;
    assert_int_equal(mw_next_token(&q, e, &t), 4);
    assert_memory_equal(t, "key:", 4);
    assert_int_equal(mw_next_token(&q, e, &t), 2);
    assert_memory_equal(t, "v1", 2);
    assert_int_equal(mw_next_token(&q, e, &t), 2);
    assert_memory_equal(t, "v2", 2);
    assert_int_equal(mw_next_token(&q, e, &t), 0);
    assert_int_equal(mw_next_line(&p, &s, &e), 1);
    assert_true(s == e); /* the empty line */
    assert_int_equal(mw_next_line(&p, &s, &e), 1);
    assert_int_equal(e - s, 4);
    assert_memory_equal(s, "last", 4);
    assert_int_equal(mw_next_line(&p, &s, &e), 0);
}

static void cpulist(void **state)
{
    (void)state;
    uint64_t bits[2];
    memset(bits, 0xff, sizeof(bits));
    assert_int_equal(mw_parse_cpulist("0-3,8,10-11\n", bits, 128), 7);
    for (unsigned i = 0; i < 128; i++) {
        int want = i <= 3 || i == 8 || i == 10 || i == 11;
        if (bit(bits, i) != want) fail_msg("cpu %u: got %d", i, bit(bits, i));
    }
    assert_int_equal(mw_parse_cpulist("127", bits, 128), 1);
    assert_true(bits[0] == 0 && bits[1] == 1ULL << 63);
    assert_int_equal(mw_parse_cpulist("0-127", bits, 128), 128);
    assert_true(bits[0] == UINT64_MAX && bits[1] == UINT64_MAX);
    /* Overlaps count each CPU once. */
    assert_int_equal(mw_parse_cpulist("1,1,0-2", bits, 128), 3);
    assert_true(bits[0] == 7 && bits[1] == 0);
    /* An empty list (a memory-only NUMA node) is valid and clears the map. */
    memset(bits, 0xff, sizeof(bits));
    assert_int_equal(mw_parse_cpulist("\n", bits, 128), 0);
    assert_true(bits[0] == 0 && bits[1] == 0);
    assert_int_equal(mw_parse_cpulist("", bits, 128), 0);
    assert_int_equal(mw_parse_cpulist(" 5 \n", bits, 128), 1);
    assert_true(bits[0] == 32);

    const char *bad[] = {"128",
                         "0-128",
                         "3-1",
                         "1,",
                         ",1",
                         "1,,2",
                         "1-",
                         "-1",
                         "a",
                         "1-2-3",
                         "0-3 x",
                         "1\n2",
                         "18446744073709551615",
                         "0-18446744073709551616"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (mw_parse_cpulist(bad[i], bits, 128) != -1) fail_msg("'%s' was accepted", bad[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(u64),
        cmocka_unit_test(i64),
        cmocka_unit_test(dbl),
        cmocka_unit_test(blanks_and_lines),
        cmocka_unit_test(kv),
        cmocka_unit_test(cpulist),
        cmocka_unit_test(lines_and_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
