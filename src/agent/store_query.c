/* store_query.c - the store module with the PromQL HTTP API over it: the
 * agent's wiring of store/ and query/. The store knows nothing of queries
 * and the query API nothing of modules; this module runs the store module
 * (store/store_module.c) and registers the query API (query/api.c) over
 * it, which answers 503 until the store is open (at start, or when a store
 * that could not open comes back), with the metadata for /api/v1/metadata
 * noted from each snapshot and from remote-write requests. */
#include "module.h"
#include "../core/util.h"
#include "../query/api.h"
#include "../store/store_module.h"

#include <stdatomic.h>
#include <stdlib.h>

typedef struct store_query {
    void *store_module; /* mw_module_store's state */
    const mw_config *cfg;
    mw_query_api api; /* registered with the routes; api.meta from then on */
} store_query;

static void note_metadata(void *ctx, const mw_rw_metadata *meta)
{
    mw_metadata_set(ctx, meta->name, meta->type, meta->help, meta->unit);
}

static void store_opened(void *ctx, mw_store *store)
{
    store_query *q = ctx;
    atomic_store(&q->api.store, store);
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
    return 0;
}

static void store_query_routes(void *state, mw_http_server *http)
{
    store_query *q = state;
    q->api.meta = mw_metadata_new();
    mw_store_module_on_open(q->store_module, store_opened, q);
    mw_store_module_on_metadata(q->store_module, note_metadata, q->api.meta);
    mw_module_store.routes(q->store_module, http);
    mw_query_api_set_limits(&q->api, mw_config_group(q->cfg, &mw_query_options));
    mw_query_api_register(http, &q->api);
}

static void store_query_derive(void *state, mw_snapshot *snap)
{
    store_query *q = state;
    mw_module_store.derive(q->store_module, snap);
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
};
