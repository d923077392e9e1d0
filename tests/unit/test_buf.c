/* test_buf.c - the bounded byte buffer (src/core/buf.c) and the arena
 * (src/core/arena.c) it is used beside. Run under ASan in the sanitized
 * build, so a leak or an overrun fails the test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/arena.h"
#include "core/buf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void append_and_format(void **state)
{
    (void)state;
    mw_buf b;
    mw_buf_init(&b, 0);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(mw_buf_puts(&b, "abc"), 0);
    assert_int_equal(mw_buf_putc(&b, '-'), 0);
    assert_int_equal(mw_buf_append(&b, "xyz\0hidden", 4), 0); /* binary-safe */
    assert_int_equal(mw_buf_printf(&b, "%d/%s", 42, "q"), 0);
    assert_int_equal(b.len, 3 + 1 + 4 + 4);
    assert_memory_equal(b.data,
                        "abc-xyz\0"
                        "42/q",
                        12);
    assert_int_equal(b.data[b.len], '\0');
    assert_int_equal(b.overflow, 0);

    /* A formatted piece longer than the 256-byte stack buffer. */
    mw_buf_clear(&b);
    assert_int_equal(b.len, 0);
    assert_string_equal(b.data, "");
    char big[1001];
    memset(big, 'z', 1000);
    big[1000] = '\0';
    assert_int_equal(mw_buf_printf(&b, "<%s>", big), 0);
    assert_int_equal(b.len, 1002);
    assert_int_equal(b.data[0], '<');
    assert_int_equal(b.data[1000], 'z');
    assert_int_equal(b.data[1001], '>');
    assert_int_equal(b.data[1002], '\0');

    /* Exactly 255 and 256 characters: either side of the stack buffer. */
    for (int n = 255; n <= 256; n++) {
        mw_buf_clear(&b);
        assert_int_equal(mw_buf_printf(&b, "%.*s", n, big), 0);
        assert_int_equal(b.len, (size_t)n);
        assert_int_equal(strlen(b.data), (size_t)n);
    }
    mw_buf_free(&b);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
}

static void bounded(void **state)
{
    (void)state;
    mw_buf b;
    mw_buf_init(&b, 10);
    assert_int_equal(mw_buf_puts(&b, "abcdefgh"), 0);
    /* An append that does not fit is refused whole: no partial bytes. */
    assert_int_equal(mw_buf_puts(&b, "xyz"), -1);
    assert_int_equal(b.overflow, 1);
    assert_int_equal(b.len, 8);
    assert_string_equal(b.data, "abcdefgh");
    /* What still fits is accepted: exactly max bytes. */
    assert_int_equal(mw_buf_puts(&b, "ij"), 0);
    assert_int_equal(b.len, 10);
    assert_string_equal(b.data, "abcdefghij");
    assert_int_equal(mw_buf_putc(&b, 'k'), -1);
    assert_true(b.cap <= 11);
    char big[300];
    memset(big, 'y', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    mw_buf_clear(&b);
    assert_int_equal(b.overflow, 0);
    assert_int_equal(mw_buf_printf(&b, "%s", big), -1); /* the >256 path */
    assert_int_equal(mw_buf_printf(&b, "%s", "0123456789A"), -1);
    assert_int_equal(b.len, 0);
    assert_int_equal(mw_buf_printf(&b, "%s", "0123456789"), 0);
    assert_string_equal(b.data, "0123456789");
    mw_buf_free(&b);
    assert_int_equal(b.max, 10); /* free keeps the bound for reuse */

    /* A request for more bytes than memory can address is refused, bounded or
     * not, rather than wrapping around. */
    mw_buf_init(&b, 0);
    assert_int_equal(mw_buf_puts(&b, "x"), 0);
    assert_int_equal(mw_buf_reserve(&b, SIZE_MAX), -1);
    assert_int_equal(mw_buf_reserve(&b, SIZE_MAX - 1), -1);
    assert_int_equal(b.len, 1);
    mw_buf_free(&b);
}

static void steal(void **state)
{
    (void)state;
    mw_buf b;
    size_t len = 99;

    /* Empty, unbounded: an empty string, never NULL. */
    mw_buf_init(&b, 0);
    char *p = mw_buf_steal(&b, &len);
    assert_non_null(p);
    assert_string_equal(p, "");
    assert_int_equal(len, 0);
    free(p);

    /* Empty with a bound, including the largest one. */
    const size_t maxes[] = {1, 10, 4096, SIZE_MAX};
    for (size_t i = 0; i < sizeof(maxes) / sizeof(maxes[0]); i++) {
        mw_buf_init(&b, maxes[i]);
        len = 99;
        p = mw_buf_steal(&b, &len);
        assert_non_null(p);
        assert_string_equal(p, "");
        assert_int_equal(len, 0);
        free(p);
        assert_null(b.data);
        assert_int_equal(b.max, maxes[i]);
    }

    /* Full to the bound, after a refused append: the bytes that fitted, and a
     * buffer that is empty and usable again (no stale overflow flag). */
    mw_buf_init(&b, 4);
    assert_int_equal(mw_buf_puts(&b, "abcd"), 0);
    assert_int_equal(mw_buf_putc(&b, 'e'), -1);
    p = mw_buf_steal(&b, &len);
    assert_string_equal(p, "abcd");
    assert_int_equal(len, 4);
    free(p);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
    assert_int_equal(b.overflow, 0);
    assert_int_equal(mw_buf_puts(&b, "wxyz"), 0);
    p = mw_buf_steal(&b, NULL); /* len is optional */
    assert_string_equal(p, "wxyz");
    free(p);
    mw_buf_free(&b);
}

static void arena(void **state)
{
    (void)state;
    mw_arena a;
    mw_arena_init(&a, 64);
    char *s = mw_arena_strdup(&a, "hello");
    char *t = mw_arena_strndup(&a, "worldwide", 5);
    assert_string_equal(s, "hello");
    assert_string_equal(t, "world");
    assert_int_equal(a.used_bytes, 32); /* two 16-byte slots */
    for (int i = 1; i < 100; i++) {
        void *q = mw_arena_alloc(&a, (size_t)i);
        assert_int_equal((uintptr_t)q % 16, 0);
        memset(q, 0xab, (size_t)i);
    }
    /* Larger than a block: gets a block of its own. */
    unsigned char *big = mw_arena_alloc(&a, 100000);
    memset(big, 1, 100000);
    assert_string_equal(s, "hello"); /* earlier data untouched */
    assert_string_equal(t, "world");
    mw_arena_reset(&a);
    assert_int_equal(a.used_bytes, 0);
    char *u = mw_arena_strdup(&a, "again");
    assert_string_equal(u, "again");
    assert_int_equal(a.used_bytes, 16);
    mw_arena_free(&a);
    assert_null(a.head);
    mw_arena_free(&a); /* twice is harmless */
    mw_arena_reset(&a);

    mw_arena_init(&a, 0); /* 0 picks the default block size */
    assert_int_equal(a.block_size, 16384);
    mw_arena_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(append_and_format),
        cmocka_unit_test(bounded),
        cmocka_unit_test(steal),
        cmocka_unit_test(arena),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
