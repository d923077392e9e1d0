/* run_cgroup.h - the cgroup `mlwatch run` puts its command in, so that every
 * process the command starts counts, daemons included (a double fork leaves
 * the process tree, never the cgroup). A child of mlwatch's own cgroup in
 * the cgroup v2 hierarchy (pure v2, or the unified/ mount of a hybrid host)
 * or in the cgroup v1 cpuacct hierarchy (v1 and hybrid hosts); where
 * neither can be made, the caller follows the process tree and says why
 * (docs/energy.md). */
#ifndef MW_RUN_CGROUP_H
#define MW_RUN_CGROUP_H

#include <limits.h>
#include <stddef.h>

/* Which hierarchy (--run-cgroup): auto tries v2, then v1. */
typedef enum { MW_RUN_CG_AUTO, MW_RUN_CG_V2, MW_RUN_CG_V1, MW_RUN_CG_NONE } mw_run_cg_mode;

typedef struct mw_run_cgroup {
    int version;        /* 2 or 1; 0: none made (see why) */
    char dir[PATH_MAX]; /* absolute folder of the command's cgroup */
    char why[1024];     /* version 0: why none could be made */
} mw_run_cgroup;

/* The folder of the own cgroup in one hierarchy, from the texts of
 * /proc/self/mountinfo and /proc/self/cgroup: version 2 (the cgroup2 mount,
 * "0::PATH") or 1 (the cgroup mount whose options name cpuacct, the line
 * whose controllers include cpuacct). The mount's own root (a container's
 * bind mount of a sub-tree) is taken off the path. 0, or -1 with why. */
int mw_run_cgroup_locate(const char *mountinfo, const char *self_cgroup, int version, char *dir,
                         size_t size, char *why, size_t whysize);

/* Make the command's cgroup NAME under the own cgroup of the hierarchy
 * the mode allows (auto: v2, else v1), from this process's files. */
void mw_run_cgroup_create(mw_run_cgroup *cg, mw_run_cg_mode mode, const char *name);

/* In the forked child before exec: move the calling process in (open and
 * write only: async-signal-safe). 0 or -1. */
int mw_run_cgroup_enter(const mw_run_cgroup *cg);

/* CPU time of everything that ran in it (seconds): v2 cpu.stat, v1
 * cpuacct.usage and cpuacct.stat. 0, or -1 when unreadable. */
int mw_run_cgroup_cpu(const mw_run_cgroup *cg, double *cpu, double *user, double *sys);

/* The processes in it now (cgroup.procs), at most cap. */
size_t mw_run_cgroup_pids(const mw_run_cgroup *cg, int *pids, size_t cap);

/* Remove it; -1 (errno) when processes of the command still run there. */
int mw_run_cgroup_remove(mw_run_cgroup *cg);

/* One sentence for the report: "cgroup v2 /sys/fs/cgroup/unified/..." or
 * "process tree: WHY". */
void mw_run_cgroup_describe(const mw_run_cgroup *cg, char *out, size_t size);

#endif
