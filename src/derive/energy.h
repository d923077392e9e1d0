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
 * interval is the difference of the snapshots' timestamps).
 *
 * Every joule lands somewhere: the workloads (containers, cgroups) and two
 * labelled shares, "unreserved" (idle energy no one reserves) and "system"
 * (processes outside any container, and the kernel). Workloads plus shares
 * equal the node's energy of every interval. */
#ifndef MW_ENERGY_H
#define MW_ENERGY_H

#include "../core/snapshot.h"

#include <stddef.h>
#include <stdint.h>

enum { MW_EC_CPU, MW_EC_DRAM, MW_EC_GPU, MW_EC_OTHER, MW_EC_N };
enum { MW_EK_DYNAMIC, MW_EK_IDLE, MW_EK_N };
/* How a component's energy was obtained in an interval. */
enum { MW_EM_MEASURED, MW_EM_ESTIMATED, MW_EM_N };
/* The labelled shares that are no workload's. */
enum { MW_ES_UNRESERVED, MW_ES_SYSTEM, MW_ES_N };
/* Where an idle floor comes from. */
enum { MW_EF_PRIOR, MW_EF_LEARNT, MW_EF_CONFIGURED, MW_EF_N };

typedef enum {
    MW_IDLE_POLICY_NONE,     /* idle energy goes to the unreserved share */
    MW_IDLE_POLICY_REQUESTS, /* by the Kubernetes containers' CPU requests over the node's CPUs
                              * (cgroup cpu weight), the rest unreserved; by CPU time where no
                              * container has a request */
    MW_IDLE_POLICY_CPU,      /* shared like dynamic energy, by CPU time */
} mw_idle_policy;

/* A container the kubelet allocated a GPU to. */
typedef struct mw_energy_holder {
    char ns[64], pod[254], container[64];
} mw_energy_holder;

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
    /* The containers the kubelet allocated the GPU with this UUID to (its
     * pod-resources API), GPU reservations for the requests policy: fills at
     * most cap and returns how many. NULL: no allocations known. */
    size_t (*gpu_holders)(void *ctx, const char *uuid, struct mw_energy_holder *out, size_t cap);
    void *gpu_holders_ctx;
    /* Idle floors set by hand (--energy-idle-watts), in watts, for the
     * components whose bit (1 << MW_EC_*) is in idle_watts_set; the others
     * are learnt. The GPU figure applies to each GPU. */
    double idle_watts[MW_EC_N];
    unsigned idle_watts_set;
    double floor_tau_s;   /* learnt floors rise toward idle readings with this time constant */
    double idle_util_max; /* node CPU utilization at or below which an interval is idle */
} mw_energy_params;

/* An idle floor rises toward a higher idle reading by 1 - exp(-dt / tau)
 * of the gap each interval (about 1/7 of it per day), and falls at once to
 * any lower reading. */
#define MW_ENERGY_FLOOR_TAU_S (7.0 * 86400)
/* At most this CPU utilization, an interval's power counts as idle. */
#define MW_ENERGY_IDLE_UTIL 0.10
/* A GPU at most this busy with no container on it counts as idle. */
#define MW_ENERGY_GPU_IDLE_UTIL 0.05

/* Defaults for everything, the idle policy given. */
void mw_energy_params_init(mw_energy_params *p, mw_idle_policy policy);

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
    double workloads_joules;                 /* attributed to containers */
    double share[MW_ES_N][MW_EC_N][MW_EK_N]; /* the labelled shares */
    double floor_watts[MW_EC_N];             /* GPUs: summed over devices */
    int floor_source[MW_EC_N];               /* MW_EF_*; GPUs: that of the first */
    int estimated_cpu;                       /* the CPU component came from the model */
    int valid;                               /* 0 for the baseline call */
} mw_energy_interval;
const mw_energy_interval *mw_energy_last(const mw_energy *e);
uint64_t mw_energy_violations(const mw_energy *e);

/* Running totals of one container (namespace, pod, container as exported),
 * measured and estimated together. Returns 0, or -1 if unknown. */
int mw_energy_container(const mw_energy *e, const char *ns, const char *pod, const char *container,
                        double joules[MW_EC_N][MW_EK_N], double *co2_grams);
/* Running totals of a share (MW_ES_*), measured and estimated together. */
void mw_energy_share(const mw_energy *e, int share, double joules[MW_EC_N][MW_EK_N],
                     double *co2_grams);

/* Iterate over tracked totals (state persistence). The callback gets the
 * kind, up to three label values and the values:
 *   'c' container (namespace, pod, container; MW_EC_N x MW_EK_N x MW_EM_N
 *       joules then CO2 grams), 's' share (name, "", ""; the same values),
 *   'n' node source (source, zone, method; joules),
 *   'k' node component (component, kind, method; joules),
 *   'g' node CO2 ("", "", ""; grams),
 *   'f' a learnt idle floor (component, GPU uuid or "", ""; watts). */
typedef void (*mw_energy_visit_fn)(void *ctx, char kind, const char *a, const char *b,
                                   const char *c, const double *values, size_t nvalues);
void mw_energy_visit(const mw_energy *e, mw_energy_visit_fn fn, void *ctx);
/* Restore totals saved by a previous run (before the first step). */
#define MW_ENERGY_VALUES (MW_EC_N * MW_EK_N * MW_EM_N)
void mw_energy_restore_container(mw_energy *e, const char *ns, const char *pod,
                                 const char *container, const double joules[MW_ENERGY_VALUES],
                                 double co2_grams);
void mw_energy_restore_share(mw_energy *e, int share, const double joules[MW_ENERGY_VALUES],
                             double co2_grams);
void mw_energy_restore_component(mw_energy *e, int component, int kind, int method, double joules);
void mw_energy_restore_node_co2(mw_energy *e, double grams);
/* A learnt floor (uuid "" for cpu, dram, other). */
void mw_energy_restore_floor(mw_energy *e, int component, const char *uuid, double watts);
/* For a state file that had no component totals: set them to the sum of
 * the restored containers and shares. */
void mw_energy_restore_components_from_parts(mw_energy *e);
void mw_energy_restore_node(mw_energy *e, const char *source, const char *zone, const char *method,
                            double joules);

extern const char *const mw_energy_component_names[MW_EC_N];
extern const char *const mw_energy_kind_names[MW_EK_N];
extern const char *const mw_energy_method_names[MW_EM_N];
extern const char *const mw_energy_share_names[MW_ES_N];
extern const char *const mw_energy_floor_source_names[MW_EF_N];
/* The index of name in a names table of n, or -1. */
int mw_energy_name_index(const char *const *names, int n, const char *name);

#endif
