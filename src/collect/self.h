/* self.h - parser for /proc/PID/stat (exposed for tests and fuzzing): the
 * agent's own (self.c) and every process's (processes.c). */
#ifndef MW_SELF_H
#define MW_SELF_H

#include <stdint.h>

typedef struct mw_proc_stat {
    char comm[32];                     /* field 2 without its parentheses (Linux: 15 bytes) */
    uint64_t flags;                    /* field 9: PF_KTHREAD 0x00200000, a kernel thread */
    uint64_t utime_ticks, stime_ticks; /* fields 14 and 15 */
    uint64_t starttime_ticks;          /* field 22: its start after boot */
    uint64_t threads;                  /* field 20 */
    uint64_t vsize_bytes;              /* field 23 */
    uint64_t rss_pages;                /* field 24 */
} mw_proc_stat;

/* "1234 (mlwatch) S 1 1234 ... \n". The command name may hold spaces and
 * parentheses, so fields are counted from the last ')'. Returns 0 or -1. */
int mw_parse_proc_stat(const char *text, mw_proc_stat *out);

#endif
