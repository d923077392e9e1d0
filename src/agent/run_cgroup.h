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

/* Which cgroup (--run-cgroup): auto asks systemd for a scope where systemd
 * runs the machine (run_systemd.h), else tries v2, then v1; systemd asks it
 * in any case, falling back like auto. */
typedef enum {
    MW_RUN_CG_AUTO,
    MW_RUN_CG_V2,
    MW_RUN_CG_V1,
    MW_RUN_CG_NONE,
    MW_RUN_CG_SYSTEMD
} mw_run_cg_mode;

typedef struct mw_run_cgroup {
    int version;           /* 2 or 1; 0: none made (see why) */
    char dir[PATH_MAX];    /* absolute folder of the command's cgroup */
    char why[1024];        /* version 0: why none could be made */
    char scope[128];       /* a systemd scope's unit name (systemd removes it) */
    char systemd_why[512]; /* no scope: why not (systemd was asked) */
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

/* Adopt the cgroup systemd made for the scope UNIT holding process PID:
 * its folder from /proc/PID/cgroup (v2, else v1 cpuacct), which must end
 * in UNIT. 0, or -1 with why. */
int mw_run_cgroup_adopt(mw_run_cgroup *cg, int pid, const char *unit, char *why, size_t whysize);

/* In the forked child before exec: move the calling process in (open and
 * write only: async-signal-safe). 0 or -1. */
int mw_run_cgroup_enter(const mw_run_cgroup *cg);

/* CPU time of everything that ran in it (seconds): v2 cpu.stat, v1
 * cpuacct.usage and cpuacct.stat. 0, or -1 when unreadable. */
int mw_run_cgroup_cpu(const mw_run_cgroup *cg, double *cpu, double *user, double *sys);

/* The processes in it now (cgroup.procs), at most cap. */
size_t mw_run_cgroup_pids(const mw_run_cgroup *cg, int *pids, size_t cap);

/* Remove it (a scope: forget it, systemd removes it once empty); -1
 * (errno) when processes of the command still run there. */
int mw_run_cgroup_remove(mw_run_cgroup *cg);

/* One sentence for the report: "systemd scope U.scope, cgroup v2 DIR",
 * "cgroup v2 /sys/fs/cgroup/unified/..." or "process tree: WHY", each
 * with "(no systemd scope: WHY)" when systemd was asked and failed. */
void mw_run_cgroup_describe(const mw_run_cgroup *cg, char *out, size_t size);

#endif
