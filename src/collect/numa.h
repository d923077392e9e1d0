/* numa.h - parsers for sys/devices/system/node/nodeN/{meminfo,numastat}
 * (exposed for tests and fuzzing). */
#ifndef MW_NUMA_H
#define MW_NUMA_H

#include <stdint.h>

typedef struct mw_node_meminfo {
    uint64_t node;              /* N of the "Node N" prefix, the same on every line */
    int has_used;               /* MemUsed was present (else used = total - free) */
    uint64_t total, free, used; /* bytes */
} mw_node_meminfo;

/* "Node 0 MemTotal:       32768 kB\n..." (every line "Node N Key: value[ kB]").
 * Returns 0, or -1 when a line is malformed, the node numbers differ, the
 * last line has no newline (truncated), or MemTotal or MemFree is missing. */
int mw_parse_node_meminfo(const char *text, mw_node_meminfo *out);

typedef struct mw_numastat {
    uint64_t hit, miss, foreign; /* pages */
} mw_numastat;

/* "numa_hit 123\nnuma_miss 0\n..." Returns 0, or -1 when a line is not
 * "name value", the last line has no newline, or numa_hit, numa_miss or
 * numa_foreign is missing or repeated. */
int mw_parse_numastat(const char *text, mw_numastat *out);

#endif
