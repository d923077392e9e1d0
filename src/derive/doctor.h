/* doctor.h - the doctor module (findings every cycle, mlwatch_finding,
 * /api/v1/findings). Rules: findings.h; the `mlwatch doctor` command:
 * agent/doctor_cmd.h. */
#ifndef MW_DOCTOR_H
#define MW_DOCTOR_H

#include "../agent/module.h"
#include "findings.h"

extern const mw_module mw_doctor_module;

/* The findings of a doctor module's state over the last window_ms (0: its
 * whole history), ranked; the caller frees out with dr_list_free. */
void mw_doctor_findings(void *state, int64_t window_ms, dr_list *out);

#endif
