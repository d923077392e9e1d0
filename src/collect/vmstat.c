/* vmstat.c - selected virtual memory counters from /proc/vmstat.
 *
 * Each counter in the table below that the running kernel has is exported
 * as mlwatch_vmstat_<name>_total; the others (e.g. numa_* on a kernel
 * without NUMA, allocstall_normal before 4.8) are simply left out. */
#include "collector.h"
#include "vmstat.h"
#include "../core/parse.h"

#include <string.h>

#define VMSTAT_MAX (256u << 10)

typedef struct field {
    const char *name;
    mw_metric_desc desc;
} field;

#define C(name, help)                                                                              \
    {                                                                                              \
        name,                                                                                      \
        {                                                                                          \
            "mlwatch_vmstat_" name "_total", help, "", MW_COUNTER                                  \
        }                                                                                          \
    }

static const field FIELDS[] = {
    C("pgpgin", "KiB paged in from block devices (pgpgin)."),
    C("pgpgout", "KiB paged out to block devices (pgpgout)."),
    C("pswpin", "Pages swapped in (pswpin)."),
    C("pswpout", "Pages swapped out (pswpout)."),
    C("numa_hit", "Pages allocated on the intended NUMA node (numa_hit)."),
    C("numa_miss", "Pages allocated on this node though intended for another (numa_miss)."),
    C("numa_foreign", "Pages intended for this node but allocated on another (numa_foreign)."),
    C("numa_local", "Pages allocated on the node of the allocating CPU (numa_local)."),
    C("numa_other", "Pages allocated on a node other than the allocating CPU's (numa_other)."),
    C("allocstall_normal", "Direct reclaim stalls in the normal zone (allocstall_normal)."),
    C("pgfault", "Page faults, minor and major (pgfault)."),
    C("pgmajfault", "Major page faults, which needed I/O (pgmajfault)."),
    C("pgsteal_kswapd", "Pages reclaimed by kswapd (pgsteal_kswapd)."),
    C("pgsteal_direct", "Pages reclaimed by direct reclaim (pgsteal_direct)."),
    C("pgscan_kswapd", "Pages scanned by kswapd (pgscan_kswapd)."),
    C("pgscan_direct", "Pages scanned by direct reclaim (pgscan_direct)."),
    C("oom_kill", "Processes killed by the out-of-memory killer (oom_kill)."),
    C("compact_stall", "Allocations that stalled for memory compaction (compact_stall)."),
    C("thp_fault_alloc", "Transparent huge pages allocated on a page fault (thp_fault_alloc)."),
};
#define NFIELDS (sizeof(FIELDS) / sizeof(FIELDS[0]))
_Static_assert(NFIELDS <= MW_VMSTAT_MAXFIELDS, "mw_vmstat.present has one bit per field");

static int lookup(const char *name, size_t len)
{
    for (size_t i = 0; i < NFIELDS; i++)
        if (strncmp(FIELDS[i].name, name, len) == 0 && FIELDS[i].name[len] == '\0') return (int)i;
    return -1;
}

int mw_vmstat_field(const char *name)
{
    return lookup(name, strlen(name));
}

int mw_parse_vmstat(const char *text, mw_vmstat *out)
{
    memset(out, 0, sizeof(*out));
    const char *p = text, *line, *nl;
    while (mw_next_whole_line(&p, &line, &nl, &out->malformed)) {
        const char *sp = memchr(line, ' ', (size_t)(nl - line));
        if (!sp || sp == line) {
            out->malformed++;
        } else {
            int i = lookup(line, (size_t)(sp - line));
            if (i >= 0) {
                const char *v = sp + 1;
                uint64_t x;
                uint32_t bit = 1u << i;
                if ((out->present & bit) || mw_parse_u64(&v, &x) < 0 || v != nl) {
                    out->malformed++;
                } else {
                    out->value[i] = x;
                    out->present |= bit;
                }
            }
        }
    }
    return out->present ? 0 : -1;
}

static void vmstat_collect(void *state, mw_collect_ctx *ctx)
{
    (void)state;
    static const char path[] = "proc/vmstat";
    const char *text = mw_collect_read(ctx, path, VMSTAT_MAX);
    if (!text) return;
    mw_vmstat v;
    if (mw_parse_vmstat(text, &v) < 0) {
        mw_collect_error(ctx, path, 0, "malformed content: no known counter");
        return;
    }
    for (size_t i = 0; i < NFIELDS; i++)
        if (v.present & (1u << i)) mw_emit(ctx->snap, &FIELDS[i].desc, (double)v.value[i], MW_END);
    if (v.malformed) mw_collect_error(ctx, path, 0, "malformed or truncated lines skipped");
}

const mw_collector mw_collector_vmstat = {
    .name = "vmstat",
    .help = "Paging, swapping, page fault, reclaim, NUMA and OOM counters from /proc/vmstat",
    .collect = vmstat_collect,
};
