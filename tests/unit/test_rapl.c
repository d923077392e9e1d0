/* test_rapl.c - RAPL wrap arithmetic, zone discovery and the collector on
 * fixtures: exact joules across a wrap, a zone that vanishes and comes back,
 * malformed and missing files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/rapl.h"
#include "testutil.h"

#include <linux/capability.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ZONES "sys/devices/virtual/powercap/intel-rapl/"
#define PKG1 ZONES "intel-rapl:1/"
#define MAX_PKG 262143328850ULL

static void eq(double got, double want, int line)
{
    if (got != want) fail_msg("line %d: got %.17g, want %.17g", line, got, want);
}
#define assert_value(got, want) eq((got), (want), __LINE__)

static double energy(const mw_snapshot *snap, const char *zone)
{
    return tu_value(snap, "mlwatch_rapl_energy_joules_total", "zone", zone, MW_END);
}

static void delta_without_wrap(void **state)
{
    (void)state;
    assert_int_equal(mw_rapl_delta(100, 100, MAX_PKG), 0);
    assert_int_equal(mw_rapl_delta(100, 1100, MAX_PKG), 1000);
    assert_int_equal(mw_rapl_delta(0, MAX_PKG, MAX_PKG), MAX_PKG);
}

static void delta_across_wrap(void **state)
{
    (void)state;
    /* 328850 µJ up to the wrap, 671150 µJ after it: exactly 1 J. */
    assert_int_equal(mw_rapl_delta(262143000000ULL, 671150, MAX_PKG), 1000000);
    /* From the very top to 0: no +1 (see rapl.h). */
    assert_int_equal(mw_rapl_delta(MAX_PKG, 0, MAX_PKG), 0);
    assert_int_equal(mw_rapl_delta(MAX_PKG, 5, MAX_PKG), 5);
    assert_int_equal(mw_rapl_delta(1, 0, MAX_PKG), MAX_PKG - 1);
    /* Inconsistent (last above the range, or no range known): restarted. */
    assert_int_equal(mw_rapl_delta(500, 20, 100), 20);
    assert_int_equal(mw_rapl_delta(500, 20, 0), 20);
    /* Near the top of uint64: no overflow in the wrap branch. */
    assert_true(mw_rapl_delta(UINT64_MAX, 0, UINT64_MAX) == 0);
}

static void parses_zone_entries(void **state)
{
    (void)state;
    int pkg, sub;
    assert_int_equal(mw_rapl_parse_entry("intel-rapl:0", &pkg, &sub), 0);
    assert_int_equal(pkg, 0);
    assert_int_equal(sub, -1);
    assert_int_equal(mw_rapl_parse_entry("intel-rapl:1:2", &pkg, &sub), 0);
    assert_int_equal(pkg, 1);
    assert_int_equal(sub, 2);
    assert_int_equal(mw_rapl_parse_entry("intel-rapl", &pkg, &sub), -1);
    assert_int_equal(mw_rapl_parse_entry("intel-rapl:", &pkg, &sub), -1);
    assert_int_equal(mw_rapl_parse_entry("intel-rapl-mmio:0", &pkg, &sub), -1);
    assert_int_equal(mw_rapl_parse_entry("intel-rapl:0:", &pkg, &sub), -1);
    assert_int_equal(mw_rapl_parse_entry("intel-rapl:0:1:2", &pkg, &sub), -1);
    assert_int_equal(mw_rapl_parse_entry("intel-rapl:x", &pkg, &sub), -1);
    assert_int_equal(mw_rapl_parse_entry("intel-rapl:99999999999999999999", &pkg, &sub), -1);
}

static void collects_fixture_zones(void **state)
{
    (void)state;
    tu_session *s = tu_open(tu_fixture("rapl-cpufreq"), "rapl");
    mw_snapshot *snap = tu_run(s);
    /* Six zones; intel-rapl-mmio:0 (the same package again) is skipped. */
    assert_int_equal(tu_count(snap, "mlwatch_rapl_energy_joules_total"), 6);
    assert_int_equal(tu_count(snap, "mlwatch_rapl_max_energy_range_joules"), 6);
    assert_value(energy(snap, "package-0"), 84215436801 / 1e6);
    assert_value(energy(snap, "package-0/core"), 30123456789 / 1e6);
    assert_value(energy(snap, "package-0/dram"), 9876543210 / 1e6);
    assert_value(energy(snap, "package-1"), 262143000000 / 1e6);
    assert_value(energy(snap, "package-1/dram"), 5000000000 / 1e6);
    assert_value(energy(snap, "psys"), 4000000000 / 1e6);
    assert_value(
        tu_value(snap, "mlwatch_rapl_max_energy_range_joules", "zone", "package-1", MW_END),
        262143328850 / 1e6);
    assert_value(
        tu_value(snap, "mlwatch_rapl_max_energy_range_joules", "zone", "package-0/dram", MW_END),
        65712999613 / 1e6);
    assert_int_equal(tu_errors(s, "rapl"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
}

static void counter_survives_wrap(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("rapl-cpufreq");
    tu_session *s = tu_open(root, "rapl");
    mw_snapshot *snap = tu_run(s);
    assert_value(energy(snap, "package-1"), 262143000000 / 1e6);
    mw_snapshot_free(snap);

    /* The hardware counter wrapped: 328850 + 671150 µJ = 1 J more. */
    tu_write(root, PKG1 "energy_uj", "671150\n");
    tu_write(root, ZONES "intel-rapl:0/energy_uj", "84216436801\n"); /* +1 J, no wrap */
    snap = tu_run(s);
    assert_value(energy(snap, "package-1"), 262144000000 / 1e6);
    assert_value(energy(snap, "package-0"), 84216436801 / 1e6);
    mw_snapshot_free(snap);

    tu_write(root, PKG1 "energy_uj", "2671150\n");
    snap = tu_run(s);
    assert_value(energy(snap, "package-1"), 262146000000 / 1e6);
    /* Unchanged zones stay where they were. */
    assert_value(energy(snap, "psys"), 4000000000 / 1e6);
    assert_int_equal(tu_errors(s, "rapl"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

static void bad_values_are_counted(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("rapl-cpufreq");
    tu_session *s = tu_open(root, "rapl");
    mw_snapshot *snap = tu_run(s);
    mw_snapshot_free(snap);

    /* Non-numeric and empty (truncated) files: counted, zone skipped this
     * cycle, every other zone still reported. */
    tu_write(root, PKG1 "energy_uj", "garbage\n");
    tu_write(root, ZONES "intel-rapl:2/energy_uj", "");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "rapl"), 2);
    assert_value(tu_value(snap, "mlwatch_collector_errors_total", "collector", "rapl", MW_END), 2);
    assert_false(tu_has(snap, "mlwatch_rapl_energy_joules_total", "zone", "package-1", MW_END));
    assert_false(tu_has(snap, "mlwatch_rapl_energy_joules_total", "zone", "psys", MW_END));
    assert_int_equal(tu_count(snap, "mlwatch_rapl_energy_joules_total"), 4);
    assert_value(energy(snap, "package-0"), 84215436801 / 1e6);
    mw_snapshot_free(snap);

    /* Good values again: the counter goes on from the last good reading. */
    tu_write(root, PKG1 "energy_uj", "262143328850\n");
    tu_write(root, ZONES "intel-rapl:2/energy_uj", "4000500000\n");
    snap = tu_run(s);
    assert_value(energy(snap, "package-1"), 262143328850 / 1e6);
    assert_value(energy(snap, "psys"), 4000500000 / 1e6);
    assert_int_equal(tu_errors(s, "rapl"), 2);
    mw_snapshot_free(snap);

    /* energy_uj missing (ENOENT) while the zone folder stays: counted once,
     * then the zone is reopened and its next reading is a new baseline. */
    tu_remove(root, ZONES "intel-rapl:2/energy_uj");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "rapl"), 3);
    assert_false(tu_has(snap, "mlwatch_rapl_energy_joules_total", "zone", "psys", MW_END));
    mw_snapshot_free(snap);
    tu_write(root, ZONES "intel-rapl:2/energy_uj", "100\n");
    snap = tu_run(s);
    assert_value(energy(snap, "psys"), 4000500000 / 1e6);
    mw_snapshot_free(snap);
    tu_write(root, ZONES "intel-rapl:2/energy_uj", "2000100\n");
    snap = tu_run(s);
    assert_value(energy(snap, "psys"), 4002500000 / 1e6);
    assert_int_equal(tu_errors(s, "rapl"), 3);
    mw_snapshot_free(snap);

    /* max_energy_range_uj unreadable after a reset: counted, the energy is
     * still reported. */
    tu_remove(root, ZONES "intel-rapl:0/intel-rapl:0:1");
    snap = tu_run(s); /* dram of package-0 vanished: 1 error */
    mw_snapshot_free(snap);
    tu_write(root, ZONES "intel-rapl:0/intel-rapl:0:1/name", "dram\n");
    tu_write(root, ZONES "intel-rapl:0/intel-rapl:0:1/energy_uj", "7\n");
    tu_write(root, ZONES "intel-rapl:0/intel-rapl:0:1/max_energy_range_uj", "x\n");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "rapl"), 5);
    assert_value(energy(snap, "package-0/dram"), 9876543210 / 1e6);
    assert_false(
        tu_has(snap, "mlwatch_rapl_max_energy_range_joules", "zone", "package-0/dram", MW_END));
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

static void vanished_zone_never_goes_backwards(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("rapl-cpufreq");
    tu_session *s = tu_open(root, "rapl");
    mw_snapshot *snap = tu_run(s);
    mw_snapshot_free(snap);
    tu_write(root, PKG1 "energy_uj", "671150\n"); /* wrap: total 262144 J */
    snap = tu_run(s);
    assert_value(energy(snap, "package-1"), 262144000000 / 1e6);
    mw_snapshot_free(snap);

    /* The package's zones disappear (driver unbound): one error each, the
     * other zones carry on. */
    tu_remove(root, ZONES "intel-rapl:1");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "rapl"), 2);
    assert_false(tu_has(snap, "mlwatch_rapl_energy_joules_total", "zone", "package-1", MW_END));
    assert_false(
        tu_has(snap, "mlwatch_rapl_energy_joules_total", "zone", "package-1/dram", MW_END));
    assert_int_equal(tu_count(snap, "mlwatch_rapl_energy_joules_total"), 4);
    mw_snapshot_free(snap);

    /* Still gone: not counted again. */
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "rapl"), 2);
    mw_snapshot_free(snap);

    /* Back, with the counter reset to a small value: a new baseline, not a
     * wrap (which would add ~262 kJ) and not a drop. */
    tu_write(root, PKG1 "name", "package-1\n");
    tu_write(root, PKG1 "max_energy_range_uj", "262143328850\n");
    tu_write(root, PKG1 "energy_uj", "5000\n");
    tu_write(root, PKG1 "intel-rapl:1:0/name", "dram\n");
    tu_write(root, PKG1 "intel-rapl:1:0/max_energy_range_uj", "65712999613\n");
    tu_write(root, PKG1 "intel-rapl:1:0/energy_uj", "6000000000\n");
    snap = tu_run(s);
    assert_value(energy(snap, "package-1"), 262144000000 / 1e6);
    assert_value(energy(snap, "package-1/dram"), 5000000000 / 1e6);
    assert_int_equal(tu_errors(s, "rapl"), 2);
    mw_snapshot_free(snap);

    tu_write(root, PKG1 "energy_uj", "2005000\n");
    tu_write(root, PKG1 "intel-rapl:1:0/energy_uj", "6000500000\n");
    snap = tu_run(s);
    assert_value(energy(snap, "package-1"), 262146000000 / 1e6);
    assert_value(energy(snap, "package-1/dram"), 5000500000 / 1e6);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

/* Root reads a mode-000 file through CAP_DAC_OVERRIDE (and lists folders
 * through CAP_DAC_READ_SEARCH). CI runs as root, so instead of skipping the
 * test there, drop both from the effective set for its duration: the owner of
 * the file then meets the mode bits like anyone else, as the agent does when
 * it runs unprivileged in a container. Returns 0 when the effective set now
 * lacks them (or never had them). */
static int dac_override(int on)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[2];
    if (syscall(SYS_capget, &hdr, data) != 0) return -1;
    unsigned bits = (1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH);
    if (on)
        data[0].effective |= bits & data[0].permitted;
    else
        data[0].effective &= ~bits;
    return (int)syscall(SYS_capset, &hdr, data);
}

static void permission_denied_is_counted(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("rapl-cpufreq");
    char path[512];
    snprintf(path, sizeof(path), "%s/" PKG1 "energy_uj", root);
    assert_int_equal(chmod(path, 0), 0);
    assert_int_equal(dac_override(0), 0);
    tu_session *s = tu_open(root, "rapl");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(dac_override(1), 0);
    assert_int_equal(tu_errors(s, "rapl"), 1);
    assert_false(tu_has(snap, "mlwatch_rapl_energy_joules_total", "zone", "package-1", MW_END));
    assert_true(tu_has(snap, "mlwatch_rapl_max_energy_range_joules", "zone", "package-1", MW_END));
    assert_int_equal(tu_count(snap, "mlwatch_rapl_energy_joules_total"), 5);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

static void absent_without_zones(void **state)
{
    (void)state;
    /* No powercap folder. */
    tu_session *s = tu_open(tu_fixture("bare-vm"), "rapl");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_rapl_energy_joules_total"), 0);
    assert_false(tu_has(snap, "mlwatch_collector_errors_total", "collector", "rapl", MW_END));
    mw_snapshot_free(snap);
    tu_close(s);

    /* A powercap folder with only intel-rapl-mmio zones. */
    const char *root = tu_fixture_copy("bare-vm");
    tu_write(root, "sys/class/powercap/intel-rapl-mmio:0/energy_uj", "1\n");
    tu_write(root, "sys/class/powercap/intel-rapl-mmio:0/name", "package-0\n");
    s = tu_open(root, "rapl");
    snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_rapl_energy_joules_total"), 0);
    assert_false(tu_has(snap, "mlwatch_collector_errors_total", "collector", "rapl", MW_END));
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

static void duplicate_names_get_distinct_labels(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("rapl-cpufreq");
    tu_write(root, PKG1 "name", "package-0\n");
    tu_session *s = tu_open(root, "rapl");
    mw_snapshot *snap = tu_run(s);
    assert_value(energy(snap, "package-0"), 84215436801 / 1e6);
    assert_value(energy(snap, "package-0 (intel-rapl:1)"), 262143000000 / 1e6);
    assert_int_equal(tu_count(snap, "mlwatch_rapl_energy_joules_total"), 6);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(delta_without_wrap),
        cmocka_unit_test(delta_across_wrap),
        cmocka_unit_test(parses_zone_entries),
        cmocka_unit_test(collects_fixture_zones),
        cmocka_unit_test(counter_survives_wrap),
        cmocka_unit_test(bad_values_are_counted),
        cmocka_unit_test(vanished_zone_never_goes_backwards),
        cmocka_unit_test(permission_denied_is_counted),
        cmocka_unit_test(absent_without_zones),
        cmocka_unit_test(duplicate_names_get_distinct_labels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
