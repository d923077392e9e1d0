/* test_vmstat.c - /proc/vmstat parsing and the vmstat collector. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/vmstat.h"
#include "testutil.h"

static uint64_t val(const mw_vmstat *v, const char *name)
{
    int i = mw_vmstat_field(name);
    assert_true(i >= 0);
    assert_true(v->present & (1u << i));
    return v->value[i];
}

static int has(const mw_vmstat *v, const char *name)
{
    int i = mw_vmstat_field(name);
    return i >= 0 && (v->present & (1u << i)) != 0;
}

static void parses_counters(void **state)
{
    (void)state;
    mw_vmstat v;
    assert_int_equal(mw_parse_vmstat("nr_free_pages 12345\n"
                                     "pgpgin 100\n"
                                     "pgfault 18446744073709551615\n"
                                     "pgmajfault 7\n"
                                     "oom_kill 0\n"
                                     "nr_unstable 0\n",
                                     &v),
                     0);
    assert_int_equal(v.malformed, 0);
    assert_int_equal(val(&v, "pgpgin"), 100);
    assert_true(val(&v, "pgfault") == UINT64_MAX);
    assert_int_equal(val(&v, "pgmajfault"), 7);
    assert_int_equal(val(&v, "oom_kill"), 0);
    assert_false(has(&v, "numa_hit"));
    assert_int_equal(mw_vmstat_field("nr_free_pages"), -1);
    assert_int_equal(mw_vmstat_field("pgfaul"), -1);
}

static void rejects_malformed(void **state)
{
    (void)state;
    mw_vmstat v;
    assert_int_equal(mw_parse_vmstat("", &v), -1);
    assert_int_equal(mw_parse_vmstat("nr_free_pages 1\nnr_dirty 2\n", &v), -1); /* none known */
    assert_int_equal(mw_parse_vmstat("pgfault 1", &v), -1);                     /* cut */
    assert_int_equal(mw_parse_vmstat("pgfault 1\n"
                                     "pgfault 2\n"                   /* repeated */
                                     "pgmajfault x\n"                /* not a number */
                                     "oom_kill 1 2\n"                /* trailing junk */
                                     "pswpin -1\n"                   /* sign */
                                     "nospace\n"                     /* not "name value" */
                                     " 5\n"                          /* no name */
                                     "pgpgin 99999999999999999999\n" /* overflow */
                                     "pswpout 3\n"
                                     "pgpgout 12", /* cut */
                                     &v),
                     0);
    assert_int_equal(v.malformed, 8);
    assert_int_equal(val(&v, "pgfault"), 1);
    assert_int_equal(val(&v, "pswpout"), 3);
    assert_false(has(&v, "pgpgout"));
    assert_false(has(&v, "oom_kill"));
}

static double c(const mw_snapshot *snap, const char *name)
{
    return tu_value(snap, name, MW_END);
}

static void collects_from_fixture(void **state)
{
    (void)state;
    tu_session *s = tu_open(tu_fixture("rapl-cpufreq"), "vmstat");
    mw_snapshot *snap = tu_run(s);
    assert_true(c(snap, "mlwatch_vmstat_pgpgin_total") == 123456789);
    assert_true(c(snap, "mlwatch_vmstat_pgpgout_total") == 234567890);
    assert_true(c(snap, "mlwatch_vmstat_pswpin_total") == 1234);
    assert_true(c(snap, "mlwatch_vmstat_pswpout_total") == 2345);
    assert_true(c(snap, "mlwatch_vmstat_pgfault_total") == 3456789012.0);
    assert_true(c(snap, "mlwatch_vmstat_pgmajfault_total") == 45678);
    assert_true(c(snap, "mlwatch_vmstat_oom_kill_total") == 2);
    /* numa_* is the sum of the two nodes' numastat files. */
    assert_true(c(snap, "mlwatch_vmstat_numa_hit_total") == 987654321.0 + 876543210.0);
    assert_true(c(snap, "mlwatch_vmstat_numa_miss_total") == 1234 + 5678);
    assert_true(c(snap, "mlwatch_vmstat_numa_foreign_total") == 5678 + 1234);
    assert_true(c(snap, "mlwatch_vmstat_numa_local_total") == 987650000.0 + 876540000.0);
    assert_true(c(snap, "mlwatch_vmstat_numa_other_total") == 5555 + 8888);
    assert_true(c(snap, "mlwatch_vmstat_pgsteal_kswapd_total") == 345678);
    assert_true(c(snap, "mlwatch_vmstat_pgsteal_direct_total") == 4567);
    assert_true(c(snap, "mlwatch_vmstat_pgscan_kswapd_total") == 456789);
    assert_true(c(snap, "mlwatch_vmstat_pgscan_direct_total") == 5678);
    assert_true(c(snap, "mlwatch_vmstat_thp_fault_alloc_total") == 12345);
    assert_true(c(snap, "mlwatch_vmstat_compact_stall_total") == 12);
    assert_true(c(snap, "mlwatch_vmstat_allocstall_normal_total") == 3);
    /* Only the table's counters, not the other ~100 lines of the file. */
    assert_false(tu_has(snap, "mlwatch_vmstat_nr_free_pages_total", MW_END));
    assert_int_equal(tu_errors(s, "vmstat"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
}

static void counts_errors(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("k8s-v2-systemd");
    tu_session *s = tu_open(root, "vmstat");
    mw_snapshot *snap = tu_run(s);
    assert_true(c(snap, "mlwatch_vmstat_oom_kill_total") == 7);
    assert_true(c(snap, "mlwatch_vmstat_pgfault_total") == 6789012345.0);
    assert_int_equal(tu_errors(s, "vmstat"), 0);
    mw_snapshot_free(snap);

    /* A kernel without NUMA or THP: those counters are just absent. */
    tu_write(root, "proc/vmstat", "nr_free_pages 1\npgpgin 5\npgpgout 6\npgfault 7\n");
    snap = tu_run(s);
    assert_true(c(snap, "mlwatch_vmstat_pgfault_total") == 7);
    assert_false(tu_has(snap, "mlwatch_vmstat_numa_hit_total", MW_END));
    assert_false(tu_has(snap, "mlwatch_vmstat_oom_kill_total", MW_END));
    assert_int_equal(tu_errors(s, "vmstat"), 0);
    mw_snapshot_free(snap);

    /* Truncated. */
    tu_write(root, "proc/vmstat", "pgpgin 5\npgpgout 6\npgfau");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "vmstat"), 1);
    assert_true(c(snap, "mlwatch_vmstat_pgpgout_total") == 6);
    mw_snapshot_free(snap);

    /* Nothing known. */
    tu_write(root, "proc/vmstat", "\n\n");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "vmstat"), 2);
    assert_false(tu_has(snap, "mlwatch_vmstat_pgpgin_total", MW_END));
    mw_snapshot_free(snap);

    tu_remove(root, "proc/vmstat");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "vmstat"), 3);
    assert_true(tu_value(snap, "mlwatch_collector_errors_total", "collector", "vmstat", MW_END) ==
                3);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_counters),
        cmocka_unit_test(rejects_malformed),
        cmocka_unit_test(collects_from_fixture),
        cmocka_unit_test(counts_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
