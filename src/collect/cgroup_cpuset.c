/* cgroup_cpuset.c - a cgroup's effective cpuset read from the host (v2,
 * else v1's cpuset hierarchy); see cgroup_cpuset.h. */
#include "cgroup_cpuset.h"
#include "../core/parse.h"

#include <stdio.h>
#include <string.h>

#define CPUSET_FILE_MAX 65536 /* "0-3,8,..." for every CPU of the largest hosts */

int mw_cg_cpuset_path(const char *cgroup, mw_cg_cpuset_file file, int v1, char *out, size_t size)
{
    static const char *const v2_names[] = {"cpuset.cpus.effective", "cpuset.mems.effective"};
    static const char *const v1_names[] = {"cpuset.effective_cpus", "cpuset.effective_mems"};
    int n = v1 ? snprintf(out, size, "sys/fs/cgroup/cpuset%s/%s", cgroup, v1_names[file])
               : snprintf(out, size, "sys/fs/cgroup%s/%s", cgroup, v2_names[file]);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

int mw_cg_read_cpuset(const mw_hostfs *host, const char *cgroup, mw_cg_cpuset_file file, mw_buf *b,
                      uint64_t *bits, size_t nbits)
{
    if (!cgroup[0] || strstr(cgroup, "..")) return -1;
    char path[1024];
    if (mw_cg_cpuset_path(cgroup, file, 0, path, sizeof(path)) < 0 ||
        mw_hostfs_read(host, path, b, CPUSET_FILE_MAX) < 0) {
        if (mw_cg_cpuset_path(cgroup, file, 1, path, sizeof(path)) < 0 ||
            mw_hostfs_read(host, path, b, CPUSET_FILE_MAX) < 0)
            return -1;
    }
    return mw_parse_cpulist(b->data ? b->data : "", bits, nbits);
}
