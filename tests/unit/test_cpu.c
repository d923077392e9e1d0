/* test_cpu.c - /proc/stat parsing and the cpu collector on fixtures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/cpu.h"
#include "core/buf.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

typedef struct seen {
    unsigned n;
    mw_cpu_times t[8];
} seen;

static void record(void *arg, const mw_cpu_times *t)
{
    seen *s = arg;
    if (s->n < 8) s->t[s->n] = *t;
    s->n++;
}

static const char STAT[] = "cpu  300 20 100 1000 10 5 4 3 2 1\n"
                           "cpu0 100 10 50 500 5 2 2 1 1 1\n"
                           "cpu1 200 10 50 500 5 3 2 2 1 0\n"
                           "intr 12345 0 1 2 12342\n"
                           "ctxt 6789\n"
                           "btime 1700000000\n"
                           "processes 4321\n"
                           "procs_running 2\n"
                           "procs_blocked 1\n"
                           "softirq 100 1 2 3 4 5 6 7 8 9 55\n";

static void parses_current_kernel(void **state)
{
    (void)state;
    mw_procstat st;
    seen s = {0};
    assert_int_equal(mw_parse_procstat(STAT, &st, record, &s), 0);
    assert_int_equal(s.n, 2);
    assert_int_equal(st.ncpus, 2);
    assert_int_equal(st.malformed, 0);
    assert_int_equal(st.present, MW_STAT_ALL);
    assert_int_equal(s.t[0].cpu, 0);
    assert_int_equal(s.t[0].ncols, 10);
    assert_int_equal(s.t[0].ticks[MW_CPU_USER], 100);
    assert_int_equal(s.t[0].ticks[MW_CPU_IDLE], 500);
    assert_int_equal(s.t[1].cpu, 1);
    assert_int_equal(s.t[1].ticks[MW_CPU_IRQ], 3);
    assert_int_equal(s.t[1].ticks[MW_CPU_STEAL], 2);
    assert_int_equal(s.t[1].ticks[MW_CPU_GUEST], 1);
    assert_int_equal(s.t[1].ticks[MW_CPU_GUEST_NICE], 0);
    assert_int_equal(st.intr, 12345);
    assert_int_equal(st.ctxt, 6789);
    assert_int_equal(st.btime, 1700000000);
    assert_int_equal(st.processes, 4321);
    assert_int_equal(st.procs_running, 2);
    assert_int_equal(st.procs_blocked, 1);
}

static void parses_old_kernels(void **state)
{
    (void)state;
    mw_procstat st;
    seen s = {0};
    /* 2.4: four columns; 2.6.0: seven; 2.6.11: eight; a future kernel: twelve. */
    assert_int_equal(mw_parse_procstat("cpu  1 2 3 4\n"
                                       "cpu0 1 2 3 4\n"
                                       "cpu1 1 2 3 4 5 6 7\n"
                                       "cpu2 1 2 3 4 5 6 7 8\n"
                                       "cpu3 1 2 3 4 5 6 7 8 9 10 11 12\n"
                                       "ctxt 1\n",
                                       &st, record, &s),
                     0);
    assert_int_equal(st.malformed, 0);
    assert_int_equal(s.n, 4);
    assert_int_equal(s.t[0].ncols, 4);
    assert_int_equal(s.t[0].ticks[MW_CPU_IOWAIT], 0);
    assert_int_equal(s.t[1].ncols, 7);
    assert_int_equal(s.t[2].ncols, 8);
    assert_int_equal(s.t[3].ncols, 10);
    assert_int_equal(s.t[3].ticks[MW_CPU_GUEST_NICE], 10);
    assert_int_equal(st.present, MW_STAT_CTXT);
}

static void rejects_malformed(void **state)
{
    (void)state;
    mw_procstat st;
    seen s = {0};
    assert_int_equal(mw_parse_procstat("", &st, NULL, NULL), -1);
    assert_int_equal(mw_parse_procstat("ctxt 1\nbtime 2\n", &st, NULL, NULL), -1);
    assert_int_equal(mw_parse_procstat("garbage\n", &st, NULL, NULL), -1);

    /* Each bad line is counted and skipped; the good ones still come. */
    assert_int_equal(mw_parse_procstat("cpu  1 2 3 4\n"
                                       "cpu0 1 2 3\n"                      /* too few columns */
                                       "cpu1 1 2 x 4\n"                    /* not a number */
                                       "cpu2 1 2 3 4\n"                    /* fine */
                                       "cpu2 1 2 3 4\n"                    /* repeated */
                                       "cpu1 1 2 3 4\n"                    /* not ascending */
                                       "cpu3x 1 2 3 4\n"                   /* bad name */
                                       "cpu4 1 2 3 4 -5\n"                 /* sign */
                                       "cpu5 1 2 3 99999999999999999999\n" /* overflow */
                                       "ctxt 5\n"
                                       "ctxt 6\n"          /* repeated */
                                       "btime 12 13\n"     /* trailing junk */
                                       "procs_running\n"   /* no value */
                                       "cpu6 1 2 3 4 5 6", /* truncated read */
                                       &st, record, &s),
                     0);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.t[0].cpu, 2);
    assert_int_equal(st.ctxt, 5);
    assert_int_equal(st.present, MW_STAT_CTXT);
    assert_int_equal(st.malformed, 11);
}

static void parses_many_cpus(void **state)
{
    (void)state;
    /* 1024 CPUs and an intr line with 100000 interrupts: ~250 KB. */
    mw_buf b;
    mw_buf_init(&b, 0);
    mw_buf_puts(&b, "cpu  1 2 3 4 5 6 7 8 9 10\n");
    for (unsigned i = 0; i < 1024; i++)
        mw_buf_printf(&b, "cpu%u %u 0 %u 100000 0 0 0 0 0 0\n", i, i * 3, i);
    mw_buf_puts(&b, "intr 100000");
    for (unsigned i = 0; i < 100000; i++)
        mw_buf_puts(&b, " 1");
    mw_buf_puts(&b, "\nctxt 1\nbtime 2\nprocesses 3\nprocs_running 4\nprocs_blocked 5\n");
    assert_true(b.len > 200000);
    mw_procstat st;
    seen s = {0};
    assert_int_equal(mw_parse_procstat(b.data, &st, record, &s), 0);
    assert_int_equal(s.n, 1024);
    assert_int_equal(st.ncpus, 1024);
    assert_int_equal(st.malformed, 0);
    assert_int_equal(st.present, MW_STAT_ALL);
    assert_int_equal(st.intr, 100000);

    /* The same through the collector: 1024 x 8 modes + 1024 x 2 guest. */
    const char *root = tu_fixture_copy("bare-vm");
    tu_write(root, "proc/stat", b.data);
    mw_buf_free(&b);
    tu_session *ses = tu_open(root, "cpu");
    mw_snapshot *snap = tu_run(ses);
    assert_int_equal(tu_count(snap, "mlwatch_cpu_seconds_total"), 1024 * 8);
    assert_int_equal(tu_count(snap, "mlwatch_cpu_guest_seconds_total"), 1024 * 2);
    assert_true(tu_value(snap, "mlwatch_cpu_seconds_total", "cpu", "1023", "mode", "user",
                         MW_END) == 30.69);
    assert_true(tu_value(snap, "mlwatch_cpu_seconds_total", "cpu", "1023", "mode", "system",
                         MW_END) == 10.23);
    assert_int_equal(tu_errors(ses, "cpu"), 0);
    mw_snapshot_free(snap);
    tu_close(ses);
    tu_cleanup();
}

static double secs(const mw_snapshot *snap, const char *cpu, const char *mode)
{
    return tu_value(snap, "mlwatch_cpu_seconds_total", "cpu", cpu, "mode", mode, MW_END);
}

static void collects_bare_metal(void **state)
{
    (void)state;
    tu_session *s = tu_open(tu_fixture("rapl-cpufreq"), "cpu");
    mw_snapshot *snap = tu_run(s);
    /* cpu0 12345678 1234 2345678 88783709 123456 34567 45678 0 0 0 */
    assert_true(secs(snap, "0", "user") == 123456.78);
    assert_true(secs(snap, "0", "nice") == 12.34);
    assert_true(secs(snap, "0", "system") == 23456.78);
    assert_true(secs(snap, "0", "idle") == 887837.09);
    assert_true(secs(snap, "0", "iowait") == 1234.56);
    assert_true(secs(snap, "0", "irq") == 345.67);
    assert_true(secs(snap, "0", "softirq") == 456.78);
    assert_true(secs(snap, "0", "steal") == 0);
    /* cpu7 17654321 1098 3123456 82785201 20123 42345 53456 0 901200 3400 */
    assert_true(secs(snap, "7", "user") == 176543.21);
    assert_true(secs(snap, "7", "idle") == 827852.01);
    assert_true(tu_value(snap, "mlwatch_cpu_guest_seconds_total", "cpu", "7", "mode", "user",
                         MW_END) == 9012);
    assert_true(tu_value(snap, "mlwatch_cpu_guest_seconds_total", "cpu", "7", "mode", "nice",
                         MW_END) == 34);
    assert_true(tu_value(snap, "mlwatch_cpu_guest_seconds_total", "cpu", "4", "mode", "user",
                         MW_END) == 12345);
    assert_true(
        tu_value(snap, "mlwatch_cpu_guest_seconds_total", "cpu", "0", "mode", "user", MW_END) == 0);
    /* Per-CPU lines only: 8 CPUs x 8 modes, no aggregate "cpu" line. */
    assert_int_equal(tu_count(snap, "mlwatch_cpu_seconds_total"), 64);
    assert_int_equal(tu_count(snap, "mlwatch_cpu_guest_seconds_total"), 16);
    assert_false(tu_has(snap, "mlwatch_cpu_seconds_total", "cpu", "8", MW_END));
    assert_true(tu_value(snap, "mlwatch_context_switches_total", MW_END) == 2345678901.0);
    assert_true(tu_value(snap, "mlwatch_interrupts_total", MW_END) == 1000000000.0);
    assert_true(tu_value(snap, "mlwatch_forks_total", MW_END) == 3456789);
    assert_true(tu_value(snap, "mlwatch_boot_time_seconds", MW_END) == 1718000000);
    assert_true(tu_value(snap, "mlwatch_procs_running", MW_END) == 3);
    assert_true(tu_value(snap, "mlwatch_procs_blocked", MW_END) == 1);
    assert_int_equal(tu_errors(s, "cpu"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
}

static void collects_vm_steal(void **state)
{
    (void)state;
    tu_session *s = tu_open(tu_fixture("bare-vm"), "cpu");
    mw_snapshot *snap = tu_run(s);
    /* cpu1 1134567 234 334567 24374954 21234 0 11234 43210 0 0 */
    assert_true(secs(snap, "1", "user") == 11345.67);
    assert_true(secs(snap, "1", "steal") == 432.1);
    assert_true(secs(snap, "1", "idle") == 243749.54);
    assert_true(secs(snap, "0", "steal") == 456.78);
    assert_int_equal(tu_count(snap, "mlwatch_cpu_seconds_total"), 16);
    assert_true(tu_value(snap, "mlwatch_boot_time_seconds", MW_END) == 1718600000);
    assert_true(tu_value(snap, "mlwatch_interrupts_total", MW_END) == 23456789);
    assert_int_equal(tu_errors(s, "cpu"), 0);
    mw_snapshot_free(snap);
    tu_close(s);

    s = tu_open(tu_fixture("k8s-v2-systemd"), "cpu");
    snap = tu_run(s);
    /* cpu3 31234567 9012 8432109 132610733 201234 0 312345 0 0 0 */
    assert_true(secs(snap, "3", "user") == 312345.67);
    assert_true(secs(snap, "3", "idle") == 1326107.33);
    assert_true(tu_value(snap, "mlwatch_context_switches_total", MW_END) == 9876543210.0);
    assert_int_equal(tu_count(snap, "mlwatch_cpu_seconds_total"), 32);
    assert_int_equal(tu_errors(s, "cpu"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
}

static void counts_errors(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("k8s-v1-cgroupfs");
    tu_session *s = tu_open(root, "cpu");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cpu"), 0);
    mw_snapshot_free(snap);

    /* A 2.6.10-era file: seven columns, no steal or guest. No error. */
    tu_write(root, "proc/stat",
             "cpu  700 0 300 9000 0 0 0\n"
             "cpu0 350 0 150 4500 0 0 0\n"
             "cpu1 350 0 150 4500 0 0 0\n"
             "intr 1\nctxt 2\nbtime 3\nprocesses 4\nprocs_running 5\nprocs_blocked 6\n");
    snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_cpu_seconds_total"), 14);
    assert_false(tu_has(snap, "mlwatch_cpu_seconds_total", "mode", "steal", MW_END));
    assert_false(tu_has(snap, "mlwatch_cpu_guest_seconds_total", MW_END));
    assert_true(secs(snap, "1", "user") == 3.5);
    assert_int_equal(tu_errors(s, "cpu"), 0);
    mw_snapshot_free(snap);

    /* Truncated read: the CPUs before the cut are still reported. */
    tu_write(root, "proc/stat",
             "cpu  1 2 3 4 5 6 7 8 9 10\n"
             "cpu0 100 0 50 900 0 0 0 0 0 0\n"
             "cpu1 200 0 60 800 0 0 0 0 0 0\n"
             "cpu2 300 0 7");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cpu"), 1);
    assert_true(tu_value(snap, "mlwatch_collector_errors_total", "collector", "cpu", MW_END) == 1);
    assert_true(secs(snap, "1", "user") == 2);
    assert_false(tu_has(snap, "mlwatch_cpu_seconds_total", "cpu", "2", MW_END));
    assert_false(tu_has(snap, "mlwatch_context_switches_total", MW_END));
    mw_snapshot_free(snap);

    /* Lines missing (no ctxt..procs_blocked): one error, CPUs reported. */
    tu_write(root, "proc/stat", "cpu  1 2 3 4\ncpu0 1 2 3 4\n");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cpu"), 2);
    assert_int_equal(tu_count(snap, "mlwatch_cpu_seconds_total"), 4);
    mw_snapshot_free(snap);

    /* Not a /proc/stat at all. */
    tu_write(root, "proc/stat", "hello\n");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cpu"), 3);
    assert_false(tu_has(snap, "mlwatch_cpu_seconds_total", MW_END));
    mw_snapshot_free(snap);

    /* Empty and missing. */
    tu_write(root, "proc/stat", "");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cpu"), 4);
    mw_snapshot_free(snap);
    tu_remove(root, "proc/stat");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cpu"), 5);
    assert_false(tu_has(snap, "mlwatch_cpu_seconds_total", MW_END));
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_current_kernel), cmocka_unit_test(parses_old_kernels),
        cmocka_unit_test(rejects_malformed),     cmocka_unit_test(parses_many_cpus),
        cmocka_unit_test(collects_bare_metal),   cmocka_unit_test(collects_vm_steal),
        cmocka_unit_test(counts_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
