/* loadavg.h - parser for /proc/loadavg (exposed for tests and fuzzing). */
#ifndef MW_LOADAVG_H
#define MW_LOADAVG_H

#include <stdint.h>

typedef struct mw_loadavg {
    double load1, load5, load15;
    uint64_t runnable, tasks;
} mw_loadavg;

int mw_parse_loadavg(const char *text, mw_loadavg *out);

#endif
