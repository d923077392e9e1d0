/* test_units.c - durations and sizes (src/core/units.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/units.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t dur(const char *s)
{
    int64_t ms = -12345;
    if (mw_parse_duration_ms(s, &ms) < 0) {
        assert_true(ms == -12345); /* untouched on error */
        return -1;
    }
    return ms;
}

static void durations_valid(void **state)
{
    (void)state;
    assert_true(dur("1s") == 1000);
    assert_true(dur("500ms") == 500);
    assert_true(dur("1m30s") == 90000);
    assert_true(dur("90s") == 90000);
    assert_true(dur("2h") == 7200000);
    assert_true(dur("1d") == 86400000);
    assert_true(dur("1w") == 604800000);
    assert_true(dur("1y") == 31536000000LL);
    assert_true(dur("1m1ms") == 60001);
    assert_true(dur("1y1w1d1h1m1s1ms") == 32230861001LL);
    assert_true(dur("0s") == 0);
    assert_true(dur("01s") == 1000); /* leading zeros: Prometheus accepts them too */
    assert_true(dur("9223372036854775807ms") == INT64_MAX);
    assert_true(dur("106751991167d") == 9223372036828800000LL);
}

static void durations_invalid(void **state)
{
    (void)state;
    const char *bad[] = {
        "",
        "5", /* a bare number has no unit */
        "-1s",
        "+1s",
        "1.5s", /* fractions: rejected, as by Prometheus */
        "1h1h", /* a unit used twice */
        "1s1m", /* units out of order */
        "1ms1s",
        "ms",
        "s",
        "1S",
        "1 s",
        " 1s",
        "1s ",
        "1sec",
        "1m30",
        "1h-1m",
        "1x",
        "0x10s",
        "1e3s",
        "9223372036854775808ms", /* INT64_MAX + 1 */
        "106751991168d",         /* overflows when multiplied */
        "292471209y",            /* overflow */
        "18446744073709551616s", /* u64 overflow in the number itself */
        "106751991167d1d",       /* d twice */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (dur(bad[i]) != -1) fail_msg("'%s' was accepted", bad[i]);
    }
    /* The largest sum that still fits, and one millisecond more. */
    assert_true(dur("292471208y") == 9223372015488000000LL);
    assert_true(dur("106751991167d7h12m55s807ms") == INT64_MAX);
    assert_int_equal(dur("106751991167d7h12m55s808ms"), -1);
    assert_true(dur("15250284452w3d7h12m55s807ms") == INT64_MAX);
    assert_int_equal(dur("106751991167d15h"), -1);
}

static void format_duration(void **state)
{
    (void)state;
    char out[64];
    const struct {
        int64_t ms;
        const char *want;
    } cases[] = {
        {0, "0s"},
        {1, "1ms"},
        {999, "999ms"},
        {1000, "1s"},
        {90000, "1m30s"},
        {3600000, "1h"},
        {86400000, "1d"},
        {604800000, "1w"},
        {31536000000LL, "1y"},
        {32230861001LL, "1y1w1d1h1m1s1ms"},
        {INT64_MAX, "292471208y35w2d7h12m55s807ms"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memset(out, 'x', sizeof(out));
        mw_format_duration(cases[i].ms, out, sizeof(out));
        assert_string_equal(out, cases[i].want);
    }
    /* A short buffer is cut, but always terminated inside it. */
    memset(out, 'x', sizeof(out));
    mw_format_duration(90000, out, 4);
    assert_string_equal(out, "1m3");
    assert_int_equal(out[4], 'x');
}

static void format_parse_round_trip(void **state)
{
    (void)state;
    srand(42);
    for (int i = 0; i < 20000; i++) {
        int64_t ms = ((int64_t)rand() << 31 | rand()) % 4000000000000000LL + 1;
        char out[64];
        mw_format_duration(ms, out, sizeof(out));
        int64_t back;
        assert_int_equal(mw_parse_duration_ms(out, &back), 0);
        if (back != ms) fail_msg("%lld -> %s -> %lld", (long long)ms, out, (long long)back);
    }
}

static uint64_t size_of(const char *s)
{
    uint64_t v = 777;
    if (mw_parse_size(s, &v) < 0) {
        assert_true(v == 777);
        return UINT64_MAX - 1; /* marker: rejected */
    }
    return v;
}

#define REJECTED (UINT64_MAX - 1)

static void sizes(void **state)
{
    (void)state;
    assert_true(size_of("4096") == 4096);
    assert_true(size_of("0") == 0);
    assert_true(size_of("12B") == 12);
    assert_true(size_of("64KiB") == 65536);
    assert_true(size_of("512MiB") == 536870912ULL);
    assert_true(size_of("3GiB") == 3221225472ULL);
    assert_true(size_of("2TiB") == 2199023255552ULL);
    assert_true(size_of("1KB") == 1000);
    assert_true(size_of("1MB") == 1000000);
    assert_true(size_of("1GB") == 1000000000ULL);
    assert_true(size_of("7TB") == 7000000000000ULL);
    assert_true(size_of("18446744073709551615") == UINT64_MAX);
    assert_true(size_of("18446744073709551615B") == UINT64_MAX);
    assert_true(size_of("16777215TiB") == 16777215ULL << 40);

    const char *bad[] = {"",
                         "B",
                         "MiB",
                         "-1",
                         "+1",
                         "1.5GiB",
                         "1 MiB",
                         " 1",
                         "1 ",
                         "1kb",
                         "1kB",
                         "1mib",
                         "1EiB",
                         "1KiBB",
                         "1iB",
                         "0x10",
                         "1e3",
                         "18446744073709551616",
                         "16777216TiB",
                         "17179869184GiB",
                         "18446744073709552KB"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (size_of(bad[i]) != REJECTED) fail_msg("'%s' was accepted", bad[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(durations_valid), cmocka_unit_test(durations_invalid),
        cmocka_unit_test(format_duration), cmocka_unit_test(format_parse_round_trip),
        cmocka_unit_test(sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
