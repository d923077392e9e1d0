/* store_query.c - the store module with the PromQL HTTP API over it: the
 * agent's wiring of store/ and query/. The store knows nothing of queries
 * and the query API nothing of modules; this module runs the store module
 * (store/store_module.c) and registers the query API (query/api.c) over
 * it, which answers 503 until the store is open (at start, or when a store
 * that could not open comes back), with the metadata for /api/v1/metadata
 * noted from each snapshot and from remote-write requests. It also runs
 * the rule evaluator (rules/rules.h) over the same store: recording rules
 * and alerts, /api/v1/rules and /api/v1/alerts, reloaded on SIGHUP. */
#include "module.h"
#include "../core/util.h"
#include "../core/log.h"
#include "../query/api.h"
#include "../rules/rules.h"
#include "../ship/rw_config.h"
#include "../store/store_module.h"

#include <stdatomic.h>
#include <stdlib.h>

typedef struct store_query {
    void *store_module; /* mw_module_store's state */
    const mw_config *cfg;
    mw_query_api api; /* registered with the routes; api.meta from then on */
    mw_rules *rules;  /* NULL: no rules configured */
    int hub;
} store_query;

static void note_metadata(void *ctx, const mw_rw_metadata *meta)
{
    mw_metadata_set(ctx, meta->name, meta->type, meta->help, meta->unit);
}

static void store_opened(void *ctx, mw_store *store)
{
    store_query *q = ctx;
    atomic_store(&q->api.store, store);
    if (q->rules) mw_rules_set_store(q->rules, store);
}

/* The rule files are read with the routes (the agent only, never a
 * one-shot command); a bad one leaves the agent without rules
 * (and says why) until a reload, while the store and its API serve on. */
static void open_rules(store_query *q)
{
    const mw_rw_settings *rw = mw_config_group(q->cfg, &mw_rw_options);
    mw_tpl_kv ext[MW_RW_MAX_EXTERNAL];
    for (size_t i = 0; i < rw->external.n; i++)
        ext[i] = (mw_tpl_kv){rw->external.names[i], rw->external.values[i]};
    mw_rules_context ctx = {.hub = q->hub,
                            .remote_writes = rw->url[0] || rw->list,
                            .external_labels = ext,
                            .nexternal = rw->external.n};
    char err[2048];
    int bad;
    q->rules =
        mw_rules_new(mw_config_group(q->cfg, &mw_rules_options), &ctx, &bad, err, sizeof(err));
    if (bad)
        mw_log(MW_LOG_ERROR, "rules",
               "no rules loaded: %s (fix it and reload: SIGHUP or POST "
               "/-/reload)",
               err);
}

static int store_query_init(const mw_env *env, void **state)
{
    void *inner = NULL;
    int rc = mw_module_store.init(env, &inner);
    if (rc != 0) return rc;
    store_query *q = mw_xcalloc(1, sizeof(*q));
    q->store_module = inner;
    q->cfg = env->cfg;
    *state = q;
    q->hub = env->hub;
    return 0;
}

static void store_query_routes(void *state, mw_http_server *http)
{
    store_query *q = state;
    q->api.meta = mw_metadata_new();
    open_rules(q); /* before the store opens: store_opened hands it over */
    mw_store_module_on_open(q->store_module, store_opened, q);
    mw_store_module_on_metadata(q->store_module, note_metadata, q->api.meta);
    mw_module_store.routes(q->store_module, http);
    mw_query_api_set_limits(&q->api, mw_config_group(q->cfg, &mw_query_options));
    mw_query_api_register(http, &q->api);
    if (q->rules) {
        mw_rules_routes(q->rules, http);
        if (mw_rules_start(q->rules) < 0)
            mw_log(MW_LOG_ERROR, "rules", "cannot start the rule evaluator's thread");
    }
}

static void store_query_reload(void *state)
{
    store_query *q = state;
    char err[2048];
    if (q->rules && mw_rules_reload(q->rules, err, sizeof(err)) < 0)
        mw_log(MW_LOG_ERROR, "rules", "reload failed, the previous rules stay in force: %s", err);
}

static void store_query_derive(void *state, mw_snapshot *snap)
{
    store_query *q = state;
    mw_module_store.derive(q->store_module, snap);
    if (q->rules) mw_rules_emit(q->rules, snap);
}

static void store_query_consume(void *state, const mw_snapshot *snap)
{
    store_query *q = state;
    if (q->api.meta && mw_store_module_store(q->store_module))
        mw_metadata_note_snapshot(q->api.meta, snap);
    mw_module_store.consume(q->store_module, snap);
}

static int store_query_ready(void *state, char *why, size_t size)
{
    store_query *q = state;
    return mw_module_store.ready(q->store_module, why, size);
}

static void store_query_destroy(void *state)
{
    store_query *q = state;
    if (!q) return;
    mw_rules_free(q->rules); /* its thread stops before the store closes */
    mw_module_store.destroy(q->store_module);
    mw_metadata_free(q->api.meta);
    free(q);
}

const mw_module mw_module_store_query = {
    .name = "store",
    .options = &mw_store_module_options, /* the PromQL engine's: agent/options.c */
    .init = store_query_init,
    .routes = store_query_routes,
    .derive = store_query_derive,
    .consume = store_query_consume,
    .destroy = store_query_destroy,
    .ready = store_query_ready,
    .reload = store_query_reload,
};
