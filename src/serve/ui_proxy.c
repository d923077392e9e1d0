/* ui_proxy.c - with --query-url, the web UI's PromQL calls go to another
 * Prometheus-compatible server (Prometheus, Thanos, Mimir, VictoriaMetrics).
 *
 * The page only ever talks to its own origin (its CSP says so, and the
 * other server need not allow cross-origin calls or be reachable from the
 * browser): the agent forwards the few read-only API calls the UI makes,
 * through the HTTP client (src/core/http_client.c), with a timeout and a
 * bound on the answer. Failures become 502 with a JSON error
 * in Prometheus' format that names the server (without credentials) and
 * what went wrong, which the page shows in the panel. */
#include "ui.h"
#include "../core/buf.h"
#include "../core/http_client.h"
#include "../core/util.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int mw_ui_proxy_init(mw_ui_proxy *p, const char *url, int64_t timeout_ms, char *why, size_t whysize)
{
    memset(p, 0, sizeof(*p));
    size_t n = strlen(url);
    while (n > 0 && url[n - 1] == '/')
        n--;
    const char *rest = strncmp(url, "http://", 7) == 0    ? url + 7
                       : strncmp(url, "https://", 8) == 0 ? url + 8
                                                          : NULL;
    if (!rest || (size_t)(rest - url) >= n) {
        snprintf(why, whysize,
                 "must be an http:// or https:// base URL, like http://prometheus:9090");
        return -1;
    }
    if (n >= sizeof(p->base)) {
        snprintf(why, whysize, "longer than %zu characters", sizeof(p->base) - 1);
        return -1;
    }
    if (strpbrk(url, "?# \t\r\n")) {
        snprintf(why, whysize, "must be a base URL without query, fragment or spaces");
        return -1;
    }
    memcpy(p->base, url, n);
    p->base[n] = '\0';
    /* Shown form: without user:password@. */
    mw_http_shown_url(p->base, p->shown, sizeof(p->shown));
    p->timeout_ms = timeout_ms > 0 ? timeout_ms : 30000;
    p->max_body = MW_UI_PROXY_MAX_BODY;
    return 0;
}

int mw_ui_proxy_allowed(const char *sub)
{
    static const char *const exact[] = {"query",    "query_range",      "series", "labels",
                                        "metadata", "status/buildinfo", NULL};
    for (const char *const *e = exact; *e; e++)
        if (strcmp(sub, *e) == 0) return 1;
    /* label/NAME/values, NAME a label name (no slashes, dots or escapes) */
    if (strncmp(sub, "label/", 6) != 0) return 0;
    const char *name = sub + 6, *end = strchr(name, '/');
    if (!end || end == name || strcmp(end, "/values") != 0) return 0;
    for (const char *c = name; c < end; c++)
        if (!(*c == '_' || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
              (c > name && *c >= '0' && *c <= '9')))
            return 0;
    return 1;
}

static void proxy_error(mw_http_response *resp, int status, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void proxy_error(mw_http_response *resp, int status, const char *type, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *o = json_pack("{s:s, s:s, s:s}", "status", "error", "errorType", type, "error", msg);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s) {
        mw_http_text(resp, status, "%s\n", msg);
        return;
    }
    resp->status = status;
    resp->content_type = "application/json";
    resp->body = s;
    resp->len = strlen(s);
    resp->free_fn = NULL;
    resp->body_static = 0;
}

/* What the upstream said went wrong: the "error" of a Prometheus JSON
 * error, else the start of its body on one line. */
static void upstream_reason(const mw_buf *body, char *out, size_t size)
{
    json_error_t je;
    json_t *o = body->len ? json_loadb(body->data, body->len, 0, &je) : NULL;
    const char *e = o ? json_string_value(json_object_get(o, "error")) : NULL;
    if (e)
        snprintf(out, size, "%s", e);
    else if (body->len)
        snprintf(out, size, "%.*s", (int)(body->len < 200 ? body->len : 200), body->data);
    else
        snprintf(out, size, "(empty answer)");
    json_decref(o);
    for (char *c = out; *c; c++)
        if (*c == '\n' || *c == '\r') *c = ' ';
}

void mw_ui_proxy_forward(const mw_ui_proxy *p, const char *method, const char *sub,
                         const char *query, const char *body, size_t body_len,
                         mw_http_response *resp)
{
    if (!mw_ui_proxy_allowed(sub)) {
        proxy_error(resp, 404, "not_found", "the web UI does not forward /api/v1/%.200s", sub);
        return;
    }
    int post = strcmp(method, "POST") == 0;
    char url[4096];
    int w = snprintf(url, sizeof(url), "%s/api/v1/%s%s%s", p->base, sub, query && *query ? "?" : "",
                     query ? query : "");
    if (w < 0 || (size_t)w >= sizeof(url)) {
        /* Long queries fit in a POST body; the page posts those. */
        proxy_error(resp, 414, "bad_data", "query string longer than %zu bytes: use POST",
                    sizeof(url) - 1);
        return;
    }
    mw_http_call call = {
        .url = url,
        .protocols = "http,https",
        .headers = {"Accept: application/json",
                    post ? "Content-Type: application/x-www-form-urlencoded" : NULL},
        .user_agent = "mlwatch-ui",
        .connect_timeout_ms = p->timeout_ms < 5000 ? p->timeout_ms : 5000,
        .timeout_ms = p->timeout_ms,
        .accept_encoding = "", /* whatever libcurl can decode */
        .max_body = p->max_body,
        .post = post,
        .body = body,
        .body_len = body ? body_len : 0,
    };
    mw_http_perform(NULL, &call);
    mw_buf *got = &call.answer;
    if (call.failure == MW_HTTP_UNAVAILABLE) {
        proxy_error(resp, 502, "upstream",
                    "query-url %s: libcurl is not available (install libcurl4)", p->shown);
    } else if (call.failure == MW_HTTP_TOO_LARGE) {
        proxy_error(resp, 502, "upstream", "query-url %s: answer to /api/v1/%s larger than %zu KiB",
                    p->shown, sub, p->max_body >> 10);
    } else if (call.failure == MW_HTTP_TIMEOUT) {
        proxy_error(resp, 504, "timeout", "query-url %s: no answer to /api/v1/%s within %lld ms",
                    p->shown, sub, (long long)p->timeout_ms);
    } else if (call.failure != MW_HTTP_OK) {
        proxy_error(resp, 502, "upstream", "query-url %s: %s", p->shown, call.reason);
    } else if ((call.status >= 200 && call.status < 300) || call.status == 400 ||
               call.status == 422) {
        resp->status = (int)call.status;
        resp->content_type = "application/json";
        resp->body = mw_buf_steal(got, &resp->len);
        if (!resp->body) {
            resp->body = (char *)"";
            resp->body_static = 1;
        }
    } else {
        char why[300];
        upstream_reason(got, why, sizeof(why));
        proxy_error(resp, 502, "upstream", "query-url %s: /api/v1/%s answered HTTP %ld: %s",
                    p->shown, sub, call.status, why);
    }
    mw_http_call_free(&call);
}

int mw_ui_check_query_url(const char *v, char *why, size_t whysize)
{
    mw_ui_proxy p;
    return v[0] ? mw_ui_proxy_init(&p, v, 0, why, whysize) : 0;
}
