/* cgroup_cpuset.h - a cgroup's effective cpuset (allowed CPUs and memory
 * nodes), read from the host: where cgroup v2 and v1 keep the files, and
 * their parsing. The doctor's NUMA rule (derive/history.c) reads the
 * cpusets of the containers that use a GPU through it; the cgroup collector
 * does not report them. */
#ifndef MW_CGROUP_CPUSET_H
#define MW_CGROUP_CPUSET_H

#include "../core/buf.h"
#include "../core/hostfs.h"

#include <stddef.h>
#include <stdint.h>

typedef enum mw_cg_cpuset_file {
    MW_CG_CPUS_EFFECTIVE, /* the CPUs the cgroup may run on */
    MW_CG_MEMS_EFFECTIVE, /* the NUMA nodes it may allocate memory on */
} mw_cg_cpuset_file;

/* The host path (relative to --root) of one of CGROUP's effective cpuset
 * files: on cgroup v2 (v1 = 0) sys/fs/cgroup<CGROUP>/cpuset.cpus.effective
 * (or cpuset.mems.effective), on v1 (v1 = 1) the cpuset hierarchy's
 * sys/fs/cgroup/cpuset<CGROUP>/cpuset.effective_cpus (effective_mems).
 * CGROUP starts with '/'. Returns 0, or -1 when the path does not fit. */
int mw_cg_cpuset_path(const char *cgroup, mw_cg_cpuset_file file, int v1, char *out, size_t size);

/* Read one of CGROUP's effective cpuset files (the v2 file, else the v1
 * one) into b and parse it into a bitmap of nbits bits. Returns the number
 * of members, or -1 when neither file can be read or the list is malformed
 * or names a member beyond nbits. A CGROUP that climbs ("..") or is empty is
 * refused (-1) without reading. */
int mw_cg_read_cpuset(const mw_hostfs *host, const char *cgroup, mw_cg_cpuset_file file, mw_buf *b,
                      uint64_t *bits, size_t nbits);

#endif
