/* doctor.h - the doctor module (findings every cycle, mlwatch_finding,
 * /api/v1/findings). Rules: findings.h; the `mlwatch doctor` command:
 * agent/doctor_cmd.h. */
#ifndef MW_DOCTOR_H
#define MW_DOCTOR_H

#include "../agent/module.h"
#include "findings.h"

extern const mw_module mw_doctor_module;

/* The doctor's settings (doctor_config.c): which workload `mlwatch doctor`
 * looks at, and the rules' thresholds for the module and the command. */
typedef struct mw_doctor_settings {
    char ns[128];
    char pod[256];
    char pid[24];
    int64_t window_ms; /* 0: the agent's whole history, or 10s when sampling */
    struct mw_doctor_thresholds t;
} mw_doctor_settings;
extern const mw_option_group mw_doctor_options;

/* The findings of a doctor module's state over the last window_ms (0: its
 * whole history), ranked; the caller frees out with dr_list_free. */
void mw_doctor_findings(void *state, int64_t window_ms, dr_list *out);

#endif
