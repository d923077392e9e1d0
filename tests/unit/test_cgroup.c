/* test_cgroup.c - cgroup control file parsers and the cgroup collector on the
 * k8s-v2-systemd and k8s-v1-cgroupfs fixtures (values derived by hand from
 * the fixture files), on changing trees, and on generated nodes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/cgroup_stat.h"
#include "collect/procmap.h"
#include "testutil.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define R2(x) x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x /* 32 times */
#define A1 R2("a1")
#define A0 R2("a0")
#define B1 R2("b1")
#define B2 R2("b2")
#define B0 R2("b0")
#define C1 R2("c1")
#define C0 R2("c0")
#define D1 R2("d1")
#define D0 R2("d0")
#define E1 R2("e1")
#define F1 R2("f1")
#define UG "aaaaaaaa-0000-4000-8000-000000000001"
#define UB "aaaaaaaa-0000-4000-8000-000000000002"
#define UE "aaaaaaaa-0000-4000-8000-000000000003"
#define UX "aaaaaaaa-0000-4000-8000-000000000005"
#define PODG "sys/fs/cgroup/kubepods.slice/kubepods-podaaaaaaaa_0000_4000_8000_000000000001.slice"
#define PODB                                                                                       \
    "sys/fs/cgroup/kubepods.slice/kubepods-burstable.slice/"                                       \
    "kubepods-burstable-podaaaaaaaa_0000_4000_8000_000000000002.slice"

/* --- parsers ------------------------------------------------------------- */

static void cpu_stat_v2(void **state)
{
    (void)state;
    mw_cg_cpu c;
    assert_int_equal(mw_parse_cg2_cpu_stat("usage_usec 12345678\nuser_usec 1\nsystem_usec 2\n"
                                           "nr_periods 1000\nnr_throttled 250\n"
                                           "throttled_usec 5000000\nnr_bursts 0\n",
                                           &c),
                     0);
    assert_true(c.usage_ns == 12345678000ULL);
    assert_true(c.has_throttling);
    assert_true(c.nr_periods == 1000 && c.nr_throttled == 250 && c.throttled_ns == 5000000000ULL);
    /* Without the cpu controller: usage only. */
    assert_int_equal(mw_parse_cg2_cpu_stat("usage_usec 7\nuser_usec 5\nsystem_usec 2\n", &c), 0);
    assert_true(c.usage_ns == 7000 && !c.has_throttling);
    /* A key is matched whole, at a line start. */
    assert_int_equal(mw_parse_cg2_cpu_stat("xusage_usec 1\nusage_usec_x 2\nusage_usec 3", &c), 0);
    assert_true(c.usage_ns == 3000);
    assert_int_equal(mw_parse_cg2_cpu_stat("", &c), -1);
    assert_int_equal(mw_parse_cg2_cpu_stat("user_usec 5\n", &c), -1);
    assert_int_equal(mw_parse_cg2_cpu_stat("usage_usec x\n", &c), -1);
    assert_int_equal(mw_parse_cg2_cpu_stat("usage_usec 12 13\n", &c), -1);
    assert_int_equal(mw_parse_cg2_cpu_stat("usage_usec 99999999999999999999\n", &c), -1);
    assert_int_equal(mw_parse_cg2_cpu_stat("usage_usec 18446744073709552\n", &c),
                     -1); /* ns overflow */
    assert_int_equal(mw_parse_cg2_cpu_stat("usage_usec 1\nthrottled_usec -1\n", &c), -1);
}

static void cpu_stat_v1(void **state)
{
    (void)state;
    mw_cg_cpu c = {0};
    assert_int_equal(
        mw_parse_cg1_cpu_stat("nr_periods 2000\nnr_throttled 300\nthrottled_time 7500000000\n", &c),
        0);
    assert_true(c.has_throttling && c.nr_periods == 2000 && c.nr_throttled == 300 &&
                c.throttled_ns == 7500000000ULL);
    assert_int_equal(mw_parse_cg1_cpu_stat("nr_periods 1\nnr_throttled 1\n", &c), -1);
    assert_int_equal(mw_parse_cg1_cpu_stat("nr_periods 1\nnr_throttled 1\nthrottled_time x\n", &c),
                     -1);
}

static void memory_stat(void **state)
{
    (void)state;
    mw_cg_memstat m;
    assert_int_equal(mw_parse_cg_memory_stat("anon 100\nfile 50\ninactive_anon 100\n"
                                             "active_file 20\ninactive_file 30\n",
                                             0, &m),
                     0);
    assert_true(m.has_inactive_file && m.inactive_file == 30 && m.has_rss && m.rss == 100);
    /* v1: the hierarchical totals, not this cgroup's own counters. */
    assert_int_equal(mw_parse_cg_memory_stat("rss 1\ninactive_file 2\ntotal_rss 300\n"
                                             "total_inactive_file 400\n",
                                             1, &m),
                     0);
    assert_true(m.inactive_file == 400 && m.rss == 300);
    assert_int_equal(mw_parse_cg_memory_stat("inactive_file 5\n", 0, &m), 0);
    assert_true(m.inactive_file == 5 && !m.has_rss);
    assert_int_equal(mw_parse_cg_memory_stat("anon 5\n", 0, &m), -1);
    assert_int_equal(mw_parse_cg_memory_stat("anon 5\ninactive_file five\n", 0, &m), -1);
    assert_int_equal(mw_parse_cg_memory_stat("", 1, &m), -1);
}

static void limits_and_values(void **state)
{
    (void)state;
    int64_t q, v;
    uint64_t p;
    assert_int_equal(mw_parse_cg2_cpu_max("400000 100000\n", &q, &p), 0);
    assert_true(q == 400000 && p == 100000);
    assert_int_equal(mw_parse_cg2_cpu_max("max 100000\n", &q, &p), 0);
    assert_true(q == -1 && p == 100000);
    assert_int_equal(mw_parse_cg2_cpu_max("max\n", &q, &p), -1);
    assert_int_equal(mw_parse_cg2_cpu_max("max 0\n", &q, &p), -1);
    assert_int_equal(mw_parse_cg2_cpu_max("1 2 3\n", &q, &p), -1);
    assert_int_equal(mw_parse_cg2_cpu_max("-1 100000\n", &q, &p), -1);
    assert_int_equal(mw_parse_cg_value("max\n", &v), 0);
    assert_true(v == INT64_MAX);
    assert_int_equal(mw_parse_cg_value("17179869184\n", &v), 0);
    assert_true(v == 17179869184LL);
    assert_int_equal(mw_parse_cg_value("-1\n", &v), 0);
    assert_true(v == -1);
    assert_int_equal(mw_parse_cg_value("9223372036854771712", &v), 0);
    assert_int_equal(mw_parse_cg_value("", &v), -1);
    assert_int_equal(mw_parse_cg_value("12 kB\n", &v), -1);
    assert_int_equal(mw_parse_cg_value("maxx\n", &v), -1);
}

static void count_pid(int pid, void *arg)
{
    int *sum = arg;
    *sum += pid;
}

static void procs(void **state)
{
    (void)state;
    int sum = 0;
    assert_int_equal(mw_parse_cg_procs("1001\n1002\n1003\n", count_pid, &sum), 3);
    assert_int_equal(sum, 3006);
    assert_int_equal(mw_parse_cg_procs("", NULL, NULL), 0);
    assert_int_equal(mw_parse_cg_procs("7", NULL, NULL), 1);
    assert_int_equal(mw_parse_cg_procs("1\n\n2\n", NULL, NULL), -1);
    assert_int_equal(mw_parse_cg_procs("0\n", NULL, NULL), -1);
    assert_int_equal(mw_parse_cg_procs("1 2\n", NULL, NULL), -1);
    assert_int_equal(mw_parse_cg_procs("99999999999\n", NULL, NULL), -1);
}

/* --- helpers ------------------------------------------------------------- */

/* No two samples of any family have the same label set. */
static void assert_unique_label_sets(const mw_snapshot *snap)
{
    for (const mw_family *f = snap->first; f; f = f->next)
        for (const mw_sample *a = f->first; a; a = a->next)
            for (const mw_sample *b = a->next; b; b = b->next) {
                if (a->nlabels != b->nlabels) continue;
                uint32_t same = 0;
                for (uint32_t i = 0; i < a->nlabels; i++)
                    for (uint32_t j = 0; j < b->nlabels; j++)
                        if (strcmp(a->labels[i].name, b->labels[j].name) == 0 &&
                            strcmp(a->labels[i].value, b->labels[j].value) == 0)
                            same++;
                if (same == a->nlabels) fail_msg("duplicate label set in %s", f->desc->name);
            }
}

/* Label lists end with a typed NULL (an untyped one is not portable in a
 * variadic call). */
#define END ((const char *)NULL)
#define V(name, ...) tu_value(snap, name, __VA_ARGS__, END)
#define CTR(id) "container_id", id

/* --- v2 fixture ------------------------------------------------------------ */

static void v2_fixture(void **state)
{
    (void)state;
    tu_session *s = tu_open(tu_fixture("k8s-v2-systemd"), "cgroup");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cgroup"), 0);
    assert_unique_label_sets(snap);

    /* Guaranteed PyTorch pod: every metric, exact. */
    const char *T[] = {"namespace", "ml-team", "pod", "pytorch-train-0", "container", "trainer"};
    assert_true(V("mlwatch_container_cpu_seconds_total", T[0], T[1], T[2], T[3], T[4], T[5],
                  CTR(A1)) == 12.345678);
    assert_true(V("mlwatch_container_cpu_throttled_seconds_total", CTR(A1)) == 5.0);
    assert_true(V("mlwatch_container_cpu_throttled_periods_total", CTR(A1)) == 250);
    assert_true(V("mlwatch_container_cpu_periods_total", CTR(A1)) == 1000);
    assert_true(V("mlwatch_container_cpu_quota_seconds", CTR(A1)) == 0.4);
    assert_true(V("mlwatch_container_cpu_period_seconds", CTR(A1)) == 0.1);
    assert_true(V("mlwatch_container_memory_usage_bytes", CTR(A1)) == 8589934592.0);
    /* working set = memory.current - inactive_file = 8 GiB - 1 GiB */
    assert_true(V("mlwatch_container_memory_working_set_bytes", CTR(A1)) == 7516192768.0);
    assert_true(V("mlwatch_container_memory_rss_bytes", CTR(A1)) == 6442450944.0);
    assert_true(V("mlwatch_container_memory_limit_bytes", CTR(A1)) == 17179869184.0);
    assert_true(V("mlwatch_container_processes", CTR(A1)) == 3);
    assert_true(V("mlwatch_container_pressure_waiting_seconds_total", CTR(A1), "resource", "cpu") ==
                1.5);
    assert_true(V("mlwatch_container_pressure_stalled_seconds_total", CTR(A1), "resource", "cpu") ==
                0.5);
    assert_true(V("mlwatch_container_pressure_waiting_seconds_total", CTR(A1), "resource",
                  "memory") == 0.25);
    assert_true(V("mlwatch_container_pressure_stalled_seconds_total", CTR(A1), "resource",
                  "memory") == 0.1);
    assert_true(V("mlwatch_container_pressure_waiting_seconds_total", CTR(A1), "resource", "io") ==
                3.0);
    assert_true(V("mlwatch_container_pressure_stalled_seconds_total", CTR(A1), "resource", "io") ==
                2.0);
    assert_true(V("mlwatch_container_info", "namespace", "ml-team", "pod", "pytorch-train-0",
                  "container", "trainer", CTR(A1), "pod_uid", UG, "qos", "guaranteed", "runtime",
                  "containerd", "cgroup",
                  "/kubepods.slice/kubepods-podaaaaaaaa_0000_4000_8000_000000000001.slice/"
                  "cri-containerd-" A1 ".scope") == 1);

    /* Its sandbox: container="POD"; no quota, so no throttling series; no limit. */
    assert_true(V("mlwatch_container_cpu_seconds_total", "pod", "pytorch-train-0", "container",
                  "POD", CTR(A0)) == 0.05);
    assert_false(tu_has(snap, "mlwatch_container_cpu_throttled_seconds_total", CTR(A0), END));
    assert_false(tu_has(snap, "mlwatch_container_cpu_quota_seconds", CTR(A0), END));
    assert_false(tu_has(snap, "mlwatch_container_memory_limit_bytes", CTR(A0), END));
    assert_true(V("mlwatch_container_memory_working_set_bytes", CTR(A0)) == 1048576);

    /* Burstable notebook pod with a sidecar. */
    assert_true(V("mlwatch_container_cpu_seconds_total", "namespace", "research", "pod",
                  "jupyter-alice", "container", "notebook", CTR(B1)) == 2.0);
    assert_true(V("mlwatch_container_cpu_throttled_seconds_total", CTR(B1)) == 0.1);
    assert_true(V("mlwatch_container_memory_working_set_bytes", CTR(B1)) == 1879048192.0);
    assert_true(V("mlwatch_container_memory_limit_bytes", CTR(B1)) == 4294967296.0);
    assert_true(V("mlwatch_container_processes", CTR(B1)) == 2);
    assert_true(V("mlwatch_container_pressure_waiting_seconds_total", CTR(B1), "resource", "io") ==
                0.9);
    assert_true(V("mlwatch_container_cpu_seconds_total", "container", "git-sync", CTR(B2)) == 0.5);
    /* inactive_file (200 MiB) > memory.current (100 MiB): floored at 0 */
    assert_true(V("mlwatch_container_memory_working_set_bytes", CTR(B2)) == 0);
    assert_true(V("mlwatch_container_cpu_quota_seconds", CTR(B2)) == 0.05);
    assert_true(V("mlwatch_container_cpu_periods_total", CTR(B2)) == 40);
    assert_true(V("mlwatch_container_cpu_seconds_total", "pod", "jupyter-alice", "container", "POD",
                  CTR(B0)) == 0.04);
    assert_true(V("mlwatch_container_info", CTR(B1), "qos", "burstable", "pod_uid", UB) == 1);

    /* Best-effort pod: no quota, no memory limit. */
    assert_true(V("mlwatch_container_cpu_seconds_total", "namespace", "default", "pod",
                  "debug-shell", "container", "shell", CTR(C1)) == 0.75);
    assert_true(V("mlwatch_container_memory_working_set_bytes", CTR(C1)) == 25165824);
    assert_false(tu_has(snap, "mlwatch_container_memory_limit_bytes", CTR(C1), END));
    assert_false(tu_has(snap, "mlwatch_container_cpu_quota_seconds", CTR(C1), END));
    assert_true(V("mlwatch_container_info", CTR(C1), "qos", "besteffort", "pod_uid", UE) == 1);
    assert_true(V("mlwatch_container_info", CTR(C0), "container", "POD") == 1);

    /* CRI-O: crio-<id>.scope reported, crio-conmon-<id>.scope not. */
    assert_true(V("mlwatch_container_cpu_seconds_total", "namespace", "inference", "pod",
                  "triton-server-7d9f8", "container", "server", CTR(D1)) == 3.0);
    assert_true(V("mlwatch_container_cpu_throttled_periods_total", CTR(D1)) == 5);
    assert_true(V("mlwatch_container_info", CTR(D1), "runtime", "crio") == 1);
    assert_true(V("mlwatch_container_info", CTR(D0), "runtime", "crio", "container", "POD") == 1);
    assert_false(tu_has(snap, "mlwatch_container_info", "cgroup",
                        "/kubepods.slice/kubepods-burstable.slice/"
                        "kubepods-burstable-podaaaaaaaa_0000_4000_8000_000000000004.slice/"
                        "crio-conmon-" D1 ".scope",
                        END));

    /* A pod without /var/log/pods entry: empty names, UID in the info metric. */
    assert_true(V("mlwatch_container_cpu_seconds_total", "namespace", "", "pod", "", "container",
                  "", CTR(E1)) == 1.0);
    assert_true(V("mlwatch_container_info", CTR(E1), "pod_uid", UX, "qos", "burstable") == 1);

    /* Outside Kubernetes: the cgroup path names it. */
    assert_true(
        V("mlwatch_container_cpu_seconds_total", "cgroup", "/system.slice/kubelet.service") == 900);
    assert_true(V("mlwatch_container_memory_working_set_bytes", "cgroup",
                  "/system.slice/kubelet.service") == 157286400);
    assert_true(V("mlwatch_container_pressure_waiting_seconds_total", "cgroup",
                  "/system.slice/kubelet.service", "resource", "cpu") == 0.01);
    assert_true(V("mlwatch_container_processes", "cgroup", "/system.slice/containerd.service") ==
                2);
    assert_true(V("mlwatch_container_cpu_seconds_total", "cgroup",
                  "/system.slice/docker-" F1 ".scope", CTR(F1)) == 4.2);
    assert_true(V("mlwatch_container_info", "cgroup", "/system.slice/docker-" F1 ".scope", CTR(F1),
                  "runtime", "docker") == 1);
    assert_true(V("mlwatch_container_memory_limit_bytes", CTR(F1)) == 536870912);
    const char *job = "/system.slice/slurmstepd.scope/job_42";
    assert_true(V("mlwatch_container_cpu_seconds_total", "cgroup", job) == 7200);
    assert_true(V("mlwatch_container_memory_working_set_bytes", "cgroup", job) == 33285996544.0);
    assert_true(V("mlwatch_container_processes", "cgroup", job) == 0);
    assert_false(tu_has(snap, "mlwatch_container_cpu_seconds_total", "cgroup",
                        "/system.slice/slurmstepd.scope/job_42/step_0", END));
    assert_false(tu_has(snap, "mlwatch_container_cpu_seconds_total", "cgroup",
                        "/user.slice/user-1000.slice/session-3.scope", END));
    assert_false(tu_has(snap, "mlwatch_container_cpu_seconds_total", "cgroup", "/init.scope", END));
    assert_false(
        tu_has(snap, "mlwatch_container_cpu_seconds_total", "cgroup", "/kubepods.slice", END));

    /* 10 Kubernetes containers (4 sandboxes) + 2 services + Docker + Slurm. */
    assert_int_equal(tu_count(snap, "mlwatch_container_cpu_seconds_total"), 14);
    assert_int_equal(tu_count(snap, "mlwatch_container_info"), 14);
    assert_int_equal(tu_count(snap, "mlwatch_container_cpu_throttled_seconds_total"), 4);
    assert_int_equal(tu_count(snap, "mlwatch_container_pressure_waiting_seconds_total"), 14 * 3);
    mw_snapshot_free(snap);

    /* Same values next cycle (kept files are re-read from offset 0). */
    snap = tu_run(s);
    assert_true(V("mlwatch_container_cpu_seconds_total", CTR(A1)) == 12.345678);
    assert_true(V("mlwatch_container_pressure_waiting_seconds_total", CTR(A1), "resource", "io") ==
                3.0);
    assert_int_equal(tu_count(snap, "mlwatch_container_cpu_seconds_total"), 14);
    assert_int_equal(tu_errors(s, "cgroup"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
}

static void v2_procmap(void **state)
{
    (void)state;
    tu_session *s = tu_open(tu_fixture("k8s-v2-systemd"), "cgroup");
    mw_procmap *pm = tu_procmap(s);
    mw_container_ref ref;
    assert_int_equal(mw_procmap_lookup(pm, 1001, &ref), -1); /* before any walk */
    mw_snapshot_free(tu_run(s));
    /* PIDs of every reported cgroup.procs: 3+1+2+1+1+1+1+1+1+1 + 1+2+1+0 */
    assert_int_equal(mw_procmap_size(pm), 17);

    /* From the walk. */
    assert_int_equal(mw_procmap_lookup(pm, 1001, &ref), 0);
    assert_string_equal(ref.namespace_, "ml-team");
    assert_string_equal(ref.pod, "pytorch-train-0");
    assert_string_equal(ref.container, "trainer");
    assert_string_equal(ref.id, A1);
    assert_string_equal(ref.pod_uid, UG);
    assert_int_equal(mw_procmap_lookup(pm, 2000, &ref), 0);
    assert_string_equal(ref.container, "POD");
    assert_int_equal(mw_procmap_lookup(pm, 600, &ref), 0);
    assert_string_equal(ref.cgroup, "/system.slice/kubelet.service");
    assert_string_equal(ref.id, "");
    assert_string_equal(ref.pod, "");

    /* Not in any cgroup.procs: resolved from proc/<pid>/cgroup. */
    assert_int_equal(mw_procmap_lookup(pm, 1004, &ref), 0); /* started after the walk */
    assert_string_equal(ref.container, "trainer");
    assert_int_equal(mw_procmap_lookup(pm, 2050, &ref), 0); /* in a sub-cgroup */
    assert_string_equal(ref.container, "notebook");
    assert_int_equal(mw_procmap_lookup(pm, 901, &ref), 0); /* Slurm step below the job */
    assert_string_equal(ref.cgroup, "/system.slice/slurmstepd.scope/job_42");
    assert_int_equal(mw_procmap_lookup(pm, 1900, &ref), 0); /* seen from another cgroup ns */
    assert_string_equal(ref.container, "shell");
    assert_string_equal(ref.namespace_, "default");
    assert_int_equal(mw_procmap_lookup(pm, 1700, &ref), -1); /* a login session: not reported */
    assert_int_equal(mw_procmap_lookup(pm, 4242, &ref), -1); /* no such process */
    assert_int_equal(mw_procmap_lookup(pm, 0, &ref), -1);
    assert_int_equal(mw_procmap_lookup(pm, -5, &ref), -1);
    tu_close(s);
}

/* --- v1 fixture ------------------------------------------------------------ */

#define G1 R2("1a")
#define G0 R2("0a")
#define VB1 R2("1b")
#define VE1 R2("1c")
#define VE0 R2("0c")
#define DK R2("1d")

static void v1_fixture(void **state)
{
    (void)state;
    tu_session *s = tu_open(tu_fixture("k8s-v1-cgroupfs"), "cgroup");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cgroup"), 0);
    assert_unique_label_sets(snap);

    /* Guaranteed pod, cgroupfs naming (bare ID: runtime not told by the path). */
    assert_true(V("mlwatch_container_cpu_seconds_total", "namespace", "ml-team", "pod",
                  "bert-finetune-0", "container", "trainer", CTR(G1)) == 98.7654321);
    assert_true(V("mlwatch_container_cpu_throttled_seconds_total", CTR(G1)) == 7.5);
    assert_true(V("mlwatch_container_cpu_throttled_periods_total", CTR(G1)) == 300);
    assert_true(V("mlwatch_container_cpu_periods_total", CTR(G1)) == 2000);
    assert_true(V("mlwatch_container_cpu_quota_seconds", CTR(G1)) == 0.2);
    assert_true(V("mlwatch_container_cpu_period_seconds", CTR(G1)) == 0.1);
    assert_true(V("mlwatch_container_memory_usage_bytes", CTR(G1)) == 4294967296.0);
    /* usage_in_bytes - total_inactive_file (not inactive_file) */
    assert_true(V("mlwatch_container_memory_working_set_bytes", CTR(G1)) == 3758096384.0);
    assert_true(V("mlwatch_container_memory_rss_bytes", CTR(G1)) == 3221225472.0);
    assert_true(V("mlwatch_container_memory_limit_bytes", CTR(G1)) == 8589934592.0);
    assert_true(V("mlwatch_container_processes", CTR(G1)) == 2);
    assert_true(V("mlwatch_container_info", CTR(G1), "qos", "guaranteed", "runtime", "", "pod_uid",
                  "bbbbbbbb-0000-4000-8000-000000000001", "cgroup",
                  "/kubepods/podbbbbbbbb-0000-4000-8000-000000000001/" G1) == 1);
    /* Sandbox: quota -1 and the "unlimited" 2^63-4096 limit are omitted. */
    assert_true(V("mlwatch_container_cpu_seconds_total", "container", "POD", CTR(G0)) == 0.025);
    assert_false(tu_has(snap, "mlwatch_container_cpu_quota_seconds", CTR(G0), END));
    assert_false(tu_has(snap, "mlwatch_container_memory_limit_bytes", CTR(G0), END));

    assert_true(V("mlwatch_container_cpu_seconds_total", "namespace", "research", "pod",
                  "tensorboard-bob", "container", "tensorboard", CTR(VB1)) == 3.5);
    assert_true(V("mlwatch_container_cpu_throttled_seconds_total", CTR(VB1)) == 0.125);
    assert_true(V("mlwatch_container_memory_working_set_bytes", CTR(VB1)) == 939524096.0);
    assert_true(V("mlwatch_container_info", CTR(VB1), "qos", "burstable") == 1);

    /* Best-effort CRI-O pod with the cgroupfs driver: crio-<id>; conmon skipped. */
    assert_true(V("mlwatch_container_cpu_seconds_total", "namespace", "default", "pod",
                  "nightly-eval", "container", "eval", CTR(VE1)) == 0.6);
    assert_true(V("mlwatch_container_memory_working_set_bytes", CTR(VE1)) == 234881024.0);
    assert_true(V("mlwatch_container_info", CTR(VE1), "runtime", "crio", "qos", "besteffort") == 1);
    assert_true(V("mlwatch_container_info", CTR(VE0), "container", "POD") == 1);

    /* Docker outside Kubernetes, services, a v1 Slurm job. */
    assert_true(V("mlwatch_container_cpu_seconds_total", "cgroup", "/docker/" DK, CTR(DK)) == 4.5);
    assert_true(V("mlwatch_container_cpu_quota_seconds", CTR(DK)) == 0.05);
    assert_true(V("mlwatch_container_cpu_throttled_seconds_total", CTR(DK)) == 0);
    assert_true(V("mlwatch_container_memory_working_set_bytes", CTR(DK)) == 262144000.0);
    assert_true(V("mlwatch_container_processes", CTR(DK)) == 2);
    assert_true(
        V("mlwatch_container_cpu_seconds_total", "cgroup", "/system.slice/kubelet.service") == 120);
    assert_true(
        V("mlwatch_container_cpu_seconds_total", "cgroup", "/system.slice/docker.service") == 60);
    assert_true(V("mlwatch_container_cpu_seconds_total", "cgroup", "/slurm/uid_1000/job_7") ==
                36000);
    assert_true(V("mlwatch_container_memory_limit_bytes", "cgroup", "/slurm/uid_1000/job_7") ==
                34359738368.0);

    /* No pressure on v1. */
    assert_int_equal(tu_count(snap, "mlwatch_container_pressure_waiting_seconds_total"), 0);
    assert_int_equal(tu_count(snap, "mlwatch_container_cpu_seconds_total"), 10);
    mw_snapshot_free(snap);

    mw_container_ref ref;
    mw_procmap *pm = tu_procmap(s);
    assert_int_equal(mw_procmap_lookup(pm, 1101, &ref), 0);
    assert_string_equal(ref.container, "trainer");
    assert_int_equal(mw_procmap_lookup(pm, 1105, &ref), 0); /* cpu,cpuacct line, fallback */
    assert_string_equal(ref.container, "trainer");
    assert_int_equal(mw_procmap_lookup(pm, 1501, &ref), 0); /* Slurm step */
    assert_string_equal(ref.cgroup, "/slurm/uid_1000/job_7");
    assert_int_equal(mw_procmap_lookup(pm, 1402, &ref), 0);
    assert_string_equal(ref.id, DK);
    tu_close(s);
}

/* A hybrid host: controllers on v1, pressure in the v2 hierarchy at
 * unified/, where systemd mirrors its units (a thrashing service: 0.14 s/s
 * memory stall, 0.33 s/s io). Cgroups missing from unified/ (the cgroupfs
 * pods) have no pressure, and no error. */
static void v1_hybrid_pressure(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("k8s-v1-cgroupfs");
    const char *svc = "sys/fs/cgroup/unified/system.slice/kubelet.service/";
    char rel[256];
    snprintf(rel, sizeof(rel), "%smemory.pressure", svc);
    tu_write(root, rel,
             "some avg10=20.00 avg60=14.00 avg300=3.00 total=14000000\n"
             "full avg10=10.00 avg60=9.00 avg300=2.00 total=9000000\n");
    snprintf(rel, sizeof(rel), "%sio.pressure", svc);
    tu_write(root, rel,
             "some avg10=33.00 avg60=33.00 avg300=5.00 total=33000000\n"
             "full avg10=30.00 avg60=30.00 avg300=4.00 total=30000000\n");
    snprintf(rel, sizeof(rel), "%scpu.pressure", svc);
    tu_write(root, rel, "some avg10=1.00 avg60=1.00 avg300=1.00 total=2500000\n");
    tu_session *s = tu_open(root, "cgroup");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cgroup"), 0);
    const char *k = "/system.slice/kubelet.service";
    assert_true(V("mlwatch_container_pressure_waiting_seconds_total", "cgroup", k, "resource",
                  "memory") == 14);
    assert_true(V("mlwatch_container_pressure_stalled_seconds_total", "cgroup", k, "resource",
                  "memory") == 9);
    assert_true(
        V("mlwatch_container_pressure_waiting_seconds_total", "cgroup", k, "resource", "io") == 33);
    assert_true(
        V("mlwatch_container_pressure_stalled_seconds_total", "cgroup", k, "resource", "io") == 30);
    assert_true(V("mlwatch_container_pressure_waiting_seconds_total", "cgroup", k, "resource",
                  "cpu") == 2.5);
    assert_false(tu_has(snap, "mlwatch_container_pressure_stalled_seconds_total", "cgroup", k,
                        "resource", "cpu", END));
    assert_int_equal(tu_count(snap, "mlwatch_container_pressure_waiting_seconds_total"), 3);
    assert_int_equal(tu_count(snap, "mlwatch_container_pressure_stalled_seconds_total"), 2);
    mw_snapshot_free(snap);
    tu_close(s);
}

/* --- changing trees ------------------------------------------------------- */

static void vanished_between_cycles(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("k8s-v2-systemd");
    tu_session *s = tu_open(root, "cgroup");
    mw_snapshot *snap = tu_run(s);
    assert_true(tu_has(snap, "mlwatch_container_cpu_seconds_total", CTR(B2), END));
    mw_snapshot_free(snap);

    tu_remove(root, PODB "/cri-containerd-" B2 ".scope");
    tu_remove(root, "sys/fs/cgroup/system.slice/docker-" F1 ".scope");
    snap = tu_run(s);
    assert_false(tu_has(snap, "mlwatch_container_cpu_seconds_total", CTR(B2), END));
    assert_false(tu_has(snap, "mlwatch_container_info", CTR(F1), END));
    assert_true(V("mlwatch_container_cpu_seconds_total", CTR(B1)) == 2.0);
    assert_int_equal(tu_count(snap, "mlwatch_container_cpu_seconds_total"), 12);
    assert_int_equal(tu_errors(s, "cgroup"), 0); /* gone before the walk: not an error */
    mw_snapshot_free(snap);
    mw_container_ref ref;
    assert_int_equal(mw_procmap_lookup(tu_procmap(s), 2101, &ref), -1);

    /* A whole pod goes. */
    tu_remove(root, PODG);
    snap = tu_run(s);
    assert_false(tu_has(snap, "mlwatch_container_cpu_seconds_total", CTR(A1), END));
    assert_int_equal(tu_count(snap, "mlwatch_container_cpu_seconds_total"), 10);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

static void broken_files(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("k8s-v2-systemd");
    const char *trainer = PODG "/cri-containerd-" A1 ".scope";
    char path[1024];

    /* cpu.stat missing: that container skipped and counted, others reported. */
    snprintf(path, sizeof(path), "%s/cpu.stat", trainer);
    tu_remove(root, path);
    tu_session *s = tu_open(root, "cgroup");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cgroup"), 1);
    assert_false(tu_has(snap, "mlwatch_container_cpu_seconds_total", CTR(A1), END));
    assert_false(tu_has(snap, "mlwatch_container_info", CTR(A1), END));
    assert_int_equal(tu_count(snap, "mlwatch_container_cpu_seconds_total"), 13);
    assert_true(V("mlwatch_collector_errors_total", "collector", "cgroup") == 1);
    mw_snapshot_free(snap);

    /* Malformed, then truncated: counted each cycle; recovers when fixed. */
    tu_write(root, path, "usage_usec twelve\n");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cgroup"), 2);
    assert_false(tu_has(snap, "mlwatch_container_cpu_seconds_total", CTR(A1), END));
    assert_int_equal(tu_count(snap, "mlwatch_container_cpu_seconds_total"), 13);
    mw_snapshot_free(snap);
    tu_write(root, path, "usage_u");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cgroup"), 3);
    mw_snapshot_free(snap);
    tu_write(root, path, "usage_usec 20000000\n");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cgroup"), 3);
    assert_true(V("mlwatch_container_cpu_seconds_total", CTR(A1)) == 20.0);
    mw_snapshot_free(snap);

    /* memory.stat unreadable (a folder in its place): memory partly lost,
     * CPU still reported. */
    snprintf(path, sizeof(path), "%s/cri-containerd-" B1 ".scope/memory.stat", PODB);
    tu_remove(root, path);
    snprintf(path, sizeof(path), "%s/cri-containerd-" B1 ".scope/memory.stat/x", PODB);
    tu_write(root, path, "");
    tu_close(s);
    s = tu_open(root, "cgroup");
    snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cgroup"), 1);
    assert_true(V("mlwatch_container_cpu_seconds_total", CTR(B1)) == 2.0);
    assert_true(V("mlwatch_container_memory_usage_bytes", CTR(B1)) == 2147483648.0);
    assert_false(tu_has(snap, "mlwatch_container_memory_working_set_bytes", CTR(B1), END));
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

static void deleted_while_open(void **state)
{
    (void)state;
    /* Control files stay open between cycles. On a fixture (ordinary files)
     * a deleted one is noticed at the cgroup's next refresh, within 10
     * cycles; on a real cgroup file system the next read fails at once. */
    const char *root = tu_fixture_copy("k8s-v2-systemd");
    tu_session *s = tu_open(root, "cgroup");
    mw_snapshot_free(tu_run(s));
    tu_remove(root, PODG "/cri-containerd-" A1 ".scope/cpu.stat");
    int gone = 0;
    for (int i = 0; i < 10 && !gone; i++) {
        mw_snapshot *snap = tu_run(s);
        gone = !tu_has(snap, "mlwatch_container_cpu_seconds_total", CTR(A1), END);
        mw_snapshot_free(snap);
    }
    assert_true(gone);
    assert_int_equal(tu_errors(s, "cgroup"), 1);
    tu_close(s);
    tu_cleanup();
}

static void optional_files(void **state)
{
    (void)state;
    /* Without the memory controller or PSI the files are absent: no samples,
     * no error. */
    const char *root = tu_fixture_copy("k8s-v2-systemd");
    const char *files[] = {"memory.current",  "memory.stat", "memory.max", "cpu.pressure",
                           "memory.pressure", "io.pressure", "cpu.max"};
    char path[1024];
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/cri-containerd-" B1 ".scope/%s", PODB, files[i]);
        tu_remove(root, path);
    }
    tu_session *s = tu_open(root, "cgroup");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_errors(s, "cgroup"), 0);
    assert_true(V("mlwatch_container_cpu_seconds_total", CTR(B1)) == 2.0);
    assert_true(V("mlwatch_container_processes", CTR(B1)) == 2);
    assert_false(tu_has(snap, "mlwatch_container_memory_usage_bytes", CTR(B1), END));
    assert_false(tu_has(snap, "mlwatch_container_pressure_waiting_seconds_total", CTR(B1), END));
    assert_false(tu_has(snap, "mlwatch_container_cpu_quota_seconds", CTR(B1), END));
    /* nr_periods > 0: it had a quota, so its throttling is still reported */
    assert_true(V("mlwatch_container_cpu_throttled_periods_total", CTR(B1)) == 10);
    mw_snapshot_free(snap);
    tu_close(s);
    tu_cleanup();
}

static void new_pod_named_at_once(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("k8s-v2-systemd");
    tu_session *s = tu_open(root, "cgroup");
    mw_snapshot_free(tu_run(s));

    /* A pod starts: kubelet writes its log folder and link, then the runtime
     * creates the cgroups. The first cycle that sees them names them. */
    const char *uid = "cccccccc-0000-4000-8000-000000000009";
    const char *id = R2("99");
    const char *pod = "sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/"
                      "kubepods-besteffort-podcccccccc_0000_4000_8000_000000000009.slice";
    char path[1024];
    snprintf(path, sizeof(path), "%s/cri-containerd-%s.scope/cpu.stat", pod, id);
    tu_write(root, path, "usage_usec 42\n");
    snprintf(path, sizeof(path), "%s/cri-containerd-%s.scope/cgroup.procs", pod, id);
    tu_write(root, path, "7001\n");
    snprintf(path, sizeof(path), "var/log/pods/batch_etl-7_%s/worker/0.log", uid);
    tu_write(root, path, "");
    char link[2048], target[1024];
    snprintf(link, sizeof(link), "%s/var/log/containers/etl-7_batch_worker-%s.log", root, id);
    snprintf(target, sizeof(target), "/var/log/pods/batch_etl-7_%s/worker/0.log", uid);
    assert_int_equal(symlink(target, link), 0);

    mw_snapshot *snap = tu_run(s);
    assert_true(V("mlwatch_container_cpu_seconds_total", "namespace", "batch", "pod", "etl-7",
                  "container", "worker", CTR(id)) == 0.000042);
    assert_true(V("mlwatch_container_info", CTR(id), "qos", "besteffort", "pod_uid", uid) == 1);
    assert_int_equal(tu_errors(s, "cgroup"), 0);
    mw_snapshot_free(snap);
    mw_container_ref ref;
    assert_int_equal(mw_procmap_lookup(tu_procmap(s), 7001, &ref), 0);
    assert_string_equal(ref.pod, "etl-7");
    tu_close(s);
    tu_cleanup();
}

static void no_cgroups(void **state)
{
    (void)state;
    /* A tree without sys/fs/cgroup: the collector stays off, no error. */
    tu_session *s = tu_open(tu_fixture("bare-vm"), "cgroup");
    mw_snapshot *snap = tu_run(s);
    assert_int_equal(tu_count(snap, "mlwatch_container_cpu_seconds_total"), 0);
    assert_int_equal(tu_errors(s, "cgroup"), 0);
    mw_snapshot_free(snap);
    tu_close(s);
}

/* --- generated nodes --------------------------------------------------------- */

static const char *generate(int n)
{
    const char *root = tu_fixture_copy("bare-vm");
    const char *src = getenv("MLWATCH_SRC");
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), "bash '%s/tests/fixtures/generate-node.sh' %d '%s' >/dev/null",
             src ? src : ".", n, root);
    assert_int_equal(system(cmd), 0);
    return root;
}

static void generated_node(void **state)
{
    (void)state;
    const char *root = generate(50);
    tu_session *s = tu_open(root, "cgroup");
    for (int cycle = 0; cycle < 3; cycle++) {
        mw_snapshot *snap = tu_run(s);
        const mw_family *f = mw_snapshot_find(snap, "mlwatch_container_cpu_seconds_total");
        assert_non_null(f);
        size_t k8s = 0, sandboxes = 0, unnamed = 0;
        for (const mw_sample *smp = f->first; smp; smp = smp->next)
            for (uint32_t i = 0; i < smp->nlabels; i++) {
                if (strcmp(smp->labels[i].name, "namespace") == 0) k8s++;
                if (strcmp(smp->labels[i].name, "container") == 0) {
                    sandboxes += strcmp(smp->labels[i].value, "POD") == 0;
                    unnamed += smp->labels[i].value[0] == '\0';
                }
            }
        assert_int_equal(k8s, 50);
        assert_int_equal(unnamed, 0);
        /* Pods of 1 to 3 containers plus a sandbox each: 50 = 5 * (2+3+4) + 2+3. */
        assert_int_equal(sandboxes, 17);
        assert_int_equal(f->nsamples, 50 + 8); /* and 8 services (init.scope is not reported) */
        assert_unique_label_sets(snap);
        mw_snapshot_free(snap);
    }
    assert_int_equal(tu_errors(s, "cgroup"), 0);
    tu_close(s);
    tu_cleanup();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cpu_stat_v2),
        cmocka_unit_test(cpu_stat_v1),
        cmocka_unit_test(memory_stat),
        cmocka_unit_test(limits_and_values),
        cmocka_unit_test(procs),
        cmocka_unit_test(v2_fixture),
        cmocka_unit_test(v2_procmap),
        cmocka_unit_test(v1_fixture),
        cmocka_unit_test(v1_hybrid_pressure),
        cmocka_unit_test(vanished_between_cycles),
        cmocka_unit_test(broken_files),
        cmocka_unit_test(deleted_while_open),
        cmocka_unit_test(optional_files),
        cmocka_unit_test(new_pod_named_at_once),
        cmocka_unit_test(no_cgroups),
        cmocka_unit_test(generated_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
