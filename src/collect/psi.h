/* psi.h - parser for pressure stall information files, shared by the host
 * pressure collector (/proc/pressure/cpu, memory, io) and the cgroup collector
 * (cpu.pressure, memory.pressure, io.pressure). */
#ifndef MW_PSI_H
#define MW_PSI_H

#include <stdint.h>

typedef struct mw_psi {
    int has_some, has_full;
    uint64_t some_total_us, full_total_us; /* cumulative stall time, microseconds */
    double some_avg10, full_avg10;         /* percent, for information */
} mw_psi;

/* "some avg10=0.00 avg60=0.00 avg300=0.00 total=12345\n
 *  full avg10=0.00 avg60=0.00 avg300=0.00 total=678\n"
 * Returns 0, or -1 when malformed or when neither line is present. */
int mw_parse_psi(const char *text, mw_psi *out);

#endif
