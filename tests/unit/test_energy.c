/* test_energy.c - the energy attribution model on scenarios with known
 * ground truth: a 3:1 CPU-time split, a pod alone on a GPU, three pods
 * sharing a GPU by utilization (and by memory), MIG slices, the idle
 * policies, the estimation model, IPMI node power and component "other",
 * a GPU counter reset, a RAPL wrap through the real collector, CO2 per
 * interval, power that changes between readings (a ramp, uneven intervals
 * and a spike on the node meter's trapezoid; a burst only a GPU's energy
 * counter sees). Every interval of every scenario checks conservation: all
 * container energy samples add up to the node energy fed in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/util.h"
#include "derive/energy.h"
#include "derive/energy_state.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const mw_metric_desc CPU = {"mlwatch_cpu_seconds_total", "", "seconds", MW_COUNTER};
static const mw_metric_desc RAPL = {"mlwatch_rapl_energy_joules_total", "", "joules", MW_COUNTER};
static const mw_metric_desc CCPU = {"mlwatch_container_cpu_seconds_total", "", "seconds",
                                    MW_COUNTER};
static const mw_metric_desc CINFO = {"mlwatch_container_info", "", "", MW_INFO};
static const mw_metric_desc GPU_E = {"mlwatch_gpu_energy_joules_total", "", "joules", MW_COUNTER};
static const mw_metric_desc GPU_P = {"mlwatch_gpu_power_watts", "", "watts", MW_GAUGE};
static const mw_metric_desc CUTIL = {"mlwatch_container_gpu_utilization_ratio", "", "ratio",
                                     MW_GAUGE};
static const mw_metric_desc CMEM = {"mlwatch_container_gpu_memory_used_bytes", "", "bytes",
                                    MW_GAUGE};
static const mw_metric_desc MIG_ON = {"mlwatch_gpu_mig_enabled", "", "", MW_GAUGE};
static const mw_metric_desc GPU_MT = {"mlwatch_gpu_memory_total_bytes", "", "bytes", MW_GAUGE};
static const mw_metric_desc MIG_MT = {"mlwatch_mig_memory_total_bytes", "", "bytes", MW_GAUGE};
static const mw_metric_desc CMIG = {"mlwatch_container_mig_memory_used_bytes", "", "bytes",
                                    MW_GAUGE};
static const mw_metric_desc IPMI = {"mlwatch_ipmi_power_watts", "", "watts", MW_GAUGE};

static void near(double got, double want, int line)
{
    if (fabs(got - want) > 1e-9 * (fabs(want) + 1))
        fail_msg("line %d: got %.17g, want %.17g", line, got, want);
}
#define assert_near(got, want) near((got), (want), __LINE__)

static mw_snapshot *at(int64_t ms)
{
    mw_snapshot *s = mw_snapshot_new();
    s->timestamp_ms = ms;
    return s;
}

/* Node CPU: ncpu CPUs, cumulative busy and idle seconds split evenly. */
static void node_cpu(mw_snapshot *s, int ncpu, double busy, double idle)
{
    for (int i = 0; i < ncpu; i++) {
        char id[16];
        snprintf(id, sizeof(id), "%d", i);
        mw_emit(s, &CPU, busy / ncpu, "cpu", id, "mode", "user", MW_END);
        mw_emit(s, &CPU, idle / ncpu, "cpu", id, "mode", "idle", MW_END);
    }
}

static void pod_cpu(mw_snapshot *s, const char *ns, const char *pod, const char *ctr, double v)
{
    mw_emit(s, &CCPU, v, "namespace", ns, "pod", pod, "container", ctr, "container_id", ctr,
            MW_END);
}

static double cj(const mw_snapshot *s, const char *pod, const char *comp, const char *kind)
{
    double v = 0;
    if (mw_snapshot_get(s, "mlwatch_container_energy_joules_total", &v, "pod", pod, "component",
                        comp, "kind", kind, MW_END) < 0)
        return 0;
    return v;
}

static double sum_family(const mw_snapshot *s, const char *name)
{
    const mw_family *f = mw_snapshot_find(s, name);
    double t = 0;
    for (const mw_sample *x = f ? f->first : NULL; x; x = x->next)
        t += x->value;
    return t;
}

/* Sum of every energy sample: the containers and the two shares. The node's
 * component totals must say the same. */
static double sum_all(const mw_snapshot *s)
{
    double parts = sum_family(s, "mlwatch_container_energy_joules_total") +
                   sum_family(s, "mlwatch_energy_share_joules_total");
    double whole = sum_family(s, "mlwatch_energy_component_joules_total");
    if (fabs(parts - whole) > 1e-9 * (whole + 1))
        fail_msg("workloads and shares %.17g != component totals %.17g", parts, whole);
    return parts;
}

/* A share's total of one component and kind (any method). */
static double sj(const mw_snapshot *s, const char *share, const char *comp, const char *kind)
{
    double t = 0;
    const mw_family *f = mw_snapshot_find(s, "mlwatch_energy_share_joules_total");
    for (const mw_sample *x = f ? f->first : NULL; x; x = x->next) {
        int match = 0;
        for (uint32_t i = 0; i < x->nlabels; i++)
            match +=
                (strcmp(x->labels[i].name, "share") == 0 &&
                 strcmp(x->labels[i].value, share) == 0) +
                (strcmp(x->labels[i].name, "component") == 0 &&
                 strcmp(x->labels[i].value, comp) == 0) +
                (strcmp(x->labels[i].name, "kind") == 0 && strcmp(x->labels[i].value, kind) == 0);
        if (match == 3) t += x->value;
    }
    return t;
}

/* Conservation after each step: the parts equal the node energy fed in so
 * far (within 0.1%), the model's own check agrees, no violation counted. */
static void conserved(mw_energy *e, const mw_snapshot *s, double node_total, int line)
{
    double got = sum_all(s);
    if (fabs(got - node_total) > 0.001 * node_total + 1e-9)
        fail_msg("line %d: parts %.17g != node %.17g", line, got, node_total);
    const mw_energy_interval *iv = mw_energy_last(e);
    if (iv->valid && fabs(iv->parts_joules - iv->node_joules) > 0.001 * iv->node_joules + 1e-9)
        fail_msg("line %d: interval parts %.17g != %.17g", line, iv->parts_joules, iv->node_joules);
    if (mw_energy_violations(e) != 0) fail_msg("line %d: violations counted", line);
    double v = -1;
    assert_int_equal(mw_snapshot_get(s, "mlwatch_energy_conservation_violations_total", &v, MW_END),
                     0);
    assert_true(v == 0);
}
#define assert_conserved(e, s, total) conserved((e), (s), (total), __LINE__)

static mw_energy *model(mw_idle_policy pol)
{
    mw_energy_params p;
    mw_energy_params_init(&p, pol);
    return mw_energy_new(&p);
}

/* Two containers with a 3:1 CPU-time split get 3:1 dynamic CPU energy. */
static void cpu_split_three_to_one(void **state)
{
    (void)state;
    mw_energy *e = model(MW_IDLE_POLICY_NONE);
    /* Package watts per interval: 50, 80, 70; DRAM 5 W flat. */
    const double pkg[] = {100, 150, 230, 300};
    double total = 0;
    for (int i = 0; i < 4; i++) {
        mw_snapshot *s = at(1000 + i * 1000);
        node_cpu(s, 2, 1.0 * i, 1.0 * i);
        mw_emit(s, &RAPL, pkg[i], "zone", "package-0", MW_END);
        mw_emit(s, &RAPL, pkg[i] * 0.4, "zone", "package-0/core", MW_END);
        mw_emit(s, &RAPL, 10 + 5.0 * i, "zone", "package-0/dram", MW_END);
        pod_cpu(s, "ml", "a", "main", 0.6 * i);
        pod_cpu(s, "ml", "b", "main", 0.2 * i);
        mw_energy_step(e, s, -1);
        if (i) total += pkg[i] - pkg[i - 1] + 5;
        assert_conserved(e, s, total);
        if (i == 3) {
            /* The node is 50% busy throughout: nothing idle seen, so the
             * CPU's idle floor is the prior, 2 CPUs x 0.74 W; DRAM's is 0 W.
             * 200 J of CPU: 3 x 1.48 = 4.44 J idle, 195.56 J dynamic, shared
             * 0.6 : 0.2 : 0.2 to the processes outside any container. */
            assert_near(cj(s, "a", "cpu", "dynamic"), 0.6 * 195.56);
            assert_near(cj(s, "b", "cpu", "dynamic"), 0.2 * 195.56);
            assert_near(cj(s, "a", "cpu", "dynamic") / cj(s, "b", "cpu", "dynamic"), 3);
            assert_near(sj(s, "system", "cpu", "dynamic"), 0.2 * 195.56);
            assert_near(sj(s, "unreserved", "cpu", "idle"), 4.44); /* policy none */
            assert_near(cj(s, "a", "dram", "dynamic"), 9);
            assert_near(sj(s, "system", "dram", "dynamic"), 3);
            assert_near(sj(s, "unreserved", "dram", "idle"), 0);
            assert_near(cj(s, "a", "cpu", "idle"), 0);
            double f;
            assert_int_equal(mw_snapshot_get(s, "mlwatch_energy_idle_floor_watts", &f, "component",
                                             "cpu", "source", "prior", MW_END),
                             0);
            assert_near(f, 1.48);
            double v;
            assert_int_equal(mw_snapshot_get(s, "mlwatch_node_energy_joules_total", &v, "source",
                                             "rapl", "zone", "package-0", "method", "measured",
                                             MW_END),
                             0);
            assert_near(v, 200);
            assert_int_equal(mw_snapshot_get(s, "mlwatch_node_energy_joules_total", &v, "zone",
                                             "package-0/core", MW_END),
                             0);
            assert_near(v, 80);
            /* No carbon source: no CO2 family at all. */
            assert_null(mw_snapshot_find(s, "mlwatch_container_co2_grams_total"));
        }
        mw_snapshot_free(s);
    }
    mw_energy_free(e);
}

static int fake_weight(void *ctx, const char *cgroup, double *w)
{
    (void)ctx;
    if (strcmp(cgroup, "/kubepods/a") == 0)
        *w = 1024;
    else if (strcmp(cgroup, "/kubepods/b") == 0)
        *w = 3072;
    else
        return -1;
    return 0;
}

/* Idle energy (a configured 20 W floor, the package's whole 20 W) by
 * reservation: requests (1024 and 3072 shares on 8 CPUs, 8192: 1/8 and
 * 3/8, the other half unreserved), the CPU-time rule (3:1 of the busy time,
 * processes outside containers the system share), requests without any
 * (the CPU-time rule), none (all unreserved). */
static void idle_policies(void **state)
{
    (void)state;
    const struct {
        mw_idle_policy pol;
        int weights;
        double a, b, system, unreserved;
    } cases[] = {
        {MW_IDLE_POLICY_REQUESTS, 1, 10, 30, 0, 40},
        {MW_IDLE_POLICY_CPU, 1, 48, 16, 16, 0},
        {MW_IDLE_POLICY_REQUESTS, 0, 48, 16, 16, 0},
        {MW_IDLE_POLICY_NONE, 1, 0, 0, 0, 80},
    };
    for (size_t c = 0; c < MW_ARRAY_LEN(cases); c++) {
        mw_energy_params p;
        mw_energy_params_init(&p, cases[c].pol);
        p.idle_watts_per_cpu = 1;
        p.max_watts_per_cpu = 2;
        p.idle_watts[MW_EC_CPU] = 20;
        p.idle_watts_set = 1u << MW_EC_CPU;
        p.cpu_weight = cases[c].weights ? fake_weight : NULL;
        mw_energy *e = mw_energy_new(&p);
        double total = 0;
        for (int i = 0; i < 3; i++) {
            mw_snapshot *s = at(5000 + i * 2000);
            node_cpu(s, 8, 1.0 * i, 3.0 * i);
            mw_emit(s, &RAPL, 40.0 * i, "zone", "package-0", MW_END);
            pod_cpu(s, "ml", "a", "main", 0.6 * i);
            pod_cpu(s, "ml", "b", "main", 0.2 * i);
            mw_emit(s, &CINFO, 1, "namespace", "ml", "pod", "a", "container", "main",
                    "container_id", "main", "pod_uid", "u1", "cgroup", "/kubepods/a", MW_END);
            mw_emit(s, &CINFO, 1, "namespace", "ml", "pod", "b", "container", "main",
                    "container_id", "main", "pod_uid", "u2", "cgroup", "/kubepods/b", MW_END);
            mw_energy_step(e, s, -1);
            total += i ? 40 : 0;
            assert_conserved(e, s, total);
            if (i == 2) {
                assert_near(cj(s, "a", "cpu", "idle"), cases[c].a);
                assert_near(cj(s, "b", "cpu", "idle"), cases[c].b);
                assert_near(sj(s, "system", "cpu", "idle"), cases[c].system);
                assert_near(sj(s, "unreserved", "cpu", "idle"), cases[c].unreserved);
                assert_near(cj(s, "a", "cpu", "dynamic") + sj(s, "system", "cpu", "dynamic"), 0);
                double f;
                assert_int_equal(mw_snapshot_get(s, "mlwatch_energy_idle_floor_watts", &f,
                                                 "component", "cpu", "source", "configured",
                                                 MW_END),
                                 0);
                assert_near(f, 20);
            }
            mw_snapshot_free(s);
        }
        mw_energy_free(e);
    }
}

static mw_energy *model_gpu_floor(double watts)
{
    mw_energy_params p;
    mw_energy_params_init(&p, MW_IDLE_POLICY_NONE);
    p.idle_watts[MW_EC_GPU] = watts;
    p.idle_watts_set = 1u << MW_EC_GPU;
    return mw_energy_new(&p);
}

static void gpu_util(mw_snapshot *s, const char *pod, double util)
{
    mw_emit(s, &CUTIL, util, "namespace", "ml", "pod", pod, "container", "main", "gpu", "0",
            MW_END);
}

static void gpu_energy(mw_snapshot *s, double j)
{
    mw_emit(s, &GPU_E, j, "gpu", "0", "uuid", "GPU-0", MW_END);
    mw_emit(s, &GPU_P, 300, "gpu", "0", "uuid", "GPU-0", MW_END);
}

/* A pod alone on a GPU gets all of its energy, idle included. */
static void gpu_alone(void **state)
{
    (void)state;
    mw_energy *e = model_gpu_floor(300);
    const double j[] = {1000, 1300, 1700, 2000};
    for (int i = 0; i < 4; i++) {
        mw_snapshot *s = at(i * 1000);
        gpu_energy(s, j[i]);
        gpu_util(s, "solo", 0.9);
        mw_energy_step(e, s, -1);
        assert_conserved(e, s, j[i] - j[0]);
        if (i == 3) {
            assert_near(cj(s, "solo", "gpu", "dynamic") + cj(s, "solo", "gpu", "idle"), 1000);
            assert_near(cj(s, "solo", "gpu", "idle"), 900); /* floor 300 W */
            assert_near(sj(s, "system", "gpu", "dynamic") + sj(s, "unreserved", "gpu", "idle"), 0);
        }
        mw_snapshot_free(s);
    }
    mw_energy_free(e);
}

/* The kubelet allocated GPU-0 to ml/held/main (pod-resources), GPU-1 to
 * nobody. */
static size_t fake_holders(void *ctx, const char *uuid, mw_energy_holder *out, size_t cap)
{
    (void)ctx;
    if (strcmp(uuid, "GPU-0") != 0 || cap < 1) return 0;
    memset(out, 0, sizeof(*out));
    strcpy(out->ns, "ml");
    strcpy(out->pod, "held");
    strcpy(out->container, "main");
    return 1;
}

/* A GPU allocated to a pod whose processes do not use it: under the
 * requests policy its idle energy is the pod's reservation (floor 100 W x
 * 3 s = 300 J), its dynamic energy the system share's; GPU-1, allocated to
 * no one, stays unreserved. Under the cpu policy, or without the
 * allocations, the idle energy is unreserved. */
static void gpu_allocation_reserves(void **state)
{
    (void)state;
    for (int mode = 0; mode < 3; mode++) {
        mw_energy_params p;
        mw_energy_params_init(&p, mode == 1 ? MW_IDLE_POLICY_CPU : MW_IDLE_POLICY_REQUESTS);
        p.idle_watts[MW_EC_GPU] = 100;
        p.idle_watts_set = 1u << MW_EC_GPU;
        if (mode != 2) p.gpu_holders = fake_holders;
        mw_energy *e = mw_energy_new(&p);
        const double j0[] = {1000, 1250, 1500, 1750}, j1[] = {0, 200, 400, 600};
        for (int i = 0; i < 4; i++) {
            mw_snapshot *s = at(i * 1000);
            mw_emit(s, &GPU_E, j0[i], "gpu", "0", "uuid", "GPU-0", MW_END);
            mw_emit(s, &GPU_E, j1[i], "gpu", "1", "uuid", "GPU-1", MW_END);
            mw_energy_step(e, s, -1);
            assert_conserved(e, s, j0[i] - j0[0] + j1[i]);
            if (i == 3) {
                double held = mode == 0 ? 300 : 0;
                assert_near(cj(s, "held", "gpu", "idle"), held);
                assert_near(cj(s, "held", "gpu", "dynamic"), 0);
                assert_near(sj(s, "unreserved", "gpu", "idle"), 600 - held);
                assert_near(sj(s, "system", "gpu", "dynamic"), 750 + 600 - 600);
            }
            mw_snapshot_free(s);
        }
        mw_energy_free(e);
    }
}

/* Three pods sharing a GPU: shares proportional to utilization; with no
 * utilization samples, to memory (the driver's reserve unattributed). */
static void gpu_shared(void **state)
{
    (void)state;
    for (int by_mem = 0; by_mem < 2; by_mem++) {
        mw_energy *e = model_gpu_floor(200);
        const double j[] = {0, 200, 800};
        for (int i = 0; i < 3; i++) {
            mw_snapshot *s = at(i * 1000);
            gpu_energy(s, j[i]);
            const char *pods[] = {"p1", "p2", "p3"};
            const double w[] = {0.5, 0.3, 0.2};
            for (int k = 0; k < 3; k++) {
                if (by_mem)
                    mw_emit(s, &CMEM, w[k] * 8e9, "namespace", "ml", "pod", pods[k], "container",
                            "main", "gpu", "0", MW_END);
                else
                    gpu_util(s, pods[k], w[k]);
            }
            if (by_mem) /* the rest bucket: memory of no process */
                mw_emit(s, &CMEM, 2e9, "namespace", "", "pod", "", "container", "", "gpu", "0",
                        MW_END);
            mw_energy_step(e, s, -1);
            assert_conserved(e, s, j[i]);
            if (i == 2) {
                /* 200 J idle (floor 200 W), 400 J dynamic. */
                double scale = by_mem ? 0.8 : 1.0;
                assert_near(cj(s, "p1", "gpu", "dynamic"), 200 * scale);
                assert_near(cj(s, "p2", "gpu", "dynamic"), 120 * scale);
                assert_near(cj(s, "p3", "gpu", "dynamic"), 80 * scale);
                assert_near(cj(s, "p1", "gpu", "idle"), 400 * 0.5 * scale);
                /* The memory of no process: its dynamic energy the system's,
                 * its idle energy unreserved. */
                assert_near(sj(s, "system", "gpu", "dynamic"), by_mem ? 80 : 0);
                assert_near(sj(s, "unreserved", "gpu", "idle"), by_mem ? 80 : 0);
            }
            mw_snapshot_free(s);
        }
        mw_energy_free(e);
    }
}

/* MIG: an instance owns its memory slice of the GPU; slices nobody uses
 * stay unattributed. */
static void gpu_mig(void **state)
{
    (void)state;
    mw_energy *e = model_gpu_floor(400);
    for (int i = 0; i < 2; i++) {
        mw_snapshot *s = at(i * 1000);
        gpu_energy(s, 400.0 * i);
        mw_emit(s, &MIG_ON, 1, "gpu", "0", MW_END);
        mw_emit(s, &GPU_MT, 40e9, "gpu", "0", MW_END);
        mw_emit(s, &MIG_MT, 10e9, "gpu", "0", "gpu_instance", "1", "compute_instance", "0", MW_END);
        mw_emit(s, &MIG_MT, 20e9, "gpu", "0", "gpu_instance", "2", "compute_instance", "0", MW_END);
        mw_emit(s, &CMIG, 1e9, "namespace", "ml", "pod", "mig1", "container", "main", "gpu", "0",
                "gpu_instance", "1", "compute_instance", "0", MW_END);
        mw_energy_step(e, s, -1);
        assert_conserved(e, s, 400.0 * i);
        if (i == 1) {
            assert_near(cj(s, "mig1", "gpu", "idle"), 100);
            assert_near(sj(s, "unreserved", "gpu", "idle"), 300);
        }
        mw_snapshot_free(s);
    }
    mw_energy_free(e);
}

/* The kubelet's MIG allocations of the MIG fixture (tests/integration/
 * idle_mig.sh): GI 9 to shared/notebook-z, GI 10 to ml-team/train-1 (mode
 * 2: also to ml-team/train-2, who share it). */
static int mig_holders_mode;
static size_t mig_holders(void *ctx, const char *uuid, mw_energy_holder *out, size_t cap)
{
    (void)ctx;
    size_t n = 0;
    const char *who[2][2] = {{"shared", "notebook-z"}, {"ml-team", "train-1"}};
    int k = strcmp(uuid, "MIG-10000002") == 0 ? 0 : strcmp(uuid, "MIG-10000003") == 0 ? 1 : -1;
    if (k < 0) return 0;
    for (int i = 0; i < (k == 1 && mig_holders_mode == 2 ? 2 : 1) && n < cap; i++, n++) {
        memset(&out[n], 0, sizeof(out[n]));
        strcpy(out[n].ns, who[k][0]);
        strcpy(out[n].pod, i ? "train-2" : who[k][1]);
        strcpy(out[n].container, "main");
    }
    return n;
}

/* MIG in the requests policy, on the MIG fixture's H100 (85899345920 bytes,
 * four 1g.10gb instances of 10200547328 bytes: 0.11875 of the GPU each):
 * GI 7 and GI 8 are used (memory of infer-0 and infer-1), GI 9 and GI 10
 * only allocated (GI 9 holds the driver's 13 MiB, memory of no process). 250 W for 2 s over a 100 W
 * floor: 200 J idle, 300 J dynamic. An allocated, unused slice reserves its memory fraction of the
 * idle energy, 0.11875 x 200 = 23.75 J, and no dynamic energy; a used one
 * gets its fraction of both (23.75 + 35.625 J); the remaining 105 J idle
 * (52.5 % of the memory in no instance, 4 x 23.75 J taken) is unreserved, 228.75 J dynamic the
 * system's. Two pods allocated one slice share its reservation equally.
 * Under the cpu policy the allocated slices reserve nothing. */
static void gpu_mig_reservations(void **state)
{
    (void)state;
    for (int mode = 0; mode < 3; mode++) {
        mw_energy_params p;
        mw_energy_params_init(&p, mode == 1 ? MW_IDLE_POLICY_CPU : MW_IDLE_POLICY_REQUESTS);
        p.idle_watts[MW_EC_GPU] = 100;
        p.idle_watts_set = 1u << MW_EC_GPU;
        p.gpu_holders = mig_holders;
        mig_holders_mode = mode;
        mw_energy *e = mw_energy_new(&p);
        for (int i = 0; i < 3; i++) {
            mw_snapshot *s = at(i * 1000);
            mw_emit(s, &GPU_E, 250.0 * i, "gpu", "0", "uuid", "GPU-h100", MW_END);
            mw_emit(s, &MIG_ON, 1, "gpu", "0", MW_END);
            mw_emit(s, &GPU_MT, 85899345920.0, "gpu", "0", MW_END);
            const char *gis[] = {"7", "8", "9", "10"};
            for (int k = 0; k < 4; k++) {
                char uuid[16];
                snprintf(uuid, sizeof(uuid), "MIG-1000000%d", k);
                mw_emit(s, &MIG_MT, 10200547328.0, "gpu", "0", "uuid", uuid, "gpu_instance", gis[k],
                        "compute_instance", "0", MW_END);
            }
            /* The driver's reserve on the empty GI 9: memory of no process. */
            mw_emit(s, &CMIG, 13631488, "namespace", "", "pod", "", "container", "", "gpu", "0",
                    "gpu_instance", "9", "compute_instance", "0", MW_END);
            mw_emit(s, &CMIG, 536870912, "namespace", "inference", "pod", "infer-0", "container",
                    "main", "gpu", "0", "gpu_instance", "7", "compute_instance", "0", MW_END);
            mw_emit(s, &CMIG, 1073741824, "namespace", "inference", "pod", "infer-1", "container",
                    "main", "gpu", "0", "gpu_instance", "8", "compute_instance", "0", MW_END);
            mw_energy_step(e, s, -1);
            assert_conserved(e, s, 250.0 * i);
            if (i == 2) {
                double r = mode == 1 ? 0 : 23.75;
                assert_near(cj(s, "notebook-z", "gpu", "idle"), r);
                assert_near(cj(s, "notebook-z", "gpu", "dynamic"), 0);
                assert_near(cj(s, "train-1", "gpu", "idle"), mode == 2 ? r / 2 : r);
                assert_near(cj(s, "train-2", "gpu", "idle"), mode == 2 ? r / 2 : 0);
                assert_near(cj(s, "infer-0", "gpu", "idle"), 23.75);
                assert_near(cj(s, "infer-0", "gpu", "dynamic"), 35.625);
                assert_near(cj(s, "infer-1", "gpu", "dynamic"), 35.625);
                assert_near(sj(s, "unreserved", "gpu", "idle"), 200 - 2 * 23.75 - 2 * r);
                assert_near(sj(s, "system", "gpu", "dynamic"), 228.75);
            }
            mw_snapshot_free(s);
        }
        mw_energy_free(e);
    }
}

/* A GPU energy counter that went down (driver reload): power x interval. */
static void gpu_counter_reset(void **state)
{
    (void)state;
    mw_energy *e = model(MW_IDLE_POLICY_NONE);
    const double j[] = {5000, 5600, 40, 640};
    double total = 0;
    for (int i = 0; i < 4; i++) {
        mw_snapshot *s = at(i * 2000);
        gpu_energy(s, j[i]); /* 300 W */
        gpu_util(s, "solo", 1);
        mw_energy_step(e, s, -1);
        total += i == 0 ? 0 : i == 2 ? 600 : j[i] - j[i - 1];
        assert_conserved(e, s, total);
        mw_snapshot_free(s);
    }
    mw_energy_free(e);
    assert_near(total, 1800);
}

/* No RAPL: the linear model, labelled estimated. */
static void estimated_model(void **state)
{
    (void)state;
    mw_energy *e = model(MW_IDLE_POLICY_NONE);
    for (int i = 0; i < 2; i++) {
        mw_snapshot *s = at(i * 1000);
        node_cpu(s, 4, 2.0 * i, 2.0 * i); /* 50% busy */
        pod_cpu(s, "ml", "a", "main", 1.0 * i);
        mw_energy_step(e, s, -1);
        double want = i ? 4 * (0.74 + (3.5 - 0.74) * 0.5) : 0;
        assert_conserved(e, s, want);
        if (i) {
            double v;
            assert_int_equal(mw_snapshot_get(s, "mlwatch_node_energy_joules_total", &v, "source",
                                             "model", "zone", "cpu", "method", "estimated", MW_END),
                             0);
            assert_near(v, 8.48);
            assert_true(mw_energy_last(e)->estimated_cpu);
            assert_near(sj(s, "unreserved", "cpu", "idle"), 2.96);
            assert_near(cj(s, "a", "cpu", "dynamic"), 5.52 / 2);
            assert_near(sj(s, "system", "cpu", "dynamic"), 5.52 / 2);
            /* Every figure says how it was obtained. */
            assert_int_equal(mw_snapshot_get(s, "mlwatch_container_energy_joules_total", &v, "pod",
                                             "a", "component", "cpu", "kind", "dynamic", "method",
                                             "estimated", MW_END),
                             0);
            assert_int_equal(mw_snapshot_get(s, "mlwatch_energy_component_joules_total", &v,
                                             "component", "cpu", "kind", "idle", "method",
                                             "estimated", MW_END),
                             0);
            assert_near(v, 2.96);
            assert_int_equal(mw_snapshot_get(s, "mlwatch_container_energy_joules_total", &v, "pod",
                                             "a", "component", "cpu", "kind", "dynamic", "method",
                                             "measured", MW_END),
                             -1);
        }
        mw_snapshot_free(s);
    }
    mw_energy_free(e);
}

/* The cgroup files are read moments after /proc/stat: a container's CPU
 * time can run ahead of the node's busy time in one interval and fall
 * behind in the next. It is paid the node's part, owed the rest and paid
 * that in the next interval, so a container that alone kept the node busy
 * gets all the dynamic energy (before: 0.2 s of it went to the remainder). */
static void cpu_ahead_of_node(void **state)
{
    (void)state;
    const double w = 3.5 - 0.74; /* dynamic watts per busy CPU, estimated model */
    mw_energy *e = model(MW_IDLE_POLICY_NONE);
    const double ctr[] = {0, 1.2, 2.0, 3.0};
    double total = 0;
    for (int i = 0; i < 4; i++) {
        mw_snapshot *s = at(1000 + i * 1000);
        node_cpu(s, 2, 1.0 * i, 1.0 * i); /* one of two CPUs busy */
        pod_cpu(s, "ml", "a", "main", ctr[i]);
        mw_energy_step(e, s, -1);
        if (i) total += 2 * 0.74 + w;
        assert_conserved(e, s, total);
        assert_near(cj(s, "a", "cpu", "dynamic"), w * i);
        assert_near(sj(s, "system", "cpu", "dynamic"), 0);
        mw_snapshot_free(s);
    }
    mw_energy_free(e);

    /* Containers that claim more than the node every interval (0.75 + 0.5
     * of 1 busy second) keep their 3:2 split of all of it; what each is
     * owed stays bounded by one interval of its own CPU time. */
    e = model(MW_IDLE_POLICY_NONE);
    total = 0;
    for (int i = 0; i < 10; i++) {
        mw_snapshot *s = at(1000 + i * 1000);
        node_cpu(s, 2, 1.0 * i, 1.0 * i);
        pod_cpu(s, "ml", "a", "main", 0.75 * i);
        pod_cpu(s, "ml", "b", "main", 0.5 * i);
        mw_energy_step(e, s, -1);
        if (i) total += 2 * 0.74 + w;
        assert_conserved(e, s, total);
        assert_near(cj(s, "a", "cpu", "dynamic"), 0.6 * w * i);
        assert_near(cj(s, "b", "cpu", "dynamic"), 0.4 * w * i);
        mw_snapshot_free(s);
    }
    mw_energy_free(e);
}

/* IPMI node power: the platform beyond RAPL and GPUs is "other"; a meter
 * below the parts keeps the parts and is counted. */
static void ipmi_other(void **state)
{
    (void)state;
    mw_energy *e = model(MW_IDLE_POLICY_CPU);
    const double watts[] = {500, 500, 500, 150};
    double total = 0;
    for (int i = 0; i < 4; i++) {
        mw_snapshot *s = at(i * 1000);
        node_cpu(s, 2, 1.0 * i, 1.0 * i);
        pod_cpu(s, "ml", "a", "main", 0.5 * i);
        mw_emit(s, &RAPL, 100.0 * i, "zone", "package-0", MW_END);
        gpu_energy(s, 300.0 * i);
        gpu_util(s, "a", 0.5);
        mw_emit(s, &IPMI, watts[i], MW_END);
        mw_energy_step(e, s, -1);
        /* Trapezoid: 500, 500, then (500+150)/2 = 325 < 400 of parts. */
        total += i == 0 ? 0 : i < 3 ? 500 : 400;
        assert_conserved(e, s, total);
        if (i == 2) {
            /* other is 100 W, its prior floor 0 W (nothing idle seen): all
             * dynamic, half the busy time the pod's. */
            assert_near(cj(s, "a", "other", "dynamic"), 100);
            assert_near(sj(s, "system", "other", "dynamic"), 100);
            assert_near(cj(s, "a", "other", "idle") + sj(s, "unreserved", "other", "idle"), 0);
        }
        if (i == 3) {
            double v;
            assert_int_equal(
                mw_snapshot_get(s, "mlwatch_energy_node_below_parts_total", &v, MW_END), 0);
            assert_near(v, 1);
        }
        mw_snapshot_free(s);
    }
    mw_energy_free(e);
}

/* Power that changes between readings. The node meter (IPMI DCMI, or an
 * ACPI power meter through hwmon) is sampled power: the model takes the
 * trapezoid between consecutive readings, the exact energy of power moving
 * linearly between them, so each interval's joules are written out below.
 * RAPL (40 W) and the pod's CPU time are counters. The pod runs all the
 * node's busy time, so it is paid everything, and the node's meter, its
 * exported total, component other and the pod's total are checked every
 * interval. */
typedef struct meter_case {
    const char *name;
    int n;
    int64_t ms[5];
    double watts[5], joules[5]; /* joules of the interval ending at ms[i] */
} meter_case;

static const meter_case METER_CASES[] = {
    /* (100 + 200) / 2, (200 + 300) / 2, (300 + 400) / 2; the last reading
     * would give 200, 300, 400. */
    {"ramp 100 to 400 W", 4, {0, 1000, 2000, 3000}, {100, 200, 300, 400}, {0, 150, 250, 350}},
    /* 1 s, 2.5 s, 0.5 s: (100 + 300) / 2 * 1, (300 + 50) / 2 * 2.5,
     * (50 + 250) / 2 * 0.5. */
    {"uneven intervals", 4, {0, 1000, 3500, 4000}, {100, 300, 50, 250}, {0, 200, 437.5, 75}},
    /* One reading at 1000 W: the rise and the fall share it, 550 J each
     * (the last reading would give 1000 J, then 100 J). */
    {"spike", 5, {0, 1000, 2000, 3000, 4000}, {100, 100, 1000, 100, 100}, {0, 100, 550, 550, 100}},
};

static const mw_metric_desc HWMON_P = {"mlwatch_hwmon_power_watts", "", "watts", MW_GAUGE};

static void node_meter_between_readings(void **state)
{
    (void)state;
    for (int src = 0; src < 2; src++) /* IPMI, then the hwmon power meter */
        for (size_t c = 0; c < MW_ARRAY_LEN(METER_CASES); c++) {
            const meter_case *mc = &METER_CASES[c];
            mw_energy *e = model(MW_IDLE_POLICY_CPU);
            double node = 0, other = 0;
            for (int i = 0; i < mc->n; i++) {
                double t = (double)mc->ms[i] / 1000, dt = i ? t - (double)mc->ms[i - 1] / 1000 : 0;
                mw_snapshot *s = at(mc->ms[i]);
                node_cpu(s, 2, 1.5 * t, 0.5 * t);
                pod_cpu(s, "ml", "a", "main", 1.5 * t);
                mw_emit(s, &RAPL, 40 * t, "zone", "package-0", MW_END);
                if (src == 0)
                    mw_emit(s, &IPMI, mc->watts[i], MW_END);
                else
                    mw_emit(s, &HWMON_P, mc->watts[i], "chip", "power_meter", "sensor", "power1",
                            MW_END);
                mw_energy_step(e, s, -1);
                node += mc->joules[i];
                other += i ? mc->joules[i] - 40 * dt : 0;
                assert_conserved(e, s, node);
                const mw_energy_interval *iv = mw_energy_last(e);
                if (i) {
                    if (fabs(iv->node_joules - mc->joules[i]) > 1e-9)
                        fail_msg("%s, %s, interval %d: node %.17g J, want %.17g", mc->name,
                                 src ? "hwmon" : "ipmi", i, iv->node_joules, mc->joules[i]);
                    assert_near(iv->component[MW_EC_OTHER][MW_EK_DYNAMIC] +
                                    iv->component[MW_EC_OTHER][MW_EK_IDLE],
                                mc->joules[i] - 40 * dt);
                }
                assert_near(cj(s, "a", "other", "dynamic") + cj(s, "a", "other", "idle"), other);
                assert_near(cj(s, "a", "cpu", "dynamic") + cj(s, "a", "cpu", "idle") +
                                cj(s, "a", "other", "dynamic") + cj(s, "a", "other", "idle"),
                            node);
                /* The exported total of the meter follows the same rule:
                 * IPMI's as the node, the power meter's as its hwmon zone. */
                double v = 0;
                if (src == 0)
                    assert_int_equal(mw_snapshot_get(s, "mlwatch_node_energy_joules_total", &v,
                                                     "source", "ipmi", "zone", "node", MW_END),
                                     0);
                else
                    assert_int_equal(mw_snapshot_get(s, "mlwatch_node_energy_joules_total", &v,
                                                     "source", "hwmon", "zone",
                                                     "power_meter/power1", MW_END),
                                     0);
                assert_near(v, node);
                mw_snapshot_free(s);
            }
            mw_energy_free(e);
        }
}

/* A GPU with an energy counter: the counter's difference is the energy,
 * whatever the power readings say. Here the power reads 100 W at both ends
 * of each 1 s interval while the counter saw a 0.2 s burst at 1000 W in the
 * second one (100 * 0.8 + 1000 * 0.2 = 280 J), and a ramp from 100 to
 * 300 W in the third (200 J); sampled power would give 100 J for each. */
static void gpu_counter_between_readings(void **state)
{
    (void)state;
    mw_energy *e = model(MW_IDLE_POLICY_NONE);
    const double counter[] = {1000, 1100, 1380, 1580}, want[] = {0, 100, 280, 200};
    double total = 0;
    for (int i = 0; i < 4; i++) {
        mw_snapshot *s = at(i * 1000);
        mw_emit(s, &GPU_E, counter[i], "gpu", "0", "uuid", "GPU-0", MW_END);
        mw_emit(s, &GPU_P, 100, "gpu", "0", "uuid", "GPU-0", MW_END);
        gpu_util(s, "solo", 1);
        mw_energy_step(e, s, -1);
        total += want[i];
        assert_conserved(e, s, total);
        const mw_energy_interval *iv = mw_energy_last(e);
        if (i)
            assert_near(iv->component[MW_EC_GPU][MW_EK_DYNAMIC] +
                            iv->component[MW_EC_GPU][MW_EK_IDLE],
                        want[i]);
        assert_near(cj(s, "solo", "gpu", "dynamic") + cj(s, "solo", "gpu", "idle"), total);
        double v = 0;
        assert_int_equal(mw_snapshot_get(s, "mlwatch_node_energy_joules_total", &v, "source", "gpu",
                                         "zone", "0", MW_END),
                         0);
        assert_near(v, total);
        mw_snapshot_free(s);
    }
    mw_energy_free(e);
}

/* A GPU without an energy counter: its power readings by the trapezoid,
 * the same rule as the node meter (the last reading would give 300, 300,
 * 1000, 100 J). */
static void gpu_power_between_readings(void **state)
{
    (void)state;
    mw_energy *e = model_gpu_floor(50);
    const double watts[] = {100, 300, 300, 1000, 100}, want[] = {0, 200, 300, 650, 550};
    double total = 0;
    for (int i = 0; i < 5; i++) {
        mw_snapshot *s = at(i * 1000);
        mw_emit(s, &GPU_P, watts[i], "gpu", "0", "uuid", "GPU-0", MW_END);
        gpu_util(s, "solo", 1);
        mw_energy_step(e, s, -1);
        total += want[i];
        assert_conserved(e, s, total);
        assert_near(cj(s, "solo", "gpu", "dynamic") + cj(s, "solo", "gpu", "idle"), total);
        assert_near(cj(s, "solo", "gpu", "idle"), 50.0 * i);
        double v = 0;
        assert_int_equal(mw_snapshot_get(s, "mlwatch_node_energy_joules_total", &v, "source", "gpu",
                                         "zone", "0", MW_END),
                         0);
        assert_near(v, total);
        mw_snapshot_free(s);
    }
    mw_energy_free(e);
}

/* The issue's node: 4 CPUs, RAPL package at 65 W while idle (5% busy, the
 * system's processes) for 4 s, then 220 W with two pods at 3:1 of all the
 * CPU time; default policy (requests, none here: by CPU time). The floor is
 * learnt from the idle intervals: 65 J idle of each busy interval, 155 J
 * (70.45 %) dynamic, split 3:1, the idle part too. Then a restart under
 * load through the state file: the floor is kept, so the split is the same
 * after it (a fresh agent would use the 2.96 W prior). */
static void feed_issue_node(mw_energy *e, int64_t t, double busy_since, mw_snapshot **out)
{
    double secs = (double)t, busy = t <= 4 ? 0.2 * secs : 0.8 + 4 * (secs - 4);
    double pkg = t <= 4 ? 65 * secs : 260 + 220 * (secs - 4);
    mw_snapshot *s = at(t * 1000);
    node_cpu(s, 4, busy, 4 * secs - busy);
    mw_emit(s, &RAPL, pkg, "zone", "package-0", MW_END);
    double pods = secs > busy_since ? 4 * (secs - busy_since) : 0;
    pod_cpu(s, "ml", "a", "main", 0.75 * pods);
    pod_cpu(s, "ml", "b", "main", 0.25 * pods);
    mw_energy_step(e, s, -1);
    *out = s;
}

static double floor_of(const mw_snapshot *s, const char *source)
{
    double v = -1;
    if (mw_snapshot_get(s, "mlwatch_energy_idle_floor_watts", &v, "component", "cpu", "source",
                        source, MW_END) < 0)
        fail_msg("no cpu floor with source %s", source);
    return v;
}

static void idle_busy_restart(void **state)
{
    (void)state;
    mw_energy *e = model(MW_IDLE_POLICY_REQUESTS);
    double total = 0;
    mw_snapshot *s;
    for (int64_t t = 0; t <= 8; t++) {
        feed_issue_node(e, t, 4, &s);
        total += t ? (t <= 4 ? 65 : 220) : 0;
        assert_conserved(e, s, total);
        if (t >= 1 && t <= 4) {
            assert_near(floor_of(s, "learnt"), 65);
            /* Idle: the system's processes ran all the busy time. */
            assert_near(sj(s, "system", "cpu", "idle"), 65.0 * t);
            assert_near(cj(s, "a", "cpu", "idle"), 0);
        }
        if (t > 4) {
            const mw_energy_interval *iv = mw_energy_last(e);
            assert_near(iv->component[MW_EC_CPU][MW_EK_DYNAMIC] / 220, 155.0 / 220);
            assert_near(cj(s, "a", "cpu", "dynamic"), 116.25 * (double)(t - 4));
            assert_near(cj(s, "b", "cpu", "dynamic"), 38.75 * (double)(t - 4));
            assert_near(cj(s, "a", "cpu", "idle"), 48.75 * (double)(t - 4));
            assert_near(cj(s, "b", "cpu", "idle"), 16.25 * (double)(t - 4));
        }
        if (t < 8) mw_snapshot_free(s);
    }
    mw_snapshot_free(s);

    /* Restart: the totals and the floor through the state file's text. */
    char *text = mw_energy_state_dump(e, "node", 8000);
    mw_energy_free(e);
    e = model(MW_IDLE_POLICY_REQUESTS);
    char err[256];
    assert_int_equal(mw_energy_state_parse(e, text, strlen(text), "node", err, sizeof(err)), 0);
    free(text);
    /* Down from 8 s to 10 s: the first snapshot after the restart is the new
     * baseline (that energy is not counted), then three busy intervals. */
    for (int64_t t = 10; t <= 13; t++) {
        feed_issue_node(e, t, 4, &s);
        double n = t == 10 ? 4 : (double)(t - 10) + 4;
        if (t > 10) total += 220;
        if (t > 10) assert_near(floor_of(s, "learnt"), 65);
        assert_near(cj(s, "a", "cpu", "dynamic"), 116.25 * n);
        assert_near(cj(s, "b", "cpu", "idle"), 16.25 * n);
        assert_near(sj(s, "system", "cpu", "idle"), 260);
        assert_conserved(e, s, total);
        mw_snapshot_free(s);
    }
    mw_energy_free(e);

    /* Without the kept floor, busy from the start: the prior (4 x 0.74 W). */
    e = model(MW_IDLE_POLICY_REQUESTS);
    feed_issue_node(e, 5, 4, &s);
    mw_snapshot_free(s);
    feed_issue_node(e, 6, 4, &s);
    assert_near(floor_of(s, "prior"), 2.96);
    assert_near(cj(s, "a", "cpu", "dynamic"), 0.75 * (220 - 2.96));
    mw_snapshot_free(s);
    mw_energy_free(e);
}

/* A learnt floor falls at once to a lower reading (busy or not) and rises
 * toward a higher idle reading by 1 - exp(-dt / 7 days) of the gap; a busy
 * reading above it leaves it. */
static void floor_follows_slowly(void **state)
{
    (void)state;
    mw_energy *e = model(MW_IDLE_POLICY_NONE);
    const double watts[] = {0, 65, 75, 200, 60, 75};
    const int idle[] = {1, 1, 1, 0, 0, 1};
    double pkg = 0, busy = 0, f = 0;
    for (int i = 0; i < 6; i++) {
        pkg += watts[i] * 100;
        busy += idle[i] ? 0 : 100;
        mw_snapshot *s = at((int64_t)i * 100000);
        node_cpu(s, 1, busy, 100.0 * i - busy);
        mw_emit(s, &RAPL, pkg, "zone", "package-0", MW_END);
        mw_energy_step(e, s, -1);
        if (i == 1) f = 65;
        if (i == 2 || i == 5) f += (75 - f) * (1 - exp(-100.0 / MW_ENERGY_FLOOR_TAU_S));
        if (i == 4) f = 60;
        if (i) {
            assert_near(floor_of(s, "learnt"), f);
            assert_near(mw_energy_last(e)->component[MW_EC_CPU][MW_EK_IDLE], f * 100);
        }
        mw_snapshot_free(s);
    }
    mw_energy_free(e);
}

/* CO2 integrates each interval's energy times that interval's intensity. */
static void co2_per_interval(void **state)
{
    (void)state;
    mw_energy *e = model(MW_IDLE_POLICY_NONE);
    const double intensity[] = {100, 100, 400, -1, 50};
    for (int i = 0; i < 5; i++) {
        mw_snapshot *s = at(i * 1000);
        gpu_energy(s, 3.6e6 * i); /* 1 kWh per interval */
        gpu_util(s, "a", 1);
        mw_energy_step(e, s, intensity[i]);
        if (i == 4) {
            double v;
            assert_int_equal(
                mw_snapshot_get(s, "mlwatch_container_co2_grams_total", &v, "pod", "a", MW_END), 0);
            /* 100 + 400 + (unknown: 0) + 50 grams; never 4 kWh x 50. */
            assert_near(v, 550);
        }
        mw_snapshot_free(s);
    }
    mw_energy_free(e);
}

/* A RAPL wrap, through the real collector on a fixture copy. */
static void rapl_wrap_through_collector(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("rapl-cpufreq");
    tu_session *ts = tu_open(root, "rapl");
    mw_energy *e = model(MW_IDLE_POLICY_NONE);
    mw_snapshot *s = tu_run(ts);
    s->timestamp_ms = 1000;
    mw_energy_step(e, s, -1);
    mw_snapshot_free(s);
    /* package-1 wraps: 328850 uJ to the top, 671150 uJ after: 1 J.
     * package-0 +2 J, its dram +0.5 J, package-1/dram unchanged. */
    tu_write(root, "sys/devices/virtual/powercap/intel-rapl/intel-rapl:1/energy_uj", "671150\n");
    tu_write(root, "sys/devices/virtual/powercap/intel-rapl/intel-rapl:0/energy_uj",
             "84217436801\n");
    tu_write(root, "sys/devices/virtual/powercap/intel-rapl/intel-rapl:0/intel-rapl:0:1/energy_uj",
             "9877043210\n");
    s = tu_run(ts);
    s->timestamp_ms = 2000;
    mw_energy_step(e, s, -1);
    assert_conserved(e, s, 3.5);
    /* No CPU time in the snapshot: nothing is known to be idle, and with no
     * CPUs counted the prior is 0 W: all dynamic. */
    assert_near(mw_energy_last(e)->component[MW_EC_CPU][MW_EK_DYNAMIC], 3);
    assert_near(mw_energy_last(e)->component[MW_EC_DRAM][MW_EK_DYNAMIC], 0.5);
    mw_snapshot_free(s);
    mw_energy_free(e);
    tu_close(ts);
    tu_cleanup();
}

/* Conservation through the real collectors on a fixture node (the
 * Kubernetes v2 tree with the RAPL zones of rapl-cpufreq): five intervals
 * with the package, DRAM, the node's CPU time and two pods' CPU time moving
 * by known amounts. The workloads and the shares add up to the node's
 * energy exactly (1e-9) every interval, and each pod gets its exact part. */
static void conserved_on_fixture(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("k8s-v2-systemd");
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "cp -a '%s/sys/devices/virtual/powercap' '%s/sys/devices/virtual/' && mkdir -p "
             "'%s/sys/class' && cp -a '%s/sys/class/powercap' '%s/sys/class/'",
             tu_fixture("rapl-cpufreq"), root, root, tu_fixture("rapl-cpufreq"), root);
    assert_int_equal(system(cmd), 0);
    tu_session *ts = tu_open(root, "cpu,rapl,cgroup");
    mw_energy *e = model(MW_IDLE_POLICY_REQUESTS);
    const char *pods[] = {
        "sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/"
        "kubepods-burstable-podaaaaaaaa_0000_4000_8000_000000000002.slice/"
        "cri-containerd-b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0.scope/"
        "cpu.stat",
        "sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/"
        "kubepods-burstable-podaaaaaaaa_0000_4000_8000_000000000005.slice/"
        "cri-containerd-e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1e1.scope/"
        "cpu.stat"};
    /* Per interval (1 s): package +(50 + 30 i) J, DRAM +4 J, cpu0 +80 ticks
     * busy of 100, pod 0 +0.6 s, pod 1 +0.1 s: 0.75 and 0.125 of the busy
     * time, 0.125 the system's. */
    double pkg = 84215.436801, dram = 9876.54321, node = 0, pod0 = 0;
    long long user = 34567890, idle = 128874088;
    for (int i = 0; i <= 5; i++) {
        double dp = i ? 50 + 30.0 * i : 0, dd = i ? 4 : 0;
        pkg += dp;
        dram += dd;
        user += i ? 80 : 0;
        idle += i ? 20 : 0;
        char text[512];
        snprintf(text, sizeof(text), "%.0f\n", pkg * 1e6);
        tu_write(root, "sys/devices/virtual/powercap/intel-rapl/intel-rapl:0/energy_uj", text);
        snprintf(text, sizeof(text), "%.0f\n", dram * 1e6);
        tu_write(root,
                 "sys/devices/virtual/powercap/intel-rapl/intel-rapl:0/intel-rapl:0:1/energy_uj",
                 text);
        snprintf(text, sizeof(text),
                 "cpu  %lld 0 0 %lld 0 0 0 0 0 0\ncpu0 %lld 0 0 %lld 0 0 0 0 0 0\n", user, idle,
                 user, idle);
        tu_write(root, "proc/stat", text);
        for (int p = 0; p < 2; p++) {
            snprintf(text, sizeof(text), "usage_usec %lld\nuser_usec %lld\nsystem_usec 0\n",
                     40000LL + i * (p ? 100000LL : 600000LL),
                     30000LL + i * (p ? 100000LL : 600000LL));
            tu_write(root, pods[p], text);
        }
        mw_snapshot *s = tu_run(ts);
        s->timestamp_ms = 1000 + i * 1000;
        mw_energy_step(e, s, 200);
        node += dp + dd;
        const mw_energy_interval *iv = mw_energy_last(e);
        if (i) {
            if (fabs(iv->parts_joules - iv->node_joules) > 1e-9 * iv->node_joules ||
                fabs(iv->node_joules - dp - dd) > 1e-6)
                fail_msg("interval %d: parts %.17g, node %.17g, want %.17g", i, iv->parts_joules,
                         iv->node_joules, dp + dd);
            /* The package's idle part is the prior (0.74 W x 1 CPU: 80 %
             * busy is not idle), DRAM's 0 W: pod 0 gets 0.75 of the dynamic
             * and, under the CPU-time rule (no requests here), 0.75 of the
             * idle part. */
            pod0 += 0.75 * (dp + dd);
        }
        double sum = sum_all(s), got = 0;
        if (fabs(sum - node) > 1e-6)
            fail_msg("interval %d: totals %.17g, want %.17g", i, sum, node);
        const mw_family *f = mw_snapshot_find(s, "mlwatch_container_energy_joules_total");
        for (const mw_sample *x = f ? f->first : NULL; x; x = x->next)
            for (uint32_t l = 0; l < x->nlabels; l++)
                if (!strcmp(x->labels[l].name, "pod") &&
                    !strcmp(x->labels[l].value, "jupyter-alice"))
                    got += x->value;
        if (fabs(got - pod0) > 1e-6) fail_msg("interval %d: pod %.17g J, want %.17g", i, got, pod0);
        mw_snapshot_free(s);
    }
    assert_true(mw_energy_violations(e) == 0);
    mw_energy_free(e);
    tu_close(ts);
    tu_cleanup();
}

/* Containers that come and go; a container restart (counter back to a low
 * value) counts the new cgroup's time. */
static void container_restart(void **state)
{
    (void)state;
    mw_energy *e = model(MW_IDLE_POLICY_NONE);
    const double c[] = {100, 101, 0.5, 1.5};
    double total = 0;
    for (int i = 0; i < 4; i++) {
        mw_snapshot *s = at(i * 1000);
        node_cpu(s, 1, 1.0 * i, 0);
        mw_emit(s, &RAPL, 10.0 * i + (i > 1 ? 10 : 0), "zone", "package-0", MW_END);
        pod_cpu(s, "ml", "a", "main", c[i]);
        mw_energy_step(e, s, -1);
        total += i == 0 ? 0 : i == 2 ? 20 : 10;
        assert_conserved(e, s, total);
        mw_snapshot_free(s);
    }
    mw_energy_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cpu_split_three_to_one),
        cmocka_unit_test(idle_policies),
        cmocka_unit_test(gpu_alone),
        cmocka_unit_test(gpu_shared),
        cmocka_unit_test(gpu_mig),
        cmocka_unit_test(gpu_mig_reservations),
        cmocka_unit_test(gpu_counter_reset),
        cmocka_unit_test(estimated_model),
        cmocka_unit_test(cpu_ahead_of_node),
        cmocka_unit_test(ipmi_other),
        cmocka_unit_test(node_meter_between_readings),
        cmocka_unit_test(gpu_counter_between_readings),
        cmocka_unit_test(gpu_allocation_reserves),
        cmocka_unit_test(gpu_power_between_readings),
        cmocka_unit_test(idle_busy_restart),
        cmocka_unit_test(floor_follows_slowly),
        cmocka_unit_test(co2_per_interval),
        cmocka_unit_test(rapl_wrap_through_collector),
        cmocka_unit_test(container_restart),
        cmocka_unit_test(conserved_on_fixture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
