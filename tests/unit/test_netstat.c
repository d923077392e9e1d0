/* test_netstat.c - /proc/net/snmp + netstat, sockstat and softnet_stat
 * parsing and their collectors on fixtures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/netstat.h"
#include "collect/sockstat.h"
#include "collect/softnet.h"
#include "testutil.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void eq(double got, double want, int line)
{
    if (got != want) fail_msg("line %d: got %.17g, want %.17g", line, got, want);
}
#define assert_value(got, want) eq((got), (want), __LINE__)

typedef struct seen {
    char text[1024];
} seen;

static void record(void *arg, const char *proto, const char *field, int64_t value)
{
    seen *s = arg;
    size_t n = strlen(s->text);
    snprintf(s->text + n, sizeof(s->text) - n, "%s.%s=%lld ", proto, field, (long long)value);
}

static void record_u(void *arg, const char *proto, const char *key, uint64_t value)
{
    record(arg, proto, key, (int64_t)value);
}

static void parses_netstat_pairs(void **state)
{
    (void)state;
    seen s = {""};
    assert_int_equal(mw_parse_netstat("Tcp: MaxConn CurrEstab\nTcp: -1 12\n\n"
                                      "Udp: InDatagrams\nUdp: 5",
                                      record, &s),
                     0);
    assert_string_equal(s.text, "Tcp.MaxConn=-1 Tcp.CurrEstab=12 Udp.InDatagrams=5 ");
    /* Count mismatch, prefix mismatch, non-number: each section dropped
     * whole and counted; good sections around them are kept. */
    memset(&s, 0, sizeof(s));
    assert_int_equal(mw_parse_netstat("Ip: A B\nIp: 1\n"
                                      "Icmp: A\n" /* no value line: Udp starts anew */
                                      "Udp: A\nUdp: 7\n"
                                      "Tcp: A B\nTcp: 1 x\n"
                                      "Tcp: X\nTcp: 3\n"
                                      "IpExt: A\n",
                                      record, &s),
                     4);
    assert_string_equal(s.text, "Udp.A=7 Tcp.X=3 ");
    memset(&s, 0, sizeof(s));
    assert_int_equal(mw_parse_netstat("no colon here\n", record, &s), 1);
    assert_int_equal(mw_parse_netstat("", record, &s), 0);
    assert_string_equal(s.text, "");
}

static void parses_sockstat(void **state)
{
    (void)state;
    seen s = {""};
    assert_int_equal(mw_parse_sockstat("sockets: used 290\nTCP: inuse 5 tw 2\n\nFRAG6: inuse 0 "
                                       "memory 0",
                                       record_u, &s),
                     0);
    assert_string_equal(s.text, "sockets.used=290 TCP.inuse=5 TCP.tw=2 FRAG6.inuse=0 "
                                "FRAG6.memory=0 ");
    memset(&s, 0, sizeof(s));
    assert_int_equal(mw_parse_sockstat("TCP: inuse\nUDP: inuse -1\nRAW inuse 1\nX:\nUDP: inuse 3\n",
                                       record_u, &s),
                     4);
    assert_string_equal(s.text, "UDP.inuse=3 ");
}

static void parses_softnet(void **state)
{
    (void)state;
    const char *p = "0000a3e5 00000002 0000001c 00000000 00000000 00000000 00000000 00000000 "
                    "00000000 00000009 00000004 00000000 00000005\n"
                    "\n"
                    "00000010 00000000 00000001 00000000 00000000 00000000 00000000 00000000 "
                    "00000000 00000003\n"
                    "0000001 0 g\n"
                    "ffffffffffffffff 1 2";
    mw_softnet s;
    assert_int_equal(mw_parse_softnet_line(&p, &s), 1);
    assert_int_equal(s.processed, 0xa3e5);
    assert_int_equal(s.dropped, 2);
    assert_int_equal(s.time_squeeze, 0x1c);
    assert_int_equal(s.received_rps, 9);
    assert_int_equal(s.flow_limit, 4);
    assert_int_equal(s.cpu, 5);
    /* A 3.x kernel: rps column, no flow limit, no CPU index. */
    assert_int_equal(mw_parse_softnet_line(&p, &s), 1);
    assert_int_equal(s.processed, 16);
    assert_true(s.has_rps);
    assert_false(s.has_flow_limit);
    assert_int_equal(s.cpu, -1);
    assert_int_equal(mw_parse_softnet_line(&p, &s), -1);
    assert_int_equal(mw_parse_softnet_line(&p, &s), 1);
    assert_int_equal(s.processed, UINT64_MAX);
    assert_int_equal(mw_parse_softnet_line(&p, &s), 0);
    p = "1 2\n";
    assert_int_equal(mw_parse_softnet_line(&p, &s), -1);
    p = "11111111111111111 2 3\n";
    assert_int_equal(mw_parse_softnet_line(&p, &s), -1);
}

static void collects_fixtures(void **state)
{
    (void)state;
    tu_session *s = tu_open(tu_fixture("rapl-cpufreq"), "netstat,sockstat,softnet");
    mw_snapshot *snap = tu_run(s);
    assert_value(tu_value(snap, "mlwatch_netstat_tcp_retrans_segs_total", MW_END), 123456);
    assert_value(tu_value(snap, "mlwatch_netstat_tcp_current_established", MW_END), 42);
    assert_value(tu_value(snap, "mlwatch_netstat_tcp_active_opens_total", MW_END), 120345);
    assert_value(tu_value(snap, "mlwatch_netstat_udp_rcvbuf_errors_total", MW_END), 321);
    assert_value(tu_value(snap, "mlwatch_netstat_ip_in_discards_total", MW_END), 17);
    assert_value(tu_value(snap, "mlwatch_netstat_tcp_ext_tcp_syn_retrans_total", MW_END), 77);
    assert_value(tu_value(snap, "mlwatch_netstat_tcp_ext_listen_overflows_total", MW_END), 9);
    assert_value(tu_value(snap, "mlwatch_netstat_ip_ext_in_bytes_total", MW_END), 1234567890123.0);
    /* Not in the table: not reported (MaxConn, MPTcpExt). */
    assert_null(mw_snapshot_find(snap, "mlwatch_netstat_tcp_max_conn_total"));
    assert_value(tu_value(snap, "mlwatch_sockstat_sockets_used", MW_END), 812);
    assert_value(tu_value(snap, "mlwatch_sockstat_tcp_timewait", MW_END), 33);
    assert_value(tu_value(snap, "mlwatch_sockstat_tcp_memory_bytes", MW_END),
                 1200.0 * (double)sysconf(_SC_PAGESIZE));
    assert_value(tu_value(snap, "mlwatch_sockstat_udp_memory_bytes", MW_END),
                 12.0 * (double)sysconf(_SC_PAGESIZE));
    assert_value(tu_value(snap, "mlwatch_sockstat_tcp6_inuse", MW_END), 4);
    assert_int_equal(tu_count(snap, "mlwatch_softnet_processed_total"), 8);
    assert_value(tu_value(snap, "mlwatch_softnet_processed_total", "cpu", "7", MW_END), 0x1a2b3c);
    assert_value(tu_value(snap, "mlwatch_softnet_dropped_total", "cpu", "0", MW_END), 16);
    assert_value(tu_value(snap, "mlwatch_softnet_times_squeezed_total", "cpu", "3", MW_END), 37);
    assert_int_equal(tu_errors(s, "netstat"), 0);
    assert_int_equal(tu_errors(s, "sockstat"), 0);
    assert_int_equal(tu_errors(s, "softnet"), 0);
    mw_snapshot_free(snap);
    tu_close(s);

    /* k8s-v1 has no sockstat6 (IPv6 disabled): no IPv6 names, no error. */
    s = tu_open(tu_fixture("k8s-v1-cgroupfs"), "sockstat,softnet");
    snap = tu_run(s);
    assert_null(mw_snapshot_find(snap, "mlwatch_sockstat_tcp6_inuse"));
    assert_value(tu_value(snap, "mlwatch_sockstat_tcp_inuse", MW_END), 120);
    assert_value(tu_value(snap, "mlwatch_softnet_times_squeezed_total", "cpu", "2", MW_END), 7);
    assert_int_equal(tu_errors(s, "sockstat"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
}

static void bad_input_is_counted(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("bare-vm");
    tu_session *s = tu_open(root, "netstat,sockstat,softnet");
    tu_write(root, "proc/net/snmp", "Tcp: RetransSegs CurrEstab\nTcp: 5\nUdp: NoPorts\nUdp: 4\n");
    tu_write(root, "proc/net/sockstat", "sockets: used 3\nTCP: inuse x\n");
    /* Offline CPU 1 with a 4.x kernel (no index column): rows shift; a bad
     * row still takes its place. */
    tu_write(root, "proc/net/softnet_stat", "00000001 0 0 0 0 0 0 0 0 0 0\nzz\n00000003 0 0\n");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_errors(s, "netstat"), 1);
    assert_int_equal(tu_errors(s, "sockstat"), 1);
    assert_int_equal(tu_errors(s, "softnet"), 1);
    assert_false(tu_has(snap, "mlwatch_netstat_tcp_retrans_segs_total", MW_END));
    assert_value(tu_value(snap, "mlwatch_netstat_udp_no_ports_total", MW_END), 4);
    assert_value(tu_value(snap, "mlwatch_netstat_tcp_ext_tcp_timeouts_total", MW_END), 9);
    assert_value(tu_value(snap, "mlwatch_sockstat_sockets_used", MW_END), 3);
    assert_value(tu_value(snap, "mlwatch_softnet_processed_total", "cpu", "2", MW_END), 3);
    assert_false(tu_has(snap, "mlwatch_softnet_received_rps_total", "cpu", "2", MW_END));
    mw_snapshot_free(snap);
    /* The same bad section again, and netstat vanished: two more. */
    tu_remove(root, "proc/net/netstat");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "netstat"), 3);
    mw_snapshot_free(snap);
    tu_close(s);

    /* No /proc/net at all: the collectors stay off, no error. */
    tu_remove(root, "proc/net");
    s = tu_open(root, "netstat,sockstat,softnet");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "netstat") + tu_errors(s, "sockstat") + tu_errors(s, "softnet"),
                     0);
    assert_null(mw_snapshot_find(snap, "mlwatch_softnet_processed_total"));
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_netstat_pairs), cmocka_unit_test(parses_sockstat),
        cmocka_unit_test(parses_softnet),       cmocka_unit_test(collects_fixtures),
        cmocka_unit_test(bad_input_is_counted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
