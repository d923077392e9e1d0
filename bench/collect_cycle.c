/* collect_cycle.c - CPU cost of one collection cycle of every collector.
 *
 *   build/bench_collect_cycle ROOT [CYCLES]
 *
 * Runs the same collector set as `mlwatch agent` against ROOT (a fixture
 * tree, e.g. one made by tests/fixtures/generate-node.sh, or / for this
 * host) and prints CPU time per cycle (thread CPU clock), wall time, and the
 * number of samples per cycle. */
#include "collect/collector.h"
#include "collect/procmap.h"
#include "agent/agent.h"
#include "core/config.h"
#include "core/log.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s ROOT [CYCLES]\n", argv[0]);
        return 2;
    }
    int cycles = argc > 2 ? atoi(argv[2]) : 1000;
    if (cycles < 1) cycles = 1;
    mw_tune_allocator(); /* as main() does for the agent */
    mw_log_set_level(MW_LOG_ERROR);
    mw_config cfg;
    mw_options_register_all();
    mw_config_defaults(&cfg);
    mw_strlcpy(cfg.root, argv[1], sizeof(cfg.root));
    mw_hostfs host;
    if (mw_hostfs_open(&host, cfg.root) < 0) {
        perror(cfg.root);
        return 1;
    }
    mw_procmap *pm = mw_procmap_new(&host);
    mw_env env = {&cfg, &host, pm, NULL, NULL, 0};
    mw_collector_set *set = mw_collector_set_new(&env);

    /* Warm up once (first cycle discovers and caches). */
    mw_snapshot *s = mw_snapshot_new();
    mw_collector_set_run(set, s);
    size_t samples = s->nsamples;
    const mw_family *cg = mw_snapshot_find(s, "mlwatch_container_cpu_seconds_total");
    size_t containers = cg ? cg->nsamples : 0;
    mw_snapshot_free(s);

    int64_t cpu0 = mw_thread_cpu_ns(), wall0 = mw_mono_ns();
    for (int i = 0; i < cycles; i++) {
        s = mw_snapshot_new();
        mw_collector_set_run(set, s);
        mw_snapshot_free(s);
    }
    double cpu_us = (double)(mw_thread_cpu_ns() - cpu0) / 1e3 / cycles;
    double wall_us = (double)(mw_mono_ns() - wall0) / 1e3 / cycles;
    printf("root=%s cycles=%d containers=%zu samples_per_cycle=%zu cpu_per_cycle_us=%.1f "
           "wall_per_cycle_us=%.1f\n",
           cfg.root, cycles, containers, samples, cpu_us, wall_us);
    mw_collector_set_free(set);
    mw_procmap_free(pm);
    mw_hostfs_close(&host);
    return 0;
}
