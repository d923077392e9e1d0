/* api_status.c - the query API's endpoints around the queries, answered as
 * Prometheus 2.x/3.x answers them so that Grafana, promtool and the
 * Prometheus UI find what they ask for: /api/v1/status/{buildinfo,
 * runtimeinfo, flags, config, tsdb, walreplay}, /api/v1/targets (an agent
 * scrapes nothing: empty lists), /api/v1/features (Prometheus 3's list, from
 * the function table), /api/v1/query_exemplars (the store keeps no
 * exemplars: an empty answer after the query is checked) and
 * /api/v1/format_query (the expression as pq_format writes it). */
#include "api_internal.h"

#include "../core/util.h"
#include "../mlwatch.h"
#include "promql.h"
#include "qinternal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void rfc3339(int64_t ms, char *out, size_t size)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    char base[32];
    strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, size, "%s.%03dZ", base, (int)(ms % 1000));
}

static char *duration_text(int64_t ms, char *out, size_t size)
{
    if (ms % 60000 == 0)
        snprintf(out, size, "%lldm", (long long)(ms / 60000));
    else if (ms % 1000 == 0)
        snprintf(out, size, "%llds", (long long)(ms / 1000));
    else
        snprintf(out, size, "%lldms", (long long)ms);
    return out;
}

static int64_t started_ms; /* when the API was registered: the agent's start */

/* The version of the Prometheus whose PromQL the engine follows (its
 * semantics and test files, docs/promql.md): what Grafana reads to choose
 * the features of its query editor. */
#define PROMQL_DIALECT_VERSION "3.14.0"

static void buildinfo(mw_query_api *api, mw_http_response *resp)
{
    (void)api;
    api_respond_data(resp, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "version",
                                     PROMQL_DIALECT_VERSION, "revision", MLWATCH_REVISION, "branch",
                                     "mlwatch", "buildUser", "mlwatch", "buildDate", "",
                                     "goVersion", "mlwatch " MLWATCH_VERSION));
}

static void runtimeinfo(mw_query_api *api, mw_http_response *resp)
{
    (void)api;
    char start[40], now[40], cwd[1024];
    rfc3339(started_ms, start, sizeof(start));
    rfc3339(mw_now_ms(), now, sizeof(now));
    if (!getcwd(cwd, sizeof(cwd))) snprintf(cwd, sizeof(cwd), "%s", "");
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    api_respond_data(resp, json_pack("{s:s, s:s, s:s, s:b, s:s, s:i, s:i}", "startTime", start,
                                     "serverTime", now, "CWD", cwd, "reloadConfigSuccess", 1,
                                     "lastConfigTime", start, "corruptionCount", 0, "GOMAXPROCS",
                                     (int)(cpus > 0 ? cpus : 1)));
}

/* The engine's settings under Prometheus's flag names. */
static void flags(mw_query_api *api, mw_http_response *resp)
{
    char to[32], lb[32], ms[32];
    snprintf(ms, sizeof(ms), "%zu", api->limits.max_samples);
    api_respond_data(resp, json_pack("{s:s, s:s, s:s}", "query.timeout",
                                     duration_text(api->limits.timeout_ms, to, sizeof(to)),
                                     "query.lookback-delta",
                                     duration_text(api->limits.lookback_ms, lb, sizeof(lb)),
                                     "query.max-samples", ms));
}

static void config(mw_query_api *api, mw_http_response *resp)
{
    (void)api; /* no Prometheus configuration: the agent's is its flags */
    api_respond_data(resp, json_pack("{s:s}", "yaml", ""));
}

static void tsdb(mw_query_api *api, mw_http_response *resp)
{
    mw_store *st = api->store;
    if (!st) {
        api_respond_json(resp, 503,
                         json_pack("{s:s, s:s, s:s}", "status", "error", "errorType", "unavailable",
                                   "error", "store unavailable"));
        return;
    }
    mw_store_stats s;
    mw_store_get_stats(st, &s);
    api_respond_data(resp, json_pack("{s:{s:I}, s:[], s:[], s:[], s:[]}", "headStats", "numSeries",
                                     (json_int_t)s.series, "seriesCountByMetricName",
                                     "labelValueCountByLabelName", "memoryInBytesByLabelName",
                                     "seriesCountByLabelValuePair"));
}

static void walreplay(mw_query_api *api, mw_http_response *resp)
{
    (void)api; /* the store replays its WAL before the API is registered */
    api_respond_data(resp, json_pack("{s:i, s:i, s:i}", "min", 0, "max", 0, "current", 0));
}

static void targets(mw_query_api *api, mw_http_response *resp)
{
    (void)api;
    api_respond_data(resp, json_pack("{s:[], s:[], s:{}}", "activeTargets", "droppedTargets",
                                     "droppedTargetCounts"));
}

/* Prometheus 3's /api/v1/features: what this engine has, true. */
static void features(mw_query_api *api, mw_http_response *resp)
{
    (void)api;
    json_t *fn = json_object();
    for (size_t i = 0; pq_func_at(i); i++)
        json_object_set_new(fn, pq_func_at(i)->name, json_true());
    static const char *const ops[] = {"+", "-", "*",  "/",  "%",   "^",  "==",     "!=",
                                      ">", "<", ">=", "<=", "and", "or", "unless", "atan2"};
    json_t *op = json_object();
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        json_object_set_new(op, ops[i], json_true());
    static const char *const aggs[] = {"sum",   "avg",     "min",      "max",
                                       "count", "group",   "stddev",   "stdvar",
                                       "topk",  "bottomk", "quantile", "count_values"};
    for (size_t i = 0; i < sizeof(aggs) / sizeof(aggs[0]); i++)
        json_object_set_new(op, aggs[i], json_true());
    api_respond_data(resp, json_pack("{s:{s:b, s:b, s:b}, s:{s:b, s:b, s:b, s:b}, s:o, s:o}", "api",
                                     "query_exemplars", 1, "format_query", 1, "stats", 1, "promql",
                                     "at_modifier", 1, "negative_offset", 1, "subqueries", 1,
                                     "native_histograms", 1, "promql_functions", fn,
                                     "promql_operators", op));
}

/* Has the expression a selector? */
static int has_selector(const pq_node *n)
{
    if (!n) return 0;
    if (n->kind == PQ_VSEL) return 1;
    for (size_t i = 0; i < n->nargs; i++)
        if (has_selector(n->args[i])) return 1;
    return 0;
}

/* The store keeps no exemplars: [] for a valid query with a selector, as a
 * Prometheus without exemplar storage answers, 204 without a selector (as
 * Prometheus 2.42); the parameters are checked as it checks them. */
static void exemplars(mw_query_api *api, const mw_http_request *req, mw_http_response *resp)
{
    (void)api;
    params p;
    api_params_load(&p, req);
    int64_t start, end;
    char err[1024];
    pq_node *n = NULL;
    if (api_time_param(resp, &p, "start", INT64_MIN, &start) < 0 ||
        api_time_param(resp, &p, "end", INT64_MAX, &end) < 0)
        goto done;
    if (end < start) {
        api_respond_error(resp, 400, "end timestamp must not be before start timestamp");
        goto done;
    }
    const char *q = api_param(&p, "query");
    n = pq_parse(q ? q : "", err, sizeof(err));
    if (!n) {
        api_respond_error(resp, 400, "%s", err);
        goto done;
    }
    if (has_selector(n)) {
        api_respond_data(resp, json_array());
    } else { /* Prometheus answers no content at all */
        resp->status = 204;
        resp->body = NULL;
        resp->len = 0;
    }
done:
    pq_node_free(n);
    api_params_free(&p);
}

static void format_query(mw_query_api *api, const mw_http_request *req, mw_http_response *resp)
{
    (void)api;
    params p;
    api_params_load(&p, req);
    char err[1024];
    const char *q = api_param(&p, "query");
    pq_node *n = pq_parse(q ? q : "", err, sizeof(err));
    if (!n) {
        api_respond_error(resp, 400, "invalid parameter \"query\": %s", err);
    } else {
        char *text = pq_format(n);
        api_respond_data(resp, json_string(text));
        free(text);
    }
    pq_node_free(n);
    api_params_free(&p);
}

static void status_handler(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    mw_query_api *api = cls;
    static const struct {
        const char *path;
        void (*fn)(mw_query_api *, mw_http_response *);
    } routes[] = {
        {"/api/v1/status/buildinfo", buildinfo},
        {"/api/v1/status/runtimeinfo", runtimeinfo},
        {"/api/v1/status/flags", flags},
        {"/api/v1/status/config", config},
        {"/api/v1/status/tsdb", tsdb},
        {"/api/v1/status/walreplay", walreplay},
        {"/api/v1/targets", targets},
        {"/api/v1/features", features},
    };
    if (req->scope && req->scope->scoped && !strcmp(req->path, "/api/v1/status/tsdb")) {
        /* The store's totals count every namespace's series. */
        api_respond_error(resp, 403,
                          "a namespace-scoped reader cannot see the store's totals "
                          "(docs/security.md)");
        return;
    }
    /* The node's configuration and the agent's own state (its flags and
     * config file, the process, the WAL replay of the whole store) are the
     * node owner's, not a tenant's: a scoped reader sees only its
     * namespaces' series. buildinfo stays open: Grafana asks it to know
     * what kind of server this is. */
    static const char *const node_level[] = {"/api/v1/status/runtimeinfo", "/api/v1/status/flags",
                                             "/api/v1/status/config", "/api/v1/status/walreplay"};
    for (size_t i = 0; req->scope && req->scope->scoped && i < 4; i++)
        if (!strcmp(req->path, node_level[i])) {
            api_respond_error(resp, 403,
                              "a namespace-scoped reader cannot see the agent's configuration "
                              "and state (docs/security.md)");
            return;
        }
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
        if (!strcmp(req->path, routes[i].path)) {
            routes[i].fn(api, resp);
            api_gzip(req, resp);
            return;
        }
    if (!strcmp(req->path, "/api/v1/query_exemplars"))
        exemplars(api, req, resp);
    else if (!strcmp(req->path, "/api/v1/format_query"))
        format_query(api, req, resp);
    else
        api_respond_error(resp, 404, "not found");
    api_gzip(req, resp);
}

void api_register_status(mw_http_server *http, mw_query_api *api)
{
    started_ms = mw_now_ms();
    static const char *const get_only[] = {"/api/v1/status/buildinfo", "/api/v1/status/runtimeinfo",
                                           "/api/v1/status/flags",     "/api/v1/status/config",
                                           "/api/v1/status/tsdb",      "/api/v1/status/walreplay",
                                           "/api/v1/targets",          "/api/v1/features"};
    for (size_t i = 0; i < sizeof(get_only) / sizeof(get_only[0]); i++)
        mw_http_route(http, MW_ROLE_READ, "GET", get_only[i], 0, status_handler, api);
    static const char *methods[] = {"GET", "POST"};
    for (int i = 0; i < 2; i++) {
        mw_http_route(http, MW_ROLE_READ, methods[i], "/api/v1/query_exemplars", 0, status_handler,
                      api);
        mw_http_route(http, MW_ROLE_READ, methods[i], "/api/v1/format_query", 0, status_handler,
                      api);
    }
}
