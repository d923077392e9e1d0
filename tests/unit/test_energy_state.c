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
    mw_energy_params p;
    mw_energy_params_init(&p, MW_IDLE_POLICY_NONE);
    p.idle_watts_per_cpu = 1;
    p.max_watts_per_cpu = 2;
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
        "{\"format\":\"mlwatch-energy-state\",\"version\":2,\"identity\":\"node \\\"7\\\"\","
        "\"saved_ms\":2000,\"containers\":[{\"namespace\":\"ml\",\"pod\":\"a\",\"container\":"
        "\"main\",\"joules\":{\"gpu\":{\"measured\":{\"dynamic\":2.5,\"idle\":0.0}}},"
        "\"co2_grams\":6.9444444444444444e-5}],\"shares\":[{\"share\":\"unreserved\",\"joules\":"
        "{},\"co2_grams\":0.0},{\"share\":\"system\",\"joules\":{},\"co2_grams\":0.0}],"
        "\"node\":[{\"source\":\"gpu\",\"zone\":\"0\",\"method\":\"measured\",\"joules\":2.5}],"
        "\"components\":[{\"component\":\"gpu\",\"kind\":\"dynamic\",\"method\":\"measured\","
        "\"joules\":2.5}],\"floors\":[],\"node_co2_grams\":6.9444444444444444e-5}");
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

/* A version 1 file (no shares, methods, components or floors): its
 * containers come back as measured, the CPU as estimated when the model
 * wrote a node total; its remainder (empty names) becomes the system share
 * (dynamic) and the unreserved share (idle); the component totals and the
 * node's CO2 are the sum of the parts. */
static void reads_version_1(void **state)
{
    (void)state;
    const char *v1 =
        "{\"format\":\"mlwatch-energy-state\",\"version\":1,\"identity\":\"m\",\"saved_ms\":1,"
        "\"containers\":[{\"namespace\":\"ml\",\"pod\":\"a\",\"container\":\"main\",\"joules\":"
        "{\"cpu\":{\"dynamic\":10,\"idle\":2},\"dram\":{\"dynamic\":1,\"idle\":0},\"gpu\":"
        "{\"dynamic\":0,\"idle\":0},\"other\":{\"dynamic\":0,\"idle\":0}},\"co2_grams\":3},"
        "{\"namespace\":\"\",\"pod\":\"\",\"container\":\"\",\"joules\":{\"cpu\":{\"dynamic\":4,"
        "\"idle\":30},\"dram\":{\"dynamic\":0,\"idle\":5},\"gpu\":{\"dynamic\":0,\"idle\":0},"
        "\"other\":{\"dynamic\":0,\"idle\":0}},\"co2_grams\":7}],\"node\":[{\"source\":\"model\","
        "\"zone\":\"cpu\",\"method\":\"estimated\",\"joules\":46},{\"source\":\"rapl\",\"zone\":"
        "\"package-0/dram\",\"method\":\"measured\",\"joules\":6}]}";
    mw_energy *e = model();
    char err[256];
    assert_int_equal(mw_energy_state_parse(e, v1, strlen(v1), "m", err, sizeof(err)), 0);
    mw_snapshot *s = mw_snapshot_new();
    s->timestamp_ms = 5000;
    mw_energy_step(e, s, -1);
    double v;
    assert_int_equal(mw_snapshot_get(s, "mlwatch_container_energy_joules_total", &v, "pod", "a",
                                     "component", "cpu", "kind", "dynamic", "method", "estimated",
                                     MW_END),
                     0);
    assert_true(v == 10);
    assert_int_equal(mw_snapshot_get(s, "mlwatch_container_energy_joules_total", &v, "pod", "a",
                                     "component", "dram", "kind", "dynamic", "method", "measured",
                                     MW_END),
                     0);
    assert_true(v == 1);
    assert_int_equal(mw_snapshot_get(s, "mlwatch_energy_share_joules_total", &v, "share", "system",
                                     "component", "cpu", "kind", "dynamic", "method", "estimated",
                                     MW_END),
                     0);
    assert_true(v == 4);
    assert_int_equal(mw_snapshot_get(s, "mlwatch_energy_share_joules_total", &v, "share",
                                     "unreserved", "component", "cpu", "kind", "idle", "method",
                                     "estimated", MW_END),
                     0);
    assert_true(v == 30);
    assert_int_equal(mw_snapshot_get(s, "mlwatch_energy_share_joules_total", &v, "share",
                                     "unreserved", "component", "dram", "kind", "idle", MW_END),
                     0);
    assert_true(v == 5);
    assert_int_equal(mw_snapshot_get(s, "mlwatch_energy_component_joules_total", &v, "component",
                                     "cpu", "kind", "idle", "method", "estimated", MW_END),
                     0);
    assert_true(v == 32);
    assert_int_equal(mw_snapshot_get(s, "mlwatch_node_co2_grams_total", &v, MW_END), 0);
    assert_true(v == 10);
    assert_int_equal(mw_snapshot_get(s, "mlwatch_container_energy_joules_total", &v, "pod", "",
                                     "container", "", MW_END),
                     -1);
    mw_snapshot_free(s);
    mw_energy_free(e);
}

/* Learnt floors are kept: a GPU idle (nobody on it) at 70 W learns 70 W;
 * the restarted model says so before it has seen anything idle, and a
 * component with nothing learnt is not written. Impossible floors are
 * refused. */
static void floors_kept(void **state)
{
    (void)state;
    mw_energy *e = model();
    for (int i = 0; i < 2; i++) {
        mw_snapshot *s = mw_snapshot_new();
        s->timestamp_ms = 1000 * (i + 1);
        mw_emit(s, &GPU_E, 70.0 * i, "gpu", "0", "uuid", "GPU-0", MW_END);
        mw_energy_step(e, s, -1);
        mw_snapshot_free(s);
    }
    char *text = mw_energy_state_dump(e, "m", 1);
    assert_non_null(
        strstr(text, "\"floors\":[{\"component\":\"gpu\",\"gpu\":\"GPU-0\",\"watts\":70.0}]"));
    mw_energy_free(e);
    e = model();
    char err[256];
    assert_int_equal(mw_energy_state_parse(e, text, strlen(text), "m", err, sizeof(err)), 0);
    free(text);
    for (int i = 0; i < 2; i++) { /* busy now, at 300 W: the floor stays 70 W */
        mw_snapshot *s = mw_snapshot_new();
        s->timestamp_ms = 10000 + 1000 * i;
        mw_emit(s, &GPU_E, 1000 + 300.0 * i, "gpu", "0", "uuid", "GPU-0", MW_END);
        mw_emit(s, &CUTIL, 1, "namespace", "ml", "pod", "a", "container", "main", "gpu", "0",
                MW_END);
        mw_energy_step(e, s, -1);
        if (i) {
            double v;
            assert_int_equal(mw_snapshot_get(s, "mlwatch_energy_idle_floor_watts", &v, "component",
                                             "gpu", "gpu", "0", "source", "learnt", MW_END),
                             0);
            assert_true(v == 70);
            assert_true(mw_energy_last(e)->component[MW_EC_GPU][MW_EK_IDLE] == 70);
        }
        mw_snapshot_free(s);
    }
    mw_energy_free(e);
    const char *bad = "{\"format\":\"mlwatch-energy-state\",\"version\":2,\"identity\":\"m\","
                      "\"containers\":[],\"shares\":[],\"node\":[],\"components\":[],"
                      "\"node_co2_grams\":0,\"floors\":[{\"component\":\"cpu\",\"gpu\":\"\","
                      "\"watts\":-3}]}";
    e = model();
    assert_int_equal(mw_energy_state_parse(e, bad, strlen(bad), "m", err, sizeof(err)), -1);
    assert_string_equal(err, "floors[0]: malformed");
    mw_energy_free(e);
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
        cmocka_unit_test(survives_restart), cmocka_unit_test(untrusted_files),
        cmocka_unit_test(unwritable_dir),   cmocka_unit_test(dump_text),
        cmocka_unit_test(reads_version_1),  cmocka_unit_test(floors_kept),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
