/* softnet.h - parser for /proc/net/softnet_stat (exposed for tests and
 * fuzzing). */
#ifndef MW_SOFTNET_H
#define MW_SOFTNET_H

#include <stdint.h>

typedef struct mw_softnet {
    uint64_t processed, dropped, time_squeeze, received_rps, flow_limit;
    int has_rps, has_flow_limit; /* column present (older kernels lack them) */
    long cpu;                    /* CPU index column (5.10+), or -1 when absent */
} mw_softnet;

/* Parse the line at *p and advance *p past it. One line per online CPU, of
 * 8-digit hex columns:
 *
 *   "0000a3e5 00000000 0000001c 00000000 ... 00000000 00000000 00000000 00000001\n"
 *
 * 0 processed, 1 dropped, 2 time_squeeze, 3-8 unused (once fastroute and
 * cpu_collision), 9 received_rps, 10 flow_limit_count (both 2.6.35+/3.11+),
 * 11 backlog length, 12 CPU index (both 5.10+; before, rows are the online
 * CPUs in order and an offline CPU shifts the rest). At least
 * 3 and at most 32 columns. Returns 1 with *out filled, 0 at the end of the
 * text, -1 for a malformed line (already skipped). Blank lines are ignored. */
int mw_parse_softnet_line(const char **p, mw_softnet *out);

#endif
