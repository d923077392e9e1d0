/* vmstat.h - parser for /proc/vmstat (exposed for tests and fuzzing). */
#ifndef MW_VMSTAT_H
#define MW_VMSTAT_H

#include <stdint.h>

#define MW_VMSTAT_MAXFIELDS 32

typedef struct mw_vmstat {
    uint32_t present;                    /* bit i: known counter i was found */
    uint64_t value[MW_VMSTAT_MAXFIELDS]; /* as in the file */
    unsigned malformed;                  /* known lines with a bad value, lines that are not
                                            "name value", a last line without its newline */
} mw_vmstat;

/* Index of a known counter ("pgfault", "oom_kill", ...), or -1. */
int mw_vmstat_field(const char *name);

/* Parse the NUL-terminated contents of /proc/vmstat; unknown counters are
 * skipped. Returns 0, or -1 when no known counter was found. */
int mw_parse_vmstat(const char *text, mw_vmstat *out);

#endif
