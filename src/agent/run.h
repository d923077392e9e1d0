/* run.h - `mlwatch run`: run a command and report its energy, CO2 and
 * efficiency (docs/energy.md). */
#ifndef MW_RUN_H
#define MW_RUN_H

#include "../core/config.h"

#include <stddef.h>

/* Runs argv[0..argc) and returns its exit status (128 + signal when a
 * signal ended it; 127 when it could not be started; 2 on usage errors). */
int mw_run_command(const mw_config *cfg, char **argv, size_t argc);

#endif
