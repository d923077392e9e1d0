/* test_energy_workloads.c - energy, CO2 and GPU time per workload over its
 * whole life: two pods of one PyTorchJob (the pod watch names the owner), a
 * Slurm job by its cgroup, a systemd service, exact joules per interval;
 * the totals across a restart (state files), after the pods are gone, and
 * the workload dropped 30 days after it was last seen. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/util.h"
#include "derive/energy.h"
#include "derive/energy_state.h"
#include "derive/energy_workloads.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const mw_metric_desc CPU = {"mlwatch_cpu_seconds_total", "", "seconds", MW_COUNTER};
static const mw_metric_desc RAPL = {"mlwatch_rapl_energy_joules_total", "", "joules", MW_COUNTER};
static const mw_metric_desc CCPU = {"mlwatch_container_cpu_seconds_total", "", "seconds",
                                    MW_COUNTER};
static const mw_metric_desc GPU_E = {"mlwatch_gpu_energy_joules_total", "", "joules", MW_COUNTER};
static const mw_metric_desc GPU_INFO = {"mlwatch_gpu_info", "", "", MW_INFO};
static const mw_metric_desc CUTIL = {"mlwatch_container_gpu_utilization_ratio", "", "ratio",
                                     MW_GAUGE};

static int lookups;

/* The pod watch: pods train-worker-N belong to PyTorchJob "train". */
static int lookup(void *ctx, const char *uid, const char *ns, const char *pod, char kind[32],
                  char name[254])
{
    (void)ctx;
    (void)uid;
    lookups++;
    if (strcmp(ns, "ml") != 0 || strncmp(pod, "train-worker-", 13) != 0) return 0;
    mw_strlcpy(kind, "PyTorchJob", 32);
    mw_strlcpy(name, "train", 254);
    return 1;
}

static mw_energy *model(void)
{
    mw_energy_params p;
    mw_energy_params_init(&p, MW_IDLE_POLICY_CPU);
    p.idle_watts[MW_EC_CPU] = 0;
    p.idle_watts_set = 1u << MW_EC_CPU;
    return mw_energy_new(&p);
}

/* Interval i (1 s): 2 CPUs busy, the package +100 J; CPU time: each worker
 * 0.5 s, the Slurm job 0.5 s, kubelet 0.25 s, the rest 0.25 s outside any
 * cgroup. GPU 0 +200 J (worker 0), GPU 1 +100 J (worker 1). */
static mw_snapshot *cycle(mw_energy *e, mw_workloads *w, int64_t i, int pods)
{
    mw_snapshot *s = mw_snapshot_new();
    s->timestamp_ms = i * 1000;
    double t = (double)i;
    for (int c = 0; c < 2; c++) {
        char id[8];
        snprintf(id, sizeof(id), "%d", c);
        mw_emit(s, &CPU, t, "cpu", id, "mode", "user", MW_END);
        mw_emit(s, &CPU, 0, "cpu", id, "mode", "idle", MW_END);
    }
    mw_emit(s, &RAPL, 100 * t, "zone", "package-0", MW_END);
    mw_emit(s, &CCPU, 0.5 * t, "namespace", "", "pod", "", "container", "", "cgroup",
            "/system.slice/slurmstepd.scope/job_42/step_0", MW_END);
    mw_emit(s, &CCPU, 0.25 * t, "namespace", "", "pod", "", "container", "", "cgroup",
            "/system.slice/kubelet.service", MW_END);
    for (int g = 0; g < 2; g++) {
        char id[8], uuid[16], pod[32];
        snprintf(id, sizeof(id), "%d", g);
        snprintf(uuid, sizeof(uuid), "GPU-%d", g);
        snprintf(pod, sizeof(pod), "train-worker-%d", g);
        mw_emit(s, &GPU_E, (g ? 100 : 200) * t, "gpu", id, "uuid", uuid, MW_END);
        mw_emit(s, &GPU_INFO, 1, "gpu", id, "uuid", uuid, "model", "NVIDIA H100 80GB HBM3", MW_END);
        if (!pods) continue;
        mw_emit(s, &CCPU, 0.5 * t, "namespace", "ml", "pod", pod, "container", "main", MW_END);
        mw_emit(s, &CUTIL, 0.9, "namespace", "ml", "pod", pod, "container", "main", "gpu", id,
                MW_END);
    }
    mw_energy_step(e, s, 100);
    mw_workloads_step(w, e, s, 1);
    return s;
}

static void expect(const mw_workloads *w, const char *kind, const char *ns, const char *name,
                   double joules, double gpu_s, int line)
{
    double j[MW_EM_N], co2, gs;
    if (mw_workloads_get(w, kind, ns, name, j, &co2, &gs) < 0)
        fail_msg("line %d: no workload %s %s/%s", line, kind, ns, name);
    if (fabs(j[MW_EM_MEASURED] - joules) > 1e-9 || j[MW_EM_ESTIMATED] != 0 ||
        fabs(co2 - joules * 100 / 3.6e6) > 1e-12 || fabs(gs - gpu_s) > 1e-9)
        fail_msg("line %d: %s %s: %.17g J, %.17g g, %.17g GPU-s; want %.17g J, %.17g GPU-s", line,
                 kind, name, j[MW_EM_MEASURED], co2, gs, joules, gpu_s);
}
#define EXPECT(w, k, ns, n, j, g) expect((w), (k), (ns), (n), (j), (g), __LINE__)

static void per_workload(void **state)
{
    (void)state;
    mw_energy *e = model();
    mw_workloads *w = mw_workloads_new(lookup, NULL);
    for (int64_t i = 0; i <= 3; i++) {
        mw_snapshot *s = cycle(e, w, i, 1);
        double n = (double)i;
        if (i == 0) { /* the baseline: no energy yet, no workload */
            double j[MW_EM_N];
            assert_int_equal(mw_workloads_get(w, "PyTorchJob", "ml", "train", j, NULL, NULL), -1);
            mw_snapshot_free(s);
            continue;
        }
        /* 25 + 25 J of CPU, 200 + 100 J of GPU per interval. */
        EXPECT(w, "PyTorchJob", "ml", "train", 350 * n, 2 * n);
        EXPECT(w, "SlurmJob", "", "42", 25 * n, 0);
        EXPECT(w, "cgroup", "", "/system.slice/kubelet.service", 12.5 * n, 0);
        double v;
        assert_int_equal(mw_snapshot_get(s, "mlwatch_workload_energy_joules_total", &v,
                                         "workload_kind", "PyTorchJob", "namespace", "ml",
                                         "workload", "train", "method", "measured", MW_END),
                         0);
        assert_true(fabs(v - 350 * n) < 1e-9);
        assert_int_equal(mw_snapshot_get(s, "mlwatch_workload_gpu_seconds_total", &v,
                                         "workload_kind", "PyTorchJob", "workload", "train",
                                         MW_END),
                         0);
        assert_true(v == 2 * n);
        {
            assert_int_equal(mw_snapshot_get(s, "mlwatch_workload_last_seen_timestamp_seconds", &v,
                                             "workload", "train", "gpu_model",
                                             "NVIDIA H100 80GB HBM3", MW_END),
                             0);
            assert_true(v == n);
        }
        mw_snapshot_free(s);
    }
    assert_true(lookups > 0);

    /* Restart: both state files' text into fresh objects. The first cycle
     * after it is a baseline for both (nothing added twice). */
    char *et = mw_energy_state_dump(e, "m", 3000), *wt = mw_workloads_dump(w, "m", 3000);
    mw_energy_free(e);
    mw_workloads_free(w);
    e = model();
    w = mw_workloads_new(lookup, NULL);
    char err[256];
    assert_int_equal(mw_energy_state_parse(e, et, strlen(et), "m", err, sizeof(err)), 0);
    assert_int_equal(mw_workloads_parse(w, wt, strlen(wt), "m", err, sizeof(err)), 0);
    free(et);
    free(wt);
    for (int64_t i = 10; i <= 12; i++) {
        mw_snapshot_free(cycle(e, w, i, 1));
        double n = 3 + (double)(i - 10);
        EXPECT(w, "PyTorchJob", "ml", "train", 350 * n, 2 * n);
        EXPECT(w, "SlurmJob", "", "42", 25 * n, 0);
    }
    /* The job ends: its totals stay (5 intervals) while the rest goes on. */
    for (int64_t i = 13; i <= 14; i++)
        mw_snapshot_free(cycle(e, w, i, 0));
    EXPECT(w, "PyTorchJob", "ml", "train", 350 * 5, 10);
    EXPECT(w, "SlurmJob", "", "42", 25 * 7, 0); /* still 0.5 s of the node's 2 */
    /* 30 days after it was last seen (12 s) it is dropped, not before. */
    mw_snapshot *s = mw_snapshot_new();
    s->timestamp_ms = 12000 + MW_WORKLOAD_KEEP_MS;
    mw_workloads_step(w, e, s, 1);
    EXPECT(w, "PyTorchJob", "ml", "train", 350 * 5, 10);
    mw_snapshot_free(s);
    s = mw_snapshot_new();
    s->timestamp_ms = 12001 + MW_WORKLOAD_KEEP_MS;
    mw_workloads_step(w, e, s, 1);
    double j[MW_EM_N];
    assert_int_equal(mw_workloads_get(w, "PyTorchJob", "ml", "train", j, NULL, NULL), -1);
    mw_snapshot_free(s);
    mw_workloads_free(w);
    mw_energy_free(e);
}

/* Slurm jobs by their cgroup (v2 slurmstepd scope, v1 uid/job layout);
 * job_N must be a whole folder name. */
static void slurm_cgroups(void **state)
{
    (void)state;
    const struct {
        const char *cgroup, *kind, *name;
    } cases[] = {
        {"/system.slice/slurmstepd.scope/job_42", "SlurmJob", "42"},
        {"/system.slice/slurmstepd.scope/job_7/step_batch/user/task_0", "SlurmJob", "7"},
        {"/slurm/uid_1000/job_123/step_0", "SlurmJob", "123"},
        {"/system.slice/myjob_5", "cgroup", "/system.slice/myjob_5"},
        {"/system.slice/job_5x", "cgroup", "/system.slice/job_5x"},
        {"/system.slice/kubelet.service", "cgroup", "/system.slice/kubelet.service"},
    };
    for (size_t i = 0; i < MW_ARRAY_LEN(cases); i++) {
        char kind[32], name[254];
        mw_workload_of_cgroup(cases[i].cgroup, kind, name);
        assert_string_equal(kind, cases[i].kind);
        assert_string_equal(name, cases[i].name);
    }
}

/* A workload file that is not ours or is malformed is refused whole. */
static void untrusted(void **state)
{
    (void)state;
    const char *bad[] = {
        "[]",
        "{\"format\":\"mlwatch-workload-state\",\"version\":1,\"identity\":\"other\","
        "\"workloads\":[]}",
        "{\"format\":\"mlwatch-workload-state\",\"version\":1,\"identity\":\"m\",\"workloads\":"
        "[{\"kind\":\"Job\",\"namespace\":\"a\",\"name\":\"b\",\"gpu_model\":\"\",\"joules\":"
        "{\"measured\":-1,\"estimated\":0},\"co2_grams\":0,\"gpu_seconds\":0,\"last_ms\":1}]}",
    };
    const char *why[] = {"not an mlwatch workload state file",
                         "written on another machine ('other', this is 'm')",
                         "workloads[0]: malformed"};
    for (size_t i = 0; i < MW_ARRAY_LEN(bad); i++) {
        mw_workloads *w = mw_workloads_new(NULL, NULL);
        char err[256];
        assert_int_equal(mw_workloads_parse(w, bad[i], strlen(bad[i]), "m", err, sizeof(err)), -1);
        assert_string_equal(err, why[i]);
        mw_workloads_free(w);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(per_workload),
        cmocka_unit_test(slurm_cgroups),
        cmocka_unit_test(untrusted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
