/* test_doctor.c - the doctor's rules on a node that changes over time.
 *
 * The world: a copy of tests/fixtures/gpu-node plus host files written here
 * (4 CPUs on two NUMA nodes: 0-1 on node 0, 2-3 on node 1; cpufreq; NUMA
 * nodes) and the fake NVML with two H100s: GPU 0 on node 0 used by
 * ml-team/train-0 (PID 3000, cpuset 0-1, mems 0), GPU 1 on node 1 used by
 * ml-team/train-4 (PID 3004, cpuset 2-3, mems 1). Every cycle is one second
 * of fake time: counters (proc/stat, cpu.stat, PSI) are rewritten before
 * each cycle and the snapshot's timestamp is set, so rates are exact.
 *
 * The healthy node is busy (CPUs 90 %, GPUs 95 %, each trainer one CPU of
 * two) and gets no finding. Each other scenario changes one thing and must
 * get exactly the findings of its kind for the right workload. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "gpu_harness.h"
#include "agent/agent.h"
#include "derive/doctor.h"

#include <math.h>
#include <time.h>

typedef struct world {
    const char *root;
    char scenario[512];
    mw_config cfg;
    mw_hostfs host;
    mw_procmap *pm;
    mw_env env;
    mw_collector_set *set;
    void *doctor;
    /* knobs, defaults = healthy and busy */
    char governor[16];
    unsigned cur_khz;
    double train_cpus[2]; /* CPU-seconds per second of train-0, train-4 */
    unsigned quota_us;    /* train-0's cpu.max quota per 100 ms, 0 = max */
    unsigned throttled_per_s, periods_per_s;
    double io_some_per_s; /* train-0's io stall seconds per second */
    char cpuset[2][32], mems[2][32];
    unsigned long long mem_limit, mem_current; /* train-4, 0 = max */
    int gpu_util[2], sm_mhz[2];
    const char *reasons[2];
    int pcie_width0;
    int errors_from_cycle; /* GPU 1: uncorrected ECC + an XID from this cycle on */
    int share_gpu0;        /* notebook-a (PID 4001) also on GPU 0 */
    mw_snapshot *last;     /* the last cycle's snapshot (for mlwatch_finding) */
} world;

static const char *const TRAIN_CG[2] = {
    "sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/"
    "kubepods-besteffort-pod00000001_0000_4000_8000_000000000001.slice/"
    "cri-containerd-0101010101010101010101010101010101010101010101010101010101010101.scope",
    "sys/fs/cgroup/kubepods.slice/kubepods-besteffort.slice/"
    "kubepods-besteffort-pod00000005_0000_4000_8000_000000000005.slice/"
    "cri-containerd-0505050505050505050505050505050505050505050505050505050505050505.scope",
};

static void put(const char *root, const char *rel, const char *text)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    FILE *f = fopen(path, "w");
    if (!f) {
        tu_write(root, rel, text); /* creates the folders */
        return;
    }
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static void putf(const char *root, const char *rel, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void putf(const char *root, const char *rel, const char *fmt, ...)
{
    char text[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    put(root, rel, text);
}

static void write_scenario(world *w, int cycle)
{
    char text[4096], tmp[600];
    int errors = w->errors_from_cycle && cycle >= w->errors_from_cycle;
    snprintf(text, sizeof(text),
             "system driver=550.54.15\n"
             "gpu 0 name=\"NVIDIA H100 80GB HBM3\" uuid=GPU-00000000-0000-0000-0000-000000000000 "
             "bus=00000000:18:00.0 numa=0 cpus=0-1\n"
             "gpu 0 util=%d memutil=40 memtotal=85520809984 memused=11811160064 power_mw=500000 "
             "limit_mw=700000 energy_mj=1000000 temp=60\n"
             "gpu 0 sm_mhz=%d sm_max_mhz=1980 mem_mhz=2619 mem_max_mhz=2619 reasons=%s pstate=0\n"
             "gpu 0 ecc_corrected=0 ecc_uncorrected=0 remapped=0,0,0,0 unsupported=retired\n"
             "gpu 0 pcie_gen=5 pcie_gen_max=5 pcie_width=%d pcie_width_max=16 replay=0\n"
             "proc gpu=0 pid=3000 mem=10737418240 sm=%d\n"
             "%s"
             "gpu 1 name=\"NVIDIA H100 80GB HBM3\" uuid=GPU-00000000-0000-0000-0000-000000000001 "
             "bus=00000000:28:00.0 numa=1 cpus=2-3\n"
             "gpu 1 util=%d memutil=40 memtotal=85520809984 memused=11811160064 power_mw=500000 "
             "limit_mw=700000 energy_mj=1000000 temp=60\n"
             "gpu 1 sm_mhz=%d sm_max_mhz=1980 mem_mhz=2619 mem_max_mhz=2619 reasons=%s pstate=0\n"
             "gpu 1 ecc_corrected=0 ecc_uncorrected=%d remapped=0,0,0,0 unsupported=retired\n"
             "gpu 1 pcie_gen=5 pcie_gen_max=5 pcie_width=16 pcie_width_max=16 replay=0\n"
             "proc gpu=1 pid=3004 mem=10737418240 sm=%d\n"
             "%s",
             w->gpu_util[0], w->sm_mhz[0], w->reasons[0], w->pcie_width0, w->gpu_util[0],
             w->share_gpu0 ? "proc gpu=0 pid=4001 mem=1073741824 sm=5\n" : "", w->gpu_util[1],
             w->sm_mhz[1], w->reasons[1], errors ? 2 : 0, w->gpu_util[1],
             errors ? "event gpu=1 xid=48 id=1\n" : "");
    snprintf(tmp, sizeof(tmp), "%s.tmp", w->scenario);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rename(tmp, w->scenario), 0);
}

/* Everything that changes, as of cycle (= second) i. */
static void write_cycle(world *w, int i)
{
    const char *r = w->root;
    char stat[2048];
    size_t len = 0;
    unsigned long long busy = 90ull * (unsigned)i + 1000, idle = 10ull * (unsigned)i + 1000;
    len += (size_t)snprintf(stat + len, sizeof(stat) - len, "cpu  %llu 0 0 %llu 0 0 0 0 0 0\n",
                            4 * busy, 4 * idle);
    for (int c = 0; c < 4; c++)
        len += (size_t)snprintf(stat + len, sizeof(stat) - len, "cpu%d %llu 0 0 %llu 0 0 0 0 0 0\n",
                                c, busy, idle);
    snprintf(stat + len, sizeof(stat) - len,
             "intr 1000\nctxt 2000\nbtime 1718000000\nprocesses 300\nprocs_running 4\n"
             "procs_blocked 0\n");
    put(r, "proc/stat", stat);
    for (int c = 0; c < 4; c++) {
        char rel[128];
        snprintf(rel, sizeof(rel), "sys/devices/system/cpu/cpu%d/cpufreq/scaling_cur_freq", c);
        putf(r, rel, "%u\n", w->cur_khz);
        snprintf(rel, sizeof(rel), "sys/devices/system/cpu/cpu%d/cpufreq/scaling_governor", c);
        putf(r, rel, "%s\n", w->governor);
    }
    for (int k = 0; k < 2; k++) {
        char rel[512];
        unsigned long long usage =
            1000000ull + (unsigned long long)(w->train_cpus[k] * 1e6) * (unsigned)i;
        unsigned long long periods =
            k == 0 ? (unsigned long long)w->periods_per_s * (unsigned)i : 0;
        unsigned long long thr = k == 0 ? (unsigned long long)w->throttled_per_s * (unsigned)i : 0;
        snprintf(rel, sizeof(rel), "%s/cpu.stat", TRAIN_CG[k]);
        putf(r, rel,
             "usage_usec %llu\nuser_usec %llu\nsystem_usec 0\nnr_periods %llu\nnr_throttled "
             "%llu\nthrottled_usec %llu\n",
             usage, usage, periods, thr, thr * 80000);
        snprintf(rel, sizeof(rel), "%s/cpu.max", TRAIN_CG[k]);
        if (k == 0 && w->quota_us)
            putf(r, rel, "%u 100000\n", w->quota_us);
        else
            put(r, rel, "max 100000\n");
        snprintf(rel, sizeof(rel), "%s/io.pressure", TRAIN_CG[k]);
        putf(r, rel,
             "some avg10=0.00 avg60=0.00 avg300=0.00 total=%llu\n"
             "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
             k == 0 ? (unsigned long long)(w->io_some_per_s * 1e6) * (unsigned)i : 0);
        snprintf(rel, sizeof(rel), "%s/cpuset.cpus.effective", TRAIN_CG[k]);
        putf(r, rel, "%s\n", w->cpuset[k]);
        snprintf(rel, sizeof(rel), "%s/cpuset.mems.effective", TRAIN_CG[k]);
        putf(r, rel, "%s\n", w->mems[k]);
    }
    char rel[512];
    snprintf(rel, sizeof(rel), "%s/memory.max", TRAIN_CG[1]);
    if (w->mem_limit)
        putf(r, rel, "%llu\n", w->mem_limit);
    else
        put(r, rel, "max\n");
    snprintf(rel, sizeof(rel), "%s/memory.current", TRAIN_CG[1]);
    putf(r, rel, "%llu\n", w->mem_current);
    write_scenario(w, i);
}

static void world_defaults(world *w)
{
    mw_strlcpy(w->governor, "performance", sizeof(w->governor));
    w->cur_khz = 3000000;
    w->train_cpus[0] = w->train_cpus[1] = 1.0;
    mw_strlcpy(w->cpuset[0], "0-1", sizeof(w->cpuset[0]));
    mw_strlcpy(w->mems[0], "0", sizeof(w->mems[0]));
    mw_strlcpy(w->cpuset[1], "2-3", sizeof(w->cpuset[1]));
    mw_strlcpy(w->mems[1], "1", sizeof(w->mems[1]));
    w->mem_current = 104857600;
    w->gpu_util[0] = w->gpu_util[1] = 95;
    w->sm_mhz[0] = w->sm_mhz[1] = 1980;
    w->reasons[0] = w->reasons[1] = "0x0";
    w->pcie_width0 = 16;
}

/* Static host files (the counters are written per cycle). */
static void world_build(world *w)
{
    w->root = tu_fixture_copy("gpu-node");
    for (int c = 0; c < 4; c++) {
        char rel[128];
        snprintf(rel, sizeof(rel), "sys/devices/system/cpu/cpu%d/cpufreq/scaling_max_freq", c);
        put(w->root, rel, "3000000\n");
        snprintf(rel, sizeof(rel), "sys/devices/system/cpu/cpu%d/cpufreq/scaling_min_freq", c);
        put(w->root, rel, "800000\n");
        snprintf(rel, sizeof(rel), "sys/devices/system/cpu/cpu%d/cpufreq/cpuinfo_max_freq", c);
        put(w->root, rel, "3000000\n");
    }
    for (int n = 0; n < 2; n++) {
        char rel[128];
        snprintf(rel, sizeof(rel), "sys/devices/system/node/node%d/cpulist", n);
        put(w->root, rel, n ? "2-3\n" : "0-1\n");
        snprintf(rel, sizeof(rel), "sys/devices/system/node/node%d/meminfo", n);
        putf(w->root, rel,
             "Node %d MemTotal:       65793208 kB\nNode %d MemFree:        40123456 kB\n"
             "Node %d MemUsed:        25669752 kB\n",
             n, n, n);
        snprintf(rel, sizeof(rel), "sys/devices/system/node/node%d/numastat", n);
        put(w->root, rel,
            "numa_hit 1\nnuma_miss 0\nnuma_foreign 0\ninterleave_hit 0\n"
            "local_node 1\nother_node 0\n");
    }
    put(w->root, "sys/devices/system/node/online", "0-1\n");
    put(w->root, "sys/devices/system/node/possible", "0-1\n");
}

static void world_open(world *w)
{
    snprintf(w->scenario, sizeof(w->scenario), "/tmp/mlwatch-doctor-scenario-%d.txt",
             (int)getpid());
    write_cycle(w, 0);
    setenv("FAKE_NVML_SCENARIO", w->scenario, 1);
    mw_options_register_all();
    mw_config_defaults(&w->cfg);
    char err[256];
    char *argv[] = {"mlwatch",
                    "doctor",
                    "--collectors",
                    "cpu,cpufreq,numa,cgroup,gpu",
                    "--nvml-library",
                    (char *)gh_fake_nvml(),
                    "--rocm-library",
                    "none",
                    "--interval",
                    "1h",
                    "--gpu-process-interval",
                    "1h",
                    "--root",
                    (char *)w->root};
    assert_int_equal(
        mw_config_from_args(&w->cfg, MW_ARRAY_LEN(argv), argv, 2, NULL, NULL, 0, err, sizeof(err)),
        0);
    assert_int_equal(mw_hostfs_open(&w->host, w->cfg.root), 0);
    w->pm = mw_procmap_new(&w->host);
    w->env = (mw_env){&w->cfg, &w->host, w->pm, NULL, NULL, 0};
    w->set = mw_collector_set_new(&w->env);
    assert_int_equal(mw_doctor_module.init(&w->env, &w->doctor), 0);
}

/* Cycles 0..n-1, one fake second apart; the last snapshot is kept. */
/* Cycles from..from + n - 1 (the files of cycle 0 are the world's own). */
static void world_run_from(world *w, int from, int n)
{
    for (int i = from; i < from + n; i++) {
        if (i) write_cycle(w, i);
        assert_int_equal(mw_gpu_collector_sync(), 0);
        mw_snapshot *snap = mw_snapshot_new();
        mw_collector_set_run(w->set, snap);
        snap->timestamp_ms = 1718000000000 + 1000 * (int64_t)i;
        mw_doctor_module.derive(w->doctor, snap);
        if (w->last) mw_snapshot_free(w->last);
        w->last = snap;
    }
    assert_int_equal(mw_collector_set_errors(w->set, "gpu"), 0);
    assert_int_equal(mw_collector_set_errors(w->set, "cgroup"), 0);
    assert_int_equal(mw_collector_set_errors(w->set, "cpu"), 0);
    assert_int_equal(mw_collector_set_errors(w->set, "cpufreq"), 0);
    assert_int_equal(mw_collector_set_errors(w->set, "numa"), 0);
}

static void world_run(world *w, int n)
{
    world_run_from(w, 0, n);
}

static void world_close(world *w)
{
    if (!w->set) return;
    if (w->last) mw_snapshot_free(w->last);
    mw_doctor_module.destroy(w->doctor);
    mw_collector_set_free(w->set);
    mw_procmap_free(w->pm);
    mw_hostfs_close(&w->host);
    unlink(w->scenario);
    tu_cleanup();
    w->set = NULL;
}

static world the_world;

/* A failed test leaves its world open: close it, or its GPU thread would
 * take the next test's XID events. */
static int teardown(void **state)
{
    (void)state;
    world_close(&the_world);
    return 0;
}

static world *world_new(void)
{
    world *w = &the_world;
    memset(w, 0, sizeof(*w));
    world_defaults(w);
    world_build(w);
    return w;
}

/* Run the world for n cycles and return the ranked findings. */
static void findings_of_n(world *w, dr_list *l, int n)
{
    world_open(w);
    world_run(w, n);
    dr_list_init(l);
    mw_doctor_findings(w->doctor, 0, l);
}

static void findings_of(world *w, dr_list *l)
{
    findings_of_n(w, l, 4);
}

static double ev(const dr_finding *f, const char *name)
{
    for (size_t i = 0; i < f->nev; i++)
        if (strcmp(f->ev[i].name, name) == 0) return f->ev[i].value;
    fail_msg("no evidence %s in %s", name, dr_kind_name(f->kind));
    return NAN;
}

static void expect(const dr_finding *f, dr_kind kind, dr_severity sev, const char *pod,
                   const char *gpu)
{
    assert_string_equal(dr_kind_name(f->kind), dr_kind_name(kind));
    assert_string_equal(dr_severity_name(f->severity), dr_severity_name(sev));
    assert_string_equal(f->namespace_, pod[0] ? "ml-team" : "");
    assert_string_equal(f->pod, pod);
    assert_string_equal(f->container, pod[0] ? "main" : "");
    assert_string_equal(f->gpu, gpu);
}

static void dump(const dr_list *l)
{
    mw_buf b;
    mw_buf_init(&b, 0);
    dr_list_to_text(l, "test", 3, &b);
    print_message("%s", b.data ? b.data : "");
    mw_buf_free(&b);
}

static void healthy_busy_node(void **state)
{
    (void)state;
    world *w = world_new();
    dr_list l;
    findings_of(w, &l);
    if (l.n) dump(&l);
    assert_int_equal(l.n, 0);
    /* The inputs were there: CPUs, both GPUs, the trainers on them. */
    assert_int_equal(tu_count(w->last, "mlwatch_cpu_frequency_hertz"), 4);
    assert_int_equal(tu_count(w->last, "mlwatch_numa_node_info"), 2);
    assert_true(tu_value(w->last, "mlwatch_container_gpu_memory_used_bytes", "pod", "train-4",
                         "gpu", "1", MW_END) == 10737418240.0);
    assert_int_equal(tu_count(w->last, "mlwatch_finding"), 0);
    dr_list_free(&l);
    world_close(w);
}

static void cpu_governor(void **state)
{
    (void)state;
    world *w = world_new();
    mw_strlcpy(w->governor, "powersave", sizeof(w->governor));
    w->cur_khz = 1200000;
    dr_list l;
    findings_of(w, &l);
    if (l.n != 1) dump(&l);
    assert_int_equal(l.n, 1);
    expect(&l.items[0], DR_CPU_GOVERNOR, DR_WARNING, "", "");
    assert_true(ev(&l.items[0], "cpus_not_performance") == 4);
    assert_true(ev(&l.items[0], "busy_cpus") == 4);
    assert_true(fabs(ev(&l.items[0], "busy_frequency_ratio") - 0.4) < 1e-12);
    assert_true(ev(&l.items[0], "busy_frequency_hertz") == 1.2e9);
    assert_true(fabs(l.items[0].magnitude - 0.6) < 1e-12);
    assert_true(tu_value(w->last, "mlwatch_finding", "kind", "cpu_governor", "severity", "warning",
                         "namespace", "", "pod", "", "container", "", "gpu", "", MW_END) == 1);
    dr_list_free(&l);
    world_close(w);
}

/* A window that starts at a packed frame reads its CPUs' times (busy) and
 * every frame's frequencies from packed CPUs. */
static void cpu_frequency_over_packed_frames(void **state)
{
    (void)state;
    world *w = world_new();
    mw_strlcpy(w->governor, "powersave", sizeof(w->governor));
    w->cur_khz = 1200000;
    world_open(w);
    world_run(w, 3);
    w->cur_khz = 3000000; /* the maximum, at the newest frame only */
    world_run_from(w, 3, 1);
    dr_list l;
    dr_list_init(&l);
    /* frames 1 and 2 (packed) at 0.4 of the maximum, 3 at 1: 0.6 */
    mw_doctor_findings(w->doctor, 2000, &l);
    if (l.n != 1) dump(&l);
    assert_int_equal(l.n, 1);
    expect(&l.items[0], DR_CPU_GOVERNOR, DR_WARNING, "", "");
    assert_true(ev(&l.items[0], "busy_cpus") == 4);
    assert_true(fabs(ev(&l.items[0], "busy_frequency_ratio") - 0.6) < 1e-12);
    assert_true(ev(&l.items[0], "busy_frequency_hertz") == 1.8e9);
    dr_list_free(&l);
    world_close(w);
}

static void cpu_throttling(void **state)
{
    (void)state;
    world *w = world_new();
    w->quota_us = 100000; /* one CPU */
    w->train_cpus[0] = 0.95;
    w->periods_per_s = 10;
    w->throttled_per_s = 5;
    dr_list l;
    findings_of(w, &l);
    if (l.n != 1) dump(&l);
    assert_int_equal(l.n, 1);
    expect(&l.items[0], DR_CPU_THROTTLING, DR_CRITICAL, "train-0", "");
    assert_true(ev(&l.items[0], "throttled_periods_ratio") == 0.5);
    assert_true(ev(&l.items[0], "periods") == 30);
    assert_true(ev(&l.items[0], "throttled_periods") == 15);
    assert_true(fabs(ev(&l.items[0], "throttled_seconds_per_second") - 0.4) < 1e-12);
    assert_true(ev(&l.items[0], "quota_cpus") == 1);
    assert_true(fabs(ev(&l.items[0], "cpu_usage_cpus") - 0.95) < 1e-12);
    assert_true(tu_value(w->last, "mlwatch_finding", "kind", "cpu_throttling", "severity",
                         "critical", "namespace", "ml-team", "pod", "train-0", "container", "main",
                         "gpu", "", MW_END) == 1);
    assert_int_equal(tu_count(w->last, "mlwatch_finding"), 1);
    dr_list_free(&l);
    /* A window of 2 s starts at the second frame, a packed one. */
    dr_list_init(&l);
    mw_doctor_findings(w->doctor, 2000, &l);
    assert_int_equal(l.n, 1);
    assert_true(ev(&l.items[0], "periods") == 20);
    assert_true(ev(&l.items[0], "throttled_periods") == 10);
    /* the packed frame's CPU time is within 2^-24 of its 0.95-s step */
    assert_true(fabs(ev(&l.items[0], "cpu_usage_cpus") - 0.95) <= 0.95 / (1 << 24) / 2);
    dr_list_free(&l);
    world_close(w);
}

/* A container younger than the window is judged on the frames it has: its
 * rates over its own span, which the evidence states. */
static void cpu_throttling_young_container(void **state)
{
    (void)state;
    world *w = world_new();
    w->quota_us = 100000;
    w->train_cpus[0] = 0.95;
    w->periods_per_s = 10;
    w->throttled_per_s = 10; /* every period */
    world_open(w);
    char there[4096], away[4200];
    snprintf(there, sizeof(there), "%s/%s", w->root, TRAIN_CG[0]);
    snprintf(away, sizeof(away), "%s.away", there);
    assert_int_equal(rename(there, away), 0);
    world_run_from(w, 0, 1); /* train-0 is not there yet */
    assert_int_equal(rename(away, there), 0);
    world_run_from(w, 1, 3); /* there from the second frame on */
    dr_list l;
    dr_list_init(&l);
    mw_doctor_findings(w->doctor, 0, &l);
    if (l.n != 1) dump(&l);
    assert_int_equal(l.n, 1);
    expect(&l.items[0], DR_CPU_THROTTLING, DR_CRITICAL, "train-0", "");
    assert_true(ev(&l.items[0], "throttled_periods_ratio") == 1);
    assert_true(ev(&l.items[0], "periods") == 20);
    assert_true(ev(&l.items[0], "throttled_periods") == 20);
    assert_true(ev(&l.items[0], "seconds_observed") == 2);
    assert_true(fabs(ev(&l.items[0], "throttled_seconds_per_second") - 0.8) < 1e-12);
    assert_true(fabs(ev(&l.items[0], "cpu_usage_cpus") - 0.95) < 1e-6);
    assert_string_equal(l.items[0].summary,
                        "Throttled in 100% of its CFS periods (20 of 20) over the 2 s it has "
                        "existed with a quota of 1.00 CPUs; it used 0.95 CPUs and waited 0.80 s "
                        "per second.");
    assert_true(tu_value(w->last, "mlwatch_finding", "kind", "cpu_throttling", "severity",
                         "critical", "namespace", "ml-team", "pod", "train-0", "container", "main",
                         "gpu", "", MW_END) == 1);
    dr_list_free(&l);
    world_close(w);
}

static void numa_mismatch(void **state)
{
    (void)state;
    world *w = world_new();
    mw_strlcpy(w->cpuset[0], "2-3", sizeof(w->cpuset[0]));
    mw_strlcpy(w->mems[0], "1", sizeof(w->mems[0]));
    dr_list l;
    findings_of(w, &l);
    if (l.n != 1) dump(&l);
    assert_int_equal(l.n, 1);
    expect(&l.items[0], DR_NUMA_MISMATCH, DR_WARNING, "train-0", "0");
    assert_true(ev(&l.items[0], "gpu_numa_node") == 0);
    assert_true(ev(&l.items[0], "cpus_allowed") == 2);
    assert_true(ev(&l.items[0], "cpus_on_gpu_node") == 0);
    assert_true(ev(&l.items[0], "memory_on_gpu_node") == 0);
    assert_true(l.items[0].magnitude == 1);
    dr_list_free(&l);
    world_close(w);
}

static void gpu_thermal_throttle(void **state)
{
    (void)state;
    world *w = world_new();
    w->sm_mhz[0] = 1188;
    w->reasons[0] = "0x20"; /* sw_thermal_slowdown */
    dr_list l;
    findings_of(w, &l);
    if (l.n != 1) dump(&l);
    assert_int_equal(l.n, 1);
    expect(&l.items[0], DR_GPU_THERMAL_THROTTLE, DR_WARNING, "train-0", "0");
    assert_true(fabs(ev(&l.items[0], "sm_clock_ratio") - 0.6) < 1e-12);
    assert_true(ev(&l.items[0], "sm_clock_hertz") == 1188e6);
    assert_true(ev(&l.items[0], "throttled_fraction") == 1);
    dr_list_free(&l);
    world_close(w);
}

static void gpu_power_throttle(void **state)
{
    (void)state;
    world *w = world_new();
    w->sm_mhz[1] = 1386;
    w->reasons[1] = "0x4"; /* sw_power_cap */
    dr_list l;
    findings_of(w, &l);
    if (l.n != 1) dump(&l);
    assert_int_equal(l.n, 1);
    expect(&l.items[0], DR_GPU_POWER_THROTTLE, DR_WARNING, "train-4", "1");
    assert_true(fabs(ev(&l.items[0], "sm_clock_ratio") - 0.7) < 1e-12);
    dr_list_free(&l);
    world_close(w);
}

static void pcie_downgraded(void **state)
{
    (void)state;
    world *w = world_new();
    w->pcie_width0 = 8;
    dr_list l;
    findings_of(w, &l);
    if (l.n != 1) dump(&l);
    assert_int_equal(l.n, 1);
    expect(&l.items[0], DR_PCIE_DOWNGRADED, DR_WARNING, "train-0", "0");
    assert_true(ev(&l.items[0], "pcie_link_width") == 8);
    assert_true(ev(&l.items[0], "pcie_link_max_width") == 16);
    assert_true(ev(&l.items[0], "bandwidth_ratio") == 0.5);
    dr_list_free(&l);
    world_close(w);
}

static void input_bound(void **state)
{
    (void)state;
    world *w = world_new();
    w->gpu_util[0] = 20;
    w->train_cpus[0] = 2.0; /* both of its CPUs */
    dr_list l;
    findings_of(w, &l);
    if (l.n != 1) dump(&l);
    assert_int_equal(l.n, 1);
    expect(&l.items[0], DR_INPUT_BOUND, DR_WARNING, "train-0", "0");
    assert_true(ev(&l.items[0], "gpu_utilization") == 0.2);
    assert_true(ev(&l.items[0], "cpu_saturation") == 1);
    assert_true(ev(&l.items[0], "cpu_capacity_cpus") == 2);
    assert_true(ev(&l.items[0], "io_pressure_ratio") == 0);
    dr_list_free(&l);
    world_close(w);
}

static void input_bound_on_io(void **state)
{
    (void)state;
    world *w = world_new();
    w->gpu_util[0] = 30;
    w->io_some_per_s = 0.5;
    dr_list l;
    /* The cgroup collector reads PSI every 5 cycles: 11 cycles give it two
     * reads after the first, whose difference is the rate. */
    findings_of_n(w, &l, 11);
    if (l.n != 1) dump(&l);
    assert_int_equal(l.n, 1);
    expect(&l.items[0], DR_INPUT_BOUND, DR_WARNING, "train-0", "0");
    assert_true(ev(&l.items[0], "io_pressure_ratio") == 0.5);
    assert_true(ev(&l.items[0], "cpu_saturation") == 0.5);
    dr_list_free(&l);
    world_close(w);
}

static void memory_pressure(void **state)
{
    (void)state;
    world *w = world_new();
    w->mem_limit = 1073741824;
    w->mem_current = 1020054732; /* 95 % */
    dr_list l;
    findings_of(w, &l);
    if (l.n != 1) dump(&l);
    assert_int_equal(l.n, 1);
    expect(&l.items[0], DR_MEMORY_PRESSURE, DR_WARNING, "train-4", "");
    assert_true(ev(&l.items[0], "limit_bytes") == 1073741824);
    assert_true(ev(&l.items[0], "working_set_bytes") == 1020054732);
    assert_true(fabs(ev(&l.items[0], "working_set_ratio") - 0.95) < 1e-9);
    dr_list_free(&l);
    world_close(w);
}

static void gpu_errors(void **state)
{
    (void)state;
    world *w = world_new();
    w->errors_from_cycle = 2;
    dr_list l;
    findings_of(w, &l);
    if (l.n != 1) dump(&l);
    assert_int_equal(l.n, 1);
    expect(&l.items[0], DR_GPU_ERRORS, DR_CRITICAL, "train-4", "1");
    assert_true(ev(&l.items[0], "ecc_uncorrected_errors") == 2);
    assert_true(ev(&l.items[0], "xid_errors") == 1);
    assert_true(ev(&l.items[0], "ecc_corrected_errors") == 0);
    assert_true(ev(&l.items[0], "seconds_observed") == 3);
    dr_list_free(&l);
    world_close(w);
}

/* A hardware-class XID in the kernel log on the GPU a workload uses, and
 * no counter moved: the workload gets a critical gpu_errors finding that
 * names the GPU's health and the recommended action (issue 30). */
static void gpu_hardware_event(void **state)
{
    (void)state;
    world *w = world_new();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char kmsg[400];
    snprintf(kmsg, sizeof(kmsg),
             "6,1,1000,-;NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15\n"
             "4,2,%lld,-;NVRM: Xid (PCI:0000:28:00): 79, pid=3004, name=python3, GPU has fallen "
             "off the bus.\n",
             (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
    tu_write(w->root, "dev/kmsg", kmsg);
    dr_list l;
    findings_of(w, &l);
    if (l.n != 1) dump(&l);
    assert_int_equal(l.n, 1);
    expect(&l.items[0], DR_GPU_ERRORS, DR_CRITICAL, "train-4", "1");
    assert_true(ev(&l.items[0], "recent_hardware_events") == 1);
    assert_true(ev(&l.items[0], "gpu_health_state") == 3);
    assert_true(ev(&l.items[0], "xid_errors") == 0); /* NVML saw none */
    assert_non_null(strstr(l.items[0].summary,
                           "the kernel log has hardware-class XIDs of it; its health is unhealthy "
                           "(xid_79; recommended action: reboot_node)."));
    dr_list_free(&l);
    world_close(w);
}

static void gpu_shared(void **state)
{
    (void)state;
    world *w = world_new();
    w->share_gpu0 = 1;
    dr_list l;
    findings_of(w, &l);
    if (l.n != 2) dump(&l);
    assert_int_equal(l.n, 2);
    /* Both workloads on GPU 0, in workload order (same severity, magnitude). */
    assert_int_equal(l.items[0].kind, DR_GPU_SHARED);
    assert_string_equal(l.items[0].namespace_, "ml-team");
    assert_string_equal(l.items[0].pod, "train-0");
    assert_string_equal(l.items[0].gpu, "0");
    assert_int_equal(l.items[1].kind, DR_GPU_SHARED);
    assert_string_equal(l.items[1].namespace_, "shared");
    assert_string_equal(l.items[1].pod, "notebook-a");
    assert_string_equal(l.items[1].gpu, "0");
    assert_true(ev(&l.items[0], "workloads_on_gpu") == 2);
    assert_true(ev(&l.items[0], "others_gpu_memory_used_bytes") == 1073741824);
    assert_true(ev(&l.items[1], "others_gpu_memory_used_bytes") == 10737418240.0);
    dr_list_free(&l);
    world_close(w);
}

/* Several at once: ranked by severity, then magnitude; filters keep the
 * node's own findings. */
static void ranking_and_filters(void **state)
{
    (void)state;
    world *w = world_new();
    mw_strlcpy(w->governor, "ondemand", sizeof(w->governor)); /* at full speed: magnitude 0.5 */
    w->quota_us = 100000;
    w->periods_per_s = 10;
    w->throttled_per_s = 1; /* 10 %: warning */
    w->pcie_width0 = 4;     /* magnitude 0.75 */
    w->errors_from_cycle = 1;
    dr_list l;
    findings_of(w, &l);
    if (l.n != 4) dump(&l);
    assert_int_equal(l.n, 4);
    assert_int_equal(l.items[0].kind, DR_GPU_ERRORS);      /* critical */
    assert_int_equal(l.items[1].kind, DR_PCIE_DOWNGRADED); /* warning 0.75 */
    assert_int_equal(l.items[2].kind, DR_CPU_GOVERNOR);    /* warning 0.5 */
    assert_int_equal(l.items[3].kind, DR_CPU_THROTTLING);  /* warning 0.1 */
    dr_list_filter(&l, "ml-team", "train-4", NULL);
    assert_int_equal(l.n, 2);
    assert_int_equal(l.items[0].kind, DR_GPU_ERRORS);
    assert_int_equal(l.items[1].kind, DR_CPU_GOVERNOR);
    dr_list_free(&l);
    /* A window of 1 s sees only the last two frames: the errors of cycle 1
     * are older, but the GPU's health is current (volatile uncorrected ECC:
     * degraded until a reset; the fixture's kernel log is read, so NVML's
     * XID 48 is not counted twice), so the workload keeps a warning. */
    dr_list_init(&l);
    mw_doctor_findings(w->doctor, 1000, &l);
    size_t errs = 0;
    for (size_t i = 0; i < l.n; i++) {
        if (l.items[i].kind != DR_GPU_ERRORS) continue;
        errs++;
        assert_true(ev(&l.items[i], "xid_errors") == 0);
        assert_true(ev(&l.items[i], "ecc_uncorrected_errors") == 0);
        assert_true(ev(&l.items[i], "gpu_health_state") == 1);
        assert_int_equal(l.items[i].severity, DR_WARNING);
        assert_string_equal(l.items[i].pod, "train-4");
        assert_non_null(
            strstr(l.items[i].summary,
                   "its health is degraded (ecc_uncorrected; recommended action: reset_gpu)"));
    }
    assert_int_equal(errs, 1);
    dr_list_free(&l);
    world_close(w);
}

static void json_round_trip(void **state)
{
    (void)state;
    world *w = world_new();
    w->share_gpu0 = 1;
    w->pcie_width0 = 8;
    dr_list l, back;
    findings_of(w, &l);
    assert_int_equal(l.n, 4); /* pcie for both users of GPU 0, gpu_shared for both */
    char *json = dr_list_to_json(&l, 1, "agent", 300);
    dr_list_init(&back);
    char err[256];
    assert_int_equal(dr_list_from_json(json, strlen(json), &back, err, sizeof(err)), 0);
    assert_int_equal(back.n, l.n);
    for (size_t i = 0; i < l.n; i++) {
        assert_int_equal(back.items[i].kind, l.items[i].kind);
        assert_int_equal(back.items[i].severity, l.items[i].severity);
        assert_string_equal(back.items[i].pod, l.items[i].pod);
        assert_string_equal(back.items[i].gpu, l.items[i].gpu);
        assert_string_equal(back.items[i].summary, l.items[i].summary);
        assert_int_equal(back.items[i].nev, l.items[i].nev);
        for (size_t k = 0; k < l.items[i].nev; k++)
            assert_true(back.items[i].ev[k].value == l.items[i].ev[k].value);
    }
    free(json);
    dr_list_free(&back);
    /* Bad answers: precise errors, nothing added. */
    static const struct {
        const char *text, *err;
    } bad[] = {
        {"nope", "not JSON: line 1 column 4: '[' or '{' expected near 'nope'"},
        {"{}", "no \"findings\" array"},
        {"{\"findings\":[1]}", "findings[0]: not an object"},
        {"{\"findings\":[{\"kind\":\"x\",\"severity\":\"info\"}]}",
         "findings[0]: unknown kind 'x'"},
        {"{\"findings\":[{\"severity\":\"info\"}]}", "findings[0]: missing \"kind\""},
        {"{\"findings\":[{\"kind\":\"gpu_shared\",\"severity\":\"info\",\"evidence\":{\"a\":\"b\"}}"
         "]}",
         "findings[0].evidence.a: not a number"},
    };
    for (size_t i = 0; i < MW_ARRAY_LEN(bad); i++) {
        dr_list_init(&back);
        assert_int_equal(
            dr_list_from_json(bad[i].text, strlen(bad[i].text), &back, err, sizeof(err)), -1);
        assert_string_equal(err, bad[i].err);
        dr_list_free(&back);
    }
    /* Long strings and many pieces of evidence are kept to the bounds a
     * rule's finding has: 127 bytes of a namespace, 39 of an evidence
     * name, 8 pieces of evidence. */
    char text[2048], ns[301], ename[61];
    memset(ns, 'n', 300);
    ns[300] = '\0';
    memset(ename, 'e', 60);
    ename[60] = '\0';
    int len = snprintf(text, sizeof(text),
                       "{\"findings\":[{\"kind\":\"gpu_shared\",\"severity\":\"warning\","
                       "\"namespace\":\"%s\",\"evidence\":{\"%s\":1",
                       ns, ename);
    for (int k = 0; k < 10; k++)
        len += snprintf(text + len, sizeof(text) - (size_t)len, ",\"e%d\":%d", k, k);
    snprintf(text + len, sizeof(text) - (size_t)len, "}}]}");
    dr_list_init(&back);
    assert_int_equal(dr_list_from_json(text, strlen(text), &back, err, sizeof(err)), 0);
    assert_int_equal(back.n, 1);
    assert_int_equal(strlen(back.items[0].namespace_), DR_NAMESPACE_MAX - 1);
    assert_string_equal(back.items[0].pod, "");
    assert_string_equal(back.items[0].summary, "");
    assert_int_equal(back.items[0].nev, DR_MAX_EVIDENCE);
    assert_int_equal(strlen(back.items[0].ev[0].name), DR_EVIDENCE_NAME_MAX - 1);
    assert_string_equal(back.items[0].ev[7].name, "e6");
    assert_true(back.items[0].ev[7].value == 6);
    dr_list_free(&back);
    dr_list_free(&l);
    world_close(w);
}

static void config_section(void **state)
{
    (void)state;
    mw_config c;
    mw_options_register_all();
    mw_config_defaults(&c);
    const mw_doctor_settings *ds = mw_config_group(&c, &mw_doctor_options);
    assert_true(ds->t.throttled_ratio == 0.05);
    assert_true(ds->t.history_ms == 300000);
    char err[512];
    const char *ok = "doctor:\n  history: 2m\n  throttled_ratio: 0.1\n  gpu_corrected_errors: 5\n";
    assert_int_equal(mw_config_load_string(&c, "t.yaml", ok, strlen(ok), err, sizeof(err)), 0);
    assert_true(ds->t.history_ms == 120000);
    assert_true(ds->t.throttled_ratio == 0.1);
    assert_true(ds->t.gpu_corrected_errors == 5);
    assert_true(ds->t.busy_cpu_ratio == 0.5);
    static const struct {
        const char *yaml, *err;
    } bad[] = {
        {"doctor:\n  throttled_ratio: 2\n",
         "t.yaml:2:20: doctor: throttled_ratio: must be a number from 0 to 1, got '2'"},
        {"doctor:\n  nope: 1\n", "t.yaml:2:3: doctor: unknown key 'nope' (see docs/doctor.md)"},
        {"doctor:\n  history: forever\n",
         "t.yaml:2:12: doctor: history: invalid duration 'forever' (from 1s to 1d, e.g. 5m)"},
        {"doctor: [1]\n", "t.yaml:1:9: doctor: expected a mapping (history: 5m, ...)"},
        {"doctor:\n  busy_cpu_ratio: 0.5\n  busy_cpu_ratio: 0.6\n",
         "t.yaml:3:3: doctor: duplicate key 'busy_cpu_ratio'"},
        {"doctor:\n  throttled_critical_ratio: 0.01\n",
         "t.yaml:2:3: doctor: throttled_critical_ratio (0.01) is below throttled_ratio (0.1)"},
    };
    for (size_t i = 0; i < MW_ARRAY_LEN(bad); i++) {
        assert_int_equal(
            mw_config_load_string(&c, "t.yaml", bad[i].yaml, strlen(bad[i].yaml), err, sizeof(err)),
            -1);
        assert_string_equal(err, bad[i].err);
        assert_true(ds->t.throttled_ratio == 0.1); /* unchanged */
    }
}

static void history_is_bounded(void **state)
{
    (void)state;
    dr_history h;
    /* An hour at 1 s: 3601 cycles in at most DR_MAX_FRAMES (64) frames. */
    dr_history_init(&h, 3600 * 1000, 1000);
    mw_snapshot *snap = mw_snapshot_new();
    for (int i = 0; i < 5000; i++) {
        snap->timestamp_ms = 1000 * (int64_t)i;
        dr_history_push(&h, dr_frame_from(snap, NULL, &h.pool));
        assert_true(dr_history_len(&h) <= DR_MAX_FRAMES);
    }
    assert_int_equal(dr_history_at(&h, dr_history_len(&h) - 1)->t_ms, 4999000);
    int64_t span = dr_history_at(&h, dr_history_len(&h) - 1)->t_ms - dr_history_at(&h, 0)->t_ms;
    assert_true(span >= 3600 * 1000 && span < 3700 * 1000);
    mw_snapshot_free(snap);
    dr_history_free(&h);
    assert_int_equal(dr_history_len(&h), 0);
}

/* The frames of a history share one counted copy of each container string:
 * a frame adds no string the previous one had, and dropping frames frees
 * the strings no frame holds any more. */
static void history_shares_strings(void **state)
{
    (void)state;
    static const mw_metric_desc INFO = {"mlwatch_container_info", "i", "", MW_GAUGE};
    dr_history h;
    dr_history_init(&h, 10 * 1000, 1000);
    for (int i = 0; i < 40; i++) {
        mw_snapshot *snap = mw_snapshot_new();
        snap->timestamp_ms = 1000 * (int64_t)i;
        /* Two containers all along; a third from cycle 20 on. */
        mw_emit(snap, &INFO, 1, "namespace", "ml", "pod", "train-0", "container", "main",
                "container_id", "aaaa", "cgroup", "/kubepods/a", MW_END);
        mw_emit(snap, &INFO, 1, "namespace", "ml", "pod", "train-0", "container", "side",
                "container_id", "bbbb", "cgroup", "/kubepods/b", MW_END);
        if (i >= 20)
            mw_emit(snap, &INFO, 1, "namespace", "web", "pod", "nginx", "container", "main",
                    "container_id", "cccc", "cgroup", "/kubepods/c", MW_END);
        dr_history_push(&h, dr_frame_from(snap, NULL, &h.pool));
        mw_snapshot_free(snap);
        if (i == 10) /* ml, train-0, main, side, aaaa, bbbb, /kubepods/a, /kubepods/b */
            assert_int_equal(h.pool.n, 8);
    }
    /* + web, nginx, cccc, /kubepods/c */
    assert_int_equal(h.pool.n, 12);
    const dr_frame *a = dr_history_at(&h, 0), *b = dr_history_at(&h, dr_history_len(&h) - 1);
    assert_int_equal(a->nctrs, 3);
    assert_ptr_equal(dr_frame_container(a, "aaaa")->id->pod,
                     dr_frame_container(b, "aaaa")->id->pod);
    assert_string_equal(dr_frame_container(b, "cccc")->id->ns, "web");
    /* The third container goes; once no frame holds it, its strings go. */
    for (int i = 40; i < 60; i++) {
        mw_snapshot *snap = mw_snapshot_new();
        snap->timestamp_ms = 1000 * (int64_t)i;
        mw_emit(snap, &INFO, 1, "namespace", "ml", "pod", "train-0", "container", "main",
                "container_id", "aaaa", "cgroup", "/kubepods/a", MW_END);
        mw_emit(snap, &INFO, 1, "namespace", "ml", "pod", "train-0", "container", "side",
                "container_id", "bbbb", "cgroup", "/kubepods/b", MW_END);
        dr_history_push(&h, dr_frame_from(snap, NULL, &h.pool));
        mw_snapshot_free(snap);
    }
    assert_int_equal(h.pool.n, 8);
    dr_history_free(&h);
    assert_int_equal(h.pool.n, 0);
    /* Without a pool a frame keeps its own copies. */
    mw_snapshot *snap = mw_snapshot_new();
    mw_emit(snap, &INFO, 1, "namespace", "ml", "pod", "p", "container", "c", "container_id", "x",
            MW_END);
    dr_frame *f = dr_frame_from(snap, NULL, NULL);
    mw_snapshot_free(snap);
    assert_string_equal(dr_frame_container(f, "x")->id->pod, "p");
    dr_frame_free(f);
}

/* Older frames keep only what the rules read of them (the cumulative
 * values and the container's shared identity); the newest frame also keeps
 * the governors and the per-container values only it is read for. */
static void history_keeps_newest_parts(void **state)
{
    (void)state;
    static const mw_metric_desc INFO = {"mlwatch_container_info", "i", "", MW_GAUGE};
    static const mw_metric_desc CPU = {"mlwatch_container_cpu_seconds_total", "c", "seconds",
                                       MW_COUNTER};
    static const mw_metric_desc WS = {"mlwatch_container_memory_working_set_bytes", "w", "bytes",
                                      MW_GAUGE};
    static const mw_metric_desc HOST = {"mlwatch_cpu_seconds_total", "h", "seconds", MW_COUNTER};
    static const mw_metric_desc GOV = {"mlwatch_cpu_scaling_governor_info", "g", "", MW_GAUGE};
    /* stride 1 (10 s at 1 s), then a stride of 58 (an hour at 1 s): the
     * newest slot is replaced between kept frames. */
    static const int64_t hist_ms[] = {10 * 1000, 3600 * 1000};
    for (size_t k = 0; k < MW_ARRAY_LEN(hist_ms); k++) {
        dr_history h;
        dr_history_init(&h, hist_ms[k], 1000);
        for (int i = 0; i < 100; i++) {
            mw_snapshot *snap = mw_snapshot_new();
            snap->timestamp_ms = 1000 * (int64_t)i;
            mw_emit(snap, &INFO, 1, "namespace", "ml", "pod", "train-0", "container", "main",
                    "container_id", "aaaa", "cgroup", "/kubepods/a", MW_END);
            mw_emit(snap, &INFO, 1, "namespace", "ml", "pod", "train-0", "container", "side",
                    "container_id", "bbbb", "cgroup", "/kubepods/b", MW_END);
            mw_emit(snap, &CPU, 0.5 * i, "container_id", "aaaa", MW_END);
            mw_emit(snap, &WS, 1000.0 + i, "container_id", "bbbb", MW_END);
            mw_emit(snap, &HOST, 2.0 * i, "cpu", "0", "mode", "user", MW_END);
            mw_emit(snap, &GOV, 1, "cpu", "0", "governor", "powersave", MW_END);
            dr_history_push(&h, dr_frame_from(snap, NULL, &h.pool));
            mw_snapshot_free(snap);
            size_t n = dr_history_len(&h);
            for (size_t j = 0; j + 1 < n; j++) {
                assert_null(dr_history_at(&h, j)->now);
                assert_null(dr_history_at(&h, j)->governors);
            }
            const dr_frame *last = dr_history_at(&h, n - 1);
            assert_non_null(last->now);
            assert_int_equal(last->t_ms, 1000 * (int64_t)i);
            assert_string_equal(last->governors[0].name, "powersave");
            assert_int_equal(last->nctrs, 2);
            assert_true(last->now[1].ws_bytes == 1000.0 + i);
            assert_true(last->now[0].ws_bytes == -1);
            assert_true(last->ctrs[0].cpu_s == 0.5 * i);
            assert_true(last->ctrs[1].cpu_s == -1);
            /* two identities, eight strings, however many frames */
            assert_int_equal(h.pool.nidents, 2);
            assert_int_equal(h.pool.n, 8);
        }
        const dr_frame *a = dr_history_at(&h, 0);
        const dr_frame *b = dr_history_at(&h, dr_history_len(&h) - 1);
        assert_true(a != b);
        assert_ptr_equal(dr_frame_container(a, "aaaa")->id, dr_frame_container(b, "aaaa")->id);
        assert_true(dr_frame_container(a, "aaaa")->cpu_s == 0.5 * (double)(a->t_ms / 1000));
        assert_true(a->cpus[0].busy_s == 2.0 * (double)(a->t_ms / 1000));
        assert_null(dr_frame_container(a, "cccc"));
        dr_history_free(&h);
        assert_int_equal(h.pool.nidents, 0);
        assert_int_equal(h.pool.n, 0);
    }
}

/* The container families a history frame reads, value k of a dr_container
 * from FAM[k] (with the resource label PSI_RESOURCE[k] when there is one). */
static const mw_metric_desc INFO = {"mlwatch_container_info", "i", "", MW_GAUGE};
static const mw_metric_desc FAM[] = {
    {"mlwatch_container_cpu_seconds_total", "c", "seconds", MW_COUNTER},
    {"mlwatch_container_cpu_throttled_periods_total", "t", "", MW_COUNTER},
    {"mlwatch_container_cpu_periods_total", "p", "", MW_COUNTER},
    {"mlwatch_container_cpu_throttled_seconds_total", "s", "seconds", MW_COUNTER},
    {"mlwatch_container_pressure_waiting_seconds_total", "w", "seconds", MW_COUNTER},
    {"mlwatch_container_pressure_stalled_seconds_total", "f", "seconds", MW_COUNTER},
    {"mlwatch_container_pressure_waiting_seconds_total", "w", "seconds", MW_COUNTER},
};
static const char *const PSI_RESOURCE[DR_CTR_VALUES] = {NULL,     NULL,     NULL, NULL,
                                                        "memory", "memory", "io"};

/* Emit value k (v >= 0) of container key. */
static void emit_ctr_value(mw_snapshot *snap, const char *key, size_t k, double v)
{
    if (PSI_RESOURCE[k])
        mw_emit(snap, &FAM[k], v, "container_id", key, "resource", PSI_RESOURCE[k], MW_END);
    else
        mw_emit(snap, &FAM[k], v, "container_id", key, MW_END);
}

/* Container values of history_packs_between at cycle i: -1 = absent. */
static double packed_value(const char *key, size_t k, int i)
{
    if (strcmp(key, "aaaa") == 0) {
        const double v[DR_CTR_VALUES] = {1e9 + 0.25 * i, 3e7 + 7.0 * i, i >= 50 ? 1000.0 * i : -1,
                                         12.5,           0.1 * i,       -1,
                                         5e8 + 3.0 * i};
        return v[k];
    }
    if (strcmp(key, "bbbb") == 0) return k == 0 && i % 10 != 5 ? 7.0 * i + 0.5 : -1;
    return k == 0 && i >= 80 ? 1e12 + i : -1; /* cccc */
}

/* The frames between the oldest and the newest hold float differences:
 * values far beyond a float's precision come back exact when their steps
 * are exact, within 2^-24 of the step otherwise; a container that appears,
 * returns, or gains a value is kept whole in that frame. */
static void history_packs_between(void **state)
{
    (void)state;
    static const char *const keys[] = {"aaaa", "bbbb", "cccc"};
    assert_int_equal(sizeof(dr_packed), 2);
    dr_history h;
    dr_history_init(&h, 60 * 1000, 1000); /* a frame a cycle */
    for (int i = 0; i < 100; i++) {
        mw_snapshot *snap = mw_snapshot_new();
        snap->timestamp_ms = 1000 * (int64_t)i;
        for (size_t c = 0; c < MW_ARRAY_LEN(keys); c++) {
            if (packed_value(keys[c], 0, i) < 0) continue;
            mw_emit(snap, &INFO, 1, "namespace", "ml", "pod", "p", "container", keys[c],
                    "container_id", keys[c], MW_END);
            for (size_t k = 0; k < DR_CTR_VALUES; k++) {
                double v = packed_value(keys[c], k, i);
                if (v >= 0) emit_ctr_value(snap, keys[c], k, v);
            }
        }
        dr_history_push(&h, dr_frame_from(snap, NULL, &h.pool));
        mw_snapshot_free(snap);
    }
    size_t n = dr_history_len(&h), anchors = 0, sets = 0, with_prev = 0;
    assert_int_equal(dr_history_at(&h, 0)->t_ms, 39000);
    assert_int_equal(n, 61);
    for (size_t j = 0; j < n; j++) {
        const dr_frame *f = dr_history_at(&h, j);
        int i = (int)(f->t_ms / 1000);
        /* whole: the oldest and the newest */
        assert_true((f->packed == NULL) == (j == 0 || j == n - 1));
        assert_true((f->ctrs == NULL) == (f->packed != NULL));
        anchors += f->nanchors;
        if (f->packed) {
            /* a packed frame shares the identities of the one before when
             * they hold the same containers */
            const dr_frame *b = dr_history_at(&h, j - 1);
            int same = b->nctrs == f->nctrs;
            for (size_t c = 0; c < f->nctrs && same; c++)
                same = dr_frame_ident(b, c) == dr_frame_ident(f, c);
            assert_int_equal(f->ids->n, f->nctrs);
            if (b->packed) assert_true((b->ids == f->ids) == same);
            sets += !b->packed || b->ids != f->ids;
            with_prev += f->prev != NULL;
            /* a difference for each value that moved: aaaa's CPU time,
             * throttled periods, memory and io pressure, and its periods
             * once there (not its throttled time, which stays, nor its
             * absent stall time); bbbb's and cccc's CPU time; none for a
             * container kept whole */
            size_t want = (i == 50 ? 0 : i < 50 ? 4 : 5) + (i % 10 != 5 && i % 10 != 6) + (i > 80);
            assert_int_equal(f->ndiffs, want);
            if (!f->prev) assert_int_equal(f->nanchors, 0);
        }
        dr_container *v = dr_history_values(&h, j);
        size_t want = 1 + (i % 10 != 5) + (i >= 80);
        assert_int_equal(f->nctrs, want);
        for (size_t c = 0; c < f->nctrs; c++) {
            assert_ptr_equal(v[c].id, dr_frame_ident(f, c));
            for (size_t k = 0; k < DR_CTR_VALUES; k++) {
                double got, exp = packed_value(v[c].id->key, k, i);
                memcpy(&got, (const char *)&v[c] + offsetof(dr_container, cpu_s) + k * 8, 8);
                if (k == 4) /* steps of 0.1: within 2^-24 of the step */
                    assert_true(fabs(got - exp) <= 0.1 / (1 << 24));
                else if (got != exp)
                    fail_msg("frame %d %s value %zu: %.17g, not %.17g", i, v[c].id->key, k, got,
                             exp);
            }
        }
        free(v);
    }
    /* bbbb back at 46, 56, ... 96; aaaa's periods from 50; cccc from 80 */
    assert_int_equal(anchors, 8);
    /* sets from 36 (frames 40-44), 45, 46, 55, 56, 65, 66, 75, 76, 80, 85,
     * 86, 95, 96; places: anchors at 46, 50, 56, 66, 76, 80, 86, 96, and
     * cccc moved by bbbb's absence at 85 and 95 */
    assert_int_equal(sets, 14);
    assert_int_equal(with_prev, 10);
    double series[DR_MAX_FRAMES];
    dr_history_series(&h, 0, "aaaa", offsetof(dr_container, cpu_s), series);
    for (size_t j = 0; j < n; j++)
        assert_true(series[j] == 1e9 + 0.25 * (double)(39 + j));
    dr_history_series(&h, 50, "bbbb", offsetof(dr_container, cpu_s), series);
    for (size_t j = 0; j + 50 < n; j++)
        assert_true(series[j] == ((89 + j) % 10 == 5 ? -1 : 7.0 * (double)(89 + j) + 0.5));
    dr_history_series(&h, 0, "cccc", offsetof(dr_container, mem_full_s), series);
    for (size_t j = 0; j < n; j++)
        assert_true(series[j] == -1);
    dr_history_free(&h);
    assert_int_equal(h.pool.nidents, 0);
    assert_int_equal(h.pool.n, 0);
}

/* Value k of container c of history_finds_values_past_marks at cycle i:
 * some values move every cycle, some never, some are absent. */
static double marked_value(int c, size_t k, int i)
{
    switch (k) {
    case 0:
        return 100.0 * c + (c % 3 ? 0.5 * i : 0);
    case 1:
        return c % 2 ? (double)i : 5;
    case 2:
        return c + 2.0 * i;
    case 3:
        return c % 4 ? 1 : -1;
    case 4:
        return (double)((i * c) % 7);
    case 5:
        return -1;
    default:
        return c % 5 ? 0 : 3.0 * i;
    }
}

/* In a packed frame of 40 containers, the values of the containers past
 * the first 16 (found from the frame's marks) come back exact. */
static void history_finds_values_past_marks(void **state)
{
    (void)state;
    dr_history h;
    dr_history_init(&h, 60 * 1000, 1000);
    for (int i = 0; i < 12; i++) {
        mw_snapshot *snap = mw_snapshot_new();
        snap->timestamp_ms = 1000 * (int64_t)i;
        for (int c = 0; c < 40; c++) {
            char key[8];
            snprintf(key, sizeof(key), "c%02d", c);
            mw_emit(snap, &INFO, 1, "namespace", "ml", "pod", "p", "container", key, "container_id",
                    key, MW_END);
            for (size_t k = 0; k < DR_CTR_VALUES; k++)
                if (marked_value(c, k, i) >= 0) emit_ctr_value(snap, key, k, marked_value(c, k, i));
        }
        dr_history_push(&h, dr_frame_from(snap, NULL, &h.pool));
        mw_snapshot_free(snap);
    }
    assert_int_equal(dr_history_len(&h), 12);
    assert_non_null(dr_history_at(&h, 5)->packed);
    /* differences before c32 from cycle 4 to 5: CPU time of 21 (c % 3), throttled
     * periods of 16 (odd), periods of 32, memory pressure of 27 (c % 7), io of 7
     * (c % 5 == 0) */
    assert_int_equal(dr_history_at(&h, 5)->marks[2], 21 + 16 + 32 + 27 + 7);
    for (int c = 0; c < 40; c++) {
        char key[8];
        snprintf(key, sizeof(key), "c%02d", c);
        for (size_t k = 0; k < DR_CTR_VALUES; k++) {
            double series[DR_MAX_FRAMES];
            dr_history_series(&h, 0, key, offsetof(dr_container, cpu_s) + k * sizeof(double),
                              series);
            for (int i = 0; i < 12; i++)
                if (series[i] != marked_value(c, k, i))
                    fail_msg("%s value %zu at %d: %.17g, not %.17g", key, k, i, series[i],
                             marked_value(c, k, i));
        }
    }
    dr_history_free(&h);
}

/* Busy and total seconds of CPU c at cycle i of history_packs_cpus, and
 * its frequency (CPU 3 is offline from 10 to 12). */
static double cpu_busy(int c, int i)
{
    return 100.0 * c + 0.75 * i;
}
static double cpu_total(int c, int i)
{
    return cpu_busy(c, i) + 1000 + 0.25 * i;
}
static double cpu_hz(int c, int i)
{
    return 2.4e9 + 1e8 * ((c + i) % 5);
}

/* The CPUs of the frames between the oldest and the newest are packed when
 * they are the frame before's, and come back exact; a frame whose CPUs
 * changed keeps them whole. */
static void history_packs_cpus(void **state)
{
    (void)state;
    static const mw_metric_desc SECS = {"mlwatch_cpu_seconds_total", "s", "seconds", MW_COUNTER};
    static const mw_metric_desc HZ = {"mlwatch_cpu_frequency_hertz", "f", "hertz", MW_GAUGE};
    static const mw_metric_desc MAX = {"mlwatch_cpu_frequency_max_hertz", "m", "hertz", MW_GAUGE};
    dr_history h;
    dr_history_init(&h, 60 * 1000, 1000);
    for (int i = 0; i < 20; i++) {
        mw_snapshot *snap = mw_snapshot_new();
        snap->timestamp_ms = 1000 * (int64_t)i;
        for (int c = 0; c < 4; c++) {
            if (c == 3 && i >= 10 && i <= 12) continue;
            char id[4];
            snprintf(id, sizeof(id), "%d", c);
            mw_emit(snap, &SECS, cpu_busy(c, i), "cpu", id, "mode", "user", MW_END);
            mw_emit(snap, &SECS, cpu_total(c, i) - cpu_busy(c, i), "cpu", id, "mode", "idle",
                    MW_END);
            mw_emit(snap, &HZ, cpu_hz(c, i), "cpu", id, MW_END);
            mw_emit(snap, &MAX, 3.9e9, "cpu", id, MW_END);
        }
        dr_history_push(&h, dr_frame_from(snap, NULL, &h.pool));
        mw_snapshot_free(snap);
    }
    assert_int_equal(dr_history_len(&h), 20);
    for (size_t j = 0; j < 20; j++) {
        const dr_frame *f = dr_history_at(&h, j);
        int i = (int)j, n = i >= 10 && i <= 12 ? 3 : 4;
        /* whole: the oldest, the newest, and where CPU 3 left (10) or came
         * back (13) */
        int whole = j == 0 || j == 19 || i == 10 || i == 13;
        assert_true((f->pcpus == NULL) == whole);
        assert_true((f->cpus == NULL) == !whole);
        assert_int_equal(f->ncpus, n);
        assert_int_equal(dr_history_cpu_ids(&h, j)->ncpus, n);
        dr_cpu *c = dr_history_cpus(&h, j);
        for (int k = 0; k < n; k++) {
            assert_int_equal(c[k].cpu, k);
            if (c[k].busy_s != cpu_busy(k, i) || c[k].total_s != cpu_total(k, i) ||
                c[k].hz != cpu_hz(k, i) || c[k].max_hz != 3.9e9)
                fail_msg("cycle %d CPU %d: %.17g %.17g %.17g %.17g", i, k, c[k].busy_s,
                         c[k].total_s, c[k].hz, c[k].max_hz);
        }
        free(c);
    }
    dr_history_free(&h);
}

/* GPU memory of container c (of 4) at cycle i of history_shares_uses: -1 =
 * none. c0 on GPU 0 throughout (its memory grows at 70), c1 on GPU 1 from
 * 30, c2 on GPU 1 throughout; c3 (no GPU) is absent from 85 to 89. */
static double use_bytes(int c, int i)
{
    switch (c) {
    case 0:
        return i < 70 ? 1e9 : 2e9;
    case 1:
        return i >= 30 ? 3e9 : -1;
    case 2:
        return 4e9;
    default:
        return -1;
    }
}

/* A packed frame whose containers use the same GPUs, with the same memory,
 * as the frame before shares the frame before's uses; when the frame they
 * belong to goes, the oldest remaining sharer gets its own copy (ASan: no
 * frame reads a dropped one's). */
static void history_shares_uses(void **state)
{
    (void)state;
    static const mw_metric_desc GPU = {"mlwatch_gpu_info", "g", "", MW_GAUGE};
    static const mw_metric_desc MEM = {"mlwatch_container_gpu_memory_used_bytes", "m", "bytes",
                                       MW_GAUGE};
    dr_history h;
    dr_history_init(&h, 60 * 1000, 1000);
    for (int i = 0; i < 100; i++) {
        mw_snapshot *snap = mw_snapshot_new();
        snap->timestamp_ms = 1000 * (int64_t)i;
        mw_emit(snap, &GPU, 1, "gpu", "0", MW_END);
        mw_emit(snap, &GPU, 1, "gpu", "1", MW_END);
        for (int c = 0; c < 4; c++) {
            if (c == 3 && i >= 85 && i < 90) continue;
            char key[4];
            snprintf(key, sizeof(key), "c%d", c);
            mw_emit(snap, &INFO, 1, "namespace", "ml", "pod", key, "container", "main",
                    "container_id", key, MW_END);
            emit_ctr_value(snap, key, 0, 10.0 * i);
            if (use_bytes(c, i) > 0)
                mw_emit(snap, &MEM, use_bytes(c, i), "namespace", "ml", "pod", key, "container",
                        "main", "gpu", c == 0 ? "0" : "1", MW_END);
        }
        dr_history_push(&h, dr_frame_from(snap, NULL, &h.pool));
        mw_snapshot_free(snap);
    }
    size_t n = dr_history_len(&h), shared = 0;
    assert_int_equal(n, 61);
    for (size_t j = 0; j < n; j++) {
        const dr_frame *f = dr_history_at(&h, j);
        int i = (int)(f->t_ms / 1000);
        assert_int_equal(f->nuses, 3);
        for (size_t u = 0; u < f->nuses; u++) {
            const char *key = dr_frame_ident(f, f->uses[u].container)->key;
            int c = key[1] - '0';
            assert_string_equal(f->gpus[f->uses[u].gpu].id, c == 0 ? "0" : "1");
            assert_true(f->uses[u].mem_bytes == use_bytes(c, i));
        }
        if (j && f->uses == dr_history_at(&h, j - 1)->uses) shared++;
    }
    /* packed frames 40-98 share the frame before's but at 70 (memory), 85
     * and 90 (containers): 59 - 3; 40 shares the copy that 39 got when it
     * became the oldest */
    assert_int_equal(shared, 56);
    dr_history_free(&h);
}

static void cpuset_parser(void **state)
{
    (void)state;
    uint64_t bits[2];
    assert_int_equal(dr_parse_cpuset("0-3,64\n", bits, 128), 5);
    assert_true(bits[0] == 0xf && bits[1] == 1);
    assert_int_equal(dr_parse_cpuset("\n", bits, 128), 0);
    assert_int_equal(dr_parse_cpuset("128\n", bits, 128), -1);
    assert_int_equal(dr_parse_cpuset("3-1", bits, 128), -1);
}

int main(void)
{
    mw_log_set_level(MW_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(healthy_busy_node, teardown),
        cmocka_unit_test_teardown(cpu_governor, teardown),
        cmocka_unit_test_teardown(cpu_throttling, teardown),
        cmocka_unit_test_teardown(cpu_throttling_young_container, teardown),
        cmocka_unit_test_teardown(numa_mismatch, teardown),
        cmocka_unit_test_teardown(gpu_thermal_throttle, teardown),
        cmocka_unit_test_teardown(gpu_power_throttle, teardown),
        cmocka_unit_test_teardown(pcie_downgraded, teardown),
        cmocka_unit_test_teardown(input_bound, teardown),
        cmocka_unit_test_teardown(input_bound_on_io, teardown),
        cmocka_unit_test_teardown(memory_pressure, teardown),
        cmocka_unit_test_teardown(gpu_errors, teardown),
        cmocka_unit_test_teardown(gpu_hardware_event, teardown),
        cmocka_unit_test_teardown(gpu_shared, teardown),
        cmocka_unit_test_teardown(ranking_and_filters, teardown),
        cmocka_unit_test_teardown(json_round_trip, teardown),
        cmocka_unit_test_teardown(config_section, teardown),
        cmocka_unit_test_teardown(history_is_bounded, teardown),
        cmocka_unit_test_teardown(history_shares_strings, teardown),
        cmocka_unit_test_teardown(history_keeps_newest_parts, teardown),
        cmocka_unit_test_teardown(history_packs_between, teardown),
        cmocka_unit_test_teardown(history_finds_values_past_marks, teardown),
        cmocka_unit_test_teardown(history_packs_cpus, teardown),
        cmocka_unit_test_teardown(history_shares_uses, teardown),
        cmocka_unit_test_teardown(cpu_frequency_over_packed_frames, teardown),
        cmocka_unit_test_teardown(cpuset_parser, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
