/* test_netclass.c - /sys/class/net attribute parsing and the netclass
 * collector on fixtures (relative symlinks into sys/devices). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/netclass.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void eq(double got, double want, int line)
{
    if (got != want) fail_msg("line %d: got %.17g, want %.17g", line, got, want);
}
#define assert_value(got, want) eq((got), (want), __LINE__)

static void parses_attributes(void **state)
{
    (void)state;
    double b = 0;
    assert_int_equal(mw_netclass_parse_speed("25000\n", &b), 0);
    assert_value(b, 3125000000.0);
    assert_int_equal(mw_netclass_parse_speed("-1\n", &b), 1);
    assert_int_equal(mw_netclass_parse_speed("0", &b), 1);
    assert_int_equal(mw_netclass_parse_speed("-2", &b), -1);
    assert_int_equal(mw_netclass_parse_speed("10G", &b), -1);
    assert_int_equal(mw_netclass_parse_speed("", &b), -1);
    uint64_t v;
    assert_int_equal(mw_netclass_parse_hex("0x1003\n", &v), 0);
    assert_int_equal(v, 0x1003);
    assert_int_equal(mw_netclass_parse_hex("0xFFFFFFFFFFFFFFFF", &v), 0);
    assert_int_equal(mw_netclass_parse_hex("0x10000000000000000", &v), -1);
    assert_int_equal(mw_netclass_parse_hex("1003", &v), -1);
    assert_int_equal(mw_netclass_parse_hex("0x", &v), -1);
    assert_int_equal(mw_netclass_parse_hex("0x12g", &v), -1);
}

static void collects_fixture(void **state)
{
    (void)state;
    tu_session *s = tu_open(tu_fixture("k8s-v1-cgroupfs"), "netclass");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_network_info"), 5);
    assert_value(tu_value(snap, "mlwatch_network_info", "device", "ens5", "operstate", "up",
                          "duplex", "full", "address", "02:a1:b2:c3:d4:e5", MW_END),
                 1);
    /* docker0 is down: no speed, duplex nor carrier (EINVAL in sysfs). */
    assert_value(tu_value(snap, "mlwatch_network_info", "device", "docker0", "operstate", "down",
                          "duplex", "", "address", "02:42:ac:11:00:01", MW_END),
                 1);
    assert_value(tu_value(snap, "mlwatch_network_up", "device", "docker0", MW_END), 0);
    assert_false(tu_has(snap, "mlwatch_network_speed_bytes", "device", "docker0", MW_END));
    assert_false(tu_has(snap, "mlwatch_network_carrier", "device", "docker0", MW_END));
    assert_value(tu_value(snap, "mlwatch_network_up", "device", "ens5", MW_END), 1);
    assert_value(tu_value(snap, "mlwatch_network_speed_bytes", "device", "ens5", MW_END),
                 3125000000.0);
    assert_value(tu_value(snap, "mlwatch_network_mtu_bytes", "device", "cni0", MW_END), 1450);
    assert_value(tu_value(snap, "mlwatch_network_carrier", "device", "ens5", MW_END), 1);
    assert_value(tu_value(snap, "mlwatch_network_carrier_changes_total", "device", "cni0", MW_END),
                 3);
    assert_value(
        tu_value(snap, "mlwatch_network_transmit_queue_length", "device", "vethab12cd34", MW_END),
        0);
    assert_value(tu_value(snap, "mlwatch_network_flags", "device", "lo", MW_END), 9);
    assert_int_equal(tu_errors(s, "netclass"), 0);
    mw_snapshot_free(snap);
    tu_close(s);

    /* virtio-net: speed -1 is unknown, not reported. */
    s = tu_open(tu_fixture("bare-vm"), "netclass");
    snap = tu_run(s);
    assert_false(tu_has(snap, "mlwatch_network_speed_bytes", "device", "eth0", MW_END));
    assert_value(tu_value(snap, "mlwatch_network_mtu_bytes", "device", "eth0", MW_END), 9001);
    assert_int_equal(tu_errors(s, "netclass"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
}

static void interfaces_come_and_go(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("bare-vm");
    tu_session *s = tu_open(root, "netclass");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_network_info"), 2);
    mw_snapshot_free(snap);

    /* A pod starts: a new veth; bonding_masters (a file) is not an interface;
     * eth0's mtu turns bad, its flags vanish. */
    const char *dev = "sys/devices/virtual/net/veth1234";
    char rel[256];
    static const char *const files[][2] = {
        {"operstate", "up\n"},      {"address", "aa:bb:cc:dd:ee:ff\n"},
        {"mtu", "1500\n"},          {"speed", "10000\n"},
        {"duplex", "full\n"},       {"carrier", "1\n"},
        {"carrier_changes", "2\n"}, {"tx_queue_len", "0\n"},
        {"flags", "0x1003\n"}};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(rel, sizeof(rel), "%s/%s", dev, files[i][0]);
        tu_write(root, rel, files[i][1]);
    }
    char path[4096], target[] = "../../devices/virtual/net/veth1234";
    snprintf(path, sizeof(path), "%s/sys/class/net/veth1234", root);
    assert_int_equal(symlink(target, path), 0);
    tu_write(root, "sys/class/net/bonding_masters", "\n");
    tu_write(root, "sys/devices/pci0000:00/0000:00:05.0/virtio1/net/eth0/mtu", "big\n");
    tu_remove(root, "sys/devices/pci0000:00/0000:00:05.0/virtio1/net/eth0/flags");
    snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_network_info"), 3);
    assert_value(tu_value(snap, "mlwatch_network_speed_bytes", "device", "veth1234", MW_END),
                 1250000000.0);
    assert_false(tu_has(snap, "mlwatch_network_mtu_bytes", "device", "eth0", MW_END));
    assert_int_equal(tu_errors(s, "netclass"), 2);
    mw_snapshot_free(snap);

    /* The pod is gone: the veth is no longer reported, and no error. */
    tu_remove(root, "sys/class/net/veth1234");
    snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_network_info"), 2);
    assert_false(tu_has(snap, "mlwatch_network_up", "device", "veth1234", MW_END));
    assert_int_equal(tu_errors(s, "netclass"), 4); /* eth0's mtu and flags again */
    mw_snapshot_free(snap);
    tu_close(s);

    /* No sys/class/net: off, not failing. */
    tu_remove(root, "sys/class/net");
    s = tu_open(root, "netclass");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "netclass"), 0);
    assert_null(mw_snapshot_find(snap, "mlwatch_network_info"));
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_attributes),
        cmocka_unit_test(collects_fixture),
        cmocka_unit_test(interfaces_come_and_go),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
