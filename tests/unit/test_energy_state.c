/* test_energy_state.c - energy and CO2 totals across a restart: saved
 * atomically, read back, continued; corrupt, foreign and impossible files
 * are reported and set aside, never trusted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "derive/energy.h"
#include "derive/energy_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const mw_metric_desc GPU_E = {"mlwatch_gpu_energy_joules_total", "", "joules", MW_COUNTER};
static const mw_metric_desc CUTIL = {"mlwatch_container_gpu_utilization_ratio", "", "ratio",
                                     MW_GAUGE};

static mw_energy *model(void)
{
    mw_energy_params p = {.idle_watts_per_cpu = 1, .max_watts_per_cpu = 2};
    return mw_energy_new(&p);
}

/* One interval of j joules on GPU 0, all to pod "a", at intensity 100. */
static void step(mw_energy *e, int64_t ms, double counter)
{
    mw_snapshot *s = mw_snapshot_new();
    s->timestamp_ms = ms;
    mw_emit(s, &GPU_E, counter, "gpu", "0", "uuid", "GPU-0", MW_END);
    mw_emit(s, &CUTIL, 1, "namespace", "ml", "pod", "a", "container", "main", "gpu", "0", MW_END);
    mw_energy_step(e, s, 100);
    mw_snapshot_free(s);
}

static double gpu_total(const mw_energy *e, double *co2)
{
    double j[MW_EC_N][MW_EK_N];
    if (mw_energy_container(e, "ml", "a", "main", j, co2) < 0) return -1;
    return j[MW_EC_GPU][0] + j[MW_EC_GPU][1];
}

static char dir[64];

static void write_file(const char *text)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", dir, MW_ENERGY_STATE_FILE);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static int exists(const char *name)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static void survives_restart(void **state)
{
    (void)state;
    mw_energy *e = model();
    step(e, 1000, 0);
    step(e, 2000, 3.6e6);
    double co2;
    assert_true(gpu_total(e, &co2) == 3.6e6);
    assert_true(co2 == 100);
    assert_int_equal(mw_energy_state_save(e, dir, "machine-1", 2000), 0);
    assert_false(exists(MW_ENERGY_STATE_FILE ".tmp"));
    mw_energy_free(e);
    /* The restarted agent: totals back, then they grow from there. */
    char err[512];
    e = model();
    assert_int_equal(mw_energy_state_load(e, dir, "machine-1", err, sizeof(err)), 0);
    assert_true(gpu_total(e, &co2) == 3.6e6);
    step(e, 10000, 500); /* a new baseline: the GPU counter is not ours to trust */
    step(e, 11000, 500 + 3.6e6);
    assert_true(gpu_total(e, &co2) == 7.2e6);
    assert_true(co2 == 200);
    mw_snapshot *s = mw_snapshot_new();
    s->timestamp_ms = 12000;
    mw_energy_step(e, s, 100);
    double v;
    assert_int_equal(
        mw_snapshot_get(s, "mlwatch_node_energy_joules_total", &v, "source", "gpu", MW_END), 0);
    assert_true(v == 7.2e6);
    mw_snapshot_free(s);
    mw_energy_free(e);
}

static void untrusted_files(void **state)
{
    (void)state;
    const char *bad[] = {
        "{\"format\":\"mlwatch-energy-state\",\"version\":1,\"identity\":\"machine-1\",\"contai",
        "{\"format\":\"something-else\",\"version\":1}",
        "{\"format\":\"mlwatch-energy-state\",\"version\":1,\"identity\":\"machine-2\","
        "\"containers\":[],\"node\":[]}",
        "{\"format\":\"mlwatch-energy-state\",\"version\":1,\"identity\":\"machine-1\","
        "\"containers\":[{\"namespace\":\"ml\",\"pod\":\"a\",\"container\":\"main\",\"co2_grams\":"
        "1,\"joules\":{\"cpu\":{\"dynamic\":-5,\"idle\":0},\"dram\":{\"dynamic\":0,\"idle\":0},"
        "\"gpu\":{\"dynamic\":0,\"idle\":0},\"other\":{\"dynamic\":0,\"idle\":0}}}],\"node\":[]}",
    };
    const char *why[] = {"not JSON", "not an mlwatch energy state file",
                         "written on another machine ('machine-2', this is 'machine-1')",
                         "containers[0]: bad joules.cpu"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        write_file(bad[i]);
        mw_energy *e = model();
        char err[512];
        assert_int_equal(mw_energy_state_load(e, dir, "machine-1", err, sizeof(err)), -1);
        if (!strstr(err, why[i])) fail_msg("case %zu: '%s' lacks '%s'", i, err, why[i]);
        assert_non_null(strstr(err, "set aside as energy-state.json.rejected"));
        assert_false(exists(MW_ENERGY_STATE_FILE));
        assert_true(exists(MW_ENERGY_STATE_FILE ".rejected"));
        double co2;
        assert_true(gpu_total(e, &co2) == -1); /* nothing restored */
        mw_energy_free(e);
    }
    /* No file at all: a fresh start, nothing to report. */
    mw_energy *e = model();
    char err[64];
    assert_int_equal(mw_energy_state_load(e, dir, "machine-1", err, sizeof(err)), 1);
    mw_energy_free(e);
}

/* The file's exact text: written one entry at a time, it is what one
 * jansson tree of the whole state printed (the same keys, order and
 * numbers; the remainder is the entry with empty names). An identity that
 * needs escaping is escaped. */
static void dump_text(void **state)
{
    (void)state;
    mw_energy *e = model();
    mw_snapshot *s = mw_snapshot_new();
    s->timestamp_ms = 1000;
    mw_emit(s, &GPU_E, 0, "gpu", "0", "uuid", "GPU-0", MW_END);
    mw_emit(s, &CUTIL, 1, "namespace", "ml", "pod", "a", "container", "main", "gpu", "0", MW_END);
    mw_energy_step(e, s, 100);
    mw_snapshot_free(s);
    s = mw_snapshot_new();
    s->timestamp_ms = 2000;
    mw_emit(s, &GPU_E, 2.5, "gpu", "0", "uuid", "GPU-0", MW_END);
    mw_emit(s, &CUTIL, 1, "namespace", "ml", "pod", "a", "container", "main", "gpu", "0", MW_END);
    mw_energy_step(e, s, 100);
    mw_snapshot_free(s);
    char *text = mw_energy_state_dump(e, "node \"7\"", 2000);
    assert_non_null(text);
    assert_string_equal(
        text,
        "{\"format\":\"mlwatch-energy-state\",\"version\":1,\"identity\":\"node \\\"7\\\"\","
        "\"saved_ms\":2000,\"containers\":[{\"namespace\":\"ml\",\"pod\":\"a\",\"container\":"
        "\"main\",\"joules\":{\"cpu\":{\"dynamic\":0.0,\"idle\":0.0},\"dram\":{\"dynamic\":0.0,"
        "\"idle\":0.0},\"gpu\":{\"dynamic\":0.0,\"idle\":2.5},\"other\":{\"dynamic\":0.0,"
        "\"idle\":0.0}},\"co2_grams\":6.9444444444444444e-5},{\"namespace\":\"\",\"pod\":\"\","
        "\"container\":\"\",\"joules\":{\"cpu\":{\"dynamic\":0.0,\"idle\":0.0},\"dram\":"
        "{\"dynamic\":0.0,\"idle\":0.0},\"gpu\":{\"dynamic\":0.0,\"idle\":0.0},\"other\":"
        "{\"dynamic\":0.0,\"idle\":0.0}},\"co2_grams\":0.0}],\"node\":[{\"source\":\"gpu\","
        "\"zone\":\"0\",\"method\":\"measured\",\"joules\":2.5}]}");
    free(text);
    mw_energy_free(e);

    /* A container whose name is not UTF-8 is left out, and only it: the
     * text is still JSON and the others read back. */
    e = model();
    for (int i = 0; i < 2; i++) {
        s = mw_snapshot_new();
        s->timestamp_ms = 1000 + 1000 * i;
        mw_emit(s, &GPU_E, 4.0 * i, "gpu", "0", "uuid", "GPU-0", MW_END);
        mw_emit(s, &CUTIL, 1, "namespace", "ml", "pod", "\xff\xfe", "container", "main", "gpu", "0",
                MW_END);
        mw_emit(s, &CUTIL, 1, "namespace", "ml", "pod", "a", "container", "main", "gpu", "0",
                MW_END);
        mw_energy_step(e, s, 100);
        mw_snapshot_free(s);
    }
    text = mw_energy_state_dump(e, "m", 2000);
    assert_non_null(text);
    assert_null(strstr(text, "\xff"));
    mw_energy *back = model();
    char err[256];
    assert_int_equal(mw_energy_state_parse(back, text, strlen(text), "m", err, sizeof(err)), 0);
    double co2;
    assert_true(gpu_total(back, &co2) == 2);
    assert_true(gpu_total(e, &co2) == 2);
    free(text);
    mw_energy_free(back);
    mw_energy_free(e);
    assert_null(mw_energy_state_dump(NULL, "\xff", 1)); /* an identity must be UTF-8 */
}

static void unwritable_dir(void **state)
{
    (void)state;
    mw_energy *e = model();
    assert_true(mw_energy_state_save(e, "/proc/mlwatch-no/such", "m", 1) < 0);
    mw_energy_free(e);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/mlwatch-state-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(survives_restart),
        cmocka_unit_test(untrusted_files),
        cmocka_unit_test(unwritable_dir),
        cmocka_unit_test(dump_text),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
