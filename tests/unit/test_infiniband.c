/* test_infiniband.c - port state and rate parsers, and the collector on the
 * rapl-cpufreq fixture (an HDR InfiniBand HCA and a RoCE device): exact
 * counters, malformed and missing files, a device that disappears. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/infiniband.h"
#include "testutil.h"

#define MLX0 "sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/infiniband/mlx5_0/ports/1/"
#define MLX1 "sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.1/infiniband/mlx5_1"

static void eq(double got, double want, int line)
{
    if (got != want) fail_msg("line %d: got %.17g, want %.17g", line, got, want);
}
#define assert_value(got, want) eq((got), (want), __LINE__)

static double port_value(const mw_snapshot *snap, const char *name, const char *dev)
{
    return tu_value(snap, name, "device", dev, "port", "1", MW_END);
}

static double ib_error(const mw_snapshot *snap, const char *dev, const char *type)
{
    return tu_value(snap, "mlwatch_infiniband_errors_total", "device", dev, "port", "1", "type",
                    type, MW_END);
}

static void parses_state(void **state)
{
    (void)state;
    unsigned code;
    char name[32];
    assert_int_equal(mw_ib_parse_state("4: ACTIVE\n", &code, name, sizeof(name)), 0);
    assert_int_equal(code, 4);
    assert_string_equal(name, "ACTIVE");
    assert_int_equal(mw_ib_parse_state("1: DOWN", &code, name, sizeof(name)), 0);
    assert_int_equal(code, 1);
    assert_string_equal(name, "DOWN");
    assert_int_equal(mw_ib_parse_state("5: ACTIVE_DEFER\n", &code, name, 4), 0);
    assert_string_equal(name, "ACT");
    assert_int_equal(mw_ib_parse_state("", &code, name, sizeof(name)), -1);
    assert_int_equal(mw_ib_parse_state("4", &code, name, sizeof(name)), -1);
    assert_int_equal(mw_ib_parse_state("4:", &code, name, sizeof(name)), -1);
    assert_int_equal(mw_ib_parse_state("ACTIVE", &code, name, sizeof(name)), -1);
    assert_int_equal(mw_ib_parse_state("4: ACTIVE junk", &code, name, sizeof(name)), -1);
    assert_int_equal(mw_ib_parse_state("99999999: X", &code, name, sizeof(name)), -1);
}

static void parses_rate(void **state)
{
    (void)state;
    double r;
    assert_int_equal(mw_ib_parse_rate("200 Gb/sec (4X HDR)\n", &r), 0);
    assert_value(r, 25e9);
    assert_int_equal(mw_ib_parse_rate("2.5 Gb/sec (1X SDR)", &r), 0);
    assert_value(r, 2.5e9 / 8);
    assert_int_equal(mw_ib_parse_rate("400 Gb/sec (4X NDR)", &r), 0);
    assert_value(r, 50e9);
    assert_int_equal(mw_ib_parse_rate("10 Gb/sec", &r), 0);
    assert_value(r, 1.25e9);
    assert_int_equal(mw_ib_parse_rate("", &r), -1);
    assert_int_equal(mw_ib_parse_rate("fast", &r), -1);
    assert_int_equal(mw_ib_parse_rate("200", &r), -1);
    assert_int_equal(mw_ib_parse_rate("200 Mb/sec", &r), -1);
    assert_int_equal(mw_ib_parse_rate("200 Gb/secs", &r), -1);
    assert_int_equal(mw_ib_parse_rate("2. Gb/sec", &r), -1);
    assert_int_equal(mw_ib_parse_rate("-200 Gb/sec", &r), -1);
    assert_int_equal(mw_ib_parse_rate("nan Gb/sec", &r), -1);
}

static void collects_fixture_ports(void **state)
{
    (void)state;
    tu_session *s = tu_open(tu_fixture("rapl-cpufreq"), "infiniband");
    mw_snapshot *snap = tu_run(s);
    /* port_rcv_data and port_xmit_data count 4-octet words. */
    assert_value(port_value(snap, "mlwatch_infiniband_receive_bytes_total", "mlx5_0"), 4000);
    assert_value(port_value(snap, "mlwatch_infiniband_transmit_bytes_total", "mlx5_0"), 10000);
    assert_value(port_value(snap, "mlwatch_infiniband_receive_packets_total", "mlx5_0"), 10);
    assert_value(port_value(snap, "mlwatch_infiniband_transmit_packets_total", "mlx5_0"), 20);
    assert_value(port_value(snap, "mlwatch_infiniband_port_up", "mlx5_0"), 1);
    assert_value(port_value(snap, "mlwatch_infiniband_link_rate_bytes_per_second", "mlx5_0"), 25e9);
    assert_true(tu_has(snap, "mlwatch_infiniband_port_info", "device", "mlx5_0", "port", "1",
                       "link_layer", "InfiniBand", "state", "ACTIVE", MW_END));
    assert_value(ib_error(snap, "mlx5_0", "port_rcv_errors"), 3);
    assert_value(ib_error(snap, "mlx5_0", "link_downed"), 1);
    assert_value(ib_error(snap, "mlx5_0", "port_xmit_discards"), 7);
    assert_value(ib_error(snap, "mlx5_0", "VL15_dropped"), 2);
    assert_value(ib_error(snap, "mlx5_0", "symbol_error"), 0);

    /* RoCE device, link down, fewer error counters. */
    assert_value(port_value(snap, "mlwatch_infiniband_receive_bytes_total", "mlx5_1"), 1000000);
    assert_value(port_value(snap, "mlwatch_infiniband_transmit_bytes_total", "mlx5_1"), 2000000);
    assert_value(port_value(snap, "mlwatch_infiniband_port_up", "mlx5_1"), 0);
    assert_value(port_value(snap, "mlwatch_infiniband_link_rate_bytes_per_second", "mlx5_1"), 5e9);
    assert_true(tu_has(snap, "mlwatch_infiniband_port_info", "device", "mlx5_1", "port", "1",
                       "link_layer", "Ethernet", "state", "DOWN", MW_END));
    assert_false(tu_has(snap, "mlwatch_infiniband_errors_total", "device", "mlx5_1", "type",
                        "VL15_dropped", MW_END));
    assert_int_equal(tu_count(snap, "mlwatch_infiniband_errors_total"), 11 + 4);
    assert_int_equal(tu_count(snap, "mlwatch_infiniband_port_info"), 2);
    assert_int_equal(tu_errors(s, "infiniband"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
}

static void bad_files_and_vanished_device(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("rapl-cpufreq");
    tu_session *s = tu_open(root, "infiniband");
    mw_snapshot *snap = tu_run(s);
    mw_snapshot_free(snap);

    tu_write(root, MLX0 "counters/port_rcv_data", "12abc\n");
    tu_write(root, MLX0 "counters/port_xmit_data", "");
    tu_write(root, MLX0 "rate", "fast\n");
    tu_write(root, MLX0 "state", "ACTIVE\n");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "infiniband"), 4);
    assert_false(
        tu_has(snap, "mlwatch_infiniband_receive_bytes_total", "device", "mlx5_0", MW_END));
    assert_false(
        tu_has(snap, "mlwatch_infiniband_transmit_bytes_total", "device", "mlx5_0", MW_END));
    assert_false(tu_has(snap, "mlwatch_infiniband_port_up", "device", "mlx5_0", MW_END));
    assert_false(
        tu_has(snap, "mlwatch_infiniband_link_rate_bytes_per_second", "device", "mlx5_0", MW_END));
    /* The port's other counters and the other device are still there. */
    assert_value(port_value(snap, "mlwatch_infiniband_receive_packets_total", "mlx5_0"), 10);
    assert_value(port_value(snap, "mlwatch_infiniband_receive_bytes_total", "mlx5_1"), 1000000);
    assert_value(
        tu_value(snap, "mlwatch_collector_errors_total", "collector", "infiniband", MW_END), 4);
    mw_snapshot_free(snap);

    /* Fixed; the counters moved on. */
    tu_write(root, MLX0 "counters/port_rcv_data", "1500\n");
    tu_write(root, MLX0 "counters/port_xmit_data", "3000\n");
    tu_write(root, MLX0 "rate", "100 Gb/sec (4X EDR)\n");
    tu_write(root, MLX0 "state", "2: INIT\n");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "infiniband"), 4);
    assert_value(port_value(snap, "mlwatch_infiniband_receive_bytes_total", "mlx5_0"), 6000);
    assert_value(port_value(snap, "mlwatch_infiniband_transmit_bytes_total", "mlx5_0"), 12000);
    assert_value(port_value(snap, "mlwatch_infiniband_port_up", "mlx5_0"), 0);
    assert_value(port_value(snap, "mlwatch_infiniband_link_rate_bytes_per_second", "mlx5_0"),
                 12.5e9);
    assert_true(
        tu_has(snap, "mlwatch_infiniband_port_info", "device", "mlx5_0", "state", "INIT", MW_END));
    mw_snapshot_free(snap);

    /* The RoCE function is unbound: one error, then it is no longer
     * expected; mlx5_0 goes on. */
    tu_remove(root, MLX1);
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "infiniband"), 5);
    assert_false(tu_has(snap, "mlwatch_infiniband_port_up", "device", "mlx5_1", MW_END));
    assert_value(port_value(snap, "mlwatch_infiniband_receive_bytes_total", "mlx5_0"), 6000);
    mw_snapshot_free(snap);
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "infiniband"), 5);
    assert_int_equal(tu_count(snap, "mlwatch_infiniband_port_up"), 1);
    assert_value(port_value(snap, "mlwatch_infiniband_receive_bytes_total", "mlx5_0"), 6000);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

static void absent_without_class(void **state)
{
    (void)state;
    tu_session *s = tu_open(tu_fixture("bare-vm"), "infiniband");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_infiniband_port_up"), 0);
    assert_false(tu_has(snap, "mlwatch_collector_errors_total", "collector", "infiniband", MW_END));
    mw_snapshot_free(snap);
    tu_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_state),           cmocka_unit_test(parses_rate),
        cmocka_unit_test(collects_fixture_ports), cmocka_unit_test(bad_files_and_vanished_device),
        cmocka_unit_test(absent_without_class),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
