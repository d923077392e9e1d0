/* agent.c - the collection loop and the HTTP endpoints of `mlwatch agent`.
 *
 * The main thread collects on a fixed schedule (absolute deadlines, so the
 * interval does not drift by the cost of collecting) and publishes each
 * snapshot; libmicrohttpd's threads serve scrapes from the latest one. */
#include "agent.h"
#include "../collect/collector.h"
#include "../collect/procmap.h"
#include "module.h"
#include "../core/log.h"
#include "../core/units.h"
#include "../core/util.h"
#include "../collect/node_health.h"
#include "../kube/kube_module.h"
#include "../mlwatch.h"
#include "../serve/auth.h"
#include "../serve/exposition.h"
#include "../serve/http.h"
#include "../serve/metrics_endpoint.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static atomic_int ready;

static const char landing_page[] =
    "<!doctype html><html><head><meta charset=\"utf-8\"><title>mlwatch</title></head>"
    "<body><h1>mlwatch " MLWATCH_VERSION "</h1>"
    "<p>GPU, energy and container telemetry for shared machines.</p>"
    "<ul><li><a href=\"/metrics\">/metrics</a> (Prometheus text 0.0.4 or OpenMetrics 1.0)</li>"
    "<li><a href=\"/-/healthy\">/-/healthy</a></li><li><a href=\"/-/ready\">/-/ready</a></li></ul>"
    "</body></html>\n";

static void landing_handler(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    (void)cls;
    if (strcmp(req->path, "/") != 0) {
        char msg[600];
        snprintf(msg, sizeof(msg), "no such path: %.500s", req->path);
        if (!strncmp(req->path, "/api/", 5)) /* as Prometheus's API answers */
            mw_http_json_error(resp, 404, "not_found", msg);
        else
            mw_http_text(resp, 404, "%s\n", msg);
        return;
    }
    resp->status = 200;
    resp->content_type = "text/html; charset=utf-8";
    resp->body = (char *)landing_page;
    resp->len = sizeof(landing_page) - 1;
    resp->body_static = 1;
}

static void healthy_handler(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    (void)cls;
    (void)req;
    mw_http_text(resp, 200, "mlwatch is healthy\n");
}

/* cls: the module set, whose modules may say they cannot serve (the
 * store while disabled). */
static void ready_handler(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    (void)req;
    char why[600];
    if (!atomic_load(&ready))
        mw_http_text(resp, 503, "mlwatch is starting: no collection has completed yet\n");
    else if (mw_module_set_ready(cls, why, sizeof(why)) < 0)
        mw_http_text(resp, 503, "mlwatch is not ready: %s\n", why);
    else
        mw_http_text(resp, 200, "mlwatch is ready\n");
}

typedef struct runtime {
    mw_hostfs host;
    mw_procmap *procmap;
    mw_kube_inputs kube;        /* filled by the kube module (kube/kube_module.c) */
    mw_node_health node_health; /* the node's GPU health verdict (collect/node_health.h) */
    mw_env env;
    mw_collector_set *set; /* NULL in a hub: it collects nothing */
    mw_module_set *modules;
    char node[256]; /* the node label of every series (mw_node_name) */
} runtime;

/* mode: MW_MODULES_AGENT, _ONESHOT or _HUB (module.h). */
static int runtime_open(runtime *rt, const mw_config *cfg, int mode)
{
    memset(rt, 0, sizeof(*rt));
    int rc = mw_hostfs_open(&rt->host, cfg->root);
    if (rc < 0) {
        fprintf(stderr, "mlwatch: --root %s: %s\n", cfg->root, strerror(-rc));
        return -1;
    }
    rt->procmap = mw_procmap_new(&rt->host);
    mw_node_health_init(&rt->node_health);
    rt->env =
        (mw_env){cfg, &rt->host, rt->procmap, &rt->kube, &rt->node_health, mode == MW_MODULES_HUB};
    if (mode != MW_MODULES_HUB) rt->set = mw_collector_set_new(&rt->env);
    rt->modules = mw_module_set_new(&rt->env, mode);
    mw_node_name(cfg, rt->node, sizeof(rt->node));
    return 0;
}

static void runtime_close(runtime *rt)
{
    mw_module_set_free(rt->modules);
    if (rt->set) mw_collector_set_free(rt->set);
    mw_procmap_free(rt->procmap);
    mw_node_health_destroy(&rt->node_health);
    mw_hostfs_close(&rt->host);
}

/* http: the agent's server, whose own figures join the snapshot; NULL in
 * one-shot commands. */
static mw_snapshot *collect_once(runtime *rt, mw_http_server *http)
{
    mw_snapshot *snap = mw_snapshot_new();
    if (rt->set) mw_collector_set_run(rt->set, snap);
    mw_module_set_derive(rt->modules, snap);
    if (http) mw_http_emit_metrics(http, snap);
    /* One name for the node on every path out (/metrics, the store, remote
     * write): a scrape adds instance and job, never node, so the label is
     * the same whether the series are scraped or shipped. */
    mw_snapshot_label_all(snap, "node", rt->node);
    return snap;
}

static int check_format(const char *v, char *why, size_t n)
{
    if (strcmp(v, "text") == 0 || strcmp(v, "openmetrics") == 0) return 0;
    snprintf(why, n, "must be text or openmetrics");
    return -1;
}

/* clang-format off */
static const mw_option metrics_rows[] = {
    MW_OPT(mw_metrics_settings, "format", MW_OPT_STRING, format, "text", check_format, "`mlwatch metrics` output: text (Prometheus 0.0.4) or openmetrics"),
};
/* clang-format on */
const mw_option_group mw_metrics_options = MW_OPTION_GROUP("mlwatch metrics", "src/agent/agent.c",
                                                           mw_metrics_settings, metrics_rows, NULL);

int mw_metrics_once(const mw_config *cfg, FILE *out)
{
    const mw_metrics_settings *ms = mw_config_group(cfg, &mw_metrics_options);
    runtime rt;
    if (runtime_open(&rt, cfg, MW_MODULES_ONESHOT) < 0) return 1;
    mw_snapshot *snap = collect_once(&rt, NULL);
    mw_buf b;
    mw_buf_init(&b, 0);
    mw_render(snap, strcmp(ms->format, "openmetrics") == 0 ? MW_FMT_OPENMETRICS : MW_FMT_TEXT, &b);
    int rc = fwrite(b.data, 1, b.len, out) == b.len && fflush(out) == 0 ? 0 : 1;
    mw_buf_free(&b);
    mw_snapshot_free(snap);
    runtime_close(&rt);
    return rc;
}

static void add_ns(struct timespec *t, int64_t ns)
{
    t->tv_nsec += ns % 1000000000;
    t->tv_sec += ns / 1000000000;
    if (t->tv_nsec >= 1000000000) {
        t->tv_nsec -= 1000000000;
        t->tv_sec++;
    }
}

/* Sleeps until the CLOCK_MONOTONIC deadline or one of the signals in set,
 * whichever comes first: the signal's number, or 0 at the deadline. A
 * deadline already past still takes a pending signal. */
static int sleep_until(const sigset_t *set, const struct timespec *deadline)
{
    for (;;) {
        struct timespec now, left = {0, 0};
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t ns = (int64_t)(deadline->tv_sec - now.tv_sec) * 1000000000 +
                     (deadline->tv_nsec - now.tv_nsec);
        if (ns > 0) {
            left.tv_sec = (time_t)(ns / 1000000000);
            left.tv_nsec = (long)(ns % 1000000000);
        }
        int sig = sigtimedwait(set, NULL, &left);
        if (sig > 0) return sig;
        if (errno != EINTR) return 0; /* EAGAIN: the deadline */
    }
}

int mw_agent_run(const mw_config *cfg, int hub)
{
    /* SIGINT and SIGTERM stay blocked in every thread (a thread starts with
     * its creator's mask, and all start after this) and the main loop takes
     * them with sigtimedwait(). With a handler instead, the kernel may hand
     * the signal to a libmicrohttpd or GPU thread, whose interrupted call
     * wakes nobody: the agent stopped only at the end of the interval, a
     * minute at --interval 60s, past a pod's termination grace period. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGHUP); /* not a stop: reloads the rule files (below) */
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* A file size limit (ulimit -f, RLIMIT_FSIZE) makes a write fail with
     * EFBIG, which the store handles as it does a full disk, instead of
     * killing the agent with SIGXFSZ. */
    signal(SIGXFSZ, SIG_IGN);

    /* Token files and certificates are read before anything starts, so a
     * bad one stops the agent with its message alone. */
    char err[9000];
    mw_auth *auth =
        mw_auth_open(mw_config_group(cfg, &mw_auth_options), cfg->listen, err, sizeof(err));
    if (!auth) {
        fprintf(stderr, "mlwatch: %s\n", err);
        return 1;
    }
    if (cfg->state_dir[0])
        mw_log(MW_LOG_WARN, "agent",
               "--state-dir is deprecated: all state lives under --data-dir (%s/state); an "
               "older agent's state files in %s are migrated there once",
               cfg->data_dir, cfg->state_dir);
    runtime rt;
    if (runtime_open(&rt, cfg, hub ? MW_MODULES_HUB : MW_MODULES_AGENT) < 0) {
        mw_auth_free(auth);
        return 1;
    }
    mw_published *pub = mw_published_new();
    mw_http_server *http = mw_http_new(0);
    mw_http_configure(http, mw_config_group(cfg, &mw_http_options));
    mw_http_route(http, MW_ROLE_METRICS, "GET", "/metrics", 0, mw_metrics_handler, pub);
    mw_http_route(http, MW_ROLE_PUBLIC, "GET", "/-/healthy", 0, healthy_handler, NULL);
    mw_http_route(http, MW_ROLE_PUBLIC, "GET", "/-/ready", 0, ready_handler, rt.modules);
    mw_module_set_routes(rt.modules, http);
    mw_http_route(http, MW_ROLE_PUBLIC, "GET", "/", 1, landing_handler, NULL);
    mw_auth_attach(auth, http);
    if (mw_http_start(http, cfg->listen, err, sizeof(err)) < 0) {
        fprintf(stderr, "mlwatch: --listen %s: %s\n", cfg->listen, err);
        mw_http_free(http);
        mw_auth_free(auth);
        mw_published_free(pub);
        runtime_close(&rt);
        return 1;
    }
    char iv[32];
    mw_format_duration(cfg->interval_ms, iv, sizeof(iv));
    const char *tls = mw_auth_tls(auth) ? " with TLS" : "";
    if (hub)
        mw_log(MW_LOG_INFO, "agent",
               "mlwatch %s hub listening on %s (port %d)%s, node %s, interval %s: no collection; "
               "remote write to /api/v1/write",
               MLWATCH_VERSION, cfg->listen, mw_http_port(http), tls, rt.node, iv);
    else
        mw_log(MW_LOG_INFO, "agent",
               "mlwatch %s listening on %s (port %d)%s, root %s, node %s, interval %s",
               MLWATCH_VERSION, cfg->listen, mw_http_port(http), tls, cfg->root, rt.node, iv);

    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    int stop_signal = 0;
    while (!stop_signal) {
        mw_snapshot *snap = collect_once(&rt, http);
        mw_module_set_consume(rt.modules, snap);
        mw_published_update(pub, snap);
        mw_release_free_memory();
        atomic_store(&ready, 1);
        add_ns(&next, cfg->interval_ms * 1000000);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > next.tv_sec || (now.tv_sec == next.tv_sec && now.tv_nsec > next.tv_nsec))
            next = now; /* a cycle overran the interval: skip ahead instead of bursting */
        stop_signal = sleep_until(&stop_signals, &next);
        while (stop_signal == SIGHUP) {
            mw_module_set_reload(rt.modules);
            stop_signal = sleep_until(&stop_signals, &next);
        }
    }
    mw_log(MW_LOG_INFO, "agent", "stopping on %s", stop_signal == SIGINT ? "SIGINT" : "SIGTERM");
    mw_http_free(http);
    mw_auth_free(auth);
    mw_published_free(pub);
    runtime_close(&rt);
    return 0;
}
