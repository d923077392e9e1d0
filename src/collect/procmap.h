/* procmap.h - which container (and pod) each process belongs to.
 *
 * GPU and energy attribution see PIDs (NVML lists the processes using a
 * GPU); they need namespace/pod/container. The cgroup collector fills the map
 * from each container's cgroup.procs during its walk; a PID not seen there
 * (started since the walk) is resolved from /proc/<pid>/cgroup and the
 * containers known from the last walk. Thread-safe: lookups may come from a
 * GPU thread while the walk updates the map. */
#ifndef MW_PROCMAP_H
#define MW_PROCMAP_H

#include "../core/hostfs.h"

#include <stddef.h>

typedef struct mw_procmap mw_procmap;

typedef struct mw_container_ref {
    char id[96];      /* container ID (runtime's), or "" for non-container cgroups */
    char pod_uid[48]; /* Kubernetes pod UID, "" outside Kubernetes */
    char namespace_[128];
    char pod[256];
    char container[128];
    char cgroup[512]; /* cgroup path relative to the hierarchy root, "/kubepods.slice/..." */
} mw_container_ref;

mw_procmap *mw_procmap_new(const mw_hostfs *host);
void mw_procmap_free(mw_procmap *m);

/* A walk replaces the whole map: begin, set each (pid, container), end. */
void mw_procmap_begin(mw_procmap *m);
void mw_procmap_set(mw_procmap *m, int pid, const mw_container_ref *ref);
void mw_procmap_end(mw_procmap *m);
/* During a walk, before its end: the container name of the cgroup already set
 * at path becomes container (names found once the whole walk is known). */
void mw_procmap_rename(mw_procmap *m, const char *cgroup, const char *container);

/* Returns 0 and fills out when pid is in a known container or cgroup, -1 when
 * it is not in any reported cgroup (or does not exist). */
int mw_procmap_lookup(mw_procmap *m, int pid, mw_container_ref *out);
size_t mw_procmap_size(mw_procmap *m);

#endif
