/* energy_workloads.h - energy, CO2 and GPU time per workload over its whole
 * life: a Kubernetes workload (the pod's owner as the pod watch reduces it:
 * Notebook, PyTorchJob, TrainJob, Job, Deployment, ...; without the watch,
 * the pod), a Slurm job (a cgroup path with a job_N folder) or any other
 * cgroup. Each interval the containers' energy and CO2 (the energy model's
 * totals, differenced) go to their workload, and each GPU a workload used
 * (utilization or memory on it) adds the interval to its GPU seconds. A
 * workload is kept 30 days after it was last seen, across restarts (its
 * own file in the energy state folder, written like the energy state). */
#ifndef MW_ENERGY_WORKLOADS_H
#define MW_ENERGY_WORKLOADS_H

#include "energy.h"

#include <stddef.h>
#include <stdint.h>

#define MW_WORKLOAD_STATE_FILE "workloads.json"
#define MW_WORKLOAD_KEEP_MS (30LL * 86400000)
#define MW_WORKLOAD_MAX 10000

typedef struct mw_workloads mw_workloads;

/* The owner of a Kubernetes pod (pod UID, else namespace and name): 1 with
 * kind and name set, 0 when unknown. */
typedef int (*mw_workload_lookup_fn)(void *ctx, const char *uid, const char *ns, const char *pod,
                                     char kind[32], char name[254]);

mw_workloads *mw_workloads_new(mw_workload_lookup_fn lookup, void *ctx);
void mw_workloads_free(mw_workloads *w);

/* After mw_energy_step(e, snap, ...): the interval of dt_s seconds ending at
 * snap->timestamp_ms. The first call takes the containers' totals as they
 * are (restored ones included) without adding them. Emits the workload
 * families into snap. */
void mw_workloads_step(mw_workloads *w, const mw_energy *e, mw_snapshot *snap, double dt_s);

/* A workload's totals (tests, `mlwatch run`): 0, or -1 when unknown. */
int mw_workloads_get(const mw_workloads *w, const char *kind, const char *ns, const char *name,
                     double joules[MW_EM_N], double *co2_grams, double *gpu_seconds);

/* The workload of a container as exported by the energy model (namespace,
 * pod, container) without a pod watch: Slurm job N for a cgroup path with a
 * job_N folder, else the pod, else the cgroup. */
void mw_workload_of_cgroup(const char *container, char kind[32], char name[254]);

char *mw_workloads_dump(const mw_workloads *w, const char *identity, int64_t now_ms);
int mw_workloads_parse(mw_workloads *w, const char *text, size_t len, const char *identity,
                       char *err, size_t errsize);
/* DIR/workloads.json: 0 restored, 1 none, -1 rejected (set aside as
 * .rejected; err says why). */
int mw_workloads_load(mw_workloads *w, const char *dir, const char *identity, char *err,
                      size_t errsize);
int mw_workloads_save(const mw_workloads *w, const char *dir, const char *identity, int64_t now_ms);

#endif
