/* api.h - Prometheus-compatible HTTP query API over the embedded store.
 * Registered by the agent's wiring once the store is open (agent/store_query.c). */
#ifndef MW_QUERY_API_H
#define MW_QUERY_API_H

#include "../core/config.h"
#include "../serve/http.h"
#include "metadata.h"
#include "promql.h"

typedef struct mw_query_api {
    /* NULL: every query answers 503 "store unavailable". Atomic: the store
     * module sets it when a store that could not open comes back. */
    mw_store *_Atomic store;
    pq_limits limits;
    /* Limits on an answer (0: none): its series, its points, its bytes. */
    size_t max_answer_series, max_answer_points, max_answer_bytes;
    mw_metadata *meta; /* for /api/v1/metadata; NULL: an empty answer */
} mw_query_api;

/* The engine's and the answers' limits from the settings (below). */
struct mw_query_settings;
void mw_query_api_set_limits(mw_query_api *api, const struct mw_query_settings *set);
/* api must outlive the server. */
void mw_query_api_register(mw_http_server *http, mw_query_api *api);
/* Prometheus' time parameter: float seconds or RFC 3339. 0, or -1. */
int mw_api_parse_time(const char *s, int64_t *ms);

/* The PromQL engine's limits (api.c), whether the embedded store answers
 * or --query-url does: the longest a query may take, the most samples in
 * memory at once (0: no limit), the lookback delta. */
typedef struct mw_query_settings {
    int64_t timeout_ms;
    double max_samples;
    int64_t lookback_ms;
    int closed_windows;       /* --query-closed-windows: Prometheus 2's windows */
    int delayed_name_removal; /* --query-delayed-name-removal */
    double max_series, max_points;
    uint64_t max_bytes;
} mw_query_settings;
extern const mw_option_group mw_query_options;

#endif
