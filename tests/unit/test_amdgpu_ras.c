/* test_amdgpu_ras.c - amdgpu's RAS error counters: the parser of
 * ras/BLOCK_err_count, and the amdgpu_ras collector on
 * tests/fixtures/amd-gpu-node (sysfs as the kernel lays it out: class/drm
 * links into devices/, an MI300X with HBM errors and a deferred count, a
 * clean one on an older kernel, a connector and a non-AMD card). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/amdgpu_ras.h"
#include "core/snapshot.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>

static void eq(double got, double want, int line)
{
    if (got != want) fail_msg("line %d: got %.17g, want %.17g", line, got, want);
}
#define assert_value(got, want) eq((got), (want), __LINE__)

static void parses_counts(void **state)
{
    (void)state;
    mw_amdgpu_ras_count c;
    assert_int_equal(mw_amdgpu_ras_parse("ue: 2\nce: 117\n", &c), 0);
    assert_true(c.ue == 2 && c.ce == 117 && !c.has_de);
    assert_int_equal(mw_amdgpu_ras_parse("ue: 0\nce: 18446744073709551615\nde: 5\n", &c), 0);
    assert_true(c.ce == UINT64_MAX && c.has_de && c.de == 5);
    assert_int_equal(mw_amdgpu_ras_parse("ue: 1\nce: 2", &c), 0); /* no final newline */
    assert_int_equal(mw_amdgpu_ras_parse("ue: 1\n", &c), -1);     /* no ce */
    assert_int_equal(mw_amdgpu_ras_parse("ue: 1\nue: 2\nce: 0\n", &c), -1);
    assert_int_equal(mw_amdgpu_ras_parse("ue: x\nce: 0\n", &c), -1);
    assert_int_equal(mw_amdgpu_ras_parse("ue: 1\nce: 0\npoison: 3\n", &c), -1);
    assert_int_equal(mw_amdgpu_ras_parse("", &c), -1);
}

#define RAS(card, bus, block, type)                                                                \
    tu_value(snap, "mlwatch_gpu_ras_errors_total", "card", card, "pci_bus_id", bus, "block",       \
             block, "type", type, MW_END)

static void collects_fixture(void **state)
{
    (void)state;
    tu_session *s = tu_open(tu_fixture("amd-gpu-node"), "amdgpu_ras");
    mw_snapshot *snap = tu_run(s);
    /* card0: 4 blocks x 2 + umc's deferred; card1: 2 blocks x 2. */
    assert_int_equal(tu_count(snap, "mlwatch_gpu_ras_errors_total"), 13);
    assert_value(RAS("card0", "0000:03:00.0", "umc", "uncorrected"), 2);
    assert_value(RAS("card0", "0000:03:00.0", "umc", "corrected"), 117);
    assert_value(RAS("card0", "0000:03:00.0", "umc", "deferred"), 5);
    assert_value(RAS("card0", "0000:03:00.0", "gfx", "corrected"), 3);
    assert_value(RAS("card0", "0000:03:00.0", "xgmi_wafl", "uncorrected"), 1);
    assert_value(RAS("card1", "0000:83:00.0", "umc", "corrected"), 0);
    assert_false(tu_has(snap, "mlwatch_gpu_ras_errors_total", "card", "card1", "pci_bus_id",
                        "0000:83:00.0", "block", "umc", "type", "deferred", MW_END));
    assert_int_equal(tu_errors(s, "amdgpu_ras"), 0);
    mw_snapshot_free(snap);
    tu_close(s);

    /* A malformed counter: one counted error, the other blocks still there. */
    const char *root = tu_fixture_copy("amd-gpu-node");
    tu_write(root, "sys/devices/pci0000:00/0000:03:00.0/ras/gfx_err_count", "garbage\n");
    s = tu_open(root, "amdgpu_ras");
    snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_gpu_ras_errors_total"), 11);
    assert_false(tu_has(snap, "mlwatch_gpu_ras_errors_total", "card", "card0", "pci_bus_id",
                        "0000:03:00.0", "block", "gfx", "type", "corrected", MW_END));
    assert_int_equal(tu_errors(s, "amdgpu_ras"), 1);
    mw_snapshot_free(snap);
    tu_close(s);

    /* No drm cards with a ras folder: the collector stays off. */
    s = tu_open(tu_fixture("gpu-node"), "amdgpu_ras");
    snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_gpu_ras_errors_total"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_counts),
        cmocka_unit_test(collects_fixture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
