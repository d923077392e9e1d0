/* cpuinfo.h - parser for /proc/cpuinfo (exposed for tests and fuzzing). */
#ifndef MW_CPUINFO_H
#define MW_CPUINFO_H

#include <stddef.h>

#define MW_CPUINFO_MAX_CPUS 8192

typedef struct mw_cpuinfo_cpu {
    char cpu[16];        /* processor */
    char vendor[32];     /* vendor_id (x86), CPU implementer (arm64) */
    char model_name[96]; /* model name (x86; some arm64 kernels) */
    char family[16];     /* cpu family (x86), CPU architecture (arm64) */
    char model[16];      /* model (x86), CPU part (arm64) */
    char stepping[16];   /* stepping (x86), CPU revision (arm64) */
    char microcode[24];  /* microcode (x86) */
    char package[16];    /* physical id (x86) */
    char core[16];       /* core id (x86) */
} mw_cpuinfo_cpu;

/* Parse /proc/cpuinfo into at most max CPUs (*n set to their number). Each
 * CPU starts at a "processor : N" line (N decimal); the keys above fill the
 * current CPU, other keys and lines before the first CPU (arm64's header,
 * "Hardware", "Serial") are ignored; values too long for their field are
 * cut. Returns the number of malformed lines (no ':', a non-numeric
 * processor number, more than max CPUs: each counted once). */
int mw_parse_cpuinfo(const char *text, mw_cpuinfo_cpu *cpus, size_t max, size_t *n);

/* From parsed CPUs: distinct packages (physical id; 1 when no CPU has one)
 * and cores (distinct physical id + core id; = threads when no core id). */
void mw_cpuinfo_topology(const mw_cpuinfo_cpu *cpus, size_t n, size_t *packages, size_t *cores);

#endif
