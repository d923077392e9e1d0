/* test_bytes.c - fixed-width integers to and from bytes (src/core/bytes.h),
 * in both byte orders, at unaligned addresses, with exact bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/bytes.h"

#include <stdint.h>
#include <string.h>

static void little_endian(void **state)
{
    (void)state;
    uint8_t b[11];
    memset(b, 0xAA, sizeof(b));
    mw_put_le16(b + 1, 0x0102);
    static const uint8_t le16[] = {0xAA, 0x02, 0x01, 0xAA};
    assert_memory_equal(b, le16, sizeof(le16));
    assert_int_equal(mw_get_le16(b + 1), 0x0102);

    memset(b, 0xAA, sizeof(b));
    mw_put_le32(b + 1, 0x01020304U);
    static const uint8_t le32[] = {0xAA, 0x04, 0x03, 0x02, 0x01, 0xAA};
    assert_memory_equal(b, le32, sizeof(le32));
    assert_true(mw_get_le32(b + 1) == 0x01020304U);

    memset(b, 0xAA, sizeof(b));
    mw_put_le64(b + 1, 0x0102030405060708ULL);
    static const uint8_t le64[] = {0xAA, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, 0xAA};
    assert_memory_equal(b, le64, sizeof(le64));
    assert_true(mw_get_le64(b + 1) == 0x0102030405060708ULL);

    /* the top bits survive (no sign extension through int promotion) */
    static const uint8_t ff[8] = {0xFF, 0xFE, 0xFD, 0xFC, 0xFB, 0xFA, 0xF9, 0xF8};
    assert_int_equal(mw_get_le16(ff), 0xFEFF);
    assert_true(mw_get_le32(ff) == 0xFCFDFEFFU);
    assert_true(mw_get_le64(ff) == 0xF8F9FAFBFCFDFEFFULL);
}

static void big_endian(void **state)
{
    (void)state;
    static const uint8_t b[9] = {0xAA, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08};
    assert_true(mw_get_be32(b + 1) == 0x01020304U);
    assert_true(mw_get_be64(b + 1) == 0x0102030405060708ULL);
    static const uint8_t ff[8] = {0xFF, 0xFE, 0xFD, 0xFC, 0xFB, 0xFA, 0xF9, 0xF8};
    assert_true(mw_get_be32(ff) == 0xFFFEFDFCU);
    assert_true(mw_get_be64(ff) == 0xFFFEFDFCFBFAF9F8ULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(little_endian),
        cmocka_unit_test(big_endian),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
