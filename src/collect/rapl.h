/* rapl.h - helpers of the RAPL collector (exposed for tests and fuzzing). */
#ifndef MW_RAPL_H
#define MW_RAPL_H

#include <stdint.h>

/* Energy (µJ) consumed between two readings of a RAPL energy_uj counter that
 * counts from 0 up to max_range (max_energy_range_uj) and wraps to 0:
 *
 *   now >= last:        now - last
 *   now <  last:        max_range - last + now       (one wrap)
 *
 * No +1 is added for the step from max_range back to 0: the hardware counter
 * is a 32-bit count of energy units (15.3 to 61 µJ) that the kernel scales
 * to µJ, so the real modulus is max_range + one energy unit, which sysfs
 * does not tell; adding 1 µJ would be no more exact. The error is below one
 * energy unit per wrap (a package wraps every few minutes to hours). A wrap
 * cannot be told from a counter that restarted, nor two wraps from one: the
 * collection interval must stay below the wrap period (262 kJ / power:
 * about 10 minutes at 400 W). When last > max_range (inconsistent: the
 * counter was reset or the range changed), the counter is taken to have
 * restarted from 0 and now is returned. */
uint64_t mw_rapl_delta(uint64_t last, uint64_t now, uint64_t max_range);

/* Parse a powercap entry name: "intel-rapl:0" -> 0, sub -1; "intel-rapl:0:2"
 * -> 0, 2. Anything else (intel-rapl-mmio:0, intel-rapl) returns -1. */
int mw_rapl_parse_entry(const char *name, int *pkg, int *sub);

#endif
