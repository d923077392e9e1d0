/* test_gpu_parse.c - the GPU string parsers and the exact share split. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/gpu/gpu.h"

#include <string.h>

static void pci_bus_ids(void **state)
{
    (void)state;
    char out[32];
    assert_int_equal(mw_gpu_parse_pci_bus_id("00000000:17:00.0", out, sizeof(out)), 0);
    assert_string_equal(out, "0000:17:00.0");
    assert_int_equal(mw_gpu_parse_pci_bus_id("00000000:B1:1F.7", out, sizeof(out)), 0);
    assert_string_equal(out, "0000:b1:1f.7");
    assert_int_equal(mw_gpu_parse_pci_bus_id("0000:3b:00.0", out, sizeof(out)), 0);
    assert_string_equal(out, "0000:3b:00.0");
    assert_int_equal(mw_gpu_parse_pci_bus_id("00010000:01:00.0", out, sizeof(out)), 0);
    assert_string_equal(out, "00010000:01:00.0");
    assert_int_equal(mw_gpu_parse_pci_bus_id("3b:00.0", out, sizeof(out)), 0); /* no domain */
    assert_string_equal(out, "0000:3b:00.0");
    const char *bad[] = {"",
                         "0000:17:00",
                         "0000:17:00.8",
                         "0000:17:20.0",
                         "0000:117:00.0",
                         "000000000:17:00.0",
                         "0000:17:00.0 ",
                         "g000:17:00.0",
                         "0000::00.0",
                         ":17:00.0",
                         "0000:17:00.0.0"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(mw_gpu_parse_pci_bus_id(bad[i], out, sizeof(out)), -1);
    char small[8];
    assert_int_equal(mw_gpu_parse_pci_bus_id("0000:17:00.0", small, sizeof(small)), -1);
}

static void mig_profiles(void **state)
{
    (void)state;
    char out[32];
    assert_int_equal(mw_gpu_parse_mig_profile("NVIDIA A100-SXM4-40GB MIG 1g.5gb", out, 32), 0);
    assert_string_equal(out, "1g.5gb");
    assert_int_equal(mw_gpu_parse_mig_profile("NVIDIA H100 80GB HBM3 MIG 3g.40gb", out, 32), 0);
    assert_string_equal(out, "3g.40gb");
    assert_int_equal(mw_gpu_parse_mig_profile("NVIDIA A100-SXM4-80GB MIG 1g.10gb+me", out, 32), 0);
    assert_string_equal(out, "1g.10gb+me");
    assert_int_equal(mw_gpu_parse_mig_profile("NVIDIA A30 MIG 2g.12gb Device", out, 32), 0);
    assert_string_equal(out, "2g.12gb");
    assert_int_equal(mw_gpu_parse_mig_profile("NVIDIA A100-SXM4-40GB", out, 32), -1);
    assert_int_equal(mw_gpu_parse_mig_profile("X MIG 0g.5gb", out, 32), -1);
    assert_int_equal(mw_gpu_parse_mig_profile("X MIG 1g.gb", out, 32), -1);
    assert_int_equal(mw_gpu_parse_mig_profile("X MIG 1g.5GB", out, 32), -1);
    assert_int_equal(mw_gpu_parse_mig_profile("X MIG 1g.5gb!", out, 32), -1);
    assert_int_equal(mw_gpu_parse_mig_profile("X MIG ", out, 32), -1);
    char small[4];
    assert_int_equal(mw_gpu_parse_mig_profile("X MIG 1g.5gb", small, sizeof(small)), -1);
}

static void driver_versions(void **state)
{
    (void)state;
    unsigned a, b, c;
    assert_int_equal(mw_gpu_parse_driver_version("550.54.15", &a, &b, &c), 0);
    assert_true(a == 550 && b == 54 && c == 15);
    assert_int_equal(mw_gpu_parse_driver_version("535.104.05", &a, &b, &c), 0);
    assert_true(a == 535 && b == 104 && c == 5);
    assert_int_equal(mw_gpu_parse_driver_version("6.7", &a, &b, &c), 0);
    assert_true(a == 6 && b == 7 && c == 0);
    assert_int_equal(mw_gpu_parse_driver_version("470", &a, &b, &c), 0);
    assert_int_equal(mw_gpu_parse_driver_version("", &a, &b, &c), -1);
    assert_int_equal(mw_gpu_parse_driver_version("550.", &a, &b, &c), -1);
    assert_int_equal(mw_gpu_parse_driver_version("550.54.15.1", &a, &b, &c), -1);
    assert_int_equal(mw_gpu_parse_driver_version("v550", &a, &b, &c), -1);
    assert_int_equal(mw_gpu_parse_driver_version("9999999999.1", &a, &b, &c), -1);
}

static void cpulists(void **state)
{
    (void)state;
    uint64_t bits[4] = {0};
    char out[64];
    mw_gpu_format_cpulist(bits, 4, out, sizeof(out));
    assert_string_equal(out, "");
    bits[0] = 0xf | (1ull << 8) | (1ull << 63);
    bits[1] = 1; /* 64: continues the 63 run */
    bits[3] = 1ull << 63;
    mw_gpu_format_cpulist(bits, 4, out, sizeof(out));
    assert_string_equal(out, "0-3,8,63-64,255");
    char tiny[6];
    mw_gpu_format_cpulist(bits, 4, tiny, sizeof(tiny)); /* does not fit: nothing */
    assert_string_equal(tiny, "");
}

static void clean_strings(void **state)
{
    (void)state;
    char out[16];
    mw_gpu_clean_string(out, sizeof(out), "  NVIDIA\tA10\x01 ", 16);
    assert_string_equal(out, "NVIDIA?A10?");
    mw_gpu_clean_string(out, sizeof(out), "0123456789abcdefXYZ", 19);
    assert_string_equal(out, "0123456789abcde");
    const char unterminated[4] = {'a', 'b', 'c', 'd'};
    mw_gpu_clean_string(out, sizeof(out), unterminated, 4);
    assert_string_equal(out, "abcd");
}

static uint64_t sum(const uint64_t *v, size_t n)
{
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i];
    return s;
}

static void split_is_exact(void **state)
{
    (void)state;
    uint64_t out[8];
    /* 10000 units in thirds: the leftover unit goes to the first. */
    uint64_t w3[] = {330, 330, 330};
    mw_gpu_split(10000, w3, 3, out);
    assert_true(out[0] == 3334 && out[1] == 3333 && out[2] == 3333);
    /* Largest remainders win: 9000 * {4, 2, 2, 0.5} / 8.5 */
    uint64_t wm[] = {4294967296ull, 2147483648ull, 2147483648ull, 536870912ull};
    mw_gpu_split(9000, wm, 4, out);
    assert_true(out[0] == 4235 && out[1] == 2118 && out[2] == 2118 && out[3] == 529);
    /* All weights zero: equal parts. */
    uint64_t wz[] = {0, 0, 0};
    mw_gpu_split(10, wz, 3, out);
    assert_true(out[0] == 4 && out[1] == 3 && out[2] == 3);
    /* Zero weights get nothing, whatever the total. */
    uint64_t w1[] = {0, 7, 0};
    mw_gpu_split(12345, w1, 3, out);
    assert_true(out[0] == 0 && out[1] == 12345 && out[2] == 0);
    /* Huge weights and totals do not overflow. */
    uint64_t wh[] = {UINT64_MAX / 3, UINT64_MAX / 3, 1};
    mw_gpu_split(UINT64_MAX / 2, wh, 3, out);
    assert_true(sum(out, 3) == UINT64_MAX / 2);
    assert_true(out[0] >= out[1] && out[0] - out[1] <= 1);
    /* Many random-ish cases: always the total. */
    uint64_t x = 88172645463325252ull;
    for (int round = 0; round < 2000; round++) {
        uint64_t w[8];
        size_t n = 1 + round % 8;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            w[i] = round % 3 ? x % 1000 : x >> (round % 40);
        }
        uint64_t total = x % 100001;
        mw_gpu_split(total, w, n, out);
        assert_true(sum(out, n) == total);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pci_bus_ids),     cmocka_unit_test(mig_profiles),
        cmocka_unit_test(driver_versions), cmocka_unit_test(cpulists),
        cmocka_unit_test(clean_strings),   cmocka_unit_test(split_is_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
