/* collector.c - runs the enabled collectors each cycle and accounts for
 * their cost and errors. */
#include "collector.h"
#include "../core/log.h"
#include "../core/util.h"
#include "../mlwatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct active {
    const mw_collector *c;
    void *state;
    uint64_t errors_total;
    double last_duration_s;
} active;

struct mw_collector_set {
    const mw_env *env;
    active *items;
    size_t n;
    mw_buf scratch;
    int64_t start_ms;
};

/* clang-format off */
MW_METRIC(DURATION, MW_GAUGE, "mlwatch_collector_duration_seconds", "seconds", "Wall-clock time the collector took in the last collection cycle.");
MW_METRIC(ERRORS, MW_COUNTER, "mlwatch_collector_errors_total", "", "Problems the collector met (unreadable or malformed files, vanished items) since start.");
MW_METRIC(BUILD_INFO, MW_INFO, "mlwatch_build_info", "", "Version of the running mlwatch; the value is always 1.");
MW_METRIC(START_TIME, MW_GAUGE, "mlwatch_start_time_seconds", "seconds", "When the agent started, seconds since the epoch.");
/* clang-format on */

void mw_collect_error(mw_collect_ctx *ctx, const char *path, int err, const char *what)
{
    ctx->errors++;
    char key[512];
    snprintf(key, sizeof(key), "%s|%s", path, what ? what : "");
    if (err)
        mw_log_once(MW_LOG_WARN, ctx->collector, key, "%s: %s%s%s", path, strerror(-err),
                    what ? ": " : "", what ? what : "");
    else
        mw_log_once(MW_LOG_WARN, ctx->collector, key, "%s: %s", path, what ? what : "error");
}

const char *mw_collect_read(mw_collect_ctx *ctx, const char *path, size_t max)
{
    int rc = mw_hostfs_read(ctx->env->host, path, ctx->scratch, max);
    if (rc < 0) {
        mw_collect_error(ctx, path, rc, NULL);
        return NULL;
    }
    return ctx->scratch->data ? ctx->scratch->data : "";
}

const mw_collector *mw_collector_find(const char *name)
{
    for (size_t i = 0; i < mw_ncollectors; i++)
        if (strcmp(mw_collectors[i]->name, name) == 0) return mw_collectors[i];
    return NULL;
}

int (*mw_collector_name_check)(const char *name);

static int check_collector(const char *v, char *why, size_t n)
{
    if (mw_collector_name_check ? mw_collector_name_check(v) : mw_collector_find(v) != NULL)
        return 0;
    snprintf(why, n, "no collector named '%s' (see `mlwatch help`)", v);
    return -1;
}

/* clang-format off */
static const mw_option set_rows[] = {
    MW_OPT_LIST_OF(mw_collector_set_settings, "collectors", collectors, ncollectors, "all", check_collector, "Comma-separated collectors to run"),
    MW_OPT_LIST_OF(mw_collector_set_settings, "disable-collectors", disable_collectors, ndisable_collectors, "none", check_collector, "Comma-separated collectors to switch off"),
};
/* clang-format on */
const mw_option_group mw_collector_set_options = MW_OPTION_GROUP(
    "collectors", "src/collect/collector.c", mw_collector_set_settings, set_rows, NULL);

static int listed(const char (*list)[32], size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], name) == 0) return 1;
    return 0;
}

mw_collector_set *mw_collector_set_new(const mw_env *env)
{
    mw_collector_set *set = mw_xcalloc(1, sizeof(*set));
    set->env = env;
    set->items = mw_xcalloc(mw_ncollectors, sizeof(active));
    set->start_ms = mw_now_ms();
    mw_buf_init(&set->scratch, MW_HOSTFS_MAX_FILE + 1);
    const mw_collector_set_settings *cfg = mw_config_group(env->cfg, &mw_collector_set_options);
    for (size_t i = 0; i < mw_ncollectors; i++) {
        const mw_collector *c = mw_collectors[i];
        if (cfg->ncollectors && !listed(cfg->collectors, cfg->ncollectors, c->name)) continue;
        if (listed(cfg->disable_collectors, cfg->ndisable_collectors, c->name)) continue;
        void *state = NULL;
        if (c->init) {
            int rc = c->init(env, &state);
            if (rc == MW_COLLECTOR_ABSENT) continue;
            if (rc < 0) {
                mw_log(MW_LOG_WARN, c->name, "collector disabled: initialisation failed (%s)",
                       strerror(-rc));
                continue;
            }
        }
        set->items[set->n].c = c;
        set->items[set->n].state = state;
        set->n++;
    }
    return set;
}

void mw_collector_set_run(mw_collector_set *set, mw_snapshot *snap)
{
    for (size_t i = 0; i < set->n; i++) {
        active *a = &set->items[i];
        mw_collect_ctx ctx = {set->env, snap, a->c->name, 0, &set->scratch};
        int64_t t0 = mw_mono_ns();
        a->c->collect(a->state, &ctx);
        a->last_duration_s = (double)(mw_mono_ns() - t0) / 1e9;
        a->errors_total += ctx.errors;
    }
    for (size_t i = 0; i < set->n; i++)
        mw_emit(snap, &DURATION, set->items[i].last_duration_s, "collector", set->items[i].c->name,
                MW_END);
    for (size_t i = 0; i < set->n; i++)
        mw_emit(snap, &ERRORS, (double)set->items[i].errors_total, "collector",
                set->items[i].c->name, MW_END);
    mw_emit(snap, &BUILD_INFO, 1, "version", MLWATCH_VERSION, "revision", MLWATCH_REVISION, MW_END);
    mw_emit(snap, &START_TIME, (double)set->start_ms / 1000.0, MW_END);
}

uint64_t mw_collector_set_errors(const mw_collector_set *set, const char *name)
{
    for (size_t i = 0; i < set->n; i++)
        if (strcmp(set->items[i].c->name, name) == 0) return set->items[i].errors_total;
    return 0;
}

void mw_collector_set_free(mw_collector_set *set)
{
    if (!set) return;
    for (size_t i = 0; i < set->n; i++)
        if (set->items[i].c->destroy) set->items[i].c->destroy(set->items[i].state);
    free(set->items);
    mw_buf_free(&set->scratch);
    free(set);
}
