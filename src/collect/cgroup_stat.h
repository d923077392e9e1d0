/* cgroup_stat.h - parsers of the cgroup control files the cgroup collector reads
 * (cgroup v2 and v1), kept apart from the reading so that they can be
 * unit-tested and fuzzed (fuzz/fuzz_cpu_stat.c). All take a NUL-terminated
 * buffer, never allocate, and return -1 on malformed input. */
#ifndef MW_CGROUP_STAT_H
#define MW_CGROUP_STAT_H

#include <stdint.h>

typedef struct mw_cg_cpu {
    uint64_t usage_ns;     /* v2 usage_usec * 1000; v1 cpuacct.usage */
    int has_throttling;    /* nr_periods, nr_throttled and throttled time present */
    uint64_t nr_periods;   /* enforcement periods that elapsed */
    uint64_t nr_throttled; /* periods in which the group was throttled */
    uint64_t throttled_ns; /* v2 throttled_usec * 1000; v1 throttled_time */
} mw_cg_cpu;

/* cgroup v2 cpu.stat: "usage_usec N" (required; present even without the cpu
 * controller) and, with the cpu controller, nr_periods, nr_throttled and
 * throttled_usec. Other keys are ignored. Returns 0 or -1. */
int mw_parse_cg2_cpu_stat(const char *text, mw_cg_cpu *out);
/* cgroup v1 cpu.stat: nr_periods, nr_throttled, throttled_time (ns), all
 * required. Leaves usage_ns alone (it comes from cpuacct.usage). */
int mw_parse_cg1_cpu_stat(const char *text, mw_cg_cpu *out);

typedef struct mw_cg_memstat {
    int has_inactive_file, has_rss;
    uint64_t inactive_file; /* v2 inactive_file; v1 total_inactive_file */
    uint64_t rss;           /* v2 anon; v1 total_rss */
} mw_cg_memstat;

/* memory.stat of either version (v1 reads the hierarchical total_* keys).
 * Returns 0, or -1 when malformed or when inactive_file is missing. */
int mw_parse_cg_memory_stat(const char *text, int v1, mw_cg_memstat *out);

/* v2 cpu.max: "max 100000\n" or "200000 100000\n". *quota_us is -1 for max.
 * Returns 0 or -1. */
int mw_parse_cg2_cpu_max(const char *text, int64_t *quota_us, uint64_t *period_us);

/* A file holding one number or "max" (v2 memory.max, memory.current; v1
 * memory.limit_in_bytes, cpu.cfs_quota_us with -1). *out is INT64_MAX for
 * "max"; negative values are kept (cfs_quota_us -1). Returns 0 or -1. */
int mw_parse_cg_value(const char *text, int64_t *out);

/* cgroup.procs: one PID per line. Calls fn(pid, arg) for each (fn may be
 * NULL) and returns the number of PIDs, or -1 when malformed. */
int mw_parse_cg_procs(const char *text, void (*fn)(int pid, void *arg), void *arg);

#endif
