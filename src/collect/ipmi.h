/* ipmi.h - node power from the BMC (IPMI DCMI Get Power Reading, in-band).
 *
 * The collector talks to the BMC through a tiny interface so tests can give
 * it a fake node-power source with exact values; the real one loads
 * FreeIPMI (libfreeipmi.so.17, Debian libfreeipmi17) with dlopen, so mlwatch
 * builds and runs where FreeIPMI is not installed. */
#ifndef MW_IPMI_H
#define MW_IPMI_H

#include "../core/options.h"

#include <limits.h>
#include <stddef.h>

typedef struct mw_ipmi_ops {
    /* Open the in-band interface; NULL with a reason in err when there is
     * none (no BMC, no driver, no DCMI). */
    void *(*open)(void *ctx, const char *library, char *err, size_t errsize);
    /* Current node power in watts; returns 1 with *watts set, 0 when the
     * BMC says no measurement is active, -1 on error (reason in err). */
    int (*power)(void *handle, double *watts, char *err, size_t errsize);
    void (*close)(void *handle);
    void *ctx;
} mw_ipmi_ops;

/* Replace the FreeIPMI source (tests); NULL restores it. Call before the
 * collector starts. */
void mw_ipmi_set_ops(const mw_ipmi_ops *ops);

/* The collector's settings: the FreeIPMI library to load ("none": off). */
typedef struct mw_ipmi_settings {
    char freeipmi_library[PATH_MAX];
} mw_ipmi_settings;
extern const mw_option_group mw_ipmi_options;

#endif
