/* gpu_harness.h - running the gpu collector against the fake NVML library
 * (build/tests/fakenvml/libnvidia-ml.so.1) on a fixture tree, for the
 * test_gpu_*.c files. Static functions: include it once per test file.
 *
 * A session sets interval and --gpu-process-interval to an hour so that the
 * collector's thread polls only when gh_cycle() asks for it
 * (mw_gpu_collector_sync), which makes every cycle see the scenario written
 * just before it. */
#ifndef MW_GPU_HARNESS_H
#define MW_GPU_HARNESS_H

#include "agent/agent.h"
#include "collect/collector.h"
#include "collect/gpu/gpu.h"
#include "collect/procmap.h"
#include "core/log.h"
#include "core/util.h"
#include "testutil.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct gh_session {
    mw_config cfg;
    mw_hostfs host;
    mw_procmap *procmap;
    mw_env env;
    mw_collector_set *set;
    char scenario[512];
} gh_session;

static inline const char *gh_fake_nvml(void)
{
    static char path[1024];
    const char *build = getenv("MLWATCH_BUILD");
    snprintf(path, sizeof(path), "%s/tests/fakenvml/libnvidia-ml.so.1", build ? build : "build");
    return path;
}

/* Replace the scenario file atomically (the fake re-reads it on change). */
static inline void gh_write_scenario(gh_session *s, const char *text)
{
    char tmp[600];
    snprintf(tmp, sizeof(tmp), "%s.tmp", s->scenario);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rename(tmp, s->scenario), 0);
}

static inline const char *gh_fake_rocm(void)
{
    static char path[1024];
    const char *build = getenv("MLWATCH_BUILD");
    snprintf(path, sizeof(path), "%s/tests/fakenvml/librocm_smi64.so.7", build ? build : "build");
    return path;
}

/* Open collectors (e.g. "cgroup,gpu") on the gpu-node fixture with the given
 * scenario and GPU libraries (--nvml-library, --rocm-library values). */
static inline gh_session *gh_open_libs(const char *collectors, const char *scenario,
                                       const char *nvml, const char *rocm)
{
    gh_session *s = mw_xcalloc(1, sizeof(*s));
    snprintf(s->scenario, sizeof(s->scenario), "/tmp/mlwatch-gpu-scenario-%d-%p.txt", (int)getpid(),
             (void *)s);
    gh_write_scenario(s, scenario);
    setenv("FAKE_NVML_SCENARIO", s->scenario, 1);
    mw_options_register_all();
    mw_config_defaults(&s->cfg);
    mw_strlcpy(s->cfg.root, tu_fixture("gpu-node"), sizeof(s->cfg.root));
    char err[256];
    char *argv[] = {"mlwatch",        "metrics",    "--collectors",           (char *)collectors,
                    "--nvml-library", (char *)nvml, "--rocm-library",         (char *)rocm,
                    "--interval",     "1h",         "--gpu-process-interval", "1h"};
    assert_int_equal(
        mw_config_from_args(&s->cfg, MW_ARRAY_LEN(argv), argv, 2, NULL, NULL, 0, err, sizeof(err)),
        0);
    assert_int_equal(mw_hostfs_open(&s->host, s->cfg.root), 0);
    s->procmap = mw_procmap_new(&s->host);
    s->env = (mw_env){&s->cfg, &s->host, s->procmap, NULL, NULL, 0};
    s->set = mw_collector_set_new(&s->env);
    return s;
}

/* Same with the fake NVML (or nvml when not NULL) and no ROCm. */
static inline gh_session *gh_open(const char *collectors, const char *scenario, const char *nvml)
{
    return gh_open_libs(collectors, scenario, nvml ? nvml : gh_fake_nvml(), "none");
}

/* One full GPU poll of the current scenario, then one collection cycle. */
static inline mw_snapshot *gh_cycle(gh_session *s)
{
    assert_int_equal(mw_gpu_collector_sync(), 0);
    mw_snapshot *snap = mw_snapshot_new();
    mw_collector_set_run(s->set, snap);
    return snap;
}

static inline uint64_t gh_errors(gh_session *s)
{
    return mw_collector_set_errors(s->set, "gpu");
}

static inline void gh_close(gh_session *s)
{
    mw_collector_set_free(s->set);
    mw_procmap_free(s->procmap);
    mw_hostfs_close(&s->host);
    unlink(s->scenario);
    free(s);
}

/* fake_nvml_calls(NAME) of the loaded fake library: calls since nvmlInit. */
static inline unsigned long gh_calls(const char *fn)
{
    void *h = dlopen(gh_fake_nvml(), RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    unsigned long (*calls)(const char *);
    void *sym = dlsym(h, "fake_nvml_calls");
    assert_non_null(sym);
    memcpy(&calls, &sym, sizeof(sym));
    unsigned long n = calls(fn);
    dlclose(h);
    return n;
}

/* Sum of the values of family NAME whose `gpu` label is gpu. */
static inline double gh_sum(const mw_snapshot *snap, const char *name, const char *gpu)
{
    const mw_family *f = mw_snapshot_find(snap, name);
    double sum = 0;
    for (const mw_sample *smp = f ? f->first : NULL; smp; smp = smp->next)
        for (uint32_t i = 0; i < smp->nlabels; i++)
            if (strcmp(smp->labels[i].name, "gpu") == 0 && strcmp(smp->labels[i].value, gpu) == 0)
                sum += smp->value;
    return sum;
}

/* Number of samples of NAME with gpu=GPU. */
static inline size_t gh_count(const mw_snapshot *snap, const char *name, const char *gpu)
{
    const mw_family *f = mw_snapshot_find(snap, name);
    size_t n = 0;
    for (const mw_sample *smp = f ? f->first : NULL; smp; smp = smp->next)
        for (uint32_t i = 0; i < smp->nlabels; i++)
            if (strcmp(smp->labels[i].name, "gpu") == 0 && strcmp(smp->labels[i].value, gpu) == 0)
                n++;
    return n;
}

#endif
