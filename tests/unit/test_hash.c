/* test_hash.c - FNV-1a (src/core/hash.h): the published test vectors, and
 * the values mlwatch's own starting value gives, which name files on disk
 * and must never change (expected values computed independently). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/hash.h"

#include <stdint.h>

static void fnv1a64_vectors(void **state)
{
    (void)state;
    /* FNV-1a 64 of "", "a" and "foobar" (the reference test suite) */
    assert_true(MW_FNV1A64_BASIS == 0xcbf29ce484222325ULL);
    assert_true(mw_fnv1a64_str(MW_FNV1A64_BASIS, "") == 0xcbf29ce484222325ULL);
    assert_true(mw_fnv1a64_str(MW_FNV1A64_BASIS, "a") == 0xaf63dc4c8601ec8cULL);
    assert_true(mw_fnv1a64_str(MW_FNV1A64_BASIS, "foobar") == 0x85944171f73967e8ULL);
    assert_true(mw_fnv1a64(MW_FNV1A64_BASIS, "foobar", 6) == 0x85944171f73967e8ULL);
    assert_true(mw_fnv1a64_byte(MW_FNV1A64_BASIS, 'a') == 0xaf63dc4c8601ec8cULL);
    /* continuing a hash is hashing the concatenation */
    assert_true(mw_fnv1a64_str(mw_fnv1a64_str(MW_FNV1A64_BASIS, "foo"), "bar") ==
                0x85944171f73967e8ULL);
    /* bytes, not C strings: a NUL in the middle counts */
    assert_true(mw_fnv1a64(MW_FNV1A64_BASIS, "a\0b", 3) != mw_fnv1a64_str(MW_FNV1A64_BASIS, "a"));
}

static void fnv1a32_vectors(void **state)
{
    (void)state;
    assert_true(MW_FNV1A32_BASIS == 0x811c9dc5U);
    assert_true(mw_fnv1a32_str(MW_FNV1A32_BASIS, "") == 0x811c9dc5U);
    assert_true(mw_fnv1a32_str(MW_FNV1A32_BASIS, "a") == 0xe40c292cU);
    assert_true(mw_fnv1a32_str(MW_FNV1A32_BASIS, "foobar") == 0xbf9cf968U);
}

static void mlwatch_seed_values(void **state)
{
    (void)state;
    assert_true(MW_FNV1A64_SEED == 0x14650fb0739d0383ULL);
    assert_true(mw_fnv1a64_str(MW_FNV1A64_SEED, "") == 0x14650fb0739d0383ULL);
    assert_true(mw_fnv1a64_str(MW_FNV1A64_SEED, "a") == 0x44bd8ad473cd9906ULL);
    assert_true(mw_fnv1a64_str(MW_FNV1A64_SEED, "foobar") == 0x88fad7c0a8ff07f2ULL);
    /* the remote-write queue folder of this URL is url-71804037ba1d617e */
    assert_true(mw_fnv1a64_str(MW_FNV1A64_SEED, "http://prometheus:9090/api/v1/write") ==
                0x71804037ba1d617eULL);
    /* name 0xff value 0xfe: a label pair as the remote-write shards hash it */
    uint64_t h = mw_fnv1a64_byte(mw_fnv1a64_str(MW_FNV1A64_SEED, "__name__"), 0xff);
    h = mw_fnv1a64_byte(mw_fnv1a64_str(h, "up"), 0xfe);
    assert_true(h == 0x99570e55d25cd532ULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fnv1a64_vectors),
        cmocka_unit_test(fnv1a32_vectors),
        cmocka_unit_test(mlwatch_seed_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
