/* registry.c - every collector compiled into mlwatch, in the order they run.
 *
 * Order matters only where one collector feeds shared state another reads:
 * cgroup fills the process-to-container map before anything attributes by
 * process. */
#include "collector.h"

#include <stddef.h>

extern const mw_collector mw_collector_cpu, mw_collector_cpufreq, mw_collector_memory,
    mw_collector_vmstat, mw_collector_numa, mw_collector_pressure, mw_collector_loadavg,
    mw_collector_hwmon, mw_collector_infiniband, mw_collector_rapl, mw_collector_netdev,
    mw_collector_diskstats, mw_collector_filesystem, mw_collector_cgroup, mw_collector_gpu,
    mw_collector_self;
extern const mw_collector mw_collector_ipmi;
extern const mw_collector mw_collector_amdgpu_ras;
extern const mw_collector mw_collector_processes;
extern const mw_collector mw_collector_netstat, mw_collector_sockstat, mw_collector_softnet,
    mw_collector_conntrack, mw_collector_filefd, mw_collector_cpuinfo, mw_collector_osinfo,
    mw_collector_netclass;

const mw_collector *const mw_collectors[] = {
    &mw_collector_cpu, &mw_collector_cpufreq, &mw_collector_memory, &mw_collector_vmstat,
    &mw_collector_numa, &mw_collector_pressure, &mw_collector_loadavg, &mw_collector_hwmon,
    &mw_collector_infiniband, &mw_collector_rapl, &mw_collector_netdev, &mw_collector_diskstats,
    &mw_collector_filesystem,
    /* protocol, socket, softirq, conntrack, fd, CPU model, OS and link state */
    &mw_collector_netstat, &mw_collector_sockstat, &mw_collector_softnet, &mw_collector_conntrack,
    &mw_collector_filefd, &mw_collector_cpuinfo, &mw_collector_osinfo, &mw_collector_netclass,
    &mw_collector_cgroup, &mw_collector_gpu,
    &mw_collector_processes,  /* the busiest processes (src/collect/processes.c) */
    &mw_collector_amdgpu_ras, /* AMD RAS counters from sysfs (src/collect/amdgpu_ras.c) */
    &mw_collector_self, &mw_collector_ipmi, /* node power from the BMC (src/collect/ipmi.c) */
};

const size_t mw_ncollectors = sizeof(mw_collectors) / sizeof(mw_collectors[0]);
