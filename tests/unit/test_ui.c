/* test_ui.c - the web UI's server side (src/serve/ui.c, ui_proxy.c): asset
 * lookup, gzip negotiation, ETag and 304, the security headers, 503 without
 * a built-in UI, the embedded table itself, and the query proxy against a
 * fake upstream (an mw_http server on 127.0.0.1:0) that answers, fails,
 * sends too much or too late. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/config.h"
#include "serve/http.h"
#include "serve/ui.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static const unsigned char INDEX[] = "<!doctype html><p>hello hello hello hello hello hello</p>";
static const unsigned char INDEX_GZ[] = "GZ";
static const unsigned char TINY[] = "x";
static const unsigned char TINY_GZ[] = "gzip-bigger-than-x";
static const mw_ui_asset TABLE[] = {
    {"/ui/index.html", "text/html; charset=utf-8", INDEX, sizeof(INDEX) - 1, INDEX_GZ,
     sizeof(INDEX_GZ) - 1, "\"aaaa\"", "\"aaaa-gz\""},
    {"/ui/tiny.js", "text/javascript; charset=utf-8", TINY, 1, TINY_GZ, sizeof(TINY_GZ) - 1,
     "\"bbbb\"", "\"bbbb-gz\""},
};

static const char *header(const mw_http_response *r, const char *name)
{
    for (int i = 0; i < r->nheaders; i++)
        if (strcmp(r->header_names[i], name) == 0) return r->header_values[i];
    return NULL;
}

static void release(mw_http_response *r)
{
    if (!r->body_static) free(r->body);
    memset(r, 0, sizeof(*r));
}

static void test_find(void **st)
{
    (void)st;
    assert_ptr_equal(mw_ui_find(TABLE, 2, "/ui/"), &TABLE[0]);
    assert_ptr_equal(mw_ui_find(TABLE, 2, "/ui/index.html"), &TABLE[0]);
    assert_ptr_equal(mw_ui_find(TABLE, 2, "/ui/tiny.js"), &TABLE[1]);
    assert_null(mw_ui_find(TABLE, 2, "/ui/tiny.js/"));
    assert_null(mw_ui_find(TABLE, 2, "/ui/../etc/passwd"));
    assert_null(mw_ui_find(TABLE, 0, "/ui/"));
}

static void test_etag(void **st)
{
    (void)st;
    assert_int_equal(mw_ui_etag_matches("\"aaaa\"", "\"aaaa\""), 1);
    assert_int_equal(mw_ui_etag_matches("\"x\", \"aaaa\"", "\"aaaa\""), 1);
    assert_int_equal(mw_ui_etag_matches("W/\"aaaa\"", "\"aaaa\""), 1);
    assert_int_equal(mw_ui_etag_matches("*", "\"aaaa\""), 1);
    assert_int_equal(mw_ui_etag_matches("\"aaaa-gz\"", "\"aaaa\""), 0);
    assert_int_equal(mw_ui_etag_matches("aaaa", "\"aaaa\""), 0);
    assert_int_equal(mw_ui_etag_matches(NULL, "\"aaaa\""), 0);
    char long_tag[300];
    memset(long_tag, 'a', sizeof(long_tag) - 1);
    long_tag[0] = '"';
    long_tag[sizeof(long_tag) - 1] = '\0';
    assert_int_equal(mw_ui_etag_matches(long_tag, "\"aaaa\""), 0);
    assert_int_equal(mw_ui_etag_matches("  ,, \"aaaa\"\t ,", "\"aaaa\""), 1);
    assert_int_equal(mw_ui_etag_matches("\"aa aa\"", "\"aaaa\""), 0); /* fuzz_ui_request */
}

static void test_serve(void **st)
{
    (void)st;
    mw_http_response r = {0};
    mw_ui_serve(TABLE, 2, NULL, "/ui/", NULL, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.content_type, "text/html; charset=utf-8");
    assert_int_equal(r.len, sizeof(INDEX) - 1);
    assert_memory_equal(r.body, INDEX, r.len);
    assert_string_equal(header(&r, "Content-Security-Policy"), MW_UI_CSP);
    assert_non_null(strstr(MW_UI_CSP, "script-src 'self';"));
    assert_null(strstr(MW_UI_CSP, "unsafe"));
    assert_string_equal(header(&r, "X-Content-Type-Options"), "nosniff");
    assert_string_equal(header(&r, "Cache-Control"), "no-cache");
    assert_string_equal(header(&r, "ETag"), "\"aaaa\"");
    assert_string_equal(header(&r, "Vary"), "Accept-Encoding");
    assert_null(header(&r, "Content-Encoding"));
    release(&r);

    /* gzip when asked for, with its own ETag */
    mw_ui_serve(TABLE, 2, NULL, "/ui/index.html", "gzip, br", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(header(&r, "Content-Encoding"), "gzip");
    assert_string_equal(header(&r, "ETag"), "\"aaaa-gz\"");
    assert_int_equal(r.len, 2);
    assert_memory_equal(r.body, "GZ", 2);
    release(&r);

    /* not when gzip would be larger */
    mw_ui_serve(TABLE, 2, NULL, "/ui/tiny.js", "gzip", NULL, &r);
    assert_null(header(&r, "Content-Encoding"));
    assert_string_equal(header(&r, "ETag"), "\"bbbb\"");
    assert_string_equal(r.content_type, "text/javascript; charset=utf-8");
    release(&r);

    /* 304 for the representation's ETag only */
    mw_ui_serve(TABLE, 2, NULL, "/ui/", "gzip", "\"aaaa-gz\"", &r);
    assert_int_equal(r.status, 304);
    assert_int_equal(r.len, 0);
    assert_string_equal(header(&r, "ETag"), "\"aaaa-gz\"");
    release(&r);
    mw_ui_serve(TABLE, 2, NULL, "/ui/", NULL, "\"aaaa-gz\"", &r);
    assert_int_equal(r.status, 200);
    release(&r);

    mw_ui_serve(TABLE, 2, NULL, "/ui/nope.js", NULL, NULL, &r);
    assert_int_equal(r.status, 404);
    assert_string_equal(r.body, "no such path: /ui/nope.js\n");
    release(&r);

    mw_ui_serve(TABLE, 0, "built without its web UI: run npm ci in ui/", "/ui/", "gzip", NULL, &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(r.body, "built without its web UI: run npm ci in ui/\n");
    release(&r);
}

/* The table this build embedded: the UI is there (CI runs `npm ci`), every
 * gzip copy inflates to its file, and the page has nothing inline that the
 * CSP would block. */
/* Whether the page at p is mapped in this process (/proc/self/pagemap). */
static int page_present(const void *p)
{
    FILE *f = fopen("/proc/self/pagemap", "rb");
    assert_non_null(f);
    uint64_t e = 0;
    long page = sysconf(_SC_PAGESIZE);
    assert_int_equal(fseek(f, (long)((uintptr_t)p / (uintptr_t)page * 8), SEEK_SET), 0);
    assert_int_equal(fread(&e, sizeof(e), 1, f), 1);
    fclose(f);
    return (int)(e >> 63);
}

/* The start and end of the mapping of this process that holds p. */
static void mapping_of(const void *p, uintptr_t *start, uintptr_t *end)
{
    FILE *f = fopen("/proc/self/maps", "r");
    assert_non_null(f);
    char line[512];
    *start = *end = 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned long a, b;
        if (sscanf(line, "%lx-%lx", &a, &b) == 2 && (uintptr_t)p >= a && (uintptr_t)p < b) {
            *start = a;
            *end = b;
        }
    }
    fclose(f);
    assert_true(*start != 0);
}

/* The embedded files are a mapping of their own (ui/embed.c puts them in a
 * section aligned to 64 KB), not within the other constants: the kernel
 * maps a file's pages 64 KB at a time around each one touched, and the
 * agent should not hold the UI's pages until it serves them. Runs before
 * anything reads the files. */
static void test_embedded_apart(void **st)
{
    (void)st;
    if (mw_ui_missing) fail_msg("this build has no web UI: %s", mw_ui_missing);
    const unsigned char *lo = mw_ui_assets[0].data, *hi = lo;
    for (size_t i = 0; i < mw_ui_nassets; i++) {
        const mw_ui_asset *a = &mw_ui_assets[i];
        if (a->data < lo) lo = a->data;
        if (a->gz < lo) lo = a->gz;
        if (a->data + a->len > hi) hi = a->data + a->len;
        if (a->gz + a->gz_len > hi) hi = a->gz + a->gz_len;
    }
    uintptr_t start, end;
    mapping_of(lo, &start, &end);
    assert_true((uintptr_t)lo == start);
    assert_true((uintptr_t)hi <= end);
    assert_true(start % 65536 == 0);
    /* The table, the content types and this file's constants are elsewhere. */
    uintptr_t s2, e2;
    mapping_of(mw_ui_assets[0].content_type, &s2, &e2);
    assert_true(s2 != start);
    mapping_of(INDEX, &s2, &e2);
    assert_true(s2 != start);
    long page = sysconf(_SC_PAGESIZE);
    for (const unsigned char *p = lo; p < hi; p += page)
        if (page_present(p))
            fail_msg("an embedded file's page at +%zu is resident unread", (size_t)(p - lo));
    volatile unsigned char c = lo[0];
    (void)c;
    assert_true(page_present(lo));
}

static void test_embedded(void **st)
{
    (void)st;
    if (mw_ui_missing) fail_msg("this build has no web UI: %s", mw_ui_missing);
    const char *want[] = {"/ui/index.html",
                          "/ui/app.js",
                          "/ui/app.css",
                          "/ui/dashboards.json",
                          "/ui/vendor/uPlot.iife.min.js",
                          "/ui/vendor/uPlot.min.css"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const mw_ui_asset *a = mw_ui_find(mw_ui_assets, mw_ui_nassets, want[i]);
        if (!a) {
            fail_msg("%s is not embedded", want[i]);
            return;
        }
        unsigned char *out = malloc(a->len + 1);
        z_stream z = {0};
        assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
        z.next_in = (unsigned char *)a->gz;
        z.avail_in = (uInt)a->gz_len;
        z.next_out = out;
        z.avail_out = (uInt)a->len + 1;
        assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
        assert_int_equal(z.total_out, a->len);
        assert_memory_equal(out, a->data, a->len);
        inflateEnd(&z);
        free(out);
        assert_string_not_equal(a->etag, a->gz_etag);
    }
    assert_string_equal(mw_ui_find(mw_ui_assets, mw_ui_nassets, "/ui/app.css")->content_type,
                        "text/css; charset=utf-8");
    assert_string_equal(
        mw_ui_find(mw_ui_assets, mw_ui_nassets, "/ui/dashboards.json")->content_type,
        "application/json");
    const mw_ui_asset *idx = mw_ui_find(mw_ui_assets, mw_ui_nassets, "/ui/");
    char *html = strndup((const char *)idx->data, idx->len);
    int scripts = 0;
    for (const char *p = html; (p = strstr(p, "<script")); p++, scripts++)
        if (strncmp(p, "<script src=\"", 13) != 0)
            fail_msg("inline script in index.html: %.40s", p);
    assert_int_equal(scripts, 2);
    assert_null(strstr(html, " style="));
    assert_null(strstr(html, "<style"));
    /* no event handler attributes (onclick=...) */
    for (const char *p = html; (p = strstr(p, " on")); p++) {
        size_t n = strspn(p + 3, "abcdefghijklmnopqrstuvwxyz");
        if (n && p[3 + n] == '=') fail_msg("inline handler in index.html: %.40s", p);
    }
    free(html);
}

/* ---- the proxy ---- */

static void test_proxy_init(void **st)
{
    (void)st;
    mw_ui_proxy p;
    char why[256];
    assert_int_equal(mw_ui_proxy_init(&p, "http://prom:9090/", 0, why, sizeof(why)), 0);
    assert_string_equal(p.base, "http://prom:9090");
    assert_int_equal(p.timeout_ms, 30000);
    assert_int_equal(p.max_body, MW_UI_PROXY_MAX_BODY);
    assert_int_equal(
        mw_ui_proxy_init(&p, "https://u:s3cret@thanos/prefix//", 1500, why, sizeof(why)), 0);
    assert_string_equal(p.base, "https://u:s3cret@thanos/prefix");
    assert_string_equal(p.shown, "https://thanos/prefix");
    assert_int_equal(p.timeout_ms, 1500);
    assert_int_equal(mw_ui_proxy_init(&p, "http://u:p@ss@vm:8428/x@y", 0, why, sizeof(why)), 0);
    assert_string_equal(p.shown, "http://vm:8428/x@y");
    assert_int_equal(mw_ui_proxy_init(&p, "ftp://x", 0, why, sizeof(why)), -1);
    assert_string_equal(why,
                        "must be an http:// or https:// base URL, like http://prometheus:9090");
    assert_int_equal(mw_ui_proxy_init(&p, "http://", 0, why, sizeof(why)), -1);
    assert_int_equal(mw_ui_proxy_init(&p, "prom:9090", 0, why, sizeof(why)), -1);
    assert_int_equal(mw_ui_proxy_init(&p, "http://prom/?x=1", 0, why, sizeof(why)), -1);
    assert_string_equal(why, "must be a base URL without query, fragment or spaces");
    assert_int_equal(mw_ui_check_query_url("", why, sizeof(why)), 0);
    assert_int_equal(mw_ui_check_query_url("http://vm:8428", why, sizeof(why)), 0);
    assert_int_equal(mw_ui_check_query_url("vm:8428", why, sizeof(why)), -1);
}

static void test_proxy_allowed(void **st)
{
    (void)st;
    const char *yes[] = {"query",
                         "query_range",
                         "series",
                         "labels",
                         "label/namespace/values",
                         "label/__name__/values",
                         "metadata",
                         "status/buildinfo"};
    const char *no[] = {"write",
                        "admin/tsdb/delete_series",
                        "status/config",
                        "label//values",
                        "label/a/b/values",
                        "label/../values",
                        "label/9x/values",
                        "query/",
                        "label/x/values/",
                        "",
                        "store/export"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        if (!mw_ui_proxy_allowed(yes[i])) fail_msg("%s refused", yes[i]);
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        if (mw_ui_proxy_allowed(no[i])) fail_msg("%s allowed", no[i]);
}

/* The fake upstream: each path behaves like one kind of server. */
static void upstream(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    (void)cls;
    const char *p = req->path;
    if (strcmp(p, "/prefix/api/v1/query") == 0) {
        const char *q = mw_http_arg(req, "query");
        mw_http_text(
            resp, 200,
            "{\"status\":\"success\",\"method\":\"%s\",\"query\":\"%s\",\"body\":\"%.*s\"}",
            req->method, q ? q : "", (int)req->body_len, req->body);
        resp->content_type = "application/json";
    } else if (strcmp(p, "/prefix/api/v1/series") == 0) {
        mw_http_text(resp, 400,
                     "{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"parse error\"}");
    } else if (strcmp(p, "/prefix/api/v1/labels") == 0) {
        mw_http_text(resp, 503,
                     "{\"status\":\"error\",\"errorType\":\"unavailable\","
                     "\"error\":\"TSDB not ready\"}");
    } else if (strcmp(p, "/prefix/api/v1/metadata") == 0) {
        mw_http_text(resp, 500, "Internal\nServer Error");
    } else if (strcmp(p, "/prefix/api/v1/query_range") == 0) {
        char *big = malloc(4096);
        memset(big, 'x', 4096);
        resp->status = 200;
        resp->body = big;
        resp->len = 4096;
    } else if (strcmp(p, "/prefix/api/v1/status/buildinfo") == 0) {
        usleep(600 * 1000);
        mw_http_text(resp, 200, "{}");
    } else {
        mw_http_text(resp, 404, "no such path: %s\n", p);
    }
}

static void test_proxy_forward(void **st)
{
    (void)st;
    mw_http_server *s = mw_http_new(0);
    mw_http_route(s, MW_ROLE_PUBLIC, NULL, "/", 1, upstream, NULL);
    char err[256];
    assert_int_equal(mw_http_start(s, "127.0.0.1:0", err, sizeof(err)), 0);
    char url[128];
    snprintf(url, sizeof(url), "http://user:pw@127.0.0.1:%d/prefix", mw_http_port(s));
    mw_ui_proxy p;
    char why[256];
    assert_int_equal(mw_ui_proxy_init(&p, url, 300, why, sizeof(why)), 0);
    p.max_body = 1024;
    char shown[128];
    snprintf(shown, sizeof(shown), "http://127.0.0.1:%d/prefix", mw_http_port(s));
    char want[512];
    mw_http_response r = {0};

    /* GET, the query string as given */
    mw_ui_proxy_forward(&p, "GET", "query", "query=up%7Bjob%3D%22a%22%7D&time=1", NULL, 0, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.content_type, "application/json");
    assert_string_equal(r.body,
                        "{\"status\":\"success\",\"method\":\"GET\",\"query\":\"up{job=\"a\"}\","
                        "\"body\":\"\"}");
    release(&r);
    /* POST, the form as the body */
    mw_ui_proxy_forward(&p, "POST", "query", "", "query=sum(up)", 13, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"method\":\"POST\""));
    assert_non_null(strstr(r.body, "\"body\":\"query=sum(up)\""));
    release(&r);
    /* The API's own query errors pass through */
    mw_ui_proxy_forward(&p, "GET", "series", "match%5B%5D=%7B", NULL, 0, &r);
    assert_int_equal(r.status, 400);
    assert_string_equal(
        r.body, "{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"parse error\"}");
    release(&r);
    /* Anything else is a bad gateway naming the server (no password) and
     * what it said */
    mw_ui_proxy_forward(&p, "GET", "labels", "", NULL, 0, &r);
    assert_int_equal(r.status, 502);
    snprintf(want, sizeof(want),
             "{\"status\":\"error\",\"errorType\":\"upstream\",\"error\":\"query-url %s: "
             "/api/v1/labels answered HTTP 503: TSDB not ready\"}",
             shown);
    assert_string_equal(r.body, want);
    release(&r);
    mw_ui_proxy_forward(&p, "GET", "metadata", "", NULL, 0, &r);
    assert_int_equal(r.status, 502);
    assert_non_null(strstr(r.body, "answered HTTP 500: Internal Server Error\""));
    release(&r);
    mw_ui_proxy_forward(&p, "GET", "query_range", "", NULL, 0, &r);
    assert_int_equal(r.status, 502);
    snprintf(want, sizeof(want),
             "{\"status\":\"error\",\"errorType\":\"upstream\",\"error\":\"query-url %s: "
             "answer to /api/v1/query_range larger than 1 KiB\"}",
             shown);
    assert_string_equal(r.body, want);
    release(&r);
    mw_ui_proxy_forward(&p, "GET", "status/buildinfo", "", NULL, 0, &r);
    assert_int_equal(r.status, 504);
    snprintf(want, sizeof(want),
             "{\"status\":\"error\",\"errorType\":\"timeout\",\"error\":\"query-url %s: "
             "no answer to /api/v1/status/buildinfo within 300 ms\"}",
             shown);
    assert_string_equal(r.body, want);
    release(&r);
    /* Paths the UI never needs are not forwarded */
    mw_ui_proxy_forward(&p, "POST", "write", "", "x", 1, &r);
    assert_int_equal(r.status, 404);
    assert_string_equal(r.body, "{\"status\":\"error\",\"errorType\":\"not_found\",\"error\":"
                                "\"the web UI does not forward /api/v1/write\"}");
    release(&r);
    int port = mw_http_port(s);
    mw_http_free(s);

    /* Nobody listening */
    snprintf(url, sizeof(url), "http://user:pw@127.0.0.1:%d", port);
    assert_int_equal(mw_ui_proxy_init(&p, url, 1000, why, sizeof(why)), 0);
    mw_ui_proxy_forward(&p, "GET", "query", "query=1", NULL, 0, &r);
    assert_int_equal(r.status, 502);
    snprintf(want, sizeof(want), "query-url http://127.0.0.1:%d: Couldn", port);
    if (!strstr(r.body, want)) fail_msg("unexpected: %s", r.body);
    assert_null(strstr(r.body, "pw"));
    release(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedded_apart), cmocka_unit_test(test_find),
        cmocka_unit_test(test_etag),           cmocka_unit_test(test_serve),
        cmocka_unit_test(test_embedded),       cmocka_unit_test(test_proxy_init),
        cmocka_unit_test(test_proxy_allowed),  cmocka_unit_test(test_proxy_forward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
