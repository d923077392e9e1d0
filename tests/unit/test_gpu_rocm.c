/* test_gpu_rocm.c - the AMD backend (ROCm SMI) through the same collector,
 * against the fake librocm_smi64.so.7: core readings in mlwatch's units,
 * socket power and junction temperature where the average and edge ones
 * are not supported (MI300), per-process memory, and a process that spans
 * two GPUs (ROCm SMI gives only its total: not split, left unattributed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "gpu_harness.h"

#include <math.h>

static const char two_mi300x[] =
    "system driver=6.7.0\n"
    "gpu 0 name=\"AMD Instinct MI300X\" bus=0000:18:00.0 util=70 memutil=25 memtotal=206141652992 "
    "memused=10737418240 power_mw=650000 limit_mw=750000 energy_mj=3600000 temp=55 numa=0\n"
    "gpu 1 name=\"AMD Instinct MI300X\" bus=0000:28:00.0 util=0 memutil=0 memtotal=206141652992 "
    "memused=4294967296 power_mw=140000 limit_mw=750000 energy_mj=1000 temp=38 numa=0\n"
    "proc gpu=0 pid=4001 mem=6442450944\n"
    "proc gpu=0 pid=4002 mem=1073741824\n"
    "proc gpu=1 pid=4002 mem=1073741824\n";

static void mi300x_core_metrics(void **state)
{
    (void)state;
    gh_session *s = gh_open_libs("cgroup,gpu", two_mi300x, "none", gh_fake_rocm());
    mw_snapshot *snap = gh_cycle(s);
    assert_int_equal(tu_count(snap, "mlwatch_gpu_info"), 2);
    assert_true(tu_value(snap, "mlwatch_gpu_info", "gpu", "0", "uuid", "1000000000000000", "model",
                         "AMD Instinct MI300X", "pci_bus_id", "0000:18:00.0", "driver_version",
                         "6.7.0", MW_END) == 1);
    assert_true(tu_value(snap, "mlwatch_gpu_utilization_ratio", "gpu", "0", MW_END) == 0.7);
    assert_true(tu_value(snap, "mlwatch_gpu_memory_utilization_ratio", "gpu", "0", MW_END) == 0.25);
    assert_true(tu_value(snap, "mlwatch_gpu_memory_used_bytes", "gpu", "0", MW_END) ==
                10737418240.0);
    assert_true(tu_value(snap, "mlwatch_gpu_memory_total_bytes", "gpu", "1", MW_END) ==
                206141652992.0);
    assert_true(tu_value(snap, "mlwatch_gpu_power_watts", "gpu", "0", MW_END) == 650);
    assert_true(tu_value(snap, "mlwatch_gpu_power_limit_watts", "gpu", "0", MW_END) == 750);
    /* 3600 J as a counter of 15.259 uJ ticks, read in whole millijoules. */
    double e = tu_value(snap, "mlwatch_gpu_energy_joules_total", "gpu", "0", MW_END);
    assert_true(fabs(e - 3600) < 0.0015);
    assert_true(tu_value(snap, "mlwatch_gpu_temperature_celsius", "gpu", "0", MW_END) == 55);
    assert_true(tu_value(snap, "mlwatch_gpu_numa_node", "gpu", "1", MW_END) == 0);
    assert_true(tu_value(snap, "mlwatch_gpu_processes", "gpu", "0", MW_END) == 2);
    assert_true(tu_value(snap, "mlwatch_gpu_processes", "gpu", "1", MW_END) == 1);
    /* NVIDIA-only families are absent. */
    assert_false(tu_has(snap, "mlwatch_gpu_clock_event_active", MW_END));
    assert_false(tu_has(snap, "mlwatch_gpu_ecc_errors_total", MW_END));
    /* Per pod: notebook-a's 6 GiB on GPU 0; notebook-b's process uses both
     * GPUs, its 2 GiB total cannot be split per GPU. */
    const char *M = "mlwatch_container_gpu_memory_used_bytes";
    assert_true(tu_value(snap, M, "gpu", "0", "pod", "notebook-a", MW_END) == 6442450944.0);
    assert_true(tu_value(snap, M, "gpu", "0", "pod", "notebook-b", MW_END) == 0);
    assert_true(tu_value(snap, M, "gpu", "0", "pod", "", MW_END) == 10737418240.0 - 6442450944.0);
    assert_true(gh_sum(snap, M, "0") == 10737418240.0);
    /* Utilization by memory weight: 6 GiB against nothing known. */
    assert_true(tu_value(snap, "mlwatch_container_gpu_utilization_ratio", "gpu", "0", "pod",
                         "notebook-a", MW_END) == 0.7);
    assert_true(tu_value(snap, "mlwatch_container_gpu_utilization_ratio", "gpu", "0", "pod",
                         "notebook-b", MW_END) == 0);
    assert_int_equal(gh_errors(s), 0);
    mw_snapshot_free(snap);
    gh_close(s);
}

static void rocm_init_failure_is_off(void **state)
{
    (void)state;
    gh_session *s = gh_open_libs("gpu", "system init=INIT_ERROR\n", "none", gh_fake_rocm());
    mw_snapshot *snap = gh_cycle(s);
    assert_false(tu_has(snap, "mlwatch_gpu_info", MW_END));
    assert_false(tu_has(snap, "mlwatch_collector_duration_seconds", "collector", "gpu", MW_END));
    mw_snapshot_free(snap);
    gh_close(s);
}

static void both_vendors_together(void **state)
{
    (void)state;
    /* The same scenario through both fakes: four devices, NVIDIA first. */
    gh_session *s = gh_open_libs("gpu", two_mi300x, gh_fake_nvml(), gh_fake_rocm());
    mw_snapshot *snap = gh_cycle(s);
    assert_int_equal(tu_count(snap, "mlwatch_gpu_info"), 4);
    assert_true(tu_has(snap, "mlwatch_gpu_info", "gpu", "0", "uuid", "GPU-fake-0", MW_END));
    assert_true(tu_has(snap, "mlwatch_gpu_info", "gpu", "0", "uuid", "1000000000000000", MW_END));
    mw_snapshot_free(snap);
    gh_close(s);
}

int main(void)
{
    mw_log_set_level(MW_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mi300x_core_metrics),
        cmocka_unit_test(rocm_init_failure_is_off),
        cmocka_unit_test(both_vendors_together),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
