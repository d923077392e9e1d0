/* ui.c - the built-in web UI as an agent module (docs/ui.md).
 *
 * Routes, on the agent's one port:
 *   GET /                    302 to /ui/ (the page lists /metrics and the API)
 *   GET /ui/...              the embedded files (ui/src, uPlot, the dashboard
 *                            spec): ETag and 304, gzip when the client takes
 *                            it, a strict Content-Security-Policy; 503 with
 *                            how to build them when the binary has none
 *   GET /ui/config.json      where the page sends its PromQL calls: the
 *                            embedded store's /api/v1 (default), or
 *   GET|POST /ui/api/v1/...  with --query-url, forwarded to that server
 *                            (ui_proxy.c); the agent's own /api/v1 keeps
 *                            answering from its store either way.
 *   GET /api/v1/status/sources  what this agent sees and cannot see, and
 *                            why (core/sources.h; read role): the overview
 *                            page's "what mlwatch sees" panel.
 * Nothing here touches the collection loop: no derive, no consume. */
#include "ui.h"
#include "../agent/module.h"
#include "../core/buf.h"
#include "../core/log.h"
#include "../core/sources.h"
#include "../core/util.h"
#include "../mlwatch.h"
#include "exposition.h"
#include "../query/api.h"
#include "../store/store.h"
#include "http.h"

#include <jansson.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const mw_ui_asset *mw_ui_find(const mw_ui_asset *table, size_t n, const char *path)
{
    if (strcmp(path, "/ui/") == 0) path = "/ui/index.html";
    for (size_t i = 0; i < n; i++)
        if (table[i].path && strcmp(table[i].path, path) == 0) return &table[i];
    return NULL;
}

/* Walk a comma-separated header value (If-None-Match): each element with
 * the white space around it trimmed (inside, it stays: an entity tag has
 * none, so such an element matches nothing); a longer one than the buffer
 * comes back empty (ours are 20 characters). */
static const char *next_token(const char *s, char *tok, size_t toksize)
{
    while (*s == ' ' || *s == '\t' || *s == ',')
        s++;
    if (!*s) return NULL;
    size_t n = 0;
    int longer = 0;
    for (; *s && *s != ','; s++) {
        if (n + 1 < toksize)
            tok[n++] = *s;
        else
            longer = 1;
    }
    while (n > 0 && (tok[n - 1] == ' ' || tok[n - 1] == '\t'))
        n--;
    tok[longer ? 0 : n] = '\0';
    return s;
}

int mw_ui_etag_matches(const char *if_none_match, const char *etag)
{
    if (!if_none_match) return 0;
    char tok[128];
    for (const char *s = if_none_match; (s = next_token(s, tok, sizeof(tok)));) {
        const char *t = strncmp(tok, "W/", 2) == 0 ? tok + 2 : tok; /* weak comparison */
        if (strcmp(t, "*") == 0 || strcmp(t, etag) == 0) return 1;
    }
    return 0;
}

static void security_headers(mw_http_response *resp)
{
    mw_http_add_header(resp, "Content-Security-Policy", MW_UI_CSP);
    mw_http_add_header(resp, "X-Content-Type-Options", "nosniff");
}

void mw_ui_serve(const mw_ui_asset *table, size_t n, const char *missing, const char *path,
                 const char *accept_encoding, const char *if_none_match, mw_http_response *resp)
{
    if (missing) {
        mw_http_text(resp, 503, "%s\n", missing);
        return;
    }
    const mw_ui_asset *a = mw_ui_find(table, n, path);
    if (!a) {
        mw_http_text(resp, 404, "no such path: %s\n", path);
        return;
    }
    int gz = a->gz && a->gz_len < a->len && mw_accepts_gzip(accept_encoding);
    const char *etag = gz ? a->gz_etag : a->etag;
    security_headers(resp);
    /* Names are not content-hashed: always revalidate, which the ETag
     * makes a 304 without a body. */
    mw_http_add_header(resp, "Cache-Control", "no-cache");
    mw_http_add_header(resp, "ETag", etag);
    mw_http_add_header(resp, "Vary", "Accept-Encoding");
    resp->content_type = a->content_type;
    resp->body_static = 1;
    if (mw_ui_etag_matches(if_none_match, etag)) {
        resp->status = 304;
        resp->body = (char *)"";
        resp->len = 0;
        return;
    }
    if (gz) mw_http_add_header(resp, "Content-Encoding", "gzip");
    resp->status = 200;
    resp->body = (char *)(gz ? a->gz : a->data);
    resp->len = gz ? a->gz_len : a->len;
}

/* ---- the module ---- */

typedef struct ui_module {
    const mw_config *cfg;
    int proxied; /* --query-url given */
    mw_ui_proxy proxy;
} ui_module;

/* clang-format off */
static const mw_option ui_rows[] = {
    MW_OPT(mw_ui_settings, "query-url", MW_OPT_STRING, query_url, "", mw_ui_check_query_url, "Web UI: send its PromQL queries to this Prometheus-compatible base URL (Prometheus, Thanos, Mimir, VictoriaMetrics) instead of the embedded store"),
};
/* clang-format on */
const mw_option_group mw_ui_options =
    MW_OPTION_GROUP("web UI", "src/serve/ui.c", mw_ui_settings, ui_rows, NULL);

static int module_init(const mw_env *env, void **state)
{
    ui_module *m = mw_xcalloc(1, sizeof(*m));
    m->cfg = env->cfg;
    const mw_ui_settings *us = mw_config_group(env->cfg, &mw_ui_options);
    if (us->query_url[0]) {
        char why[256];
        const mw_query_settings *q = mw_config_group(env->cfg, &mw_query_options);
        if (mw_ui_proxy_init(&m->proxy, us->query_url, q->timeout_ms, why, sizeof(why)) < 0) {
            /* The config validator already refused this; belt and braces. */
            mw_log(MW_LOG_ERROR, "ui", "--query-url: %s", why);
            free(m);
            return -22;
        }
        m->proxied = 1;
        mw_log(MW_LOG_INFO, "ui", "web UI queries go to %s", m->proxy.shown);
    }
    *state = m;
    return 0;
}

static void redirect_handler(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    (void)cls;
    (void)req;
    mw_http_text(resp, 302, "the web UI is at /ui/\n");
    mw_http_add_header(resp, "Location", "/ui/");
}

static void asset_handler(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    (void)cls;
    mw_ui_serve(mw_ui_assets, mw_ui_nassets, mw_ui_missing, req->path,
                mw_http_header(req, "Accept-Encoding"), mw_http_header(req, "If-None-Match"), resp);
}

static void config_handler(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    (void)req;
    ui_module *m = cls;
    const char *backend =
        m->proxied ? "query-url"
        : ((const mw_store_settings *)mw_config_group(m->cfg, &mw_store_module_options))->store
            ? "store"
            : "none";
    /* Relative to /ui/, so that the UI also works behind a path prefix
     * (kubectl proxy, an ingress). */
    json_t *o =
        json_pack("{s:s, s:s, s:s, s:s, s:I}", "version", MLWATCH_VERSION, "backend", backend,
                  "api", m->proxied ? "api/v1" : "../api/v1", "query_url",
                  m->proxied ? m->proxy.shown : "", "interval_ms", (json_int_t)m->cfg->interval_ms);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s) {
        mw_http_text(resp, 500, "out of memory\n");
        return;
    }
    resp->status = 200;
    resp->content_type = "application/json";
    resp->body = s;
    resp->len = strlen(s);
    security_headers(resp);
    mw_http_add_header(resp, "Cache-Control", "no-store");
}

/* {"status":"success","data":{"gpu":{"state":"absent","detail":"..."},...}} */
static void sources_handler(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    (void)cls;
    (void)req;
    char *table = mw_sources_json();
    mw_buf b;
    mw_buf_init(&b, 0);
    int rc = table ? mw_buf_printf(&b, "{\"status\":\"success\",\"data\":%s}", table) : -1;
    free(table);
    if (rc < 0) {
        mw_buf_free(&b);
        mw_http_text(resp, 500, "out of memory\n");
        return;
    }
    resp->status = 200;
    resp->content_type = "application/json";
    resp->body = b.data;
    resp->len = b.len;
    mw_http_add_header(resp, "Cache-Control", "no-store");
}

typedef struct args_ctx {
    mw_buf *b;
} args_ctx;

static void put_encoded(mw_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~') {
            mw_buf_putc(b, (char)c);
        } else {
            mw_buf_putc(b, '%');
            mw_buf_putc(b, hex[c >> 4]);
            mw_buf_putc(b, hex[c & 15]);
        }
    }
}

/* libmicrohttpd decoded the query string; encode it again, every value in
 * order (match[] repeats). */
static enum MHD_Result put_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *value)
{
    (void)kind;
    args_ctx *a = cls;
    if (a->b->len) mw_buf_putc(a->b, '&');
    put_encoded(a->b, key);
    if (value) {
        mw_buf_putc(a->b, '=');
        put_encoded(a->b, value);
    }
    return MHD_YES;
}

static void proxy_handler(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    ui_module *m = cls;
    const char *sub = req->path + strlen("/ui/api/v1/");
    if (!m->proxied) {
        /* Without --query-url the page calls ../api/v1 itself; this is
         * someone's old link. */
        mw_http_text(resp, 404, "no --query-url: the UI queries /api/v1/%s\n", sub);
        return;
    }
    if (req->scope && req->scope->scoped) {
        /* --query-url's server does not know this reader's namespaces. */
        mw_http_text(resp, 403,
                     "a namespace-scoped reader cannot query through --query-url; the agent's "
                     "own /api/v1 applies the scope\n");
        return;
    }
    mw_buf q;
    mw_buf_init(&q, 64u << 10);
    args_ctx a = {&q};
    MHD_get_connection_values(req->conn, MHD_GET_ARGUMENT_KIND, put_arg, &a);
    if (q.overflow) {
        mw_buf_free(&q);
        mw_http_text(resp, 414, "query string longer than 64 KiB\n");
        return;
    }
    mw_ui_proxy_forward(&m->proxy, req->method, sub, q.data ? q.data : "", req->body, req->body_len,
                        resp);
    mw_buf_free(&q);
}

static void module_routes(void *state, mw_http_server *http)
{
    ui_module *m = state;
    /* Without the UI built in, / keeps the agent's plain landing page. */
    if (!mw_ui_missing) mw_http_route(http, MW_ROLE_PUBLIC, "GET", "/", 0, redirect_handler, m);
    mw_http_route(http, MW_ROLE_PUBLIC, "GET", "/ui", 0, redirect_handler, m);
    mw_http_route(http, MW_ROLE_READ, "GET", "/ui/config.json", 0, config_handler, m);
    mw_http_route(http, MW_ROLE_READ, "GET", "/api/v1/status/sources", 0, sources_handler, m);
    mw_http_route_lane(http, MW_ROLE_READ, "GET", "/ui/api/v1/", 1, proxy_handler, m);
    mw_http_route_lane(http, MW_ROLE_READ, "POST", "/ui/api/v1/", 1, proxy_handler, m);
    mw_http_route(http, MW_ROLE_READ, "GET", "/ui/", 1, asset_handler, m);
}

static void module_destroy(void *state)
{
    free(state);
}

const mw_module mw_module_ui = {
    .name = "ui",
    .options = &mw_ui_options,
    .agent_only = 1,
    .init = module_init,
    .routes = module_routes,
    .destroy = module_destroy,
};
