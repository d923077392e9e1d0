/* run.h - `mlwatch run`: run a command and report its energy, CO2 and
 * efficiency (docs/energy.md). */
#ifndef MW_RUN_H
#define MW_RUN_H

#include "../core/config.h"

#include <stddef.h>

/* `mlwatch run --work N --unit NAME`: units of work, for joules per unit. */
typedef struct mw_run_settings {
    double work;
    char unit[64];
    int compare;    /* --compare FILE...: a table of --json reports */
    char cgroup[8]; /* --run-cgroup: auto, v2, v1, none */
} mw_run_settings;
extern const mw_option_group mw_run_options;

/* Runs argv[0..argc) and returns its exit status (128 + signal when a
 * signal ended it; 127 when it could not be started; 2 on usage errors). */
int mw_run_command(const mw_config *cfg, char **argv, size_t argc);

#endif
