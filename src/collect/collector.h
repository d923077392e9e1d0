/* collector.h - the collector interface and registry.
 *
 * A collector is one file that reads one part of the host and adds samples
 * to the cycle's snapshot. It registers itself with a mw_collector struct:
 *
 *   const mw_collector mw_collector_loadavg = {
 *       .name = "loadavg", .help = "Load averages from /proc/loadavg",
 *       .collect = loadavg_collect,
 *   };
 *
 * and a line in registry.c. A collector with settings declares them in its
 * own file (an mw_option_group, see core/options.h) and points .options at
 * it; it reads them with mw_config_group(env->cfg, &its_group). init() runs once at start and may
 * decide the collector has nothing to do on this host (MW_COLLECTOR_ABSENT: it logs one informative
 * line and stays off). collect() runs every interval; it reports each problem with
 * mw_collect_error(), which counts it in mlwatch_collector_errors_total and logs it once per path,
 * and it carries on with the next item. A collector never aborts the cycle.
 *
 * Parsing is kept apart from reading (functions taking a buffer) so that
 * every parser can be unit-tested and fuzzed without a host. */
#ifndef MW_COLLECTOR_H
#define MW_COLLECTOR_H

#include "../core/buf.h"
#include "../core/config.h"
#include "../core/hostfs.h"
#include "../core/snapshot.h"

#include <stdint.h>

#define MW_COLLECTOR_ABSENT 1

typedef struct mw_procmap mw_procmap;
typedef struct mw_kube_inputs mw_kube_inputs;
typedef struct mw_node_health mw_node_health;

/* What every collector may use; lives as long as the agent. */
typedef struct mw_env {
    const mw_config *cfg;
    const mw_hostfs *host;
    mw_procmap *procmap; /* pid -> container, filled by the cgroup collector */
    /* The Kubernetes inputs (kube/kube_module.h), filled by the kube module
     * at init for the modules after it; NULL where there are none (tests). */
    mw_kube_inputs *kube;
    /* The node's GPU health verdict (collect/node_health.h): published by
     * whoever judges GPU health, read by the Node condition; NULL where
     * there is none (one-shot commands, tests). */
    mw_node_health *node_health;
    int hub; /* `mlwatch hub`: nothing is collected (agent/agent.c) */
} mw_env;

typedef struct mw_collect_ctx {
    const mw_env *env;
    mw_snapshot *snap;
    const char *collector; /* name of the running collector */
    uint64_t errors;       /* errors reported during this run */
    mw_buf *scratch;       /* reusable file buffer, cleared by each read */
} mw_collect_ctx;

typedef struct mw_collector {
    const char *name;
    const char *help;
    /* Its settings (options.h), when it has any; collectors may share one
     * group (the GPU backends). */
    const mw_option_group *options;
    int (*init)(const mw_env *env, void **state); /* optional */
    void (*collect)(void *state, mw_collect_ctx *ctx);
    void (*destroy)(void *state); /* optional */
} mw_collector;

/* Count and log (once per path per quiet period) a problem with one item.
 * err is a negative errno (or 0 when what says it all). */
void mw_collect_error(mw_collect_ctx *ctx, const char *path, int err, const char *what);

/* Read one host file (at most max bytes, 0 = the default bound) into the
 * context's scratch buffer. Returns its text ("" when empty), or NULL after
 * reporting the failure with mw_collect_error(). Valid until the next read. */
const char *mw_collect_read(mw_collect_ctx *ctx, const char *path, size_t max);

/* All collectors compiled in, in the order they run. */
extern const mw_collector *const mw_collectors[];
extern const size_t mw_ncollectors;
const mw_collector *mw_collector_find(const char *name);

/* Which collectors run: --collectors and --disable-collectors. */
typedef struct mw_collector_set_settings {
    char collectors[MW_MAX_LIST][32]; /* empty = all */
    size_t ncollectors;
    char disable_collectors[MW_MAX_LIST][32]; /* applied after collectors */
    size_t ndisable_collectors;
} mw_collector_set_settings;
extern const mw_option_group mw_collector_set_options;
/* Which names --collectors accepts: NULL (the default) is the registry;
 * tests of the configuration set a list of their own. */
extern int (*mw_collector_name_check)(const char *name);

/* A set of initialised, enabled collectors with their running totals. */
typedef struct mw_collector_set mw_collector_set;

/* Initialise the collectors that cfg enables. Never fails: a collector whose
 * init fails is reported and left off. */
mw_collector_set *mw_collector_set_new(const mw_env *env);
/* Run every active collector once into snap, then add the self-metrics
 * (mlwatch_collector_duration_seconds, mlwatch_collector_errors_total, ...). */
void mw_collector_set_run(mw_collector_set *set, mw_snapshot *snap);
/* Total errors reported so far by the named collector (tests). */
uint64_t mw_collector_set_errors(const mw_collector_set *set, const char *name);
void mw_collector_set_free(mw_collector_set *set);

#endif
