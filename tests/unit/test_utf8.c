/* test_utf8.c - the UTF-8 encoder and validator (src/core/util.c): the
 * exact bytes at every length boundary, refusal of surrogates and of
 * values past U+10FFFF, and every code point decoded again by the C
 * library's own UTF-8 decoder (mbrtowc in the C.UTF-8 locale) as an
 * independent reference. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/util.h"

#include <locale.h>
#include <string.h>
#include <wchar.h>

static void boundaries(void **state)
{
    (void)state;
    static const struct {
        unsigned long cp;
        const char *bytes;
    } cases[] = {
        {0x41, "\x41"},
        {0x7f, "\x7f"},
        {0x80, "\xc2\x80"},
        {0x7ff, "\xdf\xbf"},
        {0x800, "\xe0\xa0\x80"},
        {0xd7ff, "\xed\x9f\xbf"},
        {0xe000, "\xee\x80\x80"},
        {0xffff, "\xef\xbf\xbf"},
        {0x10000, "\xf0\x90\x80\x80"},
        {0x1f600, "\xf0\x9f\x98\x80"},
        {0x10ffff, "\xf4\x8f\xbf\xbf"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[5] = {0};
        int n = mw_utf8_put(cases[i].cp, out);
        assert_int_equal(n, (int)strlen(cases[i].bytes));
        assert_memory_equal(out, cases[i].bytes, (size_t)n);
        assert_int_equal(mw_utf8_len(out), n);
    }
    char out[4];
    assert_int_equal(mw_utf8_put(0xd800, out), 0);
    assert_int_equal(mw_utf8_put(0xdfff, out), 0);
    assert_int_equal(mw_utf8_put(0x110000, out), 0);
    assert_int_equal(mw_utf8_put(0xffffffffUL, out), 0);
}

static void validator_refuses(void **state)
{
    (void)state;
    assert_int_equal(mw_utf8_len("\xc0\x80"), -1);         /* overlong NUL */
    assert_int_equal(mw_utf8_len("\xe0\x9f\xbf"), -1);     /* overlong U+07FF */
    assert_int_equal(mw_utf8_len("\xed\xa0\x80"), -1);     /* surrogate U+D800 */
    assert_int_equal(mw_utf8_len("\xf4\x90\x80\x80"), -1); /* U+110000 */
    assert_int_equal(mw_utf8_len("\xc3"), -1);             /* cut short */
    assert_int_equal(mw_utf8_len("a\xc3\xa9z"), 4);
}

/* Every scalar value: the length by range, accepted by our validator, and
 * the C library decodes the same code point from the bytes. */
static void every_code_point(void **state)
{
    (void)state;
    assert_non_null(setlocale(LC_CTYPE, "C.UTF-8"));
    for (unsigned long cp = 1; cp <= 0x10ffff; cp++) {
        char out[5] = {0};
        int n = mw_utf8_put(cp, out);
        if (cp >= 0xd800 && cp <= 0xdfff) {
            assert_int_equal(n, 0);
            continue;
        }
        int want = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        if (n != want) fail_msg("U+%lX: %d bytes, expected %d", cp, n, want);
        if (mw_utf8_len(out) != n) fail_msg("U+%lX: mw_utf8_len refuses its encoding", cp);
        mbstate_t ms;
        memset(&ms, 0, sizeof(ms));
        wchar_t wc = 0;
        size_t used = mbrtowc(&wc, out, (size_t)n, &ms);
        if (used != (size_t)n || (unsigned long)wc != cp)
            fail_msg("U+%lX: mbrtowc read %zu bytes as U+%lX", cp, used, (unsigned long)wc);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(boundaries),
        cmocka_unit_test(validator_refuses),
        cmocka_unit_test(every_code_point),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
