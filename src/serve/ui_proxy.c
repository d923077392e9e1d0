/* ui_proxy.c - with --query-url, the web UI's PromQL calls go to another
 * Prometheus-compatible server (Prometheus, Thanos, Mimir, VictoriaMetrics).
 *
 * The page only ever talks to its own origin (its CSP says so, and the
 * other server need not allow cross-origin calls or be reachable from the
 * browser): the agent forwards the few read-only API calls the UI makes,
 * through libcurl (loaded on first use, src/core/lazylib.c), with a
 * timeout and a bound on the answer. Failures become 502 with a JSON error
 * in Prometheus' format that names the server (without credentials) and
 * what went wrong, which the page shows in the panel. */
#include "ui.h"
#include "../core/buf.h"
#include "../core/util.h"

#include <curl/curl.h>
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
    /* Shown form: drop user:password@ of the authority (up to its last
     * '@', as a password may hold one). */
    size_t scheme = (size_t)(rest - url);
    const char *auth = p->base + scheme, *slash = strchr(auth, '/'), *at = NULL;
    for (const char *c = auth; *c && c != slash; c++)
        if (*c == '@') at = c;
    if (at)
        snprintf(p->shown, sizeof(p->shown), "%.*s%s", (int)scheme, p->base, at + 1);
    else
        mw_strlcpy(p->shown, p->base, sizeof(p->shown));
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

static size_t on_body(char *data, size_t size, size_t nmemb, void *cls)
{
    mw_buf *b = cls;
    size_t n = size * nmemb;
    return mw_buf_append(b, data, n) < 0 ? 0 : n; /* 0 aborts: CURLE_WRITE_ERROR */
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
    CURL *c = curl_easy_init();
    if (!c) {
        proxy_error(resp, 502, "upstream",
                    "query-url %s: libcurl is not available (install libcurl4)", p->shown);
        return;
    }
    mw_buf got;
    mw_buf_init(&got, p->max_body);
    struct curl_slist *h = NULL;
    h = curl_slist_append(h, "Accept: application/json");
    if (post) h = curl_slist_append(h, "Content-Type: application/x-www-form-urlencoded");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "mlwatch-ui");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                     (long)(p->timeout_ms < 5000 ? p->timeout_ms : 5000));
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)p->timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, ""); /* whatever libcurl can decode */
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
    if (post) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? body_len : 0));
    }
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    curl_slist_free_all(h);
    if (rc == CURLE_WRITE_ERROR && got.overflow) {
        proxy_error(resp, 502, "upstream", "query-url %s: answer to /api/v1/%s larger than %zu KiB",
                    p->shown, sub, p->max_body >> 10);
    } else if (rc == CURLE_OPERATION_TIMEDOUT) {
        proxy_error(resp, 504, "timeout", "query-url %s: no answer to /api/v1/%s within %lld ms",
                    p->shown, sub, (long long)p->timeout_ms);
    } else if (rc != CURLE_OK) {
        proxy_error(resp, 502, "upstream", "query-url %s: %s", p->shown, curl_easy_strerror(rc));
    } else if ((status >= 200 && status < 300) || status == 400 || status == 422) {
        resp->status = (int)status;
        resp->content_type = "application/json";
        resp->body = mw_buf_steal(&got, &resp->len);
        if (!resp->body) {
            resp->body = (char *)"";
            resp->body_static = 1;
        }
    } else {
        char why[300];
        upstream_reason(&got, why, sizeof(why));
        proxy_error(resp, 502, "upstream", "query-url %s: /api/v1/%s answered HTTP %ld: %s",
                    p->shown, sub, status, why);
    }
    mw_buf_free(&got);
}

int mw_ui_check_query_url(const char *v, char *why, size_t whysize)
{
    mw_ui_proxy p;
    return v[0] ? mw_ui_proxy_init(&p, v, 0, why, whysize) : 0;
}
