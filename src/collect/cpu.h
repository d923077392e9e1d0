/* cpu.h - parser for /proc/stat (exposed for tests and fuzzing). */
#ifndef MW_CPU_H
#define MW_CPU_H

#include <stdint.h>

/* USER_HZ: the unit of /proc/stat times, fixed at 100 by the Linux ABI. */
#define MW_USER_HZ 100

/* Columns of a "cpuN" line, in kernel order. Old kernels print fewer:
 * 2.4 has only the first four, steal came in 2.6.11, guest in 2.6.24 and
 * guest_nice in 2.6.33. Columns after the tenth (none yet) are ignored. */
enum {
    MW_CPU_USER,
    MW_CPU_NICE,
    MW_CPU_SYSTEM,
    MW_CPU_IDLE,
    MW_CPU_IOWAIT,
    MW_CPU_IRQ,
    MW_CPU_SOFTIRQ,
    MW_CPU_STEAL,
    MW_CPU_GUEST,
    MW_CPU_GUEST_NICE,
    MW_CPU_NCOLS
};
#define MW_CPU_MINCOLS 4

typedef struct mw_cpu_times {
    uint32_t cpu;   /* N of "cpuN" */
    unsigned ncols; /* columns present, MW_CPU_MINCOLS..MW_CPU_NCOLS */
    uint64_t ticks[MW_CPU_NCOLS];
} mw_cpu_times;

/* Bits of mw_procstat.present. */
enum {
    MW_STAT_CTXT = 1 << 0,
    MW_STAT_INTR = 1 << 1,
    MW_STAT_PROCESSES = 1 << 2,
    MW_STAT_BTIME = 1 << 3,
    MW_STAT_PROCS_RUNNING = 1 << 4,
    MW_STAT_PROCS_BLOCKED = 1 << 5,
    MW_STAT_ALL = (1 << 6) - 1
};

typedef struct mw_procstat {
    unsigned present; /* MW_STAT_* of the lines found */
    uint64_t ctxt, intr, processes, btime, procs_running, procs_blocked;
    unsigned ncpus;     /* "cpuN" lines accepted (passed to the callback) */
    unsigned malformed; /* lines rejected: bad numbers, too few columns, CPU
                           numbers not ascending, repeated keys, or a last
                           line without its newline (a truncated read) */
} mw_procstat;

/* Called once per accepted "cpuN" line, in file order (ascending N). */
typedef void (*mw_procstat_cpu_fn)(void *arg, const mw_cpu_times *t);

/* Parse the NUL-terminated contents of /proc/stat. The aggregate "cpu" line
 * and unknown lines (softirq, page, swap, ...) are skipped; a rejected line
 * is counted in out->malformed and parsing goes on with the next one. fn may
 * be NULL. Returns 0, or -1 when there is no "cpu" line at all (not a
 * /proc/stat file). */
int mw_parse_procstat(const char *text, mw_procstat *out, mw_procstat_cpu_fn fn, void *arg);

#endif
