/* netdev.c - network interface counters from /proc/net/dev. */
#include "collector.h"
#include "netdev.h"
#include "../core/parse.h"

#include <string.h>

#define NETDEV_MAX 4096 /* interfaces reported per cycle */

/* clang-format off */
MW_METRIC(RX_BYTES, MW_COUNTER, "mlwatch_network_receive_bytes_total", "bytes", "Bytes received by the interface.");
MW_METRIC(TX_BYTES, MW_COUNTER, "mlwatch_network_transmit_bytes_total", "bytes", "Bytes transmitted by the interface.");
MW_METRIC(RX_PACKETS, MW_COUNTER, "mlwatch_network_receive_packets_total", "", "Packets received by the interface.");
MW_METRIC(TX_PACKETS, MW_COUNTER, "mlwatch_network_transmit_packets_total", "", "Packets transmitted by the interface.");
MW_METRIC(RX_ERRS, MW_COUNTER, "mlwatch_network_receive_errors_total", "", "Receive errors detected by the interface.");
MW_METRIC(TX_ERRS, MW_COUNTER, "mlwatch_network_transmit_errors_total", "", "Transmit errors detected by the interface.");
MW_METRIC(RX_DROP, MW_COUNTER, "mlwatch_network_receive_drops_total", "", "Received packets dropped by the interface or the kernel.");
MW_METRIC(TX_DROP, MW_COUNTER, "mlwatch_network_transmit_drops_total", "", "Packets dropped before transmission.");

MW_METRIC(RX_FIFO, MW_COUNTER, "mlwatch_network_receive_fifo_total", "", "Receive FIFO (ring buffer) overruns.");
MW_METRIC(RX_FRAME, MW_COUNTER, "mlwatch_network_receive_frame_total", "", "Received frames with framing or CRC errors.");
MW_METRIC(RX_COMPRESSED, MW_COUNTER, "mlwatch_network_receive_compressed_total", "", "Compressed packets received (CSLIP, PPP).");
MW_METRIC(RX_MULTICAST, MW_COUNTER, "mlwatch_network_receive_multicast_total", "", "Multicast packets received.");
MW_METRIC(TX_FIFO, MW_COUNTER, "mlwatch_network_transmit_fifo_total", "", "Transmit FIFO errors.");
MW_METRIC(TX_COLLS, MW_COUNTER, "mlwatch_network_transmit_colls_total", "", "Collisions detected while transmitting.");
MW_METRIC(TX_CARRIER, MW_COUNTER, "mlwatch_network_transmit_carrier_total", "", "Transmit carrier errors (link lost while sending).");
MW_METRIC(TX_COMPRESSED, MW_COUNTER, "mlwatch_network_transmit_compressed_total", "", "Compressed packets transmitted (CSLIP, PPP).");
/* clang-format on */

static const char *line_end(const char *p)
{
    const char *nl = strchr(p, '\n');
    return nl ? nl : p + strlen(p);
}

int mw_parse_netdev_line(const char **p, mw_netdev *out)
{
    const char *s = *p;
    for (;;) {
        if (!*s) {
            *p = s;
            return 0;
        }
        const char *end = line_end(s);
        *p = *end ? end + 1 : end;
        /* The two header lines have '|' and no ':'; blank lines are ignored. */
        if (memchr(s, '|', (size_t)(end - s)) && !memchr(s, ':', (size_t)(end - s))) {
            s = *p;
            continue;
        }
        const char *q = s;
        mw_skip_blanks(&q);
        if (q == end) {
            s = *p;
            continue;
        }
        const char *colon = memchr(q, ':', (size_t)(end - q));
        if (!colon || colon == q || (size_t)(colon - q) >= sizeof(out->name)) return -1;
        for (const char *c = q; c < colon; c++)
            if (*c == ' ' || *c == '\t') return -1;
        memcpy(out->name, q, (size_t)(colon - q));
        out->name[colon - q] = '\0';
        q = colon + 1;
        uint64_t v[16];
        for (int i = 0; i < 16; i++) {
            mw_skip_blanks(&q);
            if (mw_parse_u64(&q, &v[i]) < 0) return -1;
            if (*q != ' ' && *q != '\t' && *q != '\n' && *q != '\0') return -1;
        }
        mw_skip_blanks(&q);
        if (q != end) return -1;
        out->rx_bytes = v[0];
        out->rx_packets = v[1];
        out->rx_errs = v[2];
        out->rx_drop = v[3];
        out->rx_fifo = v[4];
        out->rx_frame = v[5];
        out->rx_compressed = v[6];
        out->rx_multicast = v[7];
        out->tx_bytes = v[8];
        out->tx_packets = v[9];
        out->tx_errs = v[10];
        out->tx_drop = v[11];
        out->tx_fifo = v[12];
        out->tx_colls = v[13];
        out->tx_carrier = v[14];
        out->tx_compressed = v[15];
        return 1;
    }
}

static void netdev_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    static const char path[] = "proc/net/dev";
    const char *text = mw_collect_read(ctx, path, 0);
    if (!text) return;
    int rc;
    const char *p = text;
    size_t n = 0;
    mw_netdev d;
    while ((rc = mw_parse_netdev_line(&p, &d)) != 0) {
        if (rc < 0) {
            mw_collect_error(ctx, path, 0, "malformed line");
            continue;
        }
        if (n++ == NETDEV_MAX) {
            mw_collect_error(ctx, path, 0, "more than 4096 interfaces; the rest are not reported");
            break;
        }
        mw_emit(ctx->snap, &RX_BYTES, (double)d.rx_bytes, "device", d.name, MW_END);
        mw_emit(ctx->snap, &TX_BYTES, (double)d.tx_bytes, "device", d.name, MW_END);
        mw_emit(ctx->snap, &RX_PACKETS, (double)d.rx_packets, "device", d.name, MW_END);
        mw_emit(ctx->snap, &TX_PACKETS, (double)d.tx_packets, "device", d.name, MW_END);
        mw_emit(ctx->snap, &RX_ERRS, (double)d.rx_errs, "device", d.name, MW_END);
        mw_emit(ctx->snap, &TX_ERRS, (double)d.tx_errs, "device", d.name, MW_END);
        mw_emit(ctx->snap, &RX_DROP, (double)d.rx_drop, "device", d.name, MW_END);
        mw_emit(ctx->snap, &TX_DROP, (double)d.tx_drop, "device", d.name, MW_END);
        mw_emit(ctx->snap, &RX_FIFO, (double)d.rx_fifo, "device", d.name, MW_END);
        mw_emit(ctx->snap, &RX_FRAME, (double)d.rx_frame, "device", d.name, MW_END);
        mw_emit(ctx->snap, &RX_COMPRESSED, (double)d.rx_compressed, "device", d.name, MW_END);
        mw_emit(ctx->snap, &RX_MULTICAST, (double)d.rx_multicast, "device", d.name, MW_END);
        mw_emit(ctx->snap, &TX_FIFO, (double)d.tx_fifo, "device", d.name, MW_END);
        mw_emit(ctx->snap, &TX_COLLS, (double)d.tx_colls, "device", d.name, MW_END);
        mw_emit(ctx->snap, &TX_CARRIER, (double)d.tx_carrier, "device", d.name, MW_END);
        mw_emit(ctx->snap, &TX_COMPRESSED, (double)d.tx_compressed, "device", d.name, MW_END);
    }
}

const mw_collector mw_collector_netdev = {
    .name = "netdev",
    .help = "Network interface traffic, errors and drops from /proc/net/dev",
    .collect = netdev_collect,
};
