/* test_run_cgroup.c - where `mlwatch run` makes its command's cgroup
 * (src/agent/run_cgroup.c): the own cgroup's folder in the v2 hierarchy
 * and in the v1 cpuacct one, from /proc/self/mountinfo and
 * /proc/self/cgroup texts of a pure v2 host, a hybrid host (v1
 * controllers, v2 at unified/), a v1 host with cpu,cpuacct co-mounted, and
 * a container whose mount shows a sub-tree; and the reasons when a
 * hierarchy is missing. The real hierarchies are exercised by
 * integ_energy_run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "agent/run_cgroup.h"

#include <limits.h>
#include <string.h>

static const char hybrid_mounts[] =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
static const char hybrid_self[] = "4:memory:/user.slice\n"
                                  "2:cpuacct:/user.slice/session-3.scope\n"
                                  "1:cpu:/user.slice\n"
                                  "0::/user.slice/session-3.scope\n";

static void locate(const char *mounts, const char *self, int version, const char *want_dir,
                   const char *want_why)
{
    char dir[PATH_MAX] = "", why[512] = "";
    int rc = mw_run_cgroup_locate(mounts, self, version, dir, sizeof(dir), why, sizeof(why));
    if (want_dir) {
        assert_int_equal(rc, 0);
        assert_string_equal(dir, want_dir);
    } else {
        assert_int_equal(rc, -1);
        assert_string_equal(why, want_why);
    }
}

static void hybrid_host(void **state)
{
    (void)state;
    locate(hybrid_mounts, hybrid_self, 2, "/sys/fs/cgroup/unified/user.slice/session-3.scope",
           NULL);
    locate(hybrid_mounts, hybrid_self, 1, "/sys/fs/cgroup/cpuacct/user.slice/session-3.scope",
           NULL);
}

static void pure_v2_host(void **state)
{
    (void)state;
    const char *mounts = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 "
                         "rw,nsdelegate,memory_recursiveprot\n";
    locate(mounts, "0::/system.slice/ssh.service\n", 2, "/sys/fs/cgroup/system.slice/ssh.service",
           NULL);
    /* The root cgroup: its folder is the mount point itself. */
    locate(mounts, "0::/\n", 2, "/sys/fs/cgroup", NULL);
    locate(mounts, "0::/\n", 1, NULL, "no cgroup v1 cpuacct hierarchy is mounted");
}

static void v1_host(void **state)
{
    (void)state;
    /* cpu and cpuacct co-mounted: the controllers list names both. */
    const char *mounts =
        "25 24 0:22 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
        "27 25 0:24 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
        "28 25 0:25 / /sys/fs/cgroup/cpuset rw,nosuid - cgroup cgroup rw,cpuset\n";
    const char *self = "3:cpuset:/\n2:cpu,cpuacct:/slurm/uid_1000/job_42\n1:name=systemd:/\n";
    locate(mounts, self, 1, "/sys/fs/cgroup/cpu,cpuacct/slurm/uid_1000/job_42", NULL);
    locate(mounts, self, 2, NULL, "no cgroup v2 hierarchy is mounted");
    /* A cpuset line must not count as cpuacct ("cpuacct" is a word). */
    locate(mounts, "3:cpuset:/a\n", 1, NULL, "/proc/self/cgroup names no cgroup v1 cpuacct cgroup");
}

static void container_sub_tree(void **state)
{
    (void)state;
    /* A container's cgroup namespace off: the mount shows its own sub-tree,
     * /proc/self/cgroup the full path. */
    const char *mounts = "800 790 0:26 /kubepods/pod1/abc /sys/fs/cgroup ro,nosuid - cgroup2 "
                         "cgroup2 rw\n";
    locate(mounts, "0::/kubepods/pod1/abc\n", 2, "/sys/fs/cgroup", NULL);
    locate(mounts, "0::/kubepods/pod1/abc/sub\n", 2, "/sys/fs/cgroup/sub", NULL);
    locate(mounts, "0::/kubepods/pod1/abcdef\n", 2, NULL,
           "the own cgroup v2 cgroup /kubepods/pod1/abcdef is outside its mount /sys/fs/cgroup "
           "(root /kubepods/pod1/abc)");
    locate(mounts, "", 2, NULL, "/proc/self/cgroup names no cgroup v2 cgroup");
}

static void describe(void **state)
{
    (void)state;
    mw_run_cgroup cg;
    memset(&cg, 0, sizeof(cg));
    char out[2048];
    mw_run_cgroup_create(&cg, MW_RUN_CG_NONE, "x");
    mw_run_cgroup_describe(&cg, out, sizeof(out));
    assert_string_equal(out, "process tree: --run-cgroup none");
    double cpu = -1, user = -1, sys = -1;
    assert_int_equal(mw_run_cgroup_cpu(&cg, &cpu, &user, &sys), -1);
    cg.version = 1;
    strcpy(cg.dir, "/sys/fs/cgroup/cpuacct/mlwatch-run-7");
    mw_run_cgroup_describe(&cg, out, sizeof(out));
    assert_string_equal(out, "cgroup v1 /sys/fs/cgroup/cpuacct/mlwatch-run-7");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hybrid_host), cmocka_unit_test(pure_v2_host),
        cmocka_unit_test(v1_host),     cmocka_unit_test(container_sub_tree),
        cmocka_unit_test(describe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
