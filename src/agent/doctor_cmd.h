/* doctor_cmd.h - `mlwatch doctor`: the findings of the agent at --listen,
 * else of the doctor module run in-process for --window (docs/doctor.md). */
#ifndef MW_DOCTOR_CMD_H
#define MW_DOCTOR_CMD_H

#include "../core/config.h"

#include <stddef.h>

/* Exit status 0 (nothing found), 1 (findings), 3 (error); 2 (usage) comes
 * from main. It takes no positional arguments (rest is unused). */
int mw_doctor_command(const mw_config *cfg, char **rest, size_t nrest);

#endif
