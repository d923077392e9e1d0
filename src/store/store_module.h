/* store_module.h - the store as an agent module (store_module.c), and what
 * it offers the layers above it without knowing them: the open store (for
 * the query API the agent's wiring registers over it, agent/store_query.c)
 * and the metric metadata that remote-write senders send. */
#ifndef MW_STORE_MODULE_H
#define MW_STORE_MODULE_H

#include "../agent/module.h"
#include "remote_write.h"
#include "store.h"

extern const mw_module mw_module_store;

/* The module's store: NULL before its routes are registered (it opens
 * then, so that one-shot commands never touch the data folder) and while it
 * cannot open (it is retried every second). state is what
 * mw_module_store.init returned. */
mw_store *mw_store_module_store(void *state);

/* Called once with the store when it opens: from the routes when it opens
 * at once, else later from the thread that retries it. Set before the
 * routes are registered; one receiver (NULL: none). */
typedef void (*mw_store_open_fn)(void *ctx, mw_store *store);
void mw_store_module_on_open(void *state, mw_store_open_fn fn, void *ctx);

/* Called with each metadata entry (TYPE, HELP, UNIT of a metric name) of
 * every remote-write request the store accepted, on the HTTP thread that
 * received it. */
typedef void (*mw_store_metadata_fn)(void *ctx, const mw_rw_metadata *meta);
/* Set before the routes are registered; one receiver (NULL: none). */
void mw_store_module_on_metadata(void *state, mw_store_metadata_fn fn, void *ctx);

#endif
