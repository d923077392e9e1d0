/* test_cgroup_cpuset.c - where a cgroup's effective cpuset lives on cgroup
 * v2 and v1, and reading it with the v1 fallback (src/collect/cgroup_cpuset.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/cgroup_cpuset.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>

static char root[256];

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof(root), "/tmp/mlwatch-cpuset-XXXXXX");
    return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static void paths(void **state)
{
    (void)state;
    char out[128];
    assert_int_equal(
        mw_cg_cpuset_path("/kubepods.slice/a.scope", MW_CG_CPUS_EFFECTIVE, 0, out, sizeof(out)), 0);
    assert_string_equal(out, "sys/fs/cgroup/kubepods.slice/a.scope/cpuset.cpus.effective");
    assert_int_equal(
        mw_cg_cpuset_path("/kubepods/pod1/c", MW_CG_MEMS_EFFECTIVE, 0, out, sizeof(out)), 0);
    assert_string_equal(out, "sys/fs/cgroup/kubepods/pod1/c/cpuset.mems.effective");
    assert_int_equal(
        mw_cg_cpuset_path("/kubepods/pod1/c", MW_CG_CPUS_EFFECTIVE, 1, out, sizeof(out)), 0);
    assert_string_equal(out, "sys/fs/cgroup/cpuset/kubepods/pod1/c/cpuset.effective_cpus");
    assert_int_equal(
        mw_cg_cpuset_path("/kubepods/pod1/c", MW_CG_MEMS_EFFECTIVE, 1, out, sizeof(out)), 0);
    assert_string_equal(out, "sys/fs/cgroup/cpuset/kubepods/pod1/c/cpuset.effective_mems");
    /* "sys/fs/cgroup/x/cpuset.cpus.effective" is 37 bytes: 38 fit, 37 do not */
    assert_int_equal(mw_cg_cpuset_path("/x", MW_CG_CPUS_EFFECTIVE, 0, out, 38), 0);
    assert_int_equal(mw_cg_cpuset_path("/x", MW_CG_CPUS_EFFECTIVE, 0, out, 37), -1);
}

static void reads_v2_then_v1(void **state)
{
    (void)state;
    tu_write(root, "sys/fs/cgroup/v2.scope/cpuset.cpus.effective", "0-3,8\n");
    tu_write(root, "sys/fs/cgroup/v2.scope/cpuset.mems.effective", "1\n");
    /* both hierarchies: v2 wins */
    tu_write(root, "sys/fs/cgroup/cpuset/v2.scope/cpuset.effective_cpus", "5\n");
    tu_write(root, "sys/fs/cgroup/cpuset/v1/c/cpuset.effective_cpus", "2-3\n");
    tu_write(root, "sys/fs/cgroup/cpuset/v1/c/cpuset.effective_mems", "0-1\n");
    tu_write(root, "sys/fs/cgroup/bad.scope/cpuset.cpus.effective", "3-1\n");
    tu_write(root, "sys/fs/cgroup/empty.scope/cpuset.cpus.effective", "\n");
    mw_hostfs host;
    assert_int_equal(mw_hostfs_open(&host, root), 0);
    mw_buf b;
    mw_buf_init(&b, 0);
    uint64_t bits[2];

    assert_int_equal(mw_cg_read_cpuset(&host, "/v2.scope", MW_CG_CPUS_EFFECTIVE, &b, bits, 128), 5);
    assert_true(bits[0] == 0x10FULL && bits[1] == 0);
    assert_int_equal(mw_cg_read_cpuset(&host, "/v2.scope", MW_CG_MEMS_EFFECTIVE, &b, bits, 64), 1);
    assert_true(bits[0] == 0x2ULL);
    assert_int_equal(mw_cg_read_cpuset(&host, "/v1/c", MW_CG_CPUS_EFFECTIVE, &b, bits, 128), 2);
    assert_true(bits[0] == 0xCULL && bits[1] == 0);
    assert_int_equal(mw_cg_read_cpuset(&host, "/v1/c", MW_CG_MEMS_EFFECTIVE, &b, bits, 64), 2);
    assert_true(bits[0] == 0x3ULL);
    assert_int_equal(mw_cg_read_cpuset(&host, "/empty.scope", MW_CG_CPUS_EFFECTIVE, &b, bits, 128),
                     0);
    /* malformed, absent, beyond the bitmap, climbing or empty */
    assert_int_equal(mw_cg_read_cpuset(&host, "/bad.scope", MW_CG_CPUS_EFFECTIVE, &b, bits, 128),
                     -1);
    assert_int_equal(mw_cg_read_cpuset(&host, "/none", MW_CG_CPUS_EFFECTIVE, &b, bits, 128), -1);
    assert_int_equal(mw_cg_read_cpuset(&host, "/v2.scope", MW_CG_CPUS_EFFECTIVE, &b, bits, 8), -1);
    assert_int_equal(mw_cg_read_cpuset(&host, "/v1/../v1/c", MW_CG_CPUS_EFFECTIVE, &b, bits, 128),
                     -1);
    assert_int_equal(mw_cg_read_cpuset(&host, "", MW_CG_CPUS_EFFECTIVE, &b, bits, 128), -1);
    mw_buf_free(&b);
    mw_hostfs_close(&host);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(paths),
        cmocka_unit_test(reads_v2_then_v1),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
