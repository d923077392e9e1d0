/* test_self.c - /proc/self/stat parsing and the self collector (which reads
 * the test process itself, never under --root). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/self.h"
#include "testutil.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static void parses_stat(void **state)
{
    (void)state;
    mw_proc_stat ps;
    const char *line = "4242 (mlwatch) S 1 4242 4242 0 -1 4194560 1234 0 5 0 250 75 0 0 20 0 3 "
                       "0 987654 123456789 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 "
                       "3 0 0 0 0 0\n";
    assert_int_equal(mw_parse_proc_stat(line, &ps), 0);
    assert_int_equal(ps.utime_ticks, 250);
    assert_int_equal(ps.stime_ticks, 75);
    assert_int_equal(ps.threads, 3);
    assert_int_equal(ps.vsize_bytes, 123456789);
    assert_int_equal(ps.rss_pages, 2048);

    /* A command name with spaces and parentheses. */
    const char *odd = "7 (a) b (c)) R 1 7 7 0 -1 0 0 0 0 0 10 20 0 0 20 0 1 0 1 4096 3 0\n";
    assert_int_equal(mw_parse_proc_stat(odd, &ps), 0);
    assert_int_equal(ps.utime_ticks, 10);
    assert_int_equal(ps.stime_ticks, 20);
    assert_int_equal(ps.threads, 1);
    assert_int_equal(ps.vsize_bytes, 4096);
    assert_int_equal(ps.rss_pages, 3);
}

static void rejects_malformed_stat(void **state)
{
    (void)state;
    mw_proc_stat ps;
    assert_int_equal(mw_parse_proc_stat("", &ps), -1);
    assert_int_equal(mw_parse_proc_stat("4242 mlwatch S 1", &ps), -1);
    assert_int_equal(mw_parse_proc_stat("4242 (mlwatch) S 1 2 3", &ps), -1);
    assert_int_equal(mw_parse_proc_stat("4242 (mlwatch)", &ps), -1);
    assert_int_equal(mw_parse_proc_stat("4242 (mlwatch) ", &ps), -1);
    assert_int_equal(
        mw_parse_proc_stat("7 (a) R 1 7 7 0 -1 0 0 0 0 0 x 20 0 0 20 0 1 0 1 4096 3 0", &ps), -1);
    assert_int_equal(
        mw_parse_proc_stat("7 (a) R 1 7 7 0 -1 0 0 0 0 0 10  20 0 0 20 0 1 0 1 4096 3 0", &ps), -1);
}

static void collects_own_process(void **state)
{
    (void)state;
    /* bare-vm has no proc/self: the collector must not read under --root. */
    tu_session *s = tu_open(tu_fixture("bare-vm"), "self");
    mw_snapshot *snap = tu_run(s);
    assert_true(tu_value(snap, "mlwatch_process_threads", MW_END) >= 1);
    assert_true(tu_value(snap, "mlwatch_process_resident_memory_bytes", MW_END) > 0);
    assert_true(tu_value(snap, "mlwatch_process_virtual_memory_bytes", MW_END) >=
                tu_value(snap, "mlwatch_process_resident_memory_bytes", MW_END));
    assert_true(tu_value(snap, "mlwatch_process_cpu_seconds_total", MW_END) >= 0);
    double fds = tu_value(snap, "mlwatch_process_open_fds", MW_END);
    assert_true(fds >= 3);
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    assert_true(tu_value(snap, "mlwatch_process_max_fds", MW_END) == (double)rl.rlim_cur);
    assert_int_equal(tu_errors(s, "self"), 0);
    mw_snapshot_free(snap);

    /* Three more descriptors: the count is refreshed every 10 cycles (on
     * kernels before 6.2, where listing /proc/self/fd is the only way), so
     * cycles 2-10 still show the old count and cycle 11 the new one -- or
     * every cycle shows it at once where the kernel reports the count. */
    int extra[3];
    for (int i = 0; i < 3; i++)
        extra[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    double seen = 0;
    for (int cycle = 2; cycle <= 11; cycle++) {
        snap = tu_run(s);
        seen = tu_value(snap, "mlwatch_process_open_fds", MW_END);
        assert_true(seen == fds || seen == fds + 3);
        mw_snapshot_free(snap);
    }
    assert_true(seen == fds + 3);
    for (int i = 0; i < 3; i++)
        close(extra[i]);

    /* CPU time only grows. */
    snap = tu_run(s);
    double cpu0 = tu_value(snap, "mlwatch_process_cpu_seconds_total", MW_END);
    mw_snapshot_free(snap);
    /* Burn 50 ms of CPU: several clock ticks of /proc/self/stat. */
    clock_t c0 = clock();
    volatile double x = 0;
    while (clock() - c0 < CLOCKS_PER_SEC / 20)
        x += 1.0;
    assert_true(x > 0);
    snap = tu_run(s);
    assert_true(tu_value(snap, "mlwatch_process_cpu_seconds_total", MW_END) > cpu0);
    mw_snapshot_free(snap);
    tu_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_stat),
        cmocka_unit_test(rejects_malformed_stat),
        cmocka_unit_test(collects_own_process),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
