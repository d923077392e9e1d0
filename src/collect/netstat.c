/* netstat.c - protocol counters from /proc/net/snmp and /proc/net/netstat:
 * TCP retransmits and resets (NCCL over TCP, RoCE fallbacks), listen queue
 * overflows, UDP buffer errors, IP discards.
 *
 * Only the counters in the static table below are reported; a field the
 * kernel lacks is simply not there. Names are the kernel's in snake_case:
 * mlwatch_netstat_<proto>_<field>_total, with TcpExt -> tcp_ext, IpExt ->
 * ip_ext, UdpLite -> udp_lite, and IpExt In/OutOctets in bytes. */
#include "collector.h"
#include "netstat.h"
#include "../core/log.h"
#include "../core/parse.h"
#include "../core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <string.h>

#define NETSTAT_MAX_FIELDS 512
#define NETSTAT_NAME_MAX 64

typedef struct netstat_counter {
    const char *proto, *field;
    mw_metric_desc desc;
} netstat_counter;

#define C(proto, field, name, help)                                                                \
    {                                                                                              \
        proto, field,                                                                              \
        {                                                                                          \
            "mlwatch_netstat_" name "_total", help, "", MW_COUNTER                                 \
        }                                                                                          \
    }
#define B(proto, field, name, help)                                                                \
    {                                                                                              \
        proto, field,                                                                              \
        {                                                                                          \
            "mlwatch_netstat_" name "_total", help, "bytes", MW_COUNTER                            \
        }                                                                                          \
    }

/* Grouped by protocol (the lookup relies on it). */
/* clang-format off */
static const netstat_counter COUNTERS[] = {
    C("Ip", "InReceives", "ip_in_receives", "IP datagrams received (Ip InReceives)."),
    C("Ip", "InDelivers", "ip_in_delivers", "IP datagrams delivered to upper layers (Ip InDelivers)."),
    C("Ip", "OutRequests", "ip_out_requests", "IP datagrams sent by local protocols (Ip OutRequests)."),
    C("Ip", "InDiscards", "ip_in_discards", "Input IP datagrams discarded for lack of resources (Ip InDiscards)."),
    C("Ip", "OutDiscards", "ip_out_discards", "Output IP datagrams discarded for lack of resources (Ip OutDiscards)."),
    C("Icmp", "InMsgs", "icmp_in_msgs", "ICMP messages received (Icmp InMsgs)."),
    C("Icmp", "OutMsgs", "icmp_out_msgs", "ICMP messages sent (Icmp OutMsgs)."),
    C("Icmp", "InErrors", "icmp_in_errors", "ICMP messages received with errors (Icmp InErrors)."),
    C("Tcp", "ActiveOpens", "tcp_active_opens", "TCP connections opened by this host (Tcp ActiveOpens)."),
    C("Tcp", "PassiveOpens", "tcp_passive_opens", "TCP connections accepted (Tcp PassiveOpens)."),
    C("Tcp", "AttemptFails", "tcp_attempt_fails", "Failed TCP connection attempts (Tcp AttemptFails)."),
    C("Tcp", "EstabResets", "tcp_estab_resets", "Established TCP connections reset (Tcp EstabResets)."),
    C("Tcp", "InSegs", "tcp_in_segs", "TCP segments received (Tcp InSegs)."),
    C("Tcp", "OutSegs", "tcp_out_segs", "TCP segments sent, retransmissions excluded (Tcp OutSegs)."),
    C("Tcp", "RetransSegs", "tcp_retrans_segs", "TCP segments retransmitted (Tcp RetransSegs)."),
    C("Tcp", "InErrs", "tcp_in_errs", "TCP segments received in error (Tcp InErrs)."),
    C("Tcp", "OutRsts", "tcp_out_rsts", "TCP segments sent with RST (Tcp OutRsts)."),
    C("Tcp", "InCsumErrors", "tcp_in_csum_errors", "TCP segments with a bad checksum (Tcp InCsumErrors)."),
    C("Udp", "InDatagrams", "udp_in_datagrams", "UDP datagrams delivered (Udp InDatagrams)."),
    C("Udp", "OutDatagrams", "udp_out_datagrams", "UDP datagrams sent (Udp OutDatagrams)."),
    C("Udp", "NoPorts", "udp_no_ports", "UDP datagrams to a port nobody listens on (Udp NoPorts)."),
    C("Udp", "InErrors", "udp_in_errors", "UDP datagrams not delivered for other reasons (Udp InErrors)."),
    C("Udp", "RcvbufErrors", "udp_rcvbuf_errors", "UDP datagrams dropped on a full receive buffer (Udp RcvbufErrors)."),
    C("Udp", "SndbufErrors", "udp_sndbuf_errors", "UDP datagrams dropped on a full send buffer (Udp SndbufErrors)."),
    C("Udp", "InCsumErrors", "udp_in_csum_errors", "UDP datagrams with a bad checksum (Udp InCsumErrors)."),
    C("UdpLite", "InDatagrams", "udp_lite_in_datagrams", "UDP-Lite datagrams delivered (UdpLite InDatagrams)."),
    C("UdpLite", "OutDatagrams", "udp_lite_out_datagrams", "UDP-Lite datagrams sent (UdpLite OutDatagrams)."),
    C("UdpLite", "NoPorts", "udp_lite_no_ports", "UDP-Lite datagrams to a port nobody listens on (UdpLite NoPorts)."),
    C("UdpLite", "InErrors", "udp_lite_in_errors", "UDP-Lite datagrams not delivered for other reasons (UdpLite InErrors)."),
    C("UdpLite", "RcvbufErrors", "udp_lite_rcvbuf_errors", "UDP-Lite datagrams dropped on a full receive buffer (UdpLite RcvbufErrors)."),
    C("UdpLite", "SndbufErrors", "udp_lite_sndbuf_errors", "UDP-Lite datagrams dropped on a full send buffer (UdpLite SndbufErrors)."),
    C("UdpLite", "InCsumErrors", "udp_lite_in_csum_errors", "UDP-Lite datagrams with a bad checksum (UdpLite InCsumErrors)."),
    C("TcpExt", "ListenOverflows", "tcp_ext_listen_overflows", "Connections dropped on a full accept queue (TcpExt ListenOverflows)."),
    C("TcpExt", "ListenDrops", "tcp_ext_listen_drops", "Connection requests dropped by a listening socket (TcpExt ListenDrops)."),
    C("TcpExt", "TCPTimeouts", "tcp_ext_tcp_timeouts", "TCP retransmission timer expiries (TcpExt TCPTimeouts)."),
    C("TcpExt", "TCPSynRetrans", "tcp_ext_tcp_syn_retrans", "SYN and SYN-ACK retransmissions (TcpExt TCPSynRetrans)."),
    C("TcpExt", "TCPLostRetransmit", "tcp_ext_tcp_lost_retransmit", "Retransmitted TCP segments lost again (TcpExt TCPLostRetransmit)."),
    C("TcpExt", "TCPFastRetrans", "tcp_ext_tcp_fast_retrans", "TCP fast retransmissions (TcpExt TCPFastRetrans)."),
    C("TcpExt", "TCPSlowStartRetrans", "tcp_ext_tcp_slow_start_retrans", "TCP retransmissions in slow start (TcpExt TCPSlowStartRetrans)."),
    C("TcpExt", "TCPRcvQDrop", "tcp_ext_tcp_rcv_q_drop", "TCP segments dropped on receive-queue memory pressure (TcpExt TCPRcvQDrop)."),
    C("TcpExt", "TCPOFOQueue", "tcp_ext_tcp_ofo_queue", "TCP segments queued out of order (TcpExt TCPOFOQueue)."),
    C("TcpExt", "TCPBacklogDrop", "tcp_ext_tcp_backlog_drop", "TCP segments dropped on a full socket backlog (TcpExt TCPBacklogDrop)."),
    C("TcpExt", "TCPAbortOnTimeout", "tcp_ext_tcp_abort_on_timeout", "TCP connections aborted after too many retransmissions (TcpExt TCPAbortOnTimeout)."),
    C("TcpExt", "TCPAbortOnData", "tcp_ext_tcp_abort_on_data", "TCP connections reset on unexpected data (TcpExt TCPAbortOnData)."),
    C("TcpExt", "TCPMemoryPressures", "tcp_ext_tcp_memory_pressures", "Times TCP entered memory pressure (TcpExt TCPMemoryPressures)."),
    C("TcpExt", "SyncookiesSent", "tcp_ext_syncookies_sent", "SYN cookies sent (TcpExt SyncookiesSent)."),
    C("TcpExt", "SyncookiesRecv", "tcp_ext_syncookies_recv", "SYN cookies received back (TcpExt SyncookiesRecv)."),
    C("TcpExt", "SyncookiesFailed", "tcp_ext_syncookies_failed", "Invalid SYN cookies received (TcpExt SyncookiesFailed)."),
    C("TcpExt", "PruneCalled", "tcp_ext_prune_called", "Receive-queue prunes on socket memory pressure (TcpExt PruneCalled)."),
    C("TcpExt", "TCPRetransFail", "tcp_ext_tcp_retrans_fail", "TCP retransmissions that failed to be sent (TcpExt TCPRetransFail)."),
    B("IpExt", "InOctets", "ip_ext_in_bytes", "Bytes in received IP datagrams (IpExt InOctets)."),
    B("IpExt", "OutOctets", "ip_ext_out_bytes", "Bytes in sent IP datagrams (IpExt OutOctets)."),
    C("IpExt", "InNoRoutes", "ip_ext_in_no_routes", "IP datagrams dropped for lack of a route (IpExt InNoRoutes)."),
    C("IpExt", "InTruncatedPkts", "ip_ext_in_truncated_pkts", "Truncated IP datagrams received (IpExt InTruncatedPkts)."),
};
/* clang-format on */
#define NCOUNTERS (sizeof(COUNTERS) / sizeof(COUNTERS[0]))

/* clang-format off */
MW_METRIC(CURR_ESTAB, MW_GAUGE, "mlwatch_netstat_tcp_current_established", "", "TCP connections in ESTABLISHED or CLOSE-WAIT state now (Tcp CurrEstab).");
/* clang-format on */

/* --- parser ---------------------------------------------------------- */

static const char *line_end(const char *p)
{
    const char *nl = strchr(p, '\n');
    return nl ? nl : p + strlen(p);
}

/* The next non-blank line at *p as [*s, *e); 0 at the end of the text. */
static int next_line(const char **p, const char **s, const char **e)
{
    for (;;) {
        const char *q = *p;
        if (!*q) return 0;
        const char *end = line_end(q);
        *p = *end ? end + 1 : end;
        mw_skip_blanks(&q);
        if (q != end) {
            *s = q;
            *e = end;
            return 1;
        }
    }
}

/* The "Proto:" prefix of [s, e): its length (excluding ':'), or -1. */
static int prefix_len(const char *s, const char *e)
{
    const char *c = memchr(s, ':', (size_t)(e - s));
    if (!c || c == s || c - s >= NETSTAT_NAME_MAX) return -1;
    for (const char *q = s; q < c; q++)
        if (*q == ' ' || *q == '\t') return -1;
    return (int)(c - s);
}

/* Walk one section; with cb NULL it only checks it. Returns 0 or -1. */
static int section(const char *proto, const char *hs, const char *he, const char *vs,
                   const char *ve, mw_netstat_cb cb, void *arg)
{
    int n = 0;
    for (;;) {
        const char *name, *val;
        size_t nl = mw_next_token(&hs, he, &name);
        size_t vl = mw_next_token(&vs, ve, &val);
        if (nl == 0 || vl == 0) return nl == vl ? 0 : -1;
        if (++n > NETSTAT_MAX_FIELDS || nl >= NETSTAT_NAME_MAX) return -1;
        const char *p = val;
        int64_t v;
        if (mw_parse_i64(&p, &v) < 0 || p != val + vl) return -1;
        if (cb) {
            char field[NETSTAT_NAME_MAX];
            memcpy(field, name, nl);
            field[nl] = '\0';
            cb(arg, proto, field, v);
        }
    }
}

int mw_parse_netstat(const char *text, mw_netstat_cb cb, void *arg)
{
    const char *p = text;
    int bad = 0;
    const char *hs, *he;
    while (next_line(&p, &hs, &he)) {
        const char *vs, *ve;
        int hl = prefix_len(hs, he);
        if (hl < 0) {
            bad++;
            continue;
        }
        if (!next_line(&p, &vs, &ve)) {
            bad++;
            break;
        }
        int vl = prefix_len(vs, ve);
        if (vl != hl || memcmp(hs, vs, (size_t)hl) != 0) {
            /* Not a pair: the second line may start the next section. */
            bad++;
            p = vs;
            continue;
        }
        char proto[NETSTAT_NAME_MAX];
        memcpy(proto, hs, (size_t)hl);
        proto[hl] = '\0';
        hs += hl + 1;
        vs += vl + 1;
        if (section(proto, hs, he, vs, ve, NULL, NULL) < 0) {
            bad++;
            continue;
        }
        if (cb) section(proto, hs, he, vs, ve, cb, arg);
    }
    return bad;
}

/* --- collection ----------------------------------------------------- */

/* The table rows of the section being parsed: found once per section, not
 * once per field (TcpExt alone has over 100 fields). */
typedef struct emit_state {
    mw_collect_ctx *ctx;
    char proto[NETSTAT_NAME_MAX];
    size_t first, end;
} emit_state;

static void emit_field(void *arg, const char *proto, const char *field, int64_t value)
{
    emit_state *es = arg;
    if (strcmp(proto, es->proto) != 0) {
        mw_strlcpy(es->proto, proto, sizeof(es->proto));
        size_t i = 0;
        while (i < NCOUNTERS && strcmp(COUNTERS[i].proto, proto) != 0)
            i++;
        es->first = i;
        while (i < NCOUNTERS && strcmp(COUNTERS[i].proto, proto) == 0)
            i++;
        es->end = i;
    }
    if (es->first == es->end) return;
    if (field[0] == 'C' && strcmp(field, "CurrEstab") == 0 && strcmp(proto, "Tcp") == 0) {
        mw_emit(es->ctx->snap, &CURR_ESTAB, (double)value, MW_END);
        return;
    }
    for (size_t i = es->first; i < es->end; i++) {
        if (COUNTERS[i].field[0] != field[0] || strcmp(COUNTERS[i].field, field) != 0) continue;
        /* Counters are unsigned in the kernel; a negative value is not one. */
        if (value >= 0) mw_emit(es->ctx->snap, &COUNTERS[i].desc, (double)value, MW_END);
        return;
    }
}

static void read_one(mw_collect_ctx *ctx, const char *path)
{
    const char *text = mw_collect_read(ctx, path, 0);
    if (!text) return;
    emit_state es = {ctx, "", 0, 0};
    int bad = mw_parse_netstat(text, emit_field, &es);
    for (int i = 0; i < bad; i++)
        mw_collect_error(ctx, path, 0, "malformed section");
}

static int netstat_init(const mw_env *env, void **state)
{
    (void)state;
    if (faccessat(env->host->rootfd, "proc/net/snmp", R_OK, 0) < 0) {
        mw_log(MW_LOG_INFO, "netstat", "no proc/net/snmp (%s)", strerror(errno));
        return MW_COLLECTOR_ABSENT;
    }
    return 0;
}

static void netstat_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    read_one(ctx, "proc/net/snmp");
    read_one(ctx, "proc/net/netstat");
}

const mw_collector mw_collector_netstat = {
    .name = "netstat",
    .help = "TCP, UDP, IP and ICMP protocol counters from /proc/net/snmp and /proc/net/netstat",
    .init = netstat_init,
    .collect = netstat_collect,
};
