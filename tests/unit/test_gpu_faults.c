/* test_gpu_faults.c - the gpu collector when things go wrong: readings a
 * consumer card does not support, a GPU lost mid-run and back, an energy
 * counter reset, XID events, failing calls, a slow driver, and no library,
 * a driver/library mismatch or no GPU at all. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "gpu_harness.h"

#include <time.h>

static const char four_gpus[] =
    "gpu 0 util=10 memtotal=1000 memused=100 power_mw=50000 energy_mj=5000000 temp=40\n"
    "gpu 1 util=20 memtotal=1000 memused=200 power_mw=60000 energy_mj=1000 temp=41\n"
    "gpu 2 util=30 memtotal=1000 memused=300 power_mw=70000 energy_mj=1000 temp=42\n"
    "gpu 3 util=40 memtotal=1000 memused=400 power_mw=80000 energy_mj=1000 temp=43\n";

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

static void consumer_gpu_unsupported_fields(void **state)
{
    (void)state;
    gh_session *s = gh_open("cgroup,gpu", read_scenario("consumer.txt"), NULL);
    mw_snapshot *snap = NULL;
    for (int cycle = 0; cycle < 3; cycle++) {
        mw_snapshot_free(snap);
        snap = gh_cycle(s);
    }
    /* What the card has is there ... */
    assert_true(tu_value(snap, "mlwatch_gpu_utilization_ratio", "gpu", "0", MW_END) == 0.55);
    assert_true(tu_value(snap, "mlwatch_gpu_memory_used_bytes", MW_END) == 3221225472.0);
    assert_true(tu_value(snap, "mlwatch_gpu_temperature_celsius", MW_END) == 70);
    assert_true(tu_value(snap, "mlwatch_gpu_sm_clock_hertz", MW_END) == 1777e6);
    assert_true(tu_value(snap, "mlwatch_gpu_performance_state", MW_END) == 2);
    assert_true(tu_value(snap, "mlwatch_gpu_pcie_link_generation", MW_END) == 3);
    assert_true(tu_value(snap, "mlwatch_gpu_pcie_link_width", MW_END) == 8);
    /* ... NUMA node and CPUs from sysfs, since NVML has neither ... */
    assert_true(tu_value(snap, "mlwatch_gpu_numa_node", MW_END) == 0);
    assert_true(tu_value(snap, "mlwatch_gpu_info", "cpu_affinity", "0-47,96-143", "model",
                         "NVIDIA GeForce RTX 3060", MW_END) == 1);
    /* ... and the rest is omitted, not zero. */
    const char *absent[] = {"mlwatch_gpu_power_watts",
                            "mlwatch_gpu_power_limit_watts",
                            "mlwatch_gpu_energy_joules_total",
                            "mlwatch_gpu_sm_clock_max_hertz",
                            "mlwatch_gpu_clock_event_active",
                            "mlwatch_gpu_ecc_errors_total",
                            "mlwatch_gpu_remapped_rows",
                            "mlwatch_gpu_retired_pages",
                            "mlwatch_gpu_pcie_link_max_generation",
                            "mlwatch_gpu_pcie_link_max_width",
                            "mlwatch_gpu_pcie_replay_errors_total",
                            "mlwatch_gpu_nvlink_errors_total",
                            "mlwatch_gpu_mig_enabled"};
    for (size_t i = 0; i < MW_ARRAY_LEN(absent); i++)
        if (tu_count(snap, absent[i])) fail_msg("%s reported on a card without it", absent[i]);
    /* The process reports no memory: the pod gets the utilization, the
     * memory stays unattributed. */
    assert_true(tu_value(snap, "mlwatch_container_gpu_utilization_ratio", "pod", "notebook-a",
                         MW_END) == 0.55);
    assert_true(tu_value(snap, "mlwatch_container_gpu_memory_used_bytes", "pod", "notebook-a",
                         MW_END) == 0);
    assert_true(tu_value(snap, "mlwatch_container_gpu_memory_used_bytes", "pod", "", MW_END) ==
                3221225472.0);
    /* Unsupported calls were made once (first poll), supported ones every poll. */
    assert_int_equal(gh_calls("nvmlDeviceGetPowerUsage"), 1);
    assert_int_equal(gh_calls("nvmlDeviceGetTotalEccErrors"), 1);
    assert_int_equal(gh_calls("nvmlDeviceGetProcessUtilization"), 1);
    assert_int_equal(gh_calls("nvmlDeviceGetNumaNodeId"), 1);
    assert_true(gh_calls("nvmlDeviceGetTemperature") >= 3);
    assert_int_equal(gh_errors(s), 0); /* NOT_SUPPORTED is not an error */
    mw_snapshot_free(snap);
    gh_close(s);
}

static void gpu_lost_and_back(void **state)
{
    (void)state;
    gh_session *s = gh_open("gpu", four_gpus, NULL);
    mw_snapshot *snap = gh_cycle(s);
    assert_true(tu_value(snap, "mlwatch_gpu_lost", "gpu", "1", MW_END) == 0);
    mw_snapshot_free(snap);

    char text[2048];
    snprintf(text, sizeof(text), "%sgpu 1 lost=1\n", four_gpus);
    gh_write_scenario(s, text);
    snap = gh_cycle(s);
    assert_true(tu_value(snap, "mlwatch_gpu_lost", "gpu", "1", "uuid", "GPU-fake-1", MW_END) == 1);
    assert_false(tu_has(snap, "mlwatch_gpu_utilization_ratio", "gpu", "1", MW_END));
    assert_false(tu_has(snap, "mlwatch_gpu_power_watts", "gpu", "1", MW_END));
    for (int i = 0; i < 4; i += i == 0 ? 2 : 1) { /* 0, 2, 3 go on */
        char gpu[12];
        snprintf(gpu, sizeof(gpu), "%d", i);
        assert_true(tu_value(snap, "mlwatch_gpu_lost", "gpu", gpu, MW_END) == 0);
        assert_true(tu_value(snap, "mlwatch_gpu_utilization_ratio", "gpu", gpu, MW_END) ==
                    (i + 1) / 10.0);
    }
    mw_snapshot_free(snap);
    snap = gh_cycle(s); /* still lost: probed, still 1 */
    assert_true(tu_value(snap, "mlwatch_gpu_lost", "gpu", "1", MW_END) == 1);
    mw_snapshot_free(snap);

    snprintf(text, sizeof(text), "%sgpu 1 util=25\n", four_gpus);
    gh_write_scenario(s, text);
    snap = gh_cycle(s);
    assert_true(tu_value(snap, "mlwatch_gpu_lost", "gpu", "1", MW_END) == 0);
    assert_true(tu_value(snap, "mlwatch_gpu_utilization_ratio", "gpu", "1", MW_END) == 0.25);
    assert_true(tu_value(snap, "mlwatch_gpu_power_watts", "gpu", "1", MW_END) == 60);
    assert_int_equal(gh_errors(s), 0);
    mw_snapshot_free(snap);
    gh_close(s);
}

static double energy(gh_session *s, const char *gpu0_energy)
{
    char text[2048];
    snprintf(text, sizeof(text), "%sgpu 0 energy_mj=%s\n", four_gpus, gpu0_energy);
    gh_write_scenario(s, text);
    mw_snapshot *snap = gh_cycle(s);
    double v = tu_value(snap, "mlwatch_gpu_energy_joules_total", "gpu", "0", MW_END);
    mw_snapshot_free(snap);
    return v;
}

static void energy_monotonic_across_reset(void **state)
{
    (void)state;
    gh_session *s = gh_open("gpu", four_gpus, NULL);
    assert_true(energy(s, "5000000") == 5000);
    assert_true(energy(s, "6000000") == 6000);
    assert_true(energy(s, "1000") == 6001); /* driver reloaded: counter restarted */
    assert_true(energy(s, "3500") == 6003.5);
    assert_true(energy(s, "0") == 6003.5); /* again */
    assert_true(energy(s, "250") == 6003.75);
    gh_close(s);
}

static double xid(const mw_snapshot *snap, const char *gpu, const char *code, int line)
{
    if (!tu_has(snap, "mlwatch_gpu_xid_errors_total", "gpu", gpu, "xid", code, MW_END))
        fail_msg("line %d: no XID %s count for GPU %s", line, code, gpu);
    return tu_value(snap, "mlwatch_gpu_xid_errors_total", "gpu", gpu, "xid", code, MW_END);
}

static void xid_events(void **state)
{
    (void)state;
    gh_session *s = gh_open("gpu", four_gpus, NULL);
    mw_snapshot *snap = gh_cycle(s);
    assert_false(tu_has(snap, "mlwatch_gpu_xid_errors_total", MW_END));
    mw_snapshot_free(snap);
    char text[2048];
    snprintf(text, sizeof(text),
             "%sevent gpu=0 xid=79 id=1\nevent gpu=0 xid=48 id=2\nevent gpu=2 xid=79 id=3\n",
             four_gpus);
    gh_write_scenario(s, text);
    snap = gh_cycle(s);
    assert_true(xid(snap, "0", "79", __LINE__) == 1);
    assert_true(xid(snap, "0", "48", __LINE__) == 1);
    assert_true(xid(snap, "2", "79", __LINE__) == 1);
    assert_int_equal(tu_count(snap, "mlwatch_gpu_xid_errors_total"), 3);
    mw_snapshot_free(snap);
    /* Delivered once: the same events are not counted again; a new one is. */
    snap = gh_cycle(s);
    assert_true(xid(snap, "0", "79", __LINE__) == 1);
    mw_snapshot_free(snap);
    size_t len = strlen(text);
    snprintf(text + len, sizeof(text) - len, "event gpu=0 xid=79 id=4\n");
    gh_write_scenario(s, text);
    snap = gh_cycle(s);
    assert_true(xid(snap, "0", "79", __LINE__) == 2);
    mw_snapshot_free(snap);
    gh_close(s);
}

static void failing_calls_are_counted_and_retried(void **state)
{
    (void)state;
    char text[2048];
    snprintf(text, sizeof(text), "%sgpu 0 fail=temp:TIMEOUT,power:UNKNOWN\n", four_gpus);
    gh_session *s = gh_open("gpu", text, NULL);
    mw_snapshot *snap = gh_cycle(s);
    assert_false(tu_has(snap, "mlwatch_gpu_temperature_celsius", "gpu", "0", MW_END));
    assert_false(tu_has(snap, "mlwatch_gpu_power_watts", "gpu", "0", MW_END));
    assert_true(tu_value(snap, "mlwatch_gpu_temperature_celsius", "gpu", "1", MW_END) == 41);
    /* Two failing calls per poll; the thread's first poll and the first
     * sync may be one poll or two. */
    uint64_t first = gh_errors(s);
    assert_true(first == 2 || first == 4);
    mw_snapshot_free(snap);
    snap = gh_cycle(s); /* retried every poll, counted every time */
    assert_int_equal(gh_errors(s), first + 2);
    assert_true(tu_value(snap, "mlwatch_collector_errors_total", "collector", "gpu", MW_END) ==
                (double)(first + 2));
    mw_snapshot_free(snap);
    gh_write_scenario(s, four_gpus);
    snap = gh_cycle(s);
    assert_true(tu_value(snap, "mlwatch_gpu_temperature_celsius", "gpu", "0", MW_END) == 40);
    assert_true(tu_value(snap, "mlwatch_gpu_power_watts", "gpu", "0", MW_END) == 50);
    assert_int_equal(gh_errors(s), first + 2);
    mw_snapshot_free(snap);
    gh_close(s);
}

static void off(const char *scenario, const char *nvml)
{
    gh_session *s = gh_open("cgroup,gpu", scenario, nvml);
    mw_snapshot *snap = gh_cycle(s);
    assert_false(tu_has(snap, "mlwatch_gpu_info", MW_END));
    assert_false(tu_has(snap, "mlwatch_collector_duration_seconds", "collector", "gpu", MW_END));
    assert_true(tu_has(snap, "mlwatch_collector_duration_seconds", "collector", "cgroup", MW_END));
    assert_true(tu_has(snap, "mlwatch_container_cpu_seconds_total", "pod", "train-0", MW_END) ||
                tu_count(snap, "mlwatch_collector_duration_seconds") == 1);
    mw_snapshot_free(snap);
    gh_close(s);
}

static void library_missing_or_mismatched(void **state)
{
    (void)state;
    off(four_gpus, "/nonexistent/libnvidia-ml.so.1");
    off("system init=LIB_RM_VERSION_MISMATCH\ngpu 0 util=1\n", NULL);
    off("system init=DRIVER_NOT_LOADED\n", NULL);
    off("# no GPU\n", NULL);
    off(four_gpus, "none");
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

static void slow_driver_never_delays_a_cycle(void **state)
{
    (void)state;
    char text[2048];
    snprintf(text, sizeof(text), "%sproc gpu=0 pid=4001 mem=1\ngpu 0 procs_delay_ms=1500\n",
             four_gpus);
    gh_session *s = gh_open("gpu", text, NULL);
    /* Poll continuously: every 10 ms, process lists every 10 ms (each 1.5 s,
     * within the first cycle's 3-s wait for a first poll). */
    s->cfg.interval_ms = 10;
    ((mw_gpu_settings *)mw_config_group_mut(&s->cfg, &mw_gpu_options))->gpu_process_interval_ms =
        10;
    mw_collector_set_free(s->set);
    s->set = mw_collector_set_new(&s->env);
    mw_snapshot *snap = mw_snapshot_new();
    mw_collector_set_run(s->set, snap); /* the first cycle waits for the first poll */
    assert_true(tu_value(snap, "mlwatch_gpu_processes", "gpu", "0", MW_END) == 1);
    mw_snapshot_free(snap);
    double worst = 0;
    for (int k = 0; k < 15; k++) {
        struct timespec t0, pause = {0, 100000000};
        clock_gettime(CLOCK_MONOTONIC, &t0);
        snap = mw_snapshot_new();
        mw_collector_set_run(s->set, snap);
        double took = seconds_since(&t0);
        if (took > worst) worst = took;
        assert_true(tu_has(snap, "mlwatch_gpu_utilization_ratio", "gpu", "3", MW_END));
        mw_snapshot_free(snap);
        nanosleep(&pause, NULL);
    }
    /* The driver spends 1.5 s in every process listing; cycles do not. A
     * cycle that waited for one would take up to 1.5 s; half of that leaves
     * a loaded test machine room. */
    if (worst > 0.75) fail_msg("a collection cycle took %.3f s behind a slow driver", worst);
    gh_close(s);
}

int main(void)
{
    mw_log_set_level(MW_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(consumer_gpu_unsupported_fields),
        cmocka_unit_test(gpu_lost_and_back),
        cmocka_unit_test(energy_monotonic_across_reset),
        cmocka_unit_test(xid_events),
        cmocka_unit_test(failing_calls_are_counted_and_retried),
        cmocka_unit_test(library_missing_or_mismatched),
        cmocka_unit_test(slow_driver_never_delays_a_cycle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
