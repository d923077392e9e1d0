/* test_energy_module.c - the energy module as the agent runs it
 * (src/derive/energy_module.c): the CO2 of an interval uses the carbon
 * schedule's time-weighted mean over that interval, so a change of
 * intensity in the middle of an interval is split exactly (the model alone
 * is tested with one figure per interval in unit_energy, the means in
 * unit_carbon). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "agent/agent.h"
#include "agent/module.h"
#include "core/config.h"
#include "core/hostfs.h"
#include "core/util.h"
#include "derive/energy_module.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const mw_module mw_module_energy;

static const mw_metric_desc GPU_E = {"mlwatch_gpu_energy_joules_total", "", "joules", MW_COUNTER};
static const mw_metric_desc CUTIL = {"mlwatch_container_gpu_utilization_ratio", "", "ratio",
                                     MW_GAUGE};

/* 2024-05-01T12:00:00Z in milliseconds. */
#define NOON_MS 1714564800000LL

static mw_snapshot *kwh_at(int64_t ms, double kwh)
{
    mw_snapshot *s = mw_snapshot_new();
    s->timestamp_ms = ms;
    mw_emit(s, &GPU_E, kwh * 3.6e6, "gpu", "0", "uuid", "GPU-0", MW_END);
    mw_emit(s, &CUTIL, 1, "namespace", "ml", "pod", "a", "container", "main", "gpu", "0", MW_END);
    return s;
}

static double value(const mw_snapshot *s, const char *family)
{
    double v = -1;
    assert_int_equal(mw_snapshot_get(s, family, &v, MW_END), 0);
    return v;
}

/* A schedule of 100 g/kWh until 12:00:10 and 500 after; 1 kWh in each of
 * two 10-s intervals, 12:00:05-12:00:15 (half of each: mean 300 g/kWh,
 * 300 g; the first or last value would give 100 or 500 g) and
 * 12:00:15-12:00:25 (500 g). */
static void co2_by_the_intervals_mean(void **state)
{
    (void)state;
    const char *dir = tu_fixture_copy("bare-vm"); /* the root, and a folder for the rest */
    tu_write(dir, "carbon.csv", "time,grams\n2024-05-01T12:00:00Z,100\n2024-05-01T12:00:10Z,500\n");
    char csv[600], data[600], root[600];
    snprintf(csv, sizeof(csv), "%s/carbon.csv", dir);
    snprintf(data, sizeof(data), "%s/data", dir);
    snprintf(root, sizeof(root), "%s", dir);
    mw_options_register_all();
    static mw_config cfg;
    mw_config_defaults(&cfg);
    char *argv[] = {"mlwatch", "agent", "--carbon-intensity",   csv,   "--data-dir", data,
                    "--root",  root,    "--energy-idle-policy", "none"};
    char err[512];
    assert_int_equal(
        mw_config_from_args(&cfg, MW_ARRAY_LEN(argv), argv, 2, NULL, NULL, 0, err, sizeof(err)), 0);
    mw_hostfs host;
    assert_int_equal(mw_hostfs_open(&host, root), 0);
    mw_env env = {&cfg, &host, NULL, NULL, NULL, 0};
    void *st = NULL;
    assert_int_equal(mw_module_energy.init(&env, &st), 0);
    const int64_t t[] = {NOON_MS + 5000, NOON_MS + 15000, NOON_MS + 25000};
    const double want_co2[] = {0, 300, 800};
    for (int i = 0; i < 3; i++) {
        mw_snapshot *s = kwh_at(t[i], i);
        mw_module_energy.derive(st, s);
        double co2 = value(s, "mlwatch_node_co2_grams_total");
        if (fabs(co2 - want_co2[i]) > 1e-9)
            fail_msg("interval %d: %.12g g, want %g", i, co2, want_co2[i]);
        double pod = -1; /* the pod alone uses the GPU: all of it */
        if (i) {
            assert_int_equal(
                mw_snapshot_get(s, "mlwatch_container_co2_grams_total", &pod, "pod", "a", MW_END),
                0);
            if (fabs(pod - want_co2[i]) > 1e-9) fail_msg("interval %d: pod %.12g g", i, pod);
        }
        mw_snapshot_free(s);
    }
    mw_module_energy.destroy(st);
    mw_hostfs_close(&host);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(co2_by_the_intervals_mean),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tu_cleanup();
    return rc;
}
