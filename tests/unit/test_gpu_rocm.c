/* test_gpu_rocm.c - the AMD backend (ROCm SMI) through the same collector,
 * against the fake librocm_smi64.so.7: core readings in mlwatch's units,
 * socket power and junction temperature where the average and edge ones
 * are not supported (MI300), per-process memory, and a process that spans
 * two GPUs (ROCm SMI gives only its total: not split, left unattributed),
 * and ECC counts per RAS block (summed; blocks without RAS, errors,
 * no permission). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "gpu_harness.h"

#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

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

/* rsmi_dev_ecc_count_get calls of the loaded fake ROCm SMI for a GPU and
 * block since rsmi_init. */
static unsigned long ecc_calls(uint32_t dv, uint64_t block)
{
    void *h = dlopen(gh_fake_rocm(), RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    unsigned long (*calls)(uint32_t, uint64_t);
    void *sym = dlsym(h, "fake_rocm_ecc_calls");
    assert_non_null(sym);
    memcpy(&calls, &sym, sizeof(sym));
    unsigned long n = calls(dv, block);
    dlclose(h);
    return n;
}

#define UMC 0x1ull
#define SDMA 0x2ull
#define GFX 0x4ull
#define MMHUB 0x8ull
#define XGMI 0x80ull

/* ECC counts per RAS block, summed into NVML's family and health rule:
 *   GPU 0  UMC 5/2, SDMA 1/0, GFX 3/0: corrected 9, uncorrected 2
 *          (degraded, ecc_uncorrected, reset_gpu); the 11 other blocks
 *          answer NOT_SUPPORTED once and are not asked again
 *   GPU 1  UMC 0/0, XGMI an error: one counted error, no ECC this poll;
 *          the next poll (XGMI 0/4) reads uncorrected 4
 *   GPU 2  no block with RAS: no ECC family, not asked again
 *   GPU 3  UMC no permission: one error, not asked again */
static const char ecc_base[] =
    "system driver=6.7.0\n"
    "gpu 0 name=\"AMD Instinct MI300X\" bus=0000:18:00.0 memtotal=206141652992 "
    "ras_umc=5,2 ras_sdma=1,0 ras_gfx=3,0\n"
    "gpu 2 name=\"AMD Instinct MI300X\" bus=0000:38:00.0 memtotal=206141652992\n"
    "gpu 3 name=\"AMD Instinct MI300X\" bus=0000:48:00.0 memtotal=206141652992 "
    "ras_umc=PERMISSION\n";

static void mi300x_ecc_counts(void **state)
{
    (void)state;
    char text[1024];
    snprintf(text, sizeof(text),
             "%sgpu 1 name=\"AMD Instinct MI300X\" bus=0000:28:00.0 ras_umc=0,0 "
             "ras_xgmi_wafl=UNKNOWN\n",
             ecc_base);
    gh_session *s = gh_open_libs("gpu", text, "none", gh_fake_rocm());
    mw_snapshot *snap = gh_cycle(s);
    const char *E = "mlwatch_gpu_ecc_errors_total";
    assert_true(tu_value(snap, E, "gpu", "0", "type", "corrected", MW_END) == 9);
    assert_true(tu_value(snap, E, "gpu", "0", "type", "uncorrected", MW_END) == 2);
    assert_true(tu_value(snap, "mlwatch_gpu_health", "gpu", "0", "state", "degraded", "reason",
                         "ecc_uncorrected", "action", "reset_gpu", MW_END) == 1);
    assert_true(tu_value(snap, "mlwatch_gpu_health", "gpu", "2", "state", "healthy", "reason",
                         "none", MW_END) == 1);
    assert_false(tu_has(snap, E, "gpu", "1", MW_END));
    assert_false(tu_has(snap, E, "gpu", "2", MW_END));
    assert_false(tu_has(snap, E, "gpu", "3", MW_END));
    /* The start polls once, the cycle's sync may poll again: one error per
     * poll for GPU 1's XGMI, one for GPU 3's permission (asked once). */
    unsigned long polls = ecc_calls(0, UMC);
    assert_true(polls == 1 || polls == 2);
    assert_int_equal(ecc_calls(1, XGMI), polls);
    assert_int_equal(gh_errors(s), polls + 1);
    mw_snapshot_free(snap);

    snprintf(text, sizeof(text),
             "%sgpu 1 name=\"AMD Instinct MI300X\" bus=0000:28:00.0 ras_umc=0,0 "
             "ras_xgmi_wafl=0,4\n",
             ecc_base);
    gh_write_scenario(s, text);
    snap = gh_cycle(s);
    assert_true(tu_value(snap, E, "gpu", "0", "type", "corrected", MW_END) == 9);
    assert_true(tu_value(snap, E, "gpu", "1", "type", "corrected", MW_END) == 0);
    assert_true(tu_value(snap, E, "gpu", "1", "type", "uncorrected", MW_END) == 4);
    assert_false(tu_has(snap, E, "gpu", "2", MW_END));
    assert_false(tu_has(snap, E, "gpu", "3", MW_END));
    assert_int_equal(gh_errors(s), polls + 1); /* nothing new */
    /* Blocks that answered NOT_SUPPORTED, and a GPU without permission,
     * were asked once; the others at every slow poll (one more). */
    assert_int_equal(ecc_calls(0, UMC), polls + 1);
    assert_int_equal(ecc_calls(0, GFX), polls + 1);
    assert_int_equal(ecc_calls(0, MMHUB), 1);
    assert_int_equal(ecc_calls(1, XGMI), polls + 1);
    assert_int_equal(ecc_calls(2, UMC), 1);
    assert_int_equal(ecc_calls(2, 0x2000), 1);
    assert_int_equal(ecc_calls(3, UMC), 1);
    assert_int_equal(ecc_calls(3, SDMA), 0);
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
        cmocka_unit_test(mi300x_ecc_counts),
        cmocka_unit_test(rocm_init_failure_is_off),
        cmocka_unit_test(both_vendors_together),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
