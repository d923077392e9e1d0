/* hwmon.h - helpers of the hwmon collector (exposed for tests and fuzzing). */
#ifndef MW_HWMON_H
#define MW_HWMON_H

#include <stdint.h>

typedef enum { MW_HWMON_TEMP, MW_HWMON_POWER, MW_HWMON_ENERGY, MW_HWMON_IN } mw_hwmon_kind;

/* Recognise a sensor value file: "temp3_input" -> TEMP, 3; "power1_input"
 * and "power1_average" -> POWER, 1 (*average set for the latter);
 * "energy1_input" -> ENERGY; "in0_input" -> IN. Returns 0, or -1 for any
 * other name (temp1_max, temp1_label, name, ...). */
int mw_hwmon_parse_file(const char *name, mw_hwmon_kind *kind, unsigned *index, int *average);

/* Parse a signed decimal sysfs value ("-5000\n"). Returns 0 or -1. */
int mw_hwmon_parse_value(const char *text, int64_t *out);

#endif
