/* test_gpu_scenarios.c - the gpu collector against the fake NVML library on
 * the gpu-node fixture: 8 H100s each held by one pod, one GPU time-shared
 * by three pods, an A100 in MIG mode with seven instances. Scenarios are in
 * tests/fakenvml/scenarios/; every expected value below is derived from
 * them by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "gpu_harness.h"

#include <math.h>

static char *read_scenario(const char *name)
{
    static char text[1 << 16];
    char path[1024];
    const char *src = getenv("MLWATCH_SRC");
    snprintf(path, sizeof(path), "%s/tests/fakenvml/scenarios/%s", src ? src : ".", name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

#define GIB 1073741824.0
#define MIB 1048576.0

static void eight_h100_one_pod_each(void **state)
{
    (void)state;
    gh_session *s = gh_open("cgroup,gpu", read_scenario("h100x8.txt"), NULL);
    mw_snapshot *snap = gh_cycle(s);
    assert_int_equal(tu_count(snap, "mlwatch_gpu_info"), 8);
    for (int i = 0; i < 8; i++) {
        char gpu[4], uuid[64], bus[16], pod[16];
        snprintf(gpu, sizeof(gpu), "%d", i);
        snprintf(uuid, sizeof(uuid), "GPU-00000000-0000-0000-0000-00000000000%d", i);
        snprintf(bus, sizeof(bus), "0000:%02x:00.0", 0x18 + 0x10 * i);
        snprintf(pod, sizeof(pod), "train-%d", i);
        const char *cpus = i < 4 ? "0-47,96-143" : "48-95,144-191";
#define V(name, ...) tu_value(snap, name, "gpu", gpu, __VA_ARGS__ MW_END)
        assert_true(V("mlwatch_gpu_info", "uuid", uuid, "model", "NVIDIA H100 80GB HBM3",
                      "pci_bus_id", bus, "driver_version", "550.54.15", "cpu_affinity",
                      cpus, ) == 1);
        assert_true(V("mlwatch_gpu_lost", "uuid", uuid, ) == 0);
        assert_true(V("mlwatch_gpu_utilization_ratio", "uuid", uuid, "pci_bus_id", bus, ) ==
                    (10 * i + 20) / 100.0);
        assert_true(V("mlwatch_gpu_memory_utilization_ratio", ) == (5 * i + 10) / 100.0);
        assert_true(V("mlwatch_gpu_memory_used_bytes", ) == (i + 1) * GIB + 512 * MIB);
        assert_true(V("mlwatch_gpu_memory_total_bytes", ) == 85520809984.0);
        assert_true(V("mlwatch_gpu_power_watts", ) == 100 + 50 * i);
        assert_true(V("mlwatch_gpu_power_limit_watts", ) == 700);
        assert_true(V("mlwatch_gpu_energy_joules_total", ) == (i + 1) * 1000.0);
        assert_true(V("mlwatch_gpu_temperature_celsius", ) == 40 + i);
        assert_true(V("mlwatch_gpu_sm_clock_hertz", ) == 1980e6);
        assert_true(V("mlwatch_gpu_sm_clock_max_hertz", ) == 1980e6);
        assert_true(V("mlwatch_gpu_memory_clock_hertz", ) == 2619e6);
        assert_true(V("mlwatch_gpu_memory_clock_max_hertz", ) == 2619e6);
        assert_true(V("mlwatch_gpu_clock_event_active", "reason", "gpu_idle", ) == 1);
        assert_true(V("mlwatch_gpu_clock_event_active", "reason", "sw_power_cap", ) == 1);
        assert_true(V("mlwatch_gpu_clock_event_active", "reason", "hw_slowdown", ) == 0);
        assert_true(V("mlwatch_gpu_clock_event_active", "reason", "display_clock_setting", ) == 0);
        assert_int_equal(gh_count(snap, "mlwatch_gpu_clock_event_active", gpu), 9);
        assert_true(V("mlwatch_gpu_performance_state", ) == 0);
        assert_true(V("mlwatch_gpu_ecc_errors_total", "type", "corrected", ) == i);
        assert_true(V("mlwatch_gpu_ecc_errors_total", "type", "uncorrected", ) == 0);
        assert_true(V("mlwatch_gpu_remapped_rows", "type", "correctable", ) == i);
        assert_true(V("mlwatch_gpu_remapped_rows", "type", "failure", ) == 0);
        assert_int_equal(gh_count(snap, "mlwatch_gpu_retired_pages", gpu), 0); /* unsupported */
        assert_true(V("mlwatch_gpu_pcie_link_generation", ) == 5);
        assert_true(V("mlwatch_gpu_pcie_link_max_generation", ) == 5);
        assert_true(V("mlwatch_gpu_pcie_link_width", ) == 16);
        assert_true(V("mlwatch_gpu_pcie_link_max_width", ) == 16);
        assert_true(V("mlwatch_gpu_pcie_replay_errors_total", ) == 2 * i);
        assert_true(V("mlwatch_gpu_nvlink_errors_total", "link", "0", "type", "replay", ) == i);
        assert_true(V("mlwatch_gpu_nvlink_errors_total", "link", "0", "type", "crc_flit", ) == 1);
        assert_int_equal(gh_count(snap, "mlwatch_gpu_nvlink_errors_total", gpu),
                         5); /* link 1 down */
        assert_true(V("mlwatch_gpu_numa_node", ) == (i < 4 ? 0 : 1));
        assert_true(V("mlwatch_gpu_processes", ) == 1);
        assert_true(V("mlwatch_gpu_mig_enabled", ) == 0);
        /* The pod gets the whole device: its process is the only one. */
        assert_true(V("mlwatch_container_gpu_memory_used_bytes", "namespace", "ml-team", "pod", pod,
                      "container", "main", ) == (i + 1) * GIB);
        assert_true(V("mlwatch_container_gpu_memory_used_bytes", "namespace", "", "pod", "",
                      "container", "", ) == 512 * MIB);
        assert_true(gh_sum(snap, "mlwatch_container_gpu_memory_used_bytes", gpu) ==
                    V("mlwatch_gpu_memory_used_bytes", ));
        assert_true(V("mlwatch_container_gpu_utilization_ratio", "namespace", "ml-team", "pod", pod,
                      "container", "main", ) == (10 * i + 20) / 100.0);
        assert_int_equal(gh_count(snap, "mlwatch_container_gpu_utilization_ratio", gpu), 1);
        assert_true(tu_has(snap, "mlwatch_collector_duration_seconds", "collector", "gpu", "gpu",
                           gpu, MW_END));
#undef V
    }
    assert_false(tu_has(snap, "mlwatch_mig_memory_used_bytes", MW_END));
    assert_int_equal(gh_errors(s), 0);
    mw_snapshot_free(snap);
    gh_close(s);
}

static double share(const mw_snapshot *snap, const char *family, const char *ns, const char *pod)
{
    return tu_value(snap, family, "gpu", "0", "namespace", ns, "pod", pod, MW_END);
}

static void one_gpu_shared_by_three_pods(void **state)
{
    (void)state;
    const char *U = "mlwatch_container_gpu_utilization_ratio";
    const char *M = "mlwatch_container_gpu_memory_used_bytes";
    char *text = read_scenario("timeshare.txt");
    gh_session *s = gh_open("cgroup,gpu", text, NULL);
    mw_snapshot *snap = gh_cycle(s);
    assert_true(tu_value(snap, "mlwatch_gpu_utilization_ratio", "gpu", "0", MW_END) == 0.9);
    assert_true(share(snap, U, "shared", "notebook-a") == 0.4);
    assert_true(share(snap, U, "shared", "notebook-b") == 0.2);
    assert_true(share(snap, U, "shared", "notebook-c") == 0.2); /* two processes, 10 + 10 */
    assert_true(share(snap, U, "", "") == 0.1);                 /* the host process */
    assert_int_equal(tu_count(snap, U), 4);
    assert_true(fabs(gh_sum(snap, U, "0") - 0.9) < 1e-12);
    assert_true(share(snap, M, "shared", "notebook-a") == 4 * GIB);
    assert_true(share(snap, M, "shared", "notebook-b") == 2 * GIB);
    assert_true(share(snap, M, "shared", "notebook-c") == 2 * GIB);
    assert_true(share(snap, M, "", "") == 512 * MIB + 300 * MIB);
    assert_true(gh_sum(snap, M, "0") ==
                tu_value(snap, "mlwatch_gpu_memory_used_bytes", "gpu", "0", MW_END));
    assert_true(tu_value(snap, "mlwatch_gpu_processes", "gpu", "0", MW_END) == 5);
    mw_snapshot_free(snap);

    /* Three equal shares of 100 %: 3334 + 3333 + 3333 units of 0.0001,
     * the leftover unit to the first container listed. */
    char next[65536 + 4096];
    snprintf(next, sizeof(next), "%s%s", text,
             "gpu 0 util=100\n"
             "proc gpu=0 pid=4001 mem=4294967296 sm=33\nproc gpu=0 pid=4002 mem=2147483648 sm=33\n"
             "proc gpu=0 pid=4003 mem=1073741824 sm=33\nproc gpu=0 pid=4004 mem=1073741824\n");
    /* (the appended lines add processes: drop the originals by rewriting) */
    char *cut = strstr(next, "proc gpu=0 pid=4001 mem=4294967296 sm=40");
    char *tail = strstr(next, "gpu 0 util=100");
    memmove(cut, tail, strlen(tail) + 1);
    gh_write_scenario(s, next);
    snap = gh_cycle(s);
    assert_true(share(snap, U, "shared", "notebook-a") == 0.3334);
    assert_true(share(snap, U, "shared", "notebook-b") == 0.3333);
    assert_true(share(snap, U, "shared", "notebook-c") == 0.3333);
    assert_false(tu_has(snap, U, "gpu", "0", "namespace", "", "pod", "", MW_END));
    double units = 0;
    const mw_family *f = mw_snapshot_find(snap, U);
    for (const mw_sample *smp = f->first; smp; smp = smp->next)
        units += round(smp->value * 1e4);
    assert_true(units == 10000);
    assert_true(share(snap, M, "", "") == 8 * GIB + 812 * MIB - 8 * GIB); /* reserve + gone host */
    assert_true(gh_sum(snap, M, "0") ==
                tu_value(snap, "mlwatch_gpu_memory_used_bytes", "gpu", "0", MW_END));
    mw_snapshot_free(snap);

    /* No per-process samples (NOT_SUPPORTED): shares follow memory,
     * 9000 units * {4, 2, 2, 0.5} / 8.5 by largest remainder. */
    snprintf(next, sizeof(next), "%sgpu 0 unsupported=procutil\n", text);
    gh_write_scenario(s, next);
    snap = gh_cycle(s);
    assert_true(share(snap, U, "shared", "notebook-a") == 0.4235);
    assert_true(share(snap, U, "shared", "notebook-b") == 0.2118);
    assert_true(share(snap, U, "shared", "notebook-c") == 0.2118);
    assert_true(share(snap, U, "", "") == 0.0529);
    assert_int_equal(gh_errors(s), 0);
    mw_snapshot_free(snap);
    gh_close(s);
}

static void a100_mig_seven_instances(void **state)
{
    (void)state;
    gh_session *s = gh_open("cgroup,gpu", read_scenario("a100-mig.txt"), NULL);
    mw_snapshot *snap = gh_cycle(s);
    assert_true(tu_value(snap, "mlwatch_gpu_mig_enabled", "gpu", "0", MW_END) == 1);
    /* No device utilization in MIG mode, hence no container shares of it. */
    assert_false(tu_has(snap, "mlwatch_gpu_utilization_ratio", MW_END));
    assert_false(tu_has(snap, "mlwatch_container_gpu_utilization_ratio", MW_END));
    assert_int_equal(tu_count(snap, "mlwatch_mig_memory_used_bytes"), 7);
    for (int k = 0; k < 7; k++) {
        char uuid[64], gi[4], pod[16];
        snprintf(uuid, sizeof(uuid), "MIG-0000000%d-aaaa-5bbb-8ccc-00000000000%d", k, k);
        snprintf(gi, sizeof(gi), "%d", 7 + k);
        snprintf(pod, sizeof(pod), "infer-%d", k);
        const char *profile = k == 0 ? "1g.5gb+me" : "1g.5gb";
        double used = 13 * MIB + (k + 1) * 512 * MIB;
        assert_true(tu_value(snap, "mlwatch_mig_memory_used_bytes", "gpu", "0", "uuid", uuid,
                             "mig_profile", profile, "gpu_instance", gi, "compute_instance", "0",
                             MW_END) == used);
        assert_true(tu_value(snap, "mlwatch_mig_memory_total_bytes", "uuid", uuid, MW_END) ==
                    5100273664.0);
        assert_true(tu_value(snap, "mlwatch_container_mig_memory_used_bytes", "namespace",
                             "inference", "pod", pod, "container", "main", "gpu", "0",
                             "mig_profile", profile, "gpu_instance", gi, "compute_instance", "0",
                             MW_END) == (k + 1) * 512 * MIB);
        assert_true(tu_value(snap, "mlwatch_container_mig_memory_used_bytes", "pod", "",
                             "gpu_instance", gi, MW_END) == 13 * MIB);
        assert_true(tu_value(snap, "mlwatch_container_gpu_memory_used_bytes", "namespace",
                             "inference", "pod", pod, "gpu", "0", MW_END) == (k + 1) * 512 * MIB);
    }
    assert_int_equal(tu_count(snap, "mlwatch_container_mig_memory_used_bytes"), 14);
    /* An A100 has no GPM and its driver no MIG utilization (as real ones):
     * no MIG activity (test_gpu_gpm.c covers Hopper). */
    assert_false(tu_has(snap, "mlwatch_mig_utilization_ratio", MW_END));
    assert_true(tu_value(snap, "mlwatch_container_gpu_memory_used_bytes", "pod", "", MW_END) ==
                91 * MIB);
    assert_true(gh_sum(snap, "mlwatch_container_gpu_memory_used_bytes", "0") ==
                tu_value(snap, "mlwatch_gpu_memory_used_bytes", "gpu", "0", MW_END));
    assert_true(tu_value(snap, "mlwatch_gpu_processes", "gpu", "0", MW_END) == 7);
    assert_int_equal(gh_errors(s), 0);
    mw_snapshot_free(snap);
    gh_close(s);
}

int main(void)
{
    mw_log_set_level(MW_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(eight_h100_one_pod_each),
        cmocka_unit_test(one_gpu_shared_by_three_pods),
        cmocka_unit_test(a100_mig_seven_instances),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
