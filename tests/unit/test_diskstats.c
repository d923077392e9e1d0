/* test_diskstats.c - /proc/diskstats parsing (14, 18 and 20 fields), the
 * whole-disk filter, and the collector on fixtures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/diskstats.h"
#include "testutil.h"

static void eq(double got, double want, int line)
{
    if (got != want) fail_msg("line %d: got %.17g, want %.17g", line, got, want);
}
#define assert_value(got, want) eq((got), (want), __LINE__)

static double disk(const mw_snapshot *snap, const char *name, const char *dev)
{
    return tu_value(snap, name, "device", dev, MW_END);
}

static void parses_all_variants(void **state)
{
    (void)state;
    const char *p = "   8       0 sda 1 2 3 4 5 6 7 8 9 10 11\n"
                    "\n"
                    " 252 1 vda1 10 20 30 40 50 60 70 80 90 100 110 120 130 140 150\n"
                    " 259\t0\tnvme0n1 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17";
    mw_diskstat d;
    assert_int_equal(mw_parse_diskstats_line(&p, &d), 1);
    assert_int_equal(d.major, 8);
    assert_int_equal(d.minor, 0);
    assert_string_equal(d.name, "sda");
    assert_int_equal(d.nfields, 11);
    assert_int_equal(d.reads, 1);
    assert_int_equal(d.read_sectors, 3);
    assert_int_equal(d.read_ms, 4);
    assert_int_equal(d.writes, 5);
    assert_int_equal(d.write_sectors, 7);
    assert_int_equal(d.write_ms, 8);
    assert_int_equal(d.io_now, 9);
    assert_int_equal(d.io_ms, 10);
    assert_int_equal(d.weighted_io_ms, 11);
    assert_int_equal(mw_parse_diskstats_line(&p, &d), 1);
    assert_string_equal(d.name, "vda1");
    assert_int_equal(d.nfields, 15);
    assert_int_equal(d.io_ms, 100);
    assert_int_equal(mw_parse_diskstats_line(&p, &d), 1);
    assert_string_equal(d.name, "nvme0n1");
    assert_int_equal(d.major, 259);
    assert_int_equal(d.nfields, 17);
    assert_int_equal(d.writes, 5);
    assert_int_equal(d.reads_merged, 2);
    assert_int_equal(d.discards, 12);
    assert_int_equal(d.discard_sectors, 14);
    assert_int_equal(d.discard_ms, 15);
    assert_int_equal(d.flushes, 16);
    assert_int_equal(d.flush_ms, 17);
    assert_int_equal(mw_parse_diskstats_line(&p, &d), 0);
}

static void rejects_malformed_lines(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "8 0 sda 1 2 3 4 5 6 7 8 9 10\n",                   /* 10 values */
        "8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12\n",             /* 12 */
        "8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", /* 16 */
        "8 0 sda 1 2 3 4 5 6 7 8 9 10 x\n",
        "8 0 sda 1 2 3 4 5 6 7 8 9 10 11x\n",
        "8 0 sda 1 2 3 4 5 6 7 8 9 10 -11\n",
        "8 sda 1 2 3 4 5 6 7 8 9 10 11\n",
        "x 0 sda 1 2 3 4 5 6 7 8 9 10 11\n",
        "8 0\n",
        "8 0 \n",
        "99999999999 0 sda 1 2 3 4 5 6 7 8 9 10 11\n",
        ("8 0 a-name-much-longer-than-sixty-four-characters-which-no-kernel-writes 1 2 3 4 5 6 "
         "7 8 9 10 11\n"),
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *p = bad[i];
        mw_diskstat d;
        if (mw_parse_diskstats_line(&p, &d) != -1) fail_msg("accepted: %s", bad[i]);
        assert_int_equal(mw_parse_diskstats_line(&p, &d), 0);
    }
}

static void tells_whole_disks(void **state)
{
    (void)state;
    static const char *const whole[] = {"sda",     "sdaa",      "vda",     "xvda", "hdb",
                                        "nvme0n1", "nvme10n12", "mmcblk0", "dm-0", "dm-12",
                                        "md0",     "md127",     "nbd0",    "sr0",  "vdb"};
    static const char *const not_whole[] = {
        "sda1",  "sdaa12", "vda1",  "xvda1",  "hdb3", "nvme0n1p1", "nvme10n12p3", "mmcblk0p1",
        "md0p1", "nbd0p1", "loop0", "loop12", "ram0", "zram0",     "fd0"};
    for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++)
        if (!mw_disk_is_whole(whole[i])) fail_msg("%s should be a whole disk", whole[i]);
    for (size_t i = 0; i < sizeof(not_whole) / sizeof(not_whole[0]); i++)
        if (mw_disk_is_whole(not_whole[i])) fail_msg("%s should be skipped", not_whole[i]);
}

static void collects_fixtures(void **state)
{
    (void)state;
    /* 20 fields. */
    tu_session *s = tu_open(tu_fixture("rapl-cpufreq"), "diskstats");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_disk_reads_completed_total"), 1);
    assert_value(disk(snap, "mlwatch_disk_reads_completed_total", "nvme0n1"), 1000000);
    assert_value(disk(snap, "mlwatch_disk_writes_completed_total", "nvme0n1"), 3000000);
    assert_value(disk(snap, "mlwatch_disk_read_bytes_total", "nvme0n1"), 80000000.0 * 512);
    assert_value(disk(snap, "mlwatch_disk_written_bytes_total", "nvme0n1"), 160000000.0 * 512);
    assert_value(disk(snap, "mlwatch_disk_read_time_seconds_total", "nvme0n1"), 250);
    assert_value(disk(snap, "mlwatch_disk_write_time_seconds_total", "nvme0n1"), 1500);
    assert_value(disk(snap, "mlwatch_disk_io_time_seconds_total", "nvme0n1"), 900);
    assert_value(disk(snap, "mlwatch_disk_io_now", "nvme0n1"), 3);
    /* 17 values: merges, weighted time, discards and flushes too. */
    assert_value(disk(snap, "mlwatch_disk_reads_merged_total", "nvme0n1"), 2000);
    assert_value(disk(snap, "mlwatch_disk_writes_merged_total", "nvme0n1"), 4000);
    assert_value(disk(snap, "mlwatch_disk_io_time_weighted_seconds_total", "nvme0n1"), 1750);
    assert_value(disk(snap, "mlwatch_disk_discards_completed_total", "nvme0n1"), 100);
    assert_value(disk(snap, "mlwatch_disk_discarded_bytes_total", "nvme0n1"), 204800.0 * 512);
    assert_value(disk(snap, "mlwatch_disk_discard_time_seconds_total", "nvme0n1"), 0.05);
    assert_value(disk(snap, "mlwatch_disk_flush_requests_total", "nvme0n1"), 20000);
    assert_value(disk(snap, "mlwatch_disk_flush_requests_time_seconds_total", "nvme0n1"), 10);
    assert_int_equal(tu_errors(s, "diskstats"), 0);
    mw_snapshot_free(snap);
    tu_close(s);

    /* 18 fields. */
    s = tu_open(tu_fixture("bare-vm"), "diskstats");
    snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_disk_reads_completed_total"), 1);
    assert_value(disk(snap, "mlwatch_disk_read_bytes_total", "vda"), 4096000.0 * 512);
    assert_value(disk(snap, "mlwatch_disk_write_time_seconds_total", "vda"), 16);
    assert_value(disk(snap, "mlwatch_disk_io_time_seconds_total", "vda"), 12);
    assert_int_equal(tu_errors(s, "diskstats"), 0);
    mw_snapshot_free(snap);
    tu_close(s);

    /* 14 fields. */
    s = tu_open(tu_fixture("k8s-v1-cgroupfs"), "diskstats");
    snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_disk_reads_completed_total"), 3);
    assert_value(disk(snap, "mlwatch_disk_reads_completed_total", "sda"), 250000);
    assert_value(disk(snap, "mlwatch_disk_io_now", "sda"), 2);
    assert_value(disk(snap, "mlwatch_disk_written_bytes_total", "sdb"), 1600000.0 * 512);
    assert_value(disk(snap, "mlwatch_disk_read_time_seconds_total", "sr0"), 0.004);
    /* 11 values (before 4.18): no discard nor flush counters. */
    assert_int_equal(tu_count(snap, "mlwatch_disk_discards_completed_total"), 0);
    assert_int_equal(tu_count(snap, "mlwatch_disk_io_time_weighted_seconds_total"), 3);
    assert_false(tu_has(snap, "mlwatch_disk_reads_completed_total", "device", "sda1", MW_END));
    assert_int_equal(tu_errors(s, "diskstats"), 0);
    mw_snapshot_free(snap);
    tu_close(s);

    s = tu_open(tu_fixture("k8s-v2-systemd"), "diskstats");
    snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_disk_reads_completed_total"), 3);
    assert_value(disk(snap, "mlwatch_disk_io_now", "nvme1n1"), 1);
    assert_value(disk(snap, "mlwatch_disk_reads_completed_total", "dm-0"), 69000);
    assert_int_equal(tu_errors(s, "diskstats"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
}

static void bad_input_is_counted(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("bare-vm");
    tu_session *s = tu_open(root, "diskstats");
    tu_write(root, "proc/diskstats",
             " 252 0 vda 1 0 8 1 2 0 16 2 0 3 3 0 0 0 0\n"
             " 252 16 vdb 5 0 40 5 6 0 48\n"                /* cut */
             " 252 32 vdc 1 0 8 1 2 0 16 2 0 3 3 0 0 0 x\n" /* not a number */
             " 252 48 vdd 7 0 56 7 8 0 64 8 1 9 9 0 0 0 0\n");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_errors(s, "diskstats"), 2);
    assert_int_equal(tu_count(snap, "mlwatch_disk_reads_completed_total"), 2);
    assert_value(disk(snap, "mlwatch_disk_read_bytes_total", "vda"), 8 * 512);
    assert_value(disk(snap, "mlwatch_disk_io_now", "vdd"), 1);
    assert_value(tu_value(snap, "mlwatch_collector_errors_total", "collector", "diskstats", MW_END),
                 2);
    mw_snapshot_free(snap);

    /* vdd detached between cycles: no longer reported, not an error. */
    tu_write(root, "proc/diskstats", " 252 0 vda 2 0 16 2 2 0 16 2 0 4 4 0 0 0 0\n");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "diskstats"), 2);
    assert_false(tu_has(snap, "mlwatch_disk_io_now", "device", "vdd", MW_END));
    assert_value(disk(snap, "mlwatch_disk_reads_completed_total", "vda"), 2);
    mw_snapshot_free(snap);

    tu_remove(root, "proc/diskstats");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "diskstats"), 3);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_all_variants),  cmocka_unit_test(rejects_malformed_lines),
        cmocka_unit_test(tells_whole_disks),    cmocka_unit_test(collects_fixtures),
        cmocka_unit_test(bad_input_is_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
