/* infiniband.h - parsers for InfiniBand port sysfs files (exposed for tests
 * and fuzzing). */
#ifndef MW_INFINIBAND_H
#define MW_INFINIBAND_H

#include <stddef.h>

/* ports/N/state: "4: ACTIVE" -> code 4, name "ACTIVE" (the name is cut to
 * size). Trailing blanks and newline are ignored. Returns 0 or -1. */
int mw_ib_parse_state(const char *s, unsigned *code, char *name, size_t size);

/* ports/N/rate: "200 Gb/sec (4X HDR)", "2.5 Gb/sec (1X SDR)" -> bytes per
 * second (200 Gb/s = 25e9 B/s). Returns 0 or -1. */
int mw_ib_parse_rate(const char *s, double *bytes_per_second);

#endif
