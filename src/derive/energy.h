/* energy.h - node energy from the power sources a cycle's snapshot holds, and
 * its attribution to containers, interval by interval.
 *
 * The model (docs/energy.md) reads only samples other collectors emitted:
 * RAPL zones, GPU energy/power, hwmon power meters, IPMI DCMI node power,
 * node CPU time and per-container CPU time and GPU shares. Each call of
 * mw_energy_step() differences the counters since the previous call, splits
 * each component's energy of the interval into idle and dynamic parts,
 * attributes them, and emits running totals. Whatever is not attributed goes
 * to the unattributed remainder (empty namespace, pod and container), so the
 * parts always add up to the node's energy of the interval; the step checks
 * that and counts every interval where it does not hold within 0.1%.
 *
 * Pure computation on snapshots: no files, no threads, no clock (the
 * interval is the difference of the snapshots' timestamps). */
#ifndef MW_ENERGY_H
#define MW_ENERGY_H

#include "../core/snapshot.h"

#include <stddef.h>
#include <stdint.h>

enum { MW_EC_CPU, MW_EC_DRAM, MW_EC_GPU, MW_EC_OTHER, MW_EC_N };
enum { MW_EK_DYNAMIC, MW_EK_IDLE, MW_EK_N };

typedef enum {
    MW_IDLE_NONE,     /* idle energy stays unattributed */
    MW_IDLE_REQUESTS, /* shared by the containers' CPU requests (cgroup cpu weight) */
    MW_IDLE_CPU,      /* shared like dynamic energy, by CPU time */
} mw_idle_policy;

typedef struct mw_energy_params {
    double idle_watts_per_cpu; /* estimation model, at 0% utilization */
    double max_watts_per_cpu;  /* estimation model, at 100% utilization */
    mw_idle_policy idle_policy;
    size_t max_containers; /* bound on tracked containers; the rest is unattributed */
    /* Reads a container's CPU weight for the requests policy (cgroup path as
     * in mlwatch_container_info); returns 0 and sets *weight, or -1. NULL: no
     * weights (requests policy attributes nothing). */
    int (*cpu_weight)(void *ctx, const char *cgroup, double *weight);
    void *cpu_weight_ctx;
} mw_energy_params;

/* Defaults: Cloud Carbon Footprint's AWS coefficients (docs/energy.md). */
#define MW_ENERGY_IDLE_WATTS_PER_CPU 0.74
#define MW_ENERGY_MAX_WATTS_PER_CPU 3.5

typedef struct mw_energy mw_energy;

mw_energy *mw_energy_new(const mw_energy_params *p);
void mw_energy_free(mw_energy *e);

/* One interval ending at snap->timestamp_ms. intensity is the carbon
 * intensity of the interval in gCO2eq/kWh, or < 0 when unknown (no CO2 is
 * added). Emits the energy and CO2 families into snap. The first call only
 * takes the counters' baselines. */
void mw_energy_step(mw_energy *e, mw_snapshot *snap, double intensity);

/* What the last interval measured, for `mlwatch run` and tests. */
typedef struct mw_energy_interval {
    double seconds;
    double node_joules;  /* the whole the parts add up to */
    double parts_joules; /* sum of everything attributed and unattributed */
    double component[MW_EC_N][MW_EK_N];
    int estimated_cpu; /* the CPU component came from the model */
    int valid;         /* 0 for the baseline call */
} mw_energy_interval;
const mw_energy_interval *mw_energy_last(const mw_energy *e);
uint64_t mw_energy_violations(const mw_energy *e);

/* Running totals of one container (namespace, pod, container as exported;
 * all empty = the unattributed remainder). Returns 0, or -1 if unknown. */
int mw_energy_container(const mw_energy *e, const char *ns, const char *pod, const char *container,
                        double joules[MW_EC_N][MW_EK_N], double *co2_grams);

/* Iterate over tracked totals (state persistence): containers and node
 * sources. The callback gets the kind ('c' container, 'n' node source), up
 * to three label values, and the values. */
typedef void (*mw_energy_visit_fn)(void *ctx, char kind, const char *a, const char *b,
                                   const char *c, const double *values, size_t nvalues);
void mw_energy_visit(const mw_energy *e, mw_energy_visit_fn fn, void *ctx);
/* Restore totals saved by a previous run (before the first step). */
void mw_energy_restore_container(mw_energy *e, const char *ns, const char *pod,
                                 const char *container, const double joules[MW_EC_N][MW_EK_N],
                                 double co2_grams);
void mw_energy_restore_node(mw_energy *e, const char *source, const char *zone, const char *method,
                            double joules);

extern const char *const mw_energy_component_names[MW_EC_N];
extern const char *const mw_energy_kind_names[MW_EK_N];

#endif
