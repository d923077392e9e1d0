/* energy_module.h - helpers of the energy module shared with `mlwatch run`
 * (src/agent/run.c): settings from the configuration and host lookups. */
#ifndef MW_ENERGY_MODULE_H
#define MW_ENERGY_MODULE_H

#include "../core/buf.h"
#include "../core/config.h"
#include "../core/hostfs.h"
#include "carbon.h"
#include "energy.h"

/* The energy module's settings: the idle policy, the estimation model and
 * the carbon intensity. */
typedef struct mw_energy_settings {
    char idle_policy[16]; /* none, requests, cpu */
    double idle_watts_per_cpu, max_watts_per_cpu;
    char idle_watts[MW_EC_N][32]; /* --energy-idle-watts COMPONENT=W */
    size_t nidle_watts;
    mw_carbon_settings carbon;
} mw_energy_settings;
extern const mw_option_group mw_energy_options;

/* Model parameters from cfg (cpu_weight left unset). Returns 0, or -1 when
 * the coefficients are inconsistent. */
int mw_energy_params_from_config(const mw_config *cfg, mw_energy_params *p);
/* The carbon source cfg names (NULL when none). Returns 0 or -1 with err. */
int mw_energy_carbon_from_config(const mw_config *cfg, mw_carbon **out, char *err, size_t errsize);
/* A cgroup's CPU weight as v1 shares (1024 per requested CPU). 0 or -1. */
int mw_energy_cgroup_weight(const mw_hostfs *host, mw_buf *scratch, const char *cgroup,
                            double *shares);
/* The agent's energy state folder: DATA_DIR/state. */
void mw_energy_state_dir(const mw_config *cfg, char *out, size_t size);
/* This machine's identity for the state file: etc/machine-id, else the host
 * name, else "unknown". */
void mw_energy_identity(const mw_hostfs *host, char *out, size_t size);

#endif
