/* test_idle.c - idle GPU sessions: the hysteresis rule, the module on
 * hand-made snapshots (exact idle seconds, GPU-seconds, energy and CO2), the
 * `idle:` config section and restoring open episodes after a restart. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "agent/module.h"
#include "agent/agent.h"
#include "core/config.h"
#include "core/util.h"
#include "derive/idle.h"
#include "derive/idle_config.h"
#include "notify/notify_state.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The idle module as the agent runs it, with its notifications
 * (agent/idle_notify.c): restoring open episodes after a restart is theirs. */
extern const mw_module mw_module_idle_notify;

static const mw_idle_rule RULE = {0.05, 10000, 3000}; /* 5 %, 10 s window, 3 s busy */

static void test_rule_enter_after_window(void **st)
{
    (void)st;
    mw_idle_track t = {0};
    assert_int_equal(mw_idle_step(&t, 1000, 0.01, &RULE), MW_IDLE_NONE);
    assert_int_equal(t.state, MW_IDLE_BELOW);
    assert_int_equal(mw_idle_step(&t, 10999, 0.0, &RULE), MW_IDLE_NONE);
    assert_int_equal(mw_idle_step(&t, 11000, 0.049, &RULE), MW_IDLE_OPENED);
    assert_int_equal(t.below_since_ms, 1000);
    assert_int_equal(mw_idle_step(&t, 12000, 0.0, &RULE), MW_IDLE_NONE);
}

static void test_rule_spike_before_window_restarts(void **st)
{
    (void)st;
    mw_idle_track t = {0};
    mw_idle_step(&t, 0, 0.0, &RULE);
    assert_int_equal(mw_idle_step(&t, 9000, 0.05, &RULE), MW_IDLE_NONE); /* 5 % is not below */
    assert_int_equal(t.state, MW_IDLE_BUSY);
    mw_idle_step(&t, 10000, 0.0, &RULE);
    assert_int_equal(mw_idle_step(&t, 19999, 0.0, &RULE), MW_IDLE_NONE);
    assert_int_equal(mw_idle_step(&t, 20000, 0.0, &RULE), MW_IDLE_OPENED);
}

static void test_rule_flapping_is_one_episode(void **st)
{
    (void)st;
    mw_idle_track t = {0};
    int opened = 0, closed = 0;
    /* Idle for the window, then 2 s spikes every 4 s for a minute: shorter
     * than the busy period, so the episode stays open. */
    for (int64_t now = 0; now <= 70000; now += 1000) {
        double u = now < 11000 ? 0.0 : ((now / 1000) % 4 < 2 ? 0.30 : 0.01);
        int ev = mw_idle_step(&t, now, u, &RULE);
        opened += ev == MW_IDLE_OPENED;
        closed += ev == MW_IDLE_CLOSED;
    }
    assert_int_equal(opened, 1);
    assert_int_equal(closed, 0);
    /* Busy for the busy period ends it, once. */
    for (int64_t now = 71000; now <= 80000; now += 1000) {
        int ev = mw_idle_step(&t, now, 0.9, &RULE);
        closed += ev == MW_IDLE_CLOSED;
        if (ev == MW_IDLE_CLOSED) assert_int_equal(now, 74000);
    }
    assert_int_equal(closed, 1);
    assert_int_equal(t.state, MW_IDLE_BUSY);
}

/* ---- the module ---- */

static const mw_metric_desc D_INFO = {"mlwatch_gpu_info", "t", "", MW_INFO};
static const mw_metric_desc D_POWER = {"mlwatch_gpu_power_watts", "t", "watts", MW_GAUGE};
static const mw_metric_desc D_MEM = {"mlwatch_container_gpu_memory_used_bytes", "t", "bytes",
                                     MW_GAUGE};
static const mw_metric_desc D_UTIL = {"mlwatch_container_gpu_utilization_ratio", "t", "ratio",
                                      MW_GAUGE};
static const mw_metric_desc D_CARBON = {"mlwatch_carbon_intensity_grams_per_kwh", "t",
                                        "grams_per_kwh", MW_GAUGE};

/* GPU 0 (300 W) held by a/nb (1 GiB, utilization ua) and b/train (3 GiB,
 * utilization ub). */
static mw_snapshot *snap_at(int64_t ms, double ua, double ub, int with_b, double carbon)
{
    mw_snapshot *s = mw_snapshot_new();
    s->timestamp_ms = ms;
    mw_emit(s, &D_INFO, 1, "gpu", "0", "uuid", "GPU-0", "model", "NVIDIA H100 80GB HBM3", MW_END);
    mw_emit(s, &D_POWER, 300, "gpu", "0", "uuid", "GPU-0", MW_END);
    mw_emit(s, &D_MEM, 1073741824, "namespace", "a", "pod", "nb", "container", "main", "gpu", "0",
            MW_END);
    if (with_b)
        mw_emit(s, &D_MEM, 3221225472.0, "namespace", "b", "pod", "train", "container", "main",
                "gpu", "0", MW_END);
    mw_emit(s, &D_MEM, 536870912, "namespace", "", "pod", "", "container", "", "gpu", "0", MW_END);
    mw_emit(s, &D_UTIL, ua, "namespace", "a", "pod", "nb", "container", "main", "gpu", "0", MW_END);
    if (with_b)
        mw_emit(s, &D_UTIL, ub, "namespace", "b", "pod", "train", "container", "main", "gpu", "0",
                MW_END);
    if (carbon >= 0) mw_emit(s, &D_CARBON, carbon, MW_END);
    return s;
}

typedef struct fixture {
    const mw_module *m; /* mw_module_idle, or the agent's mw_module_idle_notify */
    mw_config cfg;
    mw_env env;
    void *state;
    char dir[64];
} fixture;

/* dir: an existing state folder, or NULL for a fresh one. */
static fixture *open_module_in(const mw_module *m, const char *window, const char *busy,
                               const char *dir)
{
    fixture *f = mw_xcalloc(1, sizeof(*f));
    f->m = m;
    mw_options_register_all();
    mw_config_defaults(&f->cfg);
    if (dir) {
        mw_strlcpy(f->dir, dir, sizeof(f->dir));
    } else {
        snprintf(f->dir, sizeof(f->dir), "/tmp/mlwatch-idle-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
    }
    char err[256];
    char *argv[] = {
        "mlwatch",    "agent",      "--idle-window", (char *)window, "--idle-busy-period",
        (char *)busy, "--data-dir", f->dir};
    assert_int_equal(
        mw_config_from_args(&f->cfg, MW_ARRAY_LEN(argv), argv, 2, NULL, NULL, 0, err, sizeof(err)),
        0);
    f->env.cfg = &f->cfg;
    assert_int_equal(f->m->init(&f->env, &f->state), 0);
    return f;
}

static fixture *open_module(const char *window, const char *busy)
{
    return open_module_in(&mw_module_idle, window, busy, NULL);
}

static void close_module(fixture *f, int remove)
{
    f->m->destroy(f->state);
    if (remove) {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
        assert_int_equal(system(cmd), 0);
    }
    free(f);
}

static double idle_seconds(const mw_snapshot *s, const char *ns)
{
    double v = -1;
    assert_int_equal(mw_snapshot_get(s, "mlwatch_gpu_idle_seconds", &v, "namespace", ns, MW_END),
                     0);
    return v;
}

static void test_module_idle_and_busy(void **st)
{
    (void)st;
    fixture *f = open_module("10s", "3s");
    /* a/nb idle from t=1000; b/train busy. One cycle per second. */
    int64_t t0 = 1700000000000LL;
    for (int i = 0; i <= 20; i++) {
        mw_snapshot *s = snap_at(t0 + i * 1000, 0.01, 0.9, 1, 400);
        f->m->derive(f->state, s);
        assert_true(idle_seconds(s, "b") == 0);
        if (i < 10)
            assert_true(idle_seconds(s, "a") == 0);
        else
            assert_true(idle_seconds(s, "a") == (double)i);
        if (i == 20) {
            /* Opened at i=10 with 10 GPU-seconds, then 10 cycles of 1 s. */
            assert_true(tu_value(s, "mlwatch_idle_gpu_seconds_total", "namespace", "a", MW_END) ==
                        20);
            assert_true(tu_value(s, "mlwatch_idle_gpu_sessions", "namespace", "a", MW_END) == 1);
            assert_true(tu_value(s, "mlwatch_idle_gpu_sessions", "namespace", "b", MW_END) == 0);
            assert_true(tu_value(s, "mlwatch_idle_gpu_seconds_total", "namespace", "b", MW_END) ==
                        0);
            /* 300 W x 1/4 of the pods' memory = 75 W, for 20 s = 1500 J;
             * at 400 g/kWh: 1500 / 3.6e6 * 400 g. */
            double e =
                tu_value(s, "mlwatch_idle_gpu_energy_joules_total", "namespace", "a", MW_END);
            assert_true(e > 1500 - 1e-6 && e < 1500 + 1e-6);
            double g = tu_value(s, "mlwatch_idle_gpu_co2_grams_total", "namespace", "a", MW_END);
            assert_true(g > 1500 / 3.6e6 * 400 - 1e-9 && g < 1500 / 3.6e6 * 400 + 1e-9);
            assert_true(tu_has(s, "mlwatch_gpu_idle_seconds", "namespace", "a", "pod", "nb",
                               "container", "main", "gpu", "0", "workload_kind", "", "workload", "",
                               "owner", "a", MW_END));
            /* Processes outside pods are no session. */
            assert_int_equal(tu_count(s, "mlwatch_gpu_idle_seconds"), 2);
        }
        mw_snapshot_free(s);
    }
    /* Busy for 3 s ends it: idle seconds back to 0 at the third busy cycle. */
    for (int i = 21; i <= 24; i++) {
        mw_snapshot *s = snap_at(t0 + i * 1000, 0.5, 0.9, 1, 400);
        f->m->derive(f->state, s);
        assert_true(idle_seconds(s, "a") == (i < 24 ? (double)i : 0));
        mw_snapshot_free(s);
    }
    close_module(f, 1);
}

static void test_module_no_carbon_no_co2(void **st)
{
    (void)st;
    fixture *f = open_module("2s", "1s");
    mw_snapshot *s = snap_at(1000000, 0.0, 0.0, 0, -1);
    f->m->derive(f->state, s);
    assert_false(tu_has(s, "mlwatch_idle_gpu_co2_grams_total", MW_END));
    mw_snapshot_free(s);
    close_module(f, 1);
}

/* An episode open when the agent stops continues after a restart without a
 * second opening (the state file holds it). */
static void test_module_restart_keeps_episode(void **st)
{
    (void)st;
    fixture *f = open_module("2s", "1s");
    char path[128];
    snprintf(path, sizeof(path), "%s/state", f->dir);
    assert_true(mkdir(path, 0700) == 0 || errno == EEXIST);
    snprintf(path, sizeof(path), "%s/state/idle-notifications.json", f->dir);
    mw_notify_table t = {0};
    mw_notify_episode ep = {.key = "a/nb/main/0",
                            .ns = "a",
                            .pod = "nb",
                            .container = "main",
                            .gpu = "0",
                            .idle_since_ms = 5000,
                            .gpu_seconds = 7,
                            .co2_grams = -1};
    assert_int_equal(mw_notify_table_upsert(&t, &ep), 1);
    t.e[0].fired = 1;
    char err[256];
    assert_int_equal(mw_notify_table_save(&t, path, err, sizeof(err)), 0);
    mw_notify_table_free(&t);
    char dir[64];
    mw_strlcpy(dir, f->dir, sizeof(dir));
    close_module(f, 0);

    fixture *g = open_module_in(&mw_module_idle_notify, "2s", "1s", dir);
    mw_snapshot *s = snap_at(9000, 0.0, 0.0, 0, -1);
    g->m->derive(g->state, s);
    /* Still the episode that began at 5 s: 4 s idle, not a new window. */
    assert_true(idle_seconds(s, "a") == 4);
    mw_snapshot_free(s);
    close_module(g, 1);
}

/* ---- MIG: one session per instance, judged by the instance's activity ---- */

static const mw_metric_desc D_MIGEN = {"mlwatch_gpu_mig_enabled", "t", "", MW_GAUGE};
static const mw_metric_desc D_GTOTAL = {"mlwatch_gpu_memory_total_bytes", "t", "bytes", MW_GAUGE};
static const mw_metric_desc D_MTOTAL = {"mlwatch_mig_memory_total_bytes", "t", "bytes", MW_GAUGE};
static const mw_metric_desc D_CMIG = {"mlwatch_container_mig_memory_used_bytes", "t", "bytes",
                                      MW_GAUGE};
static const mw_metric_desc D_MUTIL = {"mlwatch_mig_utilization_ratio", "t", "ratio", MW_GAUGE};

#define GIB 1073741824.0

/* An H100 (80 GiB, 300 W) in MIG mode: a/nb on GPU instance 7 (activity
 * u7), b/train on GPU instance 8 (u8), 10 GiB each; activity only when
 * with_util (a driver without GPM has none). */
static mw_snapshot *mig_snap(int64_t ms, double u7, double u8, int with_util)
{
    mw_snapshot *s = mw_snapshot_new();
    s->timestamp_ms = ms;
    mw_emit(s, &D_INFO, 1, "gpu", "0", "uuid", "GPU-0", "model", "NVIDIA H100 80GB HBM3", MW_END);
    mw_emit(s, &D_POWER, 300, "gpu", "0", "uuid", "GPU-0", MW_END);
    mw_emit(s, &D_MIGEN, 1, "gpu", "0", "uuid", "GPU-0", MW_END);
    mw_emit(s, &D_GTOTAL, 80 * GIB, "gpu", "0", "uuid", "GPU-0", MW_END);
    /* What the gpu collector also exports for the whole GPU: not sessions. */
    mw_emit(s, &D_MEM, GIB, "namespace", "a", "pod", "nb", "container", "main", "gpu", "0", MW_END);
    mw_emit(s, &D_MEM, 3 * GIB, "namespace", "b", "pod", "train", "container", "main", "gpu", "0",
            MW_END);
    const char *gi[2] = {"7", "8"}, *uuid[2] = {"MIG-7", "MIG-8"};
    const char *ns[2] = {"a", "b"}, *pod[2] = {"nb", "train"};
    double mem[2] = {GIB, 3 * GIB}, u[2] = {u7, u8};
    for (int k = 0; k < 2; k++) {
        mw_emit(s, &D_MTOTAL, 10 * GIB, "gpu", "0", "uuid", uuid[k], "mig_profile", "1g.10gb",
                "gpu_instance", gi[k], "compute_instance", "0", MW_END);
        mw_emit(s, &D_CMIG, mem[k], "namespace", ns[k], "pod", pod[k], "container", "main", "gpu",
                "0", "mig_profile", "1g.10gb", "gpu_instance", gi[k], "compute_instance", "0",
                MW_END);
        if (with_util)
            mw_emit(s, &D_MUTIL, u[k], "gpu", "0", "uuid", uuid[k], "mig_profile", "1g.10gb",
                    "gpu_instance", gi[k], "compute_instance", "0", MW_END);
    }
    return s;
}

static void test_module_mig_instances(void **st)
{
    (void)st;
    fixture *f = open_module("10s", "3s");
    int64_t t0 = 1700000000000LL;
    for (int i = 0; i <= 20; i++) {
        mw_snapshot *s = mig_snap(t0 + i * 1000, 0.01, 0.6, 1);
        f->m->derive(f->state, s);
        /* One session per instance, none for the whole GPU. */
        assert_int_equal(tu_count(s, "mlwatch_gpu_idle_seconds"), 2);
        assert_true(tu_value(s, "mlwatch_gpu_idle_seconds", "namespace", "a", "pod", "nb",
                             "container", "main", "gpu", "0", "mig_profile", "1g.10gb",
                             "gpu_instance", "7", "compute_instance", "0", "workload_kind", "",
                             "workload", "", MW_END) == (i < 10 ? 0 : (double)i));
        assert_true(tu_value(s, "mlwatch_gpu_idle_seconds", "namespace", "b", "gpu_instance", "8",
                             MW_END) == 0);
        if (i == 20) {
            assert_true(tu_value(s, "mlwatch_idle_gpu_sessions", "namespace", "a", MW_END) == 1);
            assert_true(tu_value(s, "mlwatch_idle_gpu_sessions", "namespace", "b", MW_END) == 0);
            assert_true(tu_value(s, "mlwatch_idle_gpu_seconds_total", "namespace", "a", MW_END) ==
                        20);
            /* The instance's slice of the GPU (10 of 80 GiB) of 300 W, for
             * 20 s: 750 J, whatever the other slice does. */
            double e =
                tu_value(s, "mlwatch_idle_gpu_energy_joules_total", "namespace", "a", MW_END);
            assert_true(e > 750 - 1e-6 && e < 750 + 1e-6);
        }
        mw_snapshot_free(s);
    }
    close_module(f, 1);
    /* Without per-instance activity (no GPM) sessions are listed, never idle. */
    f = open_module("10s", "3s");
    for (int i = 0; i <= 20; i++) {
        mw_snapshot *s = mig_snap(t0 + i * 1000, 0, 0, 0);
        f->m->derive(f->state, s);
        assert_int_equal(tu_count(s, "mlwatch_gpu_idle_seconds"), 2);
        assert_true(tu_value(s, "mlwatch_gpu_idle_seconds", "gpu_instance", "7", MW_END) == 0);
        mw_snapshot_free(s);
    }
    close_module(f, 1);
}

static void test_config_section(void **st)
{
    (void)st;
    mw_config c;
    mw_options_register_all();
    mw_config_defaults(&c);
    char err[256];
    const char *y = "idle:\n  namespaces:\n    research: {threshold: 2, window: 2h}\n"
                    "    notebooks: {busy_period: 5m}\n";
    assert_int_equal(mw_config_load_string(&c, "t.yml", y, strlen(y), err, sizeof(err)), 0);
    const mw_idle_settings *is = mw_config_group(&c, &mw_idle_options);
    assert_int_equal(is->noverrides, 2);
    assert_string_equal(is->overrides[0].ns, "research");
    assert_true(is->overrides[0].threshold == 2);
    assert_int_equal(is->overrides[0].window_ms, 7200000);
    assert_int_equal(is->overrides[0].busy_period_ms, 0);
    assert_true(is->overrides[1].threshold < 0);
    assert_int_equal(is->overrides[1].busy_period_ms, 300000);

    const char *bad = "idle:\n  namespaces:\n    research: {threshold: 200}\n";
    assert_int_equal(mw_config_load_string(&c, "t.yml", bad, strlen(bad), err, sizeof(err)), -1);
    assert_string_equal(err, "t.yml:3:27: idle: research.threshold: must be a percentage from 0 "
                             "to 100, got '200'");
    const char *bad2 = "idle:\n  namespaces:\n    research: {windo: 2h}\n";
    assert_int_equal(mw_config_load_string(&c, "t.yml", bad2, strlen(bad2), err, sizeof(err)), -1);
    assert_string_equal(err, "t.yml:3:16: idle: research: unknown key 'windo' (threshold, window, "
                             "busy_period)");
    char *argv[] = {"mlwatch", "agent", "--idle-threshold", "101"};
    assert_int_equal(mw_config_from_args(&c, 4, argv, 2, NULL, NULL, 0, err, sizeof(err)), -1);
    assert_string_equal(err, "--idle-threshold: must be a percentage from 0 to 100, got '101'");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule_enter_after_window),
        cmocka_unit_test(test_rule_spike_before_window_restarts),
        cmocka_unit_test(test_rule_flapping_is_one_episode),
        cmocka_unit_test(test_module_idle_and_busy),
        cmocka_unit_test(test_module_no_carbon_no_co2),
        cmocka_unit_test(test_module_restart_keeps_episode),
        cmocka_unit_test(test_module_mig_instances),
        cmocka_unit_test(test_config_section),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
