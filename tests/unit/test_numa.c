/* test_numa.c - NUMA node parsers and the numa collector on fixtures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/numa.h"
#include "testutil.h"

#define KIB(n) ((double)(n)*1024.0)
#define NODE "sys/devices/system/node/node"

static void parses_node_meminfo(void **state)
{
    (void)state;
    mw_node_meminfo m;
    assert_int_equal(mw_parse_node_meminfo("Node 1 MemTotal:       32768 kB\n"
                                           "Node 1 MemFree:         8192 kB\n"
                                           "Node 1 MemUsed:        24576 kB\n"
                                           "Node 1 Active(anon):     12 kB\n"
                                           "Node 1 HugePages_Total:     0\n",
                                           &m),
                     0);
    assert_int_equal(m.node, 1);
    assert_int_equal(m.total, 32768 * 1024);
    assert_int_equal(m.free, 8192 * 1024);
    assert_int_equal(m.used, 24576 * 1024);
    assert_true(m.has_used);
    /* Without MemUsed, used = total - free. */
    assert_int_equal(mw_parse_node_meminfo("Node 0 MemTotal: 100 kB\nNode 0 MemFree: 40 kB\n", &m),
                     0);
    assert_false(m.has_used);
    assert_int_equal(m.used, 60 * 1024);

    assert_int_equal(mw_parse_node_meminfo("", &m), -1);
    assert_int_equal(mw_parse_node_meminfo("Node 0 MemTotal: 100 kB\n", &m), -1); /* no free */
    assert_int_equal(mw_parse_node_meminfo("Node 0 MemTotal: 100 kB\nNode 0 MemFree: 4", &m), -1);
    assert_int_equal(mw_parse_node_meminfo("Node 0 MemTotal: 100 kB\nNode 1 MemFree: 40 kB\n", &m),
                     -1);
    assert_int_equal(mw_parse_node_meminfo("Node 0 MemTotal: 100\nNode 0 MemFree: 40 kB\n", &m),
                     -1);
    assert_int_equal(
        mw_parse_node_meminfo("Node 0 MemTotal: 100 kB\nNode 0 MemFree: 40 kB\nNode 0 X\n", &m),
        -1);
    assert_int_equal(mw_parse_node_meminfo(
                         "Node 0 MemTotal: 100 kB\nNode 0 MemFree: 40 kB\nMemUsed: 6 kB\n", &m),
                     -1);
    assert_int_equal(
        mw_parse_node_meminfo(
            "Node 0 MemTotal: 1 kB\nNode 0 MemTotal: 1 kB\nNode 0 MemFree: 1 kB\n", &m),
        -1);
}

static void parses_numastat(void **state)
{
    (void)state;
    mw_numastat n;
    assert_int_equal(mw_parse_numastat("numa_hit 10\nnuma_miss 2\nnuma_foreign 3\n"
                                       "interleave_hit 4\nlocal_node 9\nother_node 3\n",
                                       &n),
                     0);
    assert_int_equal(n.hit, 10);
    assert_int_equal(n.miss, 2);
    assert_int_equal(n.foreign, 3);
    assert_int_equal(mw_parse_numastat("", &n), -1);
    assert_int_equal(mw_parse_numastat("numa_hit 10\nnuma_miss 2\n", &n), -1);
    assert_int_equal(mw_parse_numastat("numa_hit 10\nnuma_miss 2\nnuma_foreign 3", &n), -1);
    assert_int_equal(mw_parse_numastat("numa_hit 10\nnuma_miss x\nnuma_foreign 3\n", &n), -1);
    assert_int_equal(mw_parse_numastat("numa_hit 1\nnuma_hit 1\nnuma_miss 2\nnuma_foreign 3\n", &n),
                     -1);
}

static void collects_two_nodes(void **state)
{
    (void)state;
    tu_session *s = tu_open(tu_fixture("rapl-cpufreq"), "numa");
    mw_snapshot *snap = tu_run(s);
    assert_true(tu_value(snap, "mlwatch_numa_node_memory_total_bytes", "numa_node", "0", MW_END) ==
                KIB(65793208));
    assert_true(tu_value(snap, "mlwatch_numa_node_memory_free_bytes", "numa_node", "0", MW_END) ==
                KIB(40123456));
    assert_true(tu_value(snap, "mlwatch_numa_node_memory_used_bytes", "numa_node", "0", MW_END) ==
                KIB(65793208 - 40123456));
    assert_true(tu_value(snap, "mlwatch_numa_node_memory_total_bytes", "numa_node", "1", MW_END) ==
                KIB(66031912));
    assert_true(tu_value(snap, "mlwatch_numa_node_memory_used_bytes", "numa_node", "1", MW_END) ==
                KIB(20353000));
    assert_true(tu_value(snap, "mlwatch_numa_node_cpus", "numa_node", "0", MW_END) == 4);
    assert_true(tu_value(snap, "mlwatch_numa_node_cpus", "numa_node", "1", MW_END) == 4);
    assert_true(
        tu_value(snap, "mlwatch_numa_node_info", "numa_node", "0", "cpulist", "0-3", MW_END) == 1);
    assert_true(
        tu_value(snap, "mlwatch_numa_node_info", "numa_node", "1", "cpulist", "4-7", MW_END) == 1);
    assert_true(tu_value(snap, "mlwatch_numa_node_hits_total", "numa_node", "0", MW_END) ==
                987654321);
    assert_true(tu_value(snap, "mlwatch_numa_node_misses_total", "numa_node", "0", MW_END) == 1234);
    assert_true(tu_value(snap, "mlwatch_numa_node_foreign_total", "numa_node", "0", MW_END) ==
                5678);
    assert_true(tu_value(snap, "mlwatch_numa_node_hits_total", "numa_node", "1", MW_END) ==
                876543210);
    assert_true(tu_value(snap, "mlwatch_numa_node_misses_total", "numa_node", "1", MW_END) == 5678);
    assert_true(tu_value(snap, "mlwatch_numa_node_foreign_total", "numa_node", "1", MW_END) ==
                1234);
    assert_int_equal(tu_count(snap, "mlwatch_numa_node_info"), 2);
    assert_int_equal(tu_errors(s, "numa"), 0);
    mw_snapshot_free(snap);
    tu_close(s);

    s = tu_open(tu_fixture("bare-vm"), "numa");
    snap = tu_run(s);
    assert_true(tu_value(snap, "mlwatch_numa_node_memory_total_bytes", "numa_node", "0", MW_END) ==
                KIB(4013036));
    assert_true(tu_value(snap, "mlwatch_numa_node_cpus", "numa_node", "0", MW_END) == 2);
    assert_true(
        tu_value(snap, "mlwatch_numa_node_info", "numa_node", "0", "cpulist", "0-1", MW_END) == 1);
    assert_true(tu_value(snap, "mlwatch_numa_node_hits_total", "numa_node", "0", MW_END) ==
                34567890);
    assert_int_equal(tu_count(snap, "mlwatch_numa_node_cpus"), 1);
    assert_int_equal(tu_errors(s, "numa"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
}

static void absent_without_nodes(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("bare-vm");
    tu_remove(root, "sys/devices/system/node");
    tu_session *s = tu_open(root, "numa");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_numa_node_cpus"), 0);
    assert_false(tu_has(snap, "mlwatch_collector_errors_total", "collector", "numa", MW_END));
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

static void handles_cpu_lists(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("rapl-cpufreq");
    tu_session *s = tu_open(root, "numa");
    /* A memory-only node (CXL, HBM) and a large sparse list. */
    tu_write(root, NODE "0/cpulist", "\n");
    tu_write(root, NODE "1/cpulist", "0-4095,4096-8191\n");
    mw_snapshot *snap = tu_run(s);
    assert_true(tu_value(snap, "mlwatch_numa_node_cpus", "numa_node", "0", MW_END) == 0);
    assert_true(tu_value(snap, "mlwatch_numa_node_info", "numa_node", "0", "cpulist", "", MW_END) ==
                1);
    assert_true(tu_value(snap, "mlwatch_numa_node_cpus", "numa_node", "1", MW_END) == 8192);
    assert_int_equal(tu_errors(s, "numa"), 0);
    mw_snapshot_free(snap);

    /* Beyond 8192 CPUs, or garbage: an error, memory still reported. */
    tu_write(root, NODE "1/cpulist", "0-8192\n");
    tu_write(root, NODE "0/cpulist", "0-\n");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "numa"), 2);
    assert_int_equal(tu_count(snap, "mlwatch_numa_node_cpus"), 0);
    assert_int_equal(tu_count(snap, "mlwatch_numa_node_info"), 0);
    assert_int_equal(tu_count(snap, "mlwatch_numa_node_memory_total_bytes"), 2);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

static void counts_errors(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("rapl-cpufreq");
    tu_session *s = tu_open(root, "numa");

    /* Node 1's meminfo truncated: one error, its other files and node 0
     * still reported. */
    tu_write(root, NODE "1/meminfo", "Node 1 MemTotal:       66031912 kB\nNode 1 MemFree:   45");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_errors(s, "numa"), 1);
    assert_false(tu_has(snap, "mlwatch_numa_node_memory_total_bytes", "numa_node", "1", MW_END));
    assert_true(tu_value(snap, "mlwatch_numa_node_cpus", "numa_node", "1", MW_END) == 4);
    assert_true(tu_value(snap, "mlwatch_numa_node_hits_total", "numa_node", "1", MW_END) ==
                876543210);
    assert_true(tu_value(snap, "mlwatch_numa_node_memory_total_bytes", "numa_node", "0", MW_END) ==
                KIB(65793208));
    mw_snapshot_free(snap);

    /* A meminfo that names another node is wrong too. */
    tu_write(root, NODE "1/meminfo", "Node 0 MemTotal: 1 kB\nNode 0 MemFree: 1 kB\n");
    tu_remove(root, NODE "0/numastat");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "numa"), 3);
    assert_false(tu_has(snap, "mlwatch_numa_node_hits_total", "numa_node", "0", MW_END));
    assert_true(tu_value(snap, "mlwatch_numa_node_hits_total", "numa_node", "1", MW_END) ==
                876543210);
    assert_int_equal(tu_count(snap, "mlwatch_numa_node_memory_total_bytes"), 1);
    mw_snapshot_free(snap);

    /* Repaired: no new error. */
    tu_write(root, NODE "1/meminfo", "Node 1 MemTotal: 1024 kB\nNode 1 MemFree: 512 kB\n");
    tu_write(root, NODE "0/numastat", "numa_hit 5\nnuma_miss 6\nnuma_foreign 7\n");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "numa"), 3);
    assert_true(tu_value(snap, "mlwatch_numa_node_memory_used_bytes", "numa_node", "1", MW_END) ==
                512 * 1024);
    assert_true(tu_value(snap, "mlwatch_numa_node_foreign_total", "numa_node", "0", MW_END) == 7);
    mw_snapshot_free(snap);

    /* A node vanishes: its three files fail once, then the node list is
     * re-read and the node is no longer expected. */
    tu_remove(root, NODE "1");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "numa"), 6);
    assert_int_equal(tu_count(snap, "mlwatch_numa_node_memory_total_bytes"), 1);
    mw_snapshot_free(snap);
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "numa"), 6);
    assert_int_equal(tu_count(snap, "mlwatch_numa_node_memory_total_bytes"), 1);
    assert_int_equal(tu_count(snap, "mlwatch_numa_node_info"), 1);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_node_meminfo), cmocka_unit_test(parses_numastat),
        cmocka_unit_test(collects_two_nodes),  cmocka_unit_test(absent_without_nodes),
        cmocka_unit_test(handles_cpu_lists),   cmocka_unit_test(counts_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
