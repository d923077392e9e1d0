/* test_gpu_gpm.c - per-GPU and per-MIG-instance activity through NVML's GPM
 * (src/collect/gpu/nvml_gpm.c) against the fake NVML: an H100 in MIG mode
 * (tests/fakenvml/scenarios/h100-mig.txt) and a pre-Hopper A100
 * (a100-mig.txt). GPM metrics are rates between two samples: a GPU or
 * instance seen for the first time gets a pair 0.1 s apart, then each poll
 * pairs its sample with the previous poll's; with the fake, the values are
 * exactly the scenario's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "gpu_harness.h"
#include "collect/gpu/nvml_abi.h"

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

/* The scenario with every occurrence of from replaced by to. */
static char *edited(const char *name, const char *from, const char *to)
{
    static char out[1 << 16];
    const char *in = read_scenario(name), *p = strstr(in, from);
    assert_non_null(p);
    snprintf(out, sizeof(out), "%.*s%s%s", (int)(p - in), in, to, p + strlen(from));
    return out;
}

static const double graphics[7] = {0, 1.5, 60, 70, 80, 90, 100};
static const double occupancy[7] = {0, 0.5, 30, 35, 40, 45, 50};
static const double dram[7] = {0, 0.25, 20, 25, 30, 35, -1};

static const char *mig_uuid(int k)
{
    static char uuid[64];
    snprintf(uuid, sizeof(uuid), "MIG-1000000%d-aaaa-5bbb-8ccc-00000000000%d", k, k);
    return uuid;
}

static void h100_mig_activity_per_instance(void **state)
{
    (void)state;
    gh_session *s = gh_open("cgroup,gpu", read_scenario("h100-mig.txt"), NULL);
    mw_snapshot *snap = gh_cycle(s);
    assert_int_equal(tu_count(snap, "mlwatch_mig_utilization_ratio"), 7);
    assert_int_equal(tu_count(snap, "mlwatch_mig_sm_occupancy_ratio"), 7);
    assert_int_equal(tu_count(snap, "mlwatch_mig_dram_bandwidth_utilization_ratio"), 6);
    for (int k = 0; k < 7; k++) {
        char gi[4];
        snprintf(gi, sizeof(gi), "%d", 7 + k);
        assert_true(tu_value(snap, "mlwatch_mig_utilization_ratio", "gpu", "0", "uuid", mig_uuid(k),
                             "mig_profile", "1g.10gb", "gpu_instance", gi, "compute_instance", "0",
                             MW_END) == graphics[k] / 100.0);
        assert_true(tu_value(snap, "mlwatch_mig_sm_occupancy_ratio", "uuid", mig_uuid(k), MW_END) ==
                    occupancy[k] / 100.0);
        if (dram[k] >= 0)
            assert_true(tu_value(snap, "mlwatch_mig_dram_bandwidth_utilization_ratio", "uuid",
                                 mig_uuid(k), MW_END) == dram[k] / 100.0);
    }
    assert_true(tu_value(snap, "mlwatch_gpu_graphics_activity_ratio", "gpu", "0", MW_END) ==
                41.5 / 100.0);
    assert_true(tu_value(snap, "mlwatch_gpu_sm_occupancy_ratio", "gpu", "0", MW_END) == 0.2);
    assert_true(tu_value(snap, "mlwatch_gpu_dram_bandwidth_utilization_ratio", "gpu", "0",
                         MW_END) == 12.25 / 100.0);
    /* MIG mode: still no device utilization from nvmlDeviceGetUtilizationRates. */
    assert_false(tu_has(snap, "mlwatch_gpu_utilization_ratio", MW_END));
    mw_snapshot_free(snap);

    /* The world changes: the next pair covers the new value. */
    gh_write_scenario(s, edited("h100-mig.txt", "graphics=60 ", "graphics=12.5 "));
    snap = gh_cycle(s);
    assert_true(tu_value(snap, "mlwatch_mig_utilization_ratio", "gpu_instance", "9", MW_END) ==
                0.125);
    assert_true(tu_value(snap, "mlwatch_mig_utilization_ratio", "gpu_instance", "10", MW_END) ==
                0.7);
    assert_int_equal(gh_errors(s), 0);
    mw_snapshot_free(snap);
    /* Two samples per GPU and per GPU instance, allocated once; one sample
     * of each per poll, plus one for the first pair; one computation per
     * poll for each. (The thread's own first poll and the sync may be one
     * poll or two: counted from the calls.) */
    unsigned long samples = gh_calls("nvmlGpmSampleGet");
    assert_true(samples >= 3);
    assert_int_equal(gh_calls("nvmlGpmQueryDeviceSupport"), 1);
    assert_int_equal(gh_calls("nvmlGpmSampleAlloc"), 16);
    assert_int_equal(gh_calls("nvmlGpmMigSampleGet"), samples * 7);
    assert_int_equal(gh_calls("nvmlGpmMetricsGet"), (samples - 1) * 8);
    gh_close(s);
}

/* An A100 is before Hopper: no GPM, asked once, nothing else called. */
static void a100_has_no_gpm(void **state)
{
    (void)state;
    gh_session *s = gh_open("cgroup,gpu", read_scenario("a100-mig.txt"), NULL);
    for (int c = 0; c < 3; c++) {
        mw_snapshot *snap = gh_cycle(s);
        assert_int_equal(tu_count(snap, "mlwatch_mig_memory_used_bytes"), 7);
        assert_false(tu_has(snap, "mlwatch_mig_utilization_ratio", MW_END));
        assert_false(tu_has(snap, "mlwatch_gpu_graphics_activity_ratio", MW_END));
        mw_snapshot_free(snap);
    }
    assert_int_equal(gh_calls("nvmlGpmQueryDeviceSupport"), 1);
    assert_int_equal(gh_calls("nvmlGpmSampleAlloc"), 0);
    assert_int_equal(gh_calls("nvmlGpmSampleGet"), 0);
    assert_int_equal(gh_calls("nvmlGpmMigSampleGet"), 0);
    assert_int_equal(gh_errors(s), 0);
    gh_close(s);
}

/* A driver whose MIG samples answer NOT_SUPPORTED: the whole GPU's metrics
 * stay, MIG samples are not asked again. */
static void mig_samples_not_supported(void **state)
{
    (void)state;
    gh_session *s = gh_open(
        "cgroup,gpu", edited("h100-mig.txt", "gpm=1", "gpm=1 fail=gpmmig:NOT_SUPPORTED"), NULL);
    for (int c = 0; c < 3; c++)
        mw_snapshot_free(gh_cycle(s));
    mw_snapshot *snap = gh_cycle(s);
    assert_false(tu_has(snap, "mlwatch_mig_utilization_ratio", MW_END));
    assert_true(tu_value(snap, "mlwatch_gpu_sm_occupancy_ratio", "gpu", "0", MW_END) == 0.2);
    assert_int_equal(gh_calls("nvmlGpmMigSampleGet"), 1);
    assert_int_equal(gh_errors(s), 0);
    mw_snapshot_free(snap);
    gh_close(s);
}

/* A failing sample is an error; the pair starts over and values come back
 * at the first poll after the driver recovers. */
static void failing_sample_starts_over(void **state)
{
    (void)state;
    gh_session *s = gh_open("cgroup,gpu", read_scenario("h100-mig.txt"), NULL);
    mw_snapshot_free(gh_cycle(s));
    gh_write_scenario(s, edited("h100-mig.txt", "gpm=1", "gpm=1 fail=gpmmig:UNKNOWN"));
    mw_snapshot *snap = gh_cycle(s);
    assert_false(tu_has(snap, "mlwatch_mig_utilization_ratio", MW_END));
    assert_true(tu_has(snap, "mlwatch_gpu_graphics_activity_ratio", MW_END));
    assert_true(gh_errors(s) > 0);
    mw_snapshot_free(snap);
    gh_write_scenario(s, read_scenario("h100-mig.txt"));
    snap = gh_cycle(s); /* a first pair again */
    assert_true(tu_value(snap, "mlwatch_mig_utilization_ratio", "gpu_instance", "8", MW_END) ==
                0.015);
    mw_snapshot_free(snap);
    gh_close(s);
}

/* A GPU lost and back: its samples are forgotten and the pair starts over. */
static void lost_gpu_starts_over(void **state)
{
    (void)state;
    gh_session *s = gh_open("cgroup,gpu", read_scenario("h100-mig.txt"), NULL);
    mw_snapshot_free(gh_cycle(s));
    mw_snapshot_free(gh_cycle(s));
    unsigned long allocs = gh_calls("nvmlGpmSampleAlloc");
    gh_write_scenario(s, edited("h100-mig.txt", "gpm=1", "gpm=1 lost=1"));
    mw_snapshot *snap = gh_cycle(s);
    assert_true(tu_value(snap, "mlwatch_gpu_lost", "gpu", "0", MW_END) == 1);
    assert_false(tu_has(snap, "mlwatch_mig_utilization_ratio", MW_END));
    mw_snapshot_free(snap);
    gh_write_scenario(s, read_scenario("h100-mig.txt"));
    snap = gh_cycle(s);
    assert_true(tu_value(snap, "mlwatch_gpu_lost", "gpu", "0", MW_END) == 0);
    assert_true(tu_value(snap, "mlwatch_mig_utilization_ratio", "gpu_instance", "13", MW_END) ==
                1.0);
    mw_snapshot_free(snap);
    assert_int_equal(gh_calls("nvmlGpmQueryDeviceSupport"), 2);
    /* The old samples were given back and new ones allocated. */
    assert_int_equal(gh_calls("nvmlGpmSampleFree"), allocs);
    assert_int_equal(gh_calls("nvmlGpmSampleAlloc"), 2 * allocs);
    gh_close(s);
}

/* An instance created while running: its first pair is taken at once; the
 * GPU and the other instances keep their pairs (one sample each). */
static void new_instance_primed_alone(void **state)
{
    (void)state;
    /* Instance 6 (GI 13) absent at first. */
    char *six = edited("h100-mig.txt", "mig gpu=0 index=6", "#mig gpu=0 index=6");
    gh_session *s = gh_open("cgroup,gpu", six, NULL);
    mw_snapshot *snap = gh_cycle(s);
    assert_int_equal(tu_count(snap, "mlwatch_mig_utilization_ratio"), 6);
    mw_snapshot_free(snap);
    unsigned long whole = gh_calls("nvmlGpmSampleGet"), mig = gh_calls("nvmlGpmMigSampleGet");
    gh_write_scenario(s, read_scenario("h100-mig.txt"));
    snap = gh_cycle(s);
    assert_int_equal(tu_count(snap, "mlwatch_mig_utilization_ratio"), 7);
    assert_true(tu_value(snap, "mlwatch_mig_utilization_ratio", "gpu_instance", "13", MW_END) ==
                1.0);
    assert_int_equal(gh_calls("nvmlGpmSampleGet") - whole, 1);
    assert_int_equal(gh_calls("nvmlGpmMigSampleGet") - mig, 6 + 2);
    mw_snapshot_free(snap);
    gh_close(s);
}

/* The fake's GPM itself, called as a program would call NVML: the errors
 * of the real API (so that a caller's mistake fails in the tests too). */
#define SYM(h, name, type) ((type)sym(h, name))
static void *sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    assert_non_null(p);
    return p;
}

static void fake_gpm_api_errors(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "/tmp/mlwatch-gpm-api-%d.txt", (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(edited("h100-mig.txt", "system driver=550.54.15",
                 "system driver=550.54.15\ngpu 1 name=\"NVIDIA A100-SXM4-80GB\" uuid=GPU-a "
                 "bus=00000000:28:00.0"),
          f);
    fclose(f);
    setenv("FAKE_NVML_SCENARIO", path, 1);
    void *h = dlopen(gh_fake_nvml(), RTLD_NOW | RTLD_LOCAL);
    assert_non_null(h);
    assert_int_equal(SYM(h, "nvmlInit_v2", nvmlInit_v2_fn)(), NVML_SUCCESS);
    nvmlDevice_t h100, a100, mig;
    nvmlDeviceGetHandleByIndex_v2_fn by_index =
        SYM(h, "nvmlDeviceGetHandleByIndex_v2", nvmlDeviceGetHandleByIndex_v2_fn);
    assert_int_equal(by_index(0, &h100), NVML_SUCCESS);
    assert_int_equal(by_index(1, &a100), NVML_SUCCESS);
    assert_int_equal(SYM(h, "nvmlDeviceGetMigDeviceHandleByIndex",
                         nvmlDeviceGetMigDeviceHandleByIndex_fn)(h100, 0, &mig),
                     NVML_SUCCESS);
    nvmlGpmQueryDeviceSupport_fn query =
        SYM(h, "nvmlGpmQueryDeviceSupport", nvmlGpmQueryDeviceSupport_fn);
    nvmlGpmSampleAlloc_fn alloc = SYM(h, "nvmlGpmSampleAlloc", nvmlGpmSampleAlloc_fn);
    nvmlGpmSampleFree_fn release = SYM(h, "nvmlGpmSampleFree", nvmlGpmSampleFree_fn);
    nvmlGpmSampleGet_fn get = SYM(h, "nvmlGpmSampleGet", nvmlGpmSampleGet_fn);
    nvmlGpmMigSampleGet_fn mig_get = SYM(h, "nvmlGpmMigSampleGet", nvmlGpmMigSampleGet_fn);
    nvmlGpmMetricsGet_fn metrics = SYM(h, "nvmlGpmMetricsGet", nvmlGpmMetricsGet_fn);

    nvmlGpmSupport_t sup = {NVML_GPM_SUPPORT_VERSION, 7};
    assert_int_equal(query(h100, &sup), NVML_SUCCESS);
    assert_int_equal(sup.isSupportedDevice, 1);
    assert_int_equal(query(a100, &sup), NVML_SUCCESS);
    assert_int_equal(sup.isSupportedDevice, 0);
    sup.version = 2;
    assert_int_equal(query(h100, &sup), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);

    nvmlGpmSample_t a, b, c;
    assert_int_equal(alloc(&a), NVML_SUCCESS);
    assert_int_equal(alloc(&b), NVML_SUCCESS);
    assert_int_equal(alloc(&c), NVML_SUCCESS);
    assert_int_equal(get(a100, a), NVML_ERROR_NOT_SUPPORTED); /* before Hopper */
    assert_int_equal(get(mig, a), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(mig_get(mig, 7, a), NVML_ERROR_INVALID_ARGUMENT); /* the parent's handle */
    assert_int_equal(mig_get(h100, 99, a), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(mig_get(h100, 6, a), NVML_ERROR_NOT_FOUND);

    static nvmlGpmMetricsGet_t mg;
    memset(&mg, 0, sizeof(mg));
    mg.version = NVML_GPM_METRICS_GET_VERSION;
    mg.numMetrics = 2;
    mg.metrics[0].metricId = NVML_GPM_METRIC_GRAPHICS_UTIL;
    mg.metrics[1].metricId = NVML_GPM_METRIC_SM_UTIL; /* not in the fake */
    mg.sample1 = a;
    mg.sample2 = b;
    assert_int_equal(metrics(&mg), NVML_ERROR_INVALID_ARGUMENT); /* never filled */
    assert_int_equal(mig_get(h100, 8, a), NVML_SUCCESS);
    assert_int_equal(mig_get(h100, 8, b), NVML_SUCCESS);
    assert_int_equal(get(h100, c), NVML_SUCCESS);
    mg.sample1 = b;
    mg.sample2 = a;
    assert_int_equal(metrics(&mg), NVML_ERROR_INVALID_ARGUMENT); /* wrong order */
    mg.sample1 = a;
    mg.sample2 = c;
    assert_int_equal(metrics(&mg), NVML_ERROR_INVALID_ARGUMENT); /* GPU and instance */
    mg.sample2 = b;
    mg.version = 2;
    assert_int_equal(metrics(&mg), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    mg.version = NVML_GPM_METRICS_GET_VERSION;
    assert_int_equal(metrics(&mg), NVML_SUCCESS);
    assert_int_equal(mg.metrics[0].nvmlReturn, NVML_SUCCESS);
    assert_true(mg.metrics[0].value == 1.5);
    assert_string_equal(mg.metrics[0].metricInfo.shortName, "GRACT");
    assert_int_equal(mg.metrics[1].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);

    assert_int_equal(release(a), NVML_SUCCESS);
    assert_int_equal(release(b), NVML_SUCCESS);
    assert_int_equal(release(c), NVML_SUCCESS);
    assert_int_equal(SYM(h, "nvmlShutdown", nvmlShutdown_fn)(), NVML_SUCCESS);
    dlclose(h);
    unlink(path);
}

int main(void)
{
    mw_log_set_level(MW_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(h100_mig_activity_per_instance),
        cmocka_unit_test(a100_has_no_gpm),
        cmocka_unit_test(mig_samples_not_supported),
        cmocka_unit_test(failing_sample_starts_over),
        cmocka_unit_test(lost_gpu_starts_over),
        cmocka_unit_test(new_instance_primed_alone),
        cmocka_unit_test(fake_gpm_api_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
