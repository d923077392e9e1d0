/* test_cpufreq.c - the cpufreq collector on fixtures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "testutil.h"

#define POLICY "sys/devices/system/cpu/cpufreq/policy"

static double hz(const mw_snapshot *snap, const char *name, const char *cpu)
{
    return tu_value(snap, name, "cpu", cpu, MW_END);
}

static void collects_bare_metal(void **state)
{
    (void)state;
    tu_session *s = tu_open(tu_fixture("rapl-cpufreq"), "cpufreq");
    mw_snapshot *snap = tu_run(s);
    /* scaling_cur_freq in kHz. */
    static const double cur[8] = {1200345e3, 800000e3,  2400123e3, 1000000e3,
                                  3700000e3, 3650000e3, 3899999e3, 3500000e3};
    for (int i = 0; i < 8; i++) {
        char cpu[4] = {(char)('0' + i), 0};
        assert_true(hz(snap, "mlwatch_cpu_frequency_hertz", cpu) == cur[i]);
        assert_true(hz(snap, "mlwatch_cpu_hardware_frequency_max_hertz", cpu) == 3.9e9);
        assert_true(hz(snap, "mlwatch_cpu_frequency_min_hertz", cpu) == (i < 4 ? 0.8e9 : 1.2e9));
        assert_true(hz(snap, "mlwatch_cpu_frequency_max_hertz", cpu) == (i < 4 ? 3.5e9 : 3.9e9));
        assert_true(tu_value(snap, "mlwatch_cpu_scaling_governor_info", "cpu", cpu, "governor",
                             i < 4 ? "powersave" : "performance", MW_END) == 1);
    }
    assert_int_equal(tu_count(snap, "mlwatch_cpu_frequency_hertz"), 8);
    assert_int_equal(tu_count(snap, "mlwatch_cpu_scaling_governor_info"), 8);
    assert_int_equal(tu_errors(s, "cpufreq"), 0);
    assert_true(tu_value(snap, "mlwatch_collector_errors_total", "collector", "cpufreq", MW_END) ==
                0);
    mw_snapshot_free(snap);
    tu_close(s);
}

static void absent_without_cpufreq(void **state)
{
    (void)state;
    static const char *const fixtures[] = {"bare-vm", "k8s-v2-systemd", "k8s-v1-cgroupfs"};
    for (size_t i = 0; i < 3; i++) {
        tu_session *s = tu_open(tu_fixture(fixtures[i]), "cpufreq");
        mw_snapshot *snap = tu_run(s);
        assert_int_equal(tu_count(snap, "mlwatch_cpu_frequency_hertz"), 0);
        assert_int_equal(tu_count(snap, "mlwatch_cpu_scaling_governor_info"), 0);
        assert_int_equal(tu_errors(s, "cpufreq"), 0);
        /* Absent, not failing: the collector does not run at all. */
        assert_false(
            tu_has(snap, "mlwatch_collector_errors_total", "collector", "cpufreq", MW_END));
        mw_snapshot_free(snap);
        tu_close(s);
    }
    /* No sys/devices/system/cpu at all. */
    const char *root = tu_fixture_copy("bare-vm");
    tu_remove(root, "sys/devices/system/cpu");
    tu_session *s = tu_open(root, "cpufreq");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_cpu_frequency_hertz"), 0);
    assert_int_equal(tu_errors(s, "cpufreq"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

static void skips_offline_cpus(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("rapl-cpufreq");
    tu_write(root, "sys/devices/system/cpu/cpu7/online", "0\n");
    tu_session *s = tu_open(root, "cpufreq");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_cpu_frequency_hertz"), 7);
    assert_false(tu_has(snap, "mlwatch_cpu_frequency_hertz", "cpu", "7", MW_END));
    assert_int_equal(tu_errors(s, "cpufreq"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

static void counts_errors(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("rapl-cpufreq");
    tu_session *s = tu_open(root, "cpufreq");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cpufreq"), 0);
    mw_snapshot_free(snap);

    /* No scaling_cur_freq: cpuinfo_cur_freq is used, no error. */
    tu_remove(root, POLICY "3/scaling_cur_freq");
    tu_write(root, POLICY "3/cpuinfo_cur_freq", "2000000\n");
    snap = tu_run(s);
    assert_true(hz(snap, "mlwatch_cpu_frequency_hertz", "3") == 2e9);
    assert_int_equal(tu_errors(s, "cpufreq"), 0);
    mw_snapshot_free(snap);

    /* A malformed file: one error each cycle, everything else reported. */
    tu_write(root, POLICY "2/scaling_cur_freq", "fast\n");
    for (int cycle = 1; cycle <= 2; cycle++) {
        snap = tu_run(s);
        assert_int_equal(tu_errors(s, "cpufreq"), cycle);
        assert_false(tu_has(snap, "mlwatch_cpu_frequency_hertz", "cpu", "2", MW_END));
        assert_int_equal(tu_count(snap, "mlwatch_cpu_frequency_hertz"), 7);
        assert_true(hz(snap, "mlwatch_cpu_frequency_min_hertz", "2") == 0.8e9);
        assert_true(hz(snap, "mlwatch_cpu_frequency_hertz", "1") == 0.8e9);
        mw_snapshot_free(snap);
    }
    tu_write(root, POLICY "2/scaling_cur_freq", "2400123\n");

    /* A missing limit and a bad governor: one error each. */
    tu_remove(root, POLICY "5/scaling_min_freq");
    tu_write(root, POLICY "6/scaling_governor", "on demand\n");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cpufreq"), 4);
    assert_false(tu_has(snap, "mlwatch_cpu_frequency_min_hertz", "cpu", "5", MW_END));
    assert_true(hz(snap, "mlwatch_cpu_frequency_hertz", "5") == 3.65e9);
    assert_false(tu_has(snap, "mlwatch_cpu_scaling_governor_info", "cpu", "6", MW_END));
    assert_int_equal(tu_count(snap, "mlwatch_cpu_scaling_governor_info"), 7);
    assert_true(hz(snap, "mlwatch_cpu_frequency_hertz", "2") == 2400123e3);
    mw_snapshot_free(snap);
    tu_write(root, POLICY "5/scaling_min_freq", "1200000\n");
    tu_write(root, POLICY "6/scaling_governor", "performance\n");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cpufreq"), 4);
    mw_snapshot_free(snap);

    /* A CPU's cpufreq folder vanishes: its five files fail once, then the
     * list is re-read and the CPU is no longer expected. */
    tu_remove(root, "sys/devices/system/cpu/cpu4/cpufreq");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cpufreq"), 9);
    assert_int_equal(tu_count(snap, "mlwatch_cpu_frequency_hertz"), 7);
    mw_snapshot_free(snap);
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cpufreq"), 9);
    assert_int_equal(tu_count(snap, "mlwatch_cpu_frequency_hertz"), 7);
    assert_false(tu_has(snap, "mlwatch_cpu_frequency_max_hertz", "cpu", "4", MW_END));
    assert_true(hz(snap, "mlwatch_cpu_frequency_hertz", "5") == 3.65e9);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(collects_bare_metal),
        cmocka_unit_test(absent_without_cpufreq),
        cmocka_unit_test(skips_offline_cpus),
        cmocka_unit_test(counts_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
