/* gpu_collect.c - cost of GPU collection with the fake NVML library.
 *
 *   build/bench_gpu_collect FAKE_LIBNVML [MLWATCH_BIN]
 *
 * 1. The NVML backend on its own (what the GPU thread spends, without the
 *    driver: the fake answers in about a microsecond where a real driver
 *    takes tens of microseconds to milliseconds per call): one fast poll
 *    (utilization, memory, power, energy, temperature, clocks) and one slow
 *    poll (process list, process utilization, MIG, ECC, PCIe, NVLink) per
 *    GPU, with 0 and 100 processes on the GPU; the difference is the cost
 *    per process.
 * 2. The collection cycle (main thread) of the cgroup and gpu collectors on
 *    a node of 100 pods (tests/fixtures/generate-node.sh) with 8 GPUs and
 *    100 GPU processes: copying the published state, mapping processes to
 *    pods and emitting every family.
 * 3. With MLWATCH_BIN: the resident memory of `mlwatch agent` on that node,
 *    every collector on, store on and off, with the fake GPUs and with
 *    --nvml-library none: after MLWATCH_BENCH_RSS_SECONDS (default 30) of
 *    cycles at 100 ms and 5 scrapes, the largest of 50 samples over 5 s,
 *    broken down by mapping (libraries, executable, heap, stacks), and the
 *    peak since the start (VmHWM: the moments between the samples, such
 *    as a head snapshot being written, included).
 *    MLWATCH_BENCH_RSS_DEFAULT_ONLY=1 runs only the default agent (8 GPUs,
 *    store on): a quarter of the time, for the 400-s steady state.
 * Run from the repository root (it calls tests/fixtures/generate-node.sh). */
#include "collect/collector.h"
#include "collect/gpu/gpu.h"
#include "collect/procmap.h"
#include "agent/agent.h"
#include "core/config.h"
#include "core/log.h"
#include "core/util.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static char scenario_path[256];
static char node[256];
static int pids[4096];
static int npids;

static void write_scenario(int gpus, int procs_per_gpu, int use_node_pids)
{
    FILE *f = fopen(scenario_path, "w");
    if (!f) exit(1);
    for (int g = 0; g < gpus; g++) {
        fprintf(f,
                "gpu %d name=\"NVIDIA H100 80GB HBM3\" uuid=GPU-%08d bus=00000000:%02X:00.0 "
                "numa=%d cpus=0-47 util=%d memutil=30 memtotal=85520809984 memused=40000000000 "
                "power_mw=500000 limit_mw=700000 energy_mj=123456789 temp=50 sm_mhz=1980 "
                "sm_max_mhz=1980 mem_mhz=2619 mem_max_mhz=2619 reasons=1 ecc_corrected=1 "
                "remapped=0,0,0,0 pcie_gen=5 pcie_gen_max=5 pcie_width=16 pcie_width_max=16\n",
                g, g, 0x18 + g, g / 4, 50 + g);
        for (int l = 0; l < 18; l++)
            fprintf(f, "nvlink gpu=%d link=%d crc_flit=%d\n", g, l, l);
        for (int p = 0; p < procs_per_gpu; p++) {
            int pid = use_node_pids && npids ? pids[(g * procs_per_gpu + p) % npids]
                                             : 100000 + g * 1000 + p;
            fprintf(f, "proc gpu=%d pid=%d mem=%d sm=%d\n", g, pid, 1 << 28, p % 90 + 1);
        }
    }
    fclose(f);
}

static double now_s(void)
{
    return (double)mw_mono_ns() / 1e9;
}

static void sink_error(void *ctx, unsigned dev, const char *call, const char *what)
{
    (void)ctx;
    fprintf(stderr, "gpu%u %s: %s\n", dev, call, what);
}

static void sink_xid(void *ctx, unsigned dev, uint64_t xid)
{
    (void)ctx;
    (void)dev;
    (void)xid;
}

/* Microseconds per device of one poll of the given kind. */
static double backend_cost(const char *lib, int gpus, int procs, unsigned what, int rounds)
{
    write_scenario(gpus, procs, 0);
    mw_gpu_backend b;
    char why[256];
    if (mw_gpu_nvml_open(&b, lib, NULL, why, sizeof(why)) < 0) {
        fprintf(stderr, "%s\n", why);
        exit(1);
    }
    mw_gpu_sink sink = {NULL, sink_error, sink_xid};
    mw_gpu_dev *devs = mw_xcalloc((size_t)gpus, sizeof(*devs));
    for (int g = 0; g < gpus; g++)
        b.identify(b.impl, (unsigned)g, &devs[g], &sink);
    for (int g = 0; g < gpus; g++)
        b.poll(b.impl, (unsigned)g, &devs[g], MW_GPU_FAST | MW_GPU_SLOW, &sink);
    double t0 = now_s();
    for (int r = 0; r < rounds; r++)
        for (int g = 0; g < gpus; g++)
            b.poll(b.impl, (unsigned)g, &devs[g], what, &sink);
    double us = (now_s() - t0) * 1e6 / rounds / gpus;
    if (procs && (int)devs[0].nprocs != procs) fprintf(stderr, "expected %d processes\n", procs);
    b.close(b.impl);
    free(devs);
    return us;
}

static void read_node_pids(void)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd),
             "find '%s/sys/fs/cgroup/kubepods.slice' -name cgroup.procs -path '*cri-containerd*' "
             "-exec cat {} + 2>/dev/null",
             node);
    FILE *p = popen(cmd, "r");
    if (!p) return;
    while (npids < 4096 && fscanf(p, "%d", &pids[npids]) == 1)
        npids++;
    pclose(p);
}

/* Microseconds of the gpu collector per cycle (main thread). */
static double cycle_cost(const char *lib, int cycles, size_t *samples)
{
    mw_config cfg;
    mw_options_register_all();
    mw_config_defaults(&cfg);
    char err[256];
    char *argv[] = {"x",
                    "x",
                    "--root",
                    node,
                    "--collectors",
                    "cgroup,gpu",
                    "--nvml-library",
                    (char *)lib,
                    "--rocm-library",
                    "none",
                    "--interval",
                    "1h",
                    "--gpu-process-interval",
                    "1h"};
    if (mw_config_from_args(&cfg, MW_ARRAY_LEN(argv), argv, 2, NULL, NULL, 0, err, sizeof(err)) <
        0) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    mw_hostfs host;
    if (mw_hostfs_open(&host, node) < 0) exit(1);
    mw_procmap *pm = mw_procmap_new(&host);
    mw_env env = {&cfg, &host, pm, NULL, NULL, 0};
    mw_collector_set *set = mw_collector_set_new(&env);
    mw_gpu_collector_sync();
    mw_snapshot *s = mw_snapshot_new();
    mw_collector_set_run(set, s);
    const mw_family *f = mw_snapshot_find(s, "mlwatch_container_gpu_memory_used_bytes");
    *samples = f ? f->nsamples : 0;
    mw_snapshot_free(s);
    double total = 0;
    for (int i = 0; i < cycles; i++) {
        s = mw_snapshot_new();
        mw_collector_set_run(set, s);
        double v;
        if (mw_snapshot_get(s, "mlwatch_collector_duration_seconds", &v, "collector", "gpu", "gpu",
                            "", MW_END) == 0)
            total += v;
        mw_snapshot_free(s);
    }
    mw_collector_set_free(set);
    mw_procmap_free(pm);
    mw_hostfs_close(&host);
    return total * 1e6 / cycles;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0)
        exit(1);
    close(fd);
    return ntohs(a.sin_port);
}

static size_t scrape(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        if (fd >= 0) close(fd);
        return 0;
    }
    static const char req[] =
        "GET /metrics HTTP/1.0\r\nHost: localhost\r\nAccept-Encoding: gzip\r\n\r\n";
    if (write(fd, req, sizeof(req) - 1) < 0) {
        close(fd);
        return 0;
    }
    char buf[65536];
    size_t total = 0;
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        total += (size_t)n;
    close(fd);
    return total;
}

/* Resident memory of a process, by kind of mapping (kB). */
typedef struct rss_parts {
    long total, libs, exe, anon, stacks;
    long hwm; /* VmHWM: the largest RSS since the start, at the end */
} rss_parts;

/* The process's peak RSS so far (kB), or 0. */
static long read_hwm(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = 0;
    if (!f) return 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
    fclose(f);
    return kb;
}

/* Reads /proc/PID/smaps: file-backed mappings of shared libraries, of the
 * executable, thread stacks ([stack] and the 8 MiB anonymous mappings that
 * glibc gives each thread), and the rest of the anonymous memory (the heap,
 * mmap'ed allocations). */
static void read_rss(pid_t pid, const char *bin, rss_parts *r)
{
    char path[64], line[512], name[400] = "";
    snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
    memset(r, 0, sizeof(*r));
    FILE *f = fopen(path, "r");
    if (!f) return;
    const char *base = strrchr(bin, '/') ? strrchr(bin, '/') + 1 : bin;
    unsigned long lo = 0, hi = 0;
    while (fgets(line, sizeof(line), f)) {
        long kb;
        /* A mapping: "lo-hi perms offset dev inode [name]"; fields are "Name: value". */
        if (!isupper((unsigned char)line[0])) {
            name[0] = '\0';
            if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %399s", &lo, &hi, name) < 2) lo = hi = 0;
            continue;
        }
        if (sscanf(line, "Rss: %ld kB", &kb) != 1) continue;
        r->total += kb;
        const char *b = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
        if (strstr(b, ".so"))
            r->libs += kb;
        else if (name[0] == '/' && strcmp(b, base) == 0)
            r->exe += kb;
        else if (strcmp(name, "[stack]") == 0 || (!name[0] && hi - lo == 8u << 20))
            r->stacks += kb;
        else if (!name[0] || strcmp(name, "[heap]") == 0)
            r->anon += kb;
    }
    fclose(f);
}

/* Runs the agent for `seconds` (10 cycles a second), scrapes it 5 times, then
 * samples its RSS every 100 ms for 5 s more: *r gets the largest sample
 * (the head's open chunks fill and are cut continuously, so RSS moves). */
static void agent_rss(const char *bin, const char *lib, int store, int seconds, rss_parts *r,
                      size_t *bytes)
{
    int port = free_port();
    char listen[64];
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, 2);
        char dir[300];
        snprintf(dir, sizeof(dir), "%s-data", node); /* never /var/lib/mlwatch */
        execl(bin, bin, "agent", "--root", node, "--listen", listen, "--nvml-library", lib,
              "--rocm-library", "none", "--interval", "100ms", "--gpu-process-interval", "100ms",
              "--data-dir", dir, "--state-dir", dir, store ? "--store=true" : "--store=false",
              (char *)NULL);
        _exit(127);
    }
    usleep((useconds_t)seconds * 1000000);
    *bytes = 0;
    for (int i = 0; i < 5; i++)
        *bytes = scrape(port);
    memset(r, 0, sizeof(*r));
    for (int i = 0; i < 50; i++) {
        rss_parts now;
        read_rss(pid, bin, &now);
        if (now.total > r->total) *r = now;
        usleep(100000);
    }
    r->hwm = read_hwm(pid);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s-data'", node);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s-data\n", node);
}

static void print_rss(const char *what, const rss_parts *r, size_t bytes)
{
    long other = r->total - r->libs - r->exe - r->anon - r->stacks;
    printf("  %-18s RSS %5.1f MiB: libraries %.1f, executable %.1f, heap and anonymous %.1f, "
           "stacks %.2f, other %.2f; peak since start (VmHWM) %.1f MiB (gzip'd scrape %zu "
           "bytes)\n",
           what, r->total / 1024.0, r->libs / 1024.0, r->exe / 1024.0, r->anon / 1024.0,
           r->stacks / 1024.0, other / 1024.0, r->hwm / 1024.0, bytes);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s FAKE_LIBNVML [MLWATCH_BIN]\n", argv[0]);
        return 2;
    }
    const char *lib = argv[1];
    mw_log_set_level(MW_LOG_ERROR);
    snprintf(scenario_path, sizeof(scenario_path), "/tmp/mlwatch-bench-gpu-%d.txt", (int)getpid());
    snprintf(node, sizeof(node), "/tmp/mlwatch-bench-node-%d", (int)getpid());
    setenv("FAKE_NVML_SCENARIO", scenario_path, 1);
    setenv("FAKE_NVML_RELOAD", "0", 1); /* the fake reads the scenario once */

    int rounds = 2000;
    double fast = backend_cost(lib, 8, 0, MW_GPU_FAST, rounds);
    double slow0 = backend_cost(lib, 8, 0, MW_GPU_SLOW, rounds / 4);
    double slow100 = backend_cost(lib, 8, 100, MW_GPU_SLOW, rounds / 4);
    printf("backend (GPU thread), 8 GPUs, per GPU: fast poll %.1f us, slow poll %.1f us "
           "(0 processes), %.1f us (100 processes): %.2f us per process\n",
           fast, slow0, slow100, (slow100 - slow0) / 100);

    char cmd[600];
    snprintf(cmd, sizeof(cmd), "tests/fixtures/generate-node.sh 299 '%s' >/dev/null", node);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot run tests/fixtures/generate-node.sh (run from the repository)\n");
        return 1;
    }
    read_node_pids();
    write_scenario(8, 13, 1); /* 104 processes of the node's pods over 8 GPUs */
    size_t samples;
    double cyc = cycle_cost(lib, 500, &samples);
    printf("collection cycle (main thread): gpu collector %.1f us per cycle for 8 GPUs, 104 "
           "processes, %zu container memory samples\n",
           cyc, samples);
    if (argc > 2) {
        const char *env = getenv("MLWATCH_BENCH_RSS_SECONDS");
        int seconds = env && atoi(env) > 0 ? atoi(env) : 30;
        printf("mlwatch agent, 100 pods (299 containers), all collectors, %d s at 100 ms, largest "
               "RSS of the next 5 s:\n",
               seconds);
        const char *only = getenv("MLWATCH_BENCH_RSS_DEFAULT_ONLY");
        if (only && atoi(only) > 0) {
            rss_parts r;
            size_t bytes;
            agent_rss(argv[2], lib, 1, seconds, &r, &bytes);
            print_rss("8 GPUs, store on:", &r, bytes);
            snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", node, scenario_path);
            if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", node);
            return 0;
        }
        for (int store = 1; store >= 0; store--) {
            rss_parts r, r0;
            size_t bytes, bytes0;
            agent_rss(argv[2], lib, store, seconds, &r, &bytes);
            agent_rss(argv[2], "none", store, seconds, &r0, &bytes0);
            print_rss(store ? "8 GPUs, store on:" : "8 GPUs, store off:", &r, bytes);
            print_rss(store ? "no GPU, store on:" : "no GPU, store off:", &r0, bytes0);
        }
    }
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", node, scenario_path);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", node);
    return 0;
}
