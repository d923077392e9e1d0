/* test_loadavg.c - /proc/loadavg parsing and its collector on fixtures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/loadavg.h"
#include "testutil.h"

static void parses_valid_line(void **state)
{
    (void)state;
    mw_loadavg l;
    assert_int_equal(mw_parse_loadavg("0.52 0.58 1.59 3/1054 123456\n", &l), 0);
    assert_true(l.load1 == 0.52 && l.load5 == 0.58 && l.load15 == 1.59);
    assert_int_equal(l.runnable, 3);
    assert_int_equal(l.tasks, 1054);
}

static void rejects_malformed(void **state)
{
    (void)state;
    mw_loadavg l;
    assert_int_equal(mw_parse_loadavg("", &l), -1);
    assert_int_equal(mw_parse_loadavg("0.52 0.58", &l), -1);
    assert_int_equal(mw_parse_loadavg("0.52 0.58 0.59 3-1054 1", &l), -1);
    assert_int_equal(mw_parse_loadavg("x 0.58 0.59 3/1054 1", &l), -1);
}

static void collects_from_fixture(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("bare-vm");
    tu_write(root, "proc/loadavg", "1.25 0.50 0.25 2/300 4242\n");
    tu_session *s = tu_open(root, "loadavg");
    mw_snapshot *snap = tu_run(s);
    assert_true(tu_value(snap, "mlwatch_load1", MW_END) == 1.25);
    assert_true(tu_value(snap, "mlwatch_load5", MW_END) == 0.5);
    assert_true(tu_value(snap, "mlwatch_load15", MW_END) == 0.25);
    assert_true(tu_value(snap, "mlwatch_tasks_runnable", MW_END) == 2);
    assert_true(tu_value(snap, "mlwatch_tasks", MW_END) == 300);
    assert_int_equal(tu_errors(s, "loadavg"), 0);
    mw_snapshot_free(snap);

    /* Truncated file: counted as an error, nothing emitted, next cycle fine. */
    tu_write(root, "proc/loadavg", "1.25 0.5");
    snap = tu_run(s);
    assert_false(tu_has(snap, "mlwatch_load1", MW_END));
    assert_int_equal(tu_errors(s, "loadavg"), 1);
    assert_true(tu_value(snap, "mlwatch_collector_errors_total", "collector", "loadavg", MW_END) ==
                1);
    mw_snapshot_free(snap);

    tu_remove(root, "proc/loadavg");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "loadavg"), 2);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_valid_line),
        cmocka_unit_test(rejects_malformed),
        cmocka_unit_test(collects_from_fixture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
