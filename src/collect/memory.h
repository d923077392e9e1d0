/* memory.h - parser for /proc/meminfo (exposed for tests and fuzzing). */
#ifndef MW_MEMORY_H
#define MW_MEMORY_H

#include <stdint.h>

#define MW_MEMINFO_MAXFIELDS 64

typedef struct mw_meminfo {
    uint64_t present;                     /* bit i: known field i was found */
    uint64_t value[MW_MEMINFO_MAXFIELDS]; /* bytes for "kB" fields, else the count */
    unsigned malformed;                   /* known lines with a bad value or unit, lines without a
                                             ':', and a last line without its newline (truncated) */
} mw_meminfo;

/* Index of a known /proc/meminfo field ("MemTotal", "Active(anon)", ...),
 * or -1. Unknown fields are skipped by the parser. */
int mw_meminfo_field(const char *key);

/* Parse the NUL-terminated contents of /proc/meminfo. A rejected line is
 * counted in out->malformed and parsing goes on. Returns 0, or -1 when
 * MemTotal is missing (not a usable meminfo file). */
int mw_parse_meminfo(const char *text, mw_meminfo *out);

#endif
