/* test_ipmi.c - the IPMI DCMI collector with a fake node-power source
 * (exact watts, a failing read, no active measurement, no BMC). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/ipmi.h"
#include "testutil.h"

#include <stdio.h>
#include <string.h>

typedef struct fake {
    int present, fail, inactive, closed;
    double watts;
} fake;

static void *f_open(void *ctx, const char *lib, char *err, size_t n)
{
    (void)lib;
    fake *f = ctx;
    if (!f->present) {
        snprintf(err, n, "no in-band IPMI interface answers (none found)");
        return NULL;
    }
    return f;
}

static int f_power(void *h, double *w, char *err, size_t n)
{
    fake *f = h;
    if (f->fail) {
        snprintf(err, n, "DCMI Get Power Reading: driver timeout");
        return -1;
    }
    *w = f->watts;
    return f->inactive ? 0 : 1;
}

static void f_close(void *h)
{
    ((fake *)h)->closed++;
}

static void reads_node_power(void **state)
{
    (void)state;
    fake f = {.present = 1, .watts = 412};
    mw_ipmi_ops ops = {f_open, f_power, f_close, &f};
    mw_ipmi_set_ops(&ops);
    tu_session *s = tu_open(tu_fixture("bare-vm"), "ipmi");
    mw_snapshot *snap = tu_run(s);
    assert_true(tu_value(snap, "mlwatch_ipmi_power_watts", MW_END) == 412);
    mw_snapshot_free(snap);
    f.fail = 1; /* counted, no sample */
    snap = tu_run(s);
    assert_false(tu_has(snap, "mlwatch_ipmi_power_watts", MW_END));
    assert_int_equal(tu_errors(s, "ipmi"), 1);
    mw_snapshot_free(snap);
    f.fail = 0;
    f.inactive = 1; /* the BMC measures nothing now: no sample, no error */
    snap = tu_run(s);
    assert_false(tu_has(snap, "mlwatch_ipmi_power_watts", MW_END));
    assert_int_equal(tu_errors(s, "ipmi"), 1);
    mw_snapshot_free(snap);
    tu_close(s);
    assert_int_equal(f.closed, 1);
    mw_ipmi_set_ops(NULL);
}

static void absent_without_bmc(void **state)
{
    (void)state;
    fake f = {.present = 0};
    mw_ipmi_ops ops = {f_open, f_power, f_close, &f};
    mw_ipmi_set_ops(&ops);
    tu_session *s = tu_open(tu_fixture("bare-vm"), "ipmi");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_ipmi_power_watts"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
    /* The real FreeIPMI source on this machine (no /dev/ipmi0 here, or no
     * BMC): absent, not an error. */
    mw_ipmi_set_ops(NULL);
    s = tu_open(tu_fixture("bare-vm"), "ipmi");
    snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_ipmi_power_watts"), 0);
    assert_int_equal(tu_errors(s, "ipmi"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_node_power),
        cmocka_unit_test(absent_without_bmc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
