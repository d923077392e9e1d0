/* test_pressure.c - the host pressure (PSI) collector on fixtures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "testutil.h"

static double waiting(const mw_snapshot *snap, const char *res)
{
    return tu_value(snap, "mlwatch_pressure_waiting_seconds_total", "resource", res, MW_END);
}

static double stalled(const mw_snapshot *snap, const char *res)
{
    return tu_value(snap, "mlwatch_pressure_stalled_seconds_total", "resource", res, MW_END);
}

static void collects_from_fixture(void **state)
{
    (void)state;
    tu_session *s = tu_open(tu_fixture("rapl-cpufreq"), "pressure");
    mw_snapshot *snap = tu_run(s);
    /* total= is in microseconds. */
    assert_true(waiting(snap, "cpu") == 123.456789);
    assert_true(waiting(snap, "memory") == 2.345678);
    assert_true(waiting(snap, "io") == 34.56789);
    assert_true(stalled(snap, "cpu") == 0);
    assert_true(stalled(snap, "memory") == 1.234567);
    assert_true(stalled(snap, "io") == 23.456789);
    assert_int_equal(tu_errors(s, "pressure"), 0);
    mw_snapshot_free(snap);
    tu_close(s);

    s = tu_open(tu_fixture("k8s-v2-systemd"), "pressure");
    snap = tu_run(s);
    assert_true(waiting(snap, "cpu") == 987.654321);
    assert_true(stalled(snap, "io") == 34.56789);
    assert_int_equal(tu_count(snap, "mlwatch_pressure_waiting_seconds_total"), 3);
    assert_int_equal(tu_errors(s, "pressure"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
}

static void absent_without_psi(void **state)
{
    (void)state;
    tu_session *s = tu_open(tu_fixture("k8s-v1-cgroupfs"), "pressure");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_pressure_waiting_seconds_total"), 0);
    assert_int_equal(tu_errors(s, "pressure"), 0);
    assert_false(tu_has(snap, "mlwatch_collector_errors_total", "collector", "pressure", MW_END));
    mw_snapshot_free(snap);
    tu_close(s);
}

static void counts_errors(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("bare-vm");
    tu_session *s = tu_open(root, "pressure");
    mw_snapshot *snap = tu_run(s);
    assert_true(waiting(snap, "cpu") == 4.56789);
    assert_true(stalled(snap, "memory") == 0.006789);
    assert_int_equal(tu_errors(s, "pressure"), 0);
    mw_snapshot_free(snap);

    /* A kernel before 5.13 has no "full" line for cpu: no sample, no error. */
    tu_write(root, "proc/pressure/cpu", "some avg10=0.00 avg60=0.00 avg300=0.00 total=1500000\n");
    snap = tu_run(s);
    assert_true(waiting(snap, "cpu") == 1.5);
    assert_false(tu_has(snap, "mlwatch_pressure_stalled_seconds_total", "resource", "cpu", MW_END));
    assert_int_equal(tu_errors(s, "pressure"), 0);
    mw_snapshot_free(snap);

    /* Truncated io, missing memory: two errors, cpu still reported. */
    tu_write(root, "proc/pressure/io",
             "some avg10=0.05 avg60=0.04 avg300=0.02 total=345678\n"
             "full avg10=0.02 avg60=0.02 avg300=0.01 total=2345");
    tu_remove(root, "proc/pressure/memory");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "pressure"), 2);
    assert_true(waiting(snap, "cpu") == 1.5);
    assert_int_equal(tu_count(snap, "mlwatch_pressure_waiting_seconds_total"), 1);
    mw_snapshot_free(snap);

    /* Garbage and an empty file. */
    tu_write(root, "proc/pressure/io", "some avg10=x\n");
    tu_write(root, "proc/pressure/memory", "");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "pressure"), 4);
    assert_true(tu_value(snap, "mlwatch_collector_errors_total", "collector", "pressure", MW_END) ==
                4);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(collects_from_fixture),
        cmocka_unit_test(absent_without_psi),
        cmocka_unit_test(counts_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
