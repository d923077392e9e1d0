/* test_netdev.c - /proc/net/dev parsing and its collector on fixtures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/netdev.h"
#include "core/buf.h"
#include "testutil.h"

#include <stdio.h>

static const char HEADER[] =
    "Inter-|   Receive                                                |  Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs "
    "drop fifo colls carrier compressed\n";

static void eq(double got, double want, int line)
{
    if (got != want) fail_msg("line %d: got %.17g, want %.17g", line, got, want);
}
#define assert_value(got, want) eq((got), (want), __LINE__)

static void parses_lines(void **state)
{
    (void)state;
    char text[1024];
    snprintf(text, sizeof(text),
             "%s  eth0: 45315374     994    1    2    0     0          0         0    46297     "
             "587    3    4    0     0       0          0\n"
             "\n"
             "ppp0:12345 1 0 0 0 0 0 0 678 2 0 0 0 0 0 0",
             HEADER);
    const char *p = text;
    mw_netdev d;
    assert_int_equal(mw_parse_netdev_line(&p, &d), 1);
    assert_string_equal(d.name, "eth0");
    assert_int_equal(d.rx_bytes, 45315374);
    assert_int_equal(d.rx_packets, 994);
    assert_int_equal(d.rx_errs, 1);
    assert_int_equal(d.rx_drop, 2);
    assert_int_equal(d.tx_bytes, 46297);
    assert_int_equal(d.tx_packets, 587);
    assert_int_equal(d.tx_errs, 3);
    assert_int_equal(d.tx_drop, 4);
    assert_int_equal(d.rx_fifo, 0);
    assert_int_equal(d.tx_compressed, 0);
    /* Old kernels: no blank after the colon. */
    assert_int_equal(mw_parse_netdev_line(&p, &d), 1);
    assert_string_equal(d.name, "ppp0");
    assert_int_equal(d.rx_bytes, 12345);
    assert_int_equal(d.tx_bytes, 678);
    assert_int_equal(mw_parse_netdev_line(&p, &d), 0);
    assert_int_equal(mw_parse_netdev_line(&p, &d), 0);
}

static void rejects_malformed_lines(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n", /* 15 values */
        "eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n",
        "eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 x\n",
        "eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 -16\n",
        "eth0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n",
        ": 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n",
        "et h0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n",
        "averyveryveryveryveryverylongname0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n",
        "eth0: 99999999999999999999 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n",
        "eth0: 1 2 3",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        const char *p = bad[i];
        mw_netdev d;
        if (mw_parse_netdev_line(&p, &d) != -1) fail_msg("accepted: %s", bad[i]);
        /* The bad line is consumed. */
        assert_int_equal(mw_parse_netdev_line(&p, &d), 0);
    }
}

static void collects_fixture(void **state)
{
    (void)state;
    tu_session *s = tu_open(tu_fixture("bare-vm"), "netdev");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_network_receive_bytes_total"), 2);
    assert_value(tu_value(snap, "mlwatch_network_receive_bytes_total", "device", "eth0", MW_END),
                 45315374);
    assert_value(tu_value(snap, "mlwatch_network_transmit_bytes_total", "device", "eth0", MW_END),
                 46297);
    assert_value(tu_value(snap, "mlwatch_network_receive_packets_total", "device", "lo", MW_END),
                 59);
    assert_int_equal(tu_errors(s, "netdev"), 0);
    mw_snapshot_free(snap);
    tu_close(s);

    s = tu_open(tu_fixture("rapl-cpufreq"), "netdev");
    snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_network_receive_bytes_total"), 3);
    assert_value(tu_value(snap, "mlwatch_network_receive_bytes_total", "device", "eno1", MW_END),
                 987654321000.0);
    assert_value(tu_value(snap, "mlwatch_network_transmit_packets_total", "device", "eno1", MW_END),
                 234567890);
    assert_value(tu_value(snap, "mlwatch_network_receive_errors_total", "device", "eno1", MW_END),
                 1);
    assert_value(tu_value(snap, "mlwatch_network_receive_drops_total", "device", "eno1", MW_END),
                 2);
    assert_value(tu_value(snap, "mlwatch_network_transmit_errors_total", "device", "eno1", MW_END),
                 3);
    assert_value(tu_value(snap, "mlwatch_network_transmit_drops_total", "device", "eno1", MW_END),
                 4);
    assert_value(tu_value(snap, "mlwatch_network_receive_drops_total", "device", "ib0", MW_END), 5);
    assert_value(tu_value(snap, "mlwatch_network_transmit_drops_total", "device", "ib0", MW_END),
                 6);
    /* The other eight columns (all 16 of /proc/net/dev are reported). */
    assert_int_equal(tu_count(snap, "mlwatch_network_receive_multicast_total"), 3);
    assert_int_equal(tu_count(snap, "mlwatch_network_transmit_carrier_total"), 3);
    assert_int_equal(tu_errors(s, "netdev"), 0);
    mw_snapshot_free(snap);
    tu_close(s);

    s = tu_open(tu_fixture("k8s-v1-cgroupfs"), "netdev");
    snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_network_receive_bytes_total"), 5);
    assert_value(
        tu_value(snap, "mlwatch_network_receive_bytes_total", "device", "vethab12cd34", MW_END),
        300000000);
    assert_int_equal(tu_errors(s, "netdev"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
}

static void bad_input_is_counted(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("bare-vm");
    tu_session *s = tu_open(root, "netdev");
    char text[2048];
    /* eth1 is cut in the middle, eth2 has a non-number: both counted, the
     * other interfaces still reported. */
    snprintf(text, sizeof(text),
             "%s    lo: 100 1 0 0 0 0 0 0 100 1 0 0 0 0 0 0\n"
             "  eth1: 5 6 7\n"
             "  eth2: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 x6\n"
             "  eth0: 200 2 0 0 0 0 0 0 300 3 0 0 0 0 0 0\n",
             HEADER);
    tu_write(root, "proc/net/dev", text);
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_errors(s, "netdev"), 2);
    assert_int_equal(tu_count(snap, "mlwatch_network_receive_bytes_total"), 2);
    assert_value(tu_value(snap, "mlwatch_network_transmit_bytes_total", "device", "eth0", MW_END),
                 300);
    assert_value(tu_value(snap, "mlwatch_collector_errors_total", "collector", "netdev", MW_END),
                 2);
    mw_snapshot_free(snap);

    /* The device disappears between cycles: simply no longer reported. */
    snprintf(text, sizeof(text), "%s    lo: 150 2 0 0 0 0 0 0 150 2 0 0 0 0 0 0\n", HEADER);
    tu_write(root, "proc/net/dev", text);
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "netdev"), 2);
    assert_false(tu_has(snap, "mlwatch_network_receive_bytes_total", "device", "eth0", MW_END));
    assert_value(tu_value(snap, "mlwatch_network_receive_bytes_total", "device", "lo", MW_END),
                 150);
    mw_snapshot_free(snap);

    /* Empty file: nothing, no error; missing file: an error. */
    tu_write(root, "proc/net/dev", "");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "netdev"), 2);
    assert_int_equal(tu_count(snap, "mlwatch_network_receive_bytes_total"), 0);
    mw_snapshot_free(snap);
    tu_remove(root, "proc/net/dev");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "netdev"), 3);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

static void interfaces_are_capped(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("bare-vm");
    mw_buf b;
    mw_buf_init(&b, 0);
    mw_buf_puts(&b, HEADER);
    for (int i = 0; i < 4100; i++)
        mw_buf_printf(&b, "veth%d: %d 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n", i, i);
    tu_write(root, "proc/net/dev", b.data);
    mw_buf_free(&b);
    tu_session *s = tu_open(root, "netdev");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_network_receive_bytes_total"), 4096);
    assert_int_equal(tu_errors(s, "netdev"), 1);
    assert_value(
        tu_value(snap, "mlwatch_network_receive_bytes_total", "device", "veth4095", MW_END), 4095);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_lines),          cmocka_unit_test(rejects_malformed_lines),
        cmocka_unit_test(collects_fixture),      cmocka_unit_test(bad_input_is_counted),
        cmocka_unit_test(interfaces_are_capped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
