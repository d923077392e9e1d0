/* cpufreq.c - CPU frequency scaling from sys/devices/system/cpu/cpuN/cpufreq.
 *
 * The CPUs that have a cpufreq folder are listed once in init and listed
 * again after a cycle that met an error (a CPU went offline, a driver was
 * unloaded). Offline CPUs are left out: their policy is inactive and its
 * files refuse reads. A host where no CPU has a cpufreq folder (most VMs)
 * has no frequency scaling to report: the collector is absent there. */
#include "collector.h"
#include "../core/log.h"
#include "../core/parse.h"
#include "../core/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CPU_DIR "sys/devices/system/cpu"
#define MAX_CPUS 8192

/* clang-format off */
MW_METRIC(FREQ, MW_GAUGE, "mlwatch_cpu_frequency_hertz", "hertz", "Current CPU frequency as the kernel sees it (scaling_cur_freq, else cpuinfo_cur_freq).");
MW_METRIC(FREQ_MIN, MW_GAUGE, "mlwatch_cpu_frequency_min_hertz", "hertz", "Lowest frequency the governor may pick (scaling_min_freq).");
MW_METRIC(FREQ_MAX, MW_GAUGE, "mlwatch_cpu_frequency_max_hertz", "hertz", "Highest frequency the governor may pick (scaling_max_freq).");
MW_METRIC(HW_MAX, MW_GAUGE, "mlwatch_cpu_hardware_frequency_max_hertz", "hertz", "Highest frequency the CPU supports, turbo included (cpuinfo_max_freq).");
MW_METRIC(GOVERNOR, MW_INFO, "mlwatch_cpu_scaling_governor_info", "", "Frequency scaling governor of each CPU (scaling_governor); the value is always 1.");
/* clang-format on */

typedef struct cpufreq_state {
    int dirfd;      /* sys/devices/system/cpu */
    uint32_t *cpus; /* online CPUs with a cpufreq folder, ascending */
    size_t ncpus, cap;
    int rescan;
} cpufreq_state;

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* "cpu12" -> 12; -1 for anything else (cpufreq, cpuidle, cpu01, ...). */
static int64_t cpu_number(const char *name)
{
    if (strncmp(name, "cpu", 3) != 0) return -1;
    const char *p = name + 3;
    uint64_t id;
    if ((p[0] == '0' && p[1]) || mw_parse_u64(&p, &id) < 0 || *p || id >= UINT32_MAX) return -1;
    return (int64_t)id;
}

static void scan(cpufreq_state *st)
{
    st->ncpus = 0;
    DIR *d = mw_fdopendir_dup(st->dirfd);
    if (!d) return;
    /* The dup shares the file offset that the previous listing left at the
     * end of the directory. */
    rewinddir(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        int64_t id = cpu_number(e->d_name);
        if (id < 0) continue;
        char path[64];
        struct stat sb;
        snprintf(path, sizeof(path), "cpu%u/cpufreq", (unsigned)id);
        if (fstatat(st->dirfd, path, &sb, 0) < 0 || !S_ISDIR(sb.st_mode)) continue;
        uint64_t online;
        snprintf(path, sizeof(path), "cpu%u/online", (unsigned)id);
        if (mw_read_u64at(st->dirfd, path, &online) == 0 && online == 0) continue;
        if (st->ncpus == st->cap) {
            if (st->cap >= MAX_CPUS) {
                mw_log_once(MW_LOG_WARN, "cpufreq", "cpufreq|max-cpus",
                            "more than %d CPUs: the others are not reported", MAX_CPUS);
                break;
            }
            st->cap = st->cap ? st->cap * 2 : 64;
            st->cpus = mw_xrealloc(st->cpus, st->cap * sizeof(*st->cpus));
        }
        st->cpus[st->ncpus++] = (uint32_t)id;
    }
    closedir(d);
    if (st->ncpus > 1) qsort(st->cpus, st->ncpus, sizeof(*st->cpus), cmp_u32);
}

static void cpufreq_destroy(void *state)
{
    cpufreq_state *st = state;
    if (!st) return;
    close(st->dirfd);
    free(st->cpus);
    free(st);
}

static int cpufreq_init(const mw_env *env, void **state)
{
    int fd = mw_hostfs_opendirfd(env->host, CPU_DIR);
    if (fd < 0) {
        mw_log(MW_LOG_INFO, "cpufreq", "no %s (%s): collector off", CPU_DIR, strerror(-fd));
        return MW_COLLECTOR_ABSENT;
    }
    cpufreq_state *st = mw_xcalloc(1, sizeof(*st));
    st->dirfd = fd;
    scan(st);
    if (st->ncpus == 0) {
        mw_log(MW_LOG_INFO, "cpufreq",
               "no CPU has a cpufreq folder (no frequency scaling exposed, as on most VMs): "
               "collector off");
        cpufreq_destroy(st);
        return MW_COLLECTOR_ABSENT;
    }
    *state = st;
    return 0;
}

static void report(mw_collect_ctx *ctx, const char *rel, int rc)
{
    char path[128];
    snprintf(path, sizeof(path), CPU_DIR "/%s", rel);
    if (rc == -EINVAL)
        mw_collect_error(ctx, path, 0, "malformed content");
    else
        mw_collect_error(ctx, path, rc, NULL);
}

/* Read DIR/FILE (kHz) into *hz; path holds DIR (dirlen bytes) on entry. */
static int read_khz(int dirfd, char *path, size_t size, size_t dirlen, const char *file,
                    uint64_t *hz)
{
    mw_strlcpy(path + dirlen, file, size - dirlen);
    uint64_t khz;
    int rc = mw_read_u64at(dirfd, path, &khz);
    if (rc < 0) return rc;
    if (khz > UINT64_MAX / 1000) return -EINVAL;
    *hz = khz * 1000;
    return 0;
}

static int valid_governor(const char *g)
{
    if (!*g) return 0;
    for (; *g; g++)
        if (!((*g >= 'a' && *g <= 'z') || (*g >= 'A' && *g <= 'Z') || (*g >= '0' && *g <= '9') ||
              *g == '_' || *g == '-' || *g == '.'))
            return 0;
    return 1;
}

static void cpufreq_collect(void *state, mw_collect_ctx *ctx)
{
    cpufreq_state *st = state;
    if (st->rescan) {
        scan(st);
        st->rescan = 0;
    }
    uint64_t errors_before = ctx->errors;
    static const struct {
        const char *file;
        const mw_metric_desc *desc;
    } LIMITS[] = {
        {"scaling_min_freq", &FREQ_MIN},
        {"scaling_max_freq", &FREQ_MAX},
        {"cpuinfo_max_freq", &HW_MAX},
    };
    for (size_t i = 0; i < st->ncpus; i++) {
        char id[16], path[96];
        snprintf(id, sizeof(id), "%u", (unsigned)st->cpus[i]);
        size_t dirlen = (size_t)snprintf(path, sizeof(path), "cpu%s/cpufreq/", id);
        uint64_t hz;

        /* Some drivers have only cpuinfo_cur_freq (the hardware's view). */
        int rc = read_khz(st->dirfd, path, sizeof(path), dirlen, "scaling_cur_freq", &hz);
        if (rc == -ENOENT)
            rc = read_khz(st->dirfd, path, sizeof(path), dirlen, "cpuinfo_cur_freq", &hz);
        if (rc < 0)
            report(ctx, path, rc);
        else
            mw_emit(ctx->snap, &FREQ, (double)hz, "cpu", id, MW_END);

        for (size_t k = 0; k < sizeof(LIMITS) / sizeof(LIMITS[0]); k++) {
            rc = read_khz(st->dirfd, path, sizeof(path), dirlen, LIMITS[k].file, &hz);
            if (rc < 0)
                report(ctx, path, rc);
            else
                mw_emit(ctx->snap, LIMITS[k].desc, (double)hz, "cpu", id, MW_END);
        }

        char gov[64];
        mw_strlcpy(path + dirlen, "scaling_governor", sizeof(path) - dirlen);
        rc = mw_read_lineat(st->dirfd, path, gov, sizeof(gov));
        if (rc == 0 && !valid_governor(gov)) rc = -EINVAL;
        if (rc < 0)
            report(ctx, path, rc);
        else
            mw_emit(ctx->snap, &GOVERNOR, 1, "cpu", id, "governor", gov, MW_END);
    }
    if (ctx->errors != errors_before) st->rescan = 1;
}

const mw_collector mw_collector_cpufreq = {
    .name = "cpufreq",
    .help = "CPU frequencies, limits and governors from sys/devices/system/cpu/cpuN/cpufreq",
    .init = cpufreq_init,
    .collect = cpufreq_collect,
    .destroy = cpufreq_destroy,
};
