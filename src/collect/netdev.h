/* netdev.h - parser for /proc/net/dev (exposed for tests and fuzzing). */
#ifndef MW_NETDEV_H
#define MW_NETDEV_H

#include <stdint.h>

#define MW_NETDEV_NAME_MAX 32 /* IFNAMSIZ is 16; room for odd kernels */

typedef struct mw_netdev {
    char name[MW_NETDEV_NAME_MAX];
    uint64_t rx_bytes, rx_packets, rx_errs, rx_drop;
    uint64_t rx_fifo, rx_frame, rx_compressed, rx_multicast;
    uint64_t tx_bytes, tx_packets, tx_errs, tx_drop;
    uint64_t tx_fifo, tx_colls, tx_carrier, tx_compressed;
} mw_netdev;

/* Parse the line at *p and advance *p past it. The two header lines (with
 * '|' and no ':') and blank lines are skipped. Returns 1 with *out filled, 0 at the end of the
 * text, or -1 for a malformed line (already skipped: the caller counts it and
 * calls again).
 *
 *   "  eth0: 45315374 994 0 0 0 0 0 0 46297 587 0 0 0 0 0 0\n"
 *
 * The 16 values are rx bytes packets errs drop fifo frame compressed
 * multicast, then tx bytes packets errs drop fifo colls carrier compressed.
 * Old kernels write no blank after the colon ("eth0:12345 ..."). */
int mw_parse_netdev_line(const char **p, mw_netdev *out);

#endif
