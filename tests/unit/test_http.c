/* test_http.c - the router over libmicrohttpd (src/serve/http.c), driven
 * through a real server on 127.0.0.1:0 with plain sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/buf.h"
#include "serve/http.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- a minimal HTTP/1.1 client: one request per connection ---- */

typedef struct reply {
    int status;
    char *raw;     /* the whole response */
    char *headers; /* inside raw: from the status line to the blank line */
    char *body;    /* inside raw */
    size_t len;    /* body length */
} reply;

static int connect_to(int family, int port)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int rc;
    if (family == AF_INET6) {
        struct sockaddr_in6 a = {0};
        a.sin6_family = AF_INET6;
        a.sin6_port = htons((uint16_t)port);
        a.sin6_addr = in6addr_loopback;
        rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
    } else {
        struct sockaddr_in a = {0};
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t)port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
    }
    if (rc < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Send METHOD PATH with extra header lines ("Name: value\r\n...") and an
 * optional body; read the reply to the end. Returns 0 or -1. */
static int request6(int family, int port, const char *method, const char *path, const char *extra,
                    const char *body, size_t body_len, reply *r)
{
    memset(r, 0, sizeof(*r));
    int fd = connect_to(family, port);
    if (fd < 0) return -1;
    mw_buf req;
    mw_buf_init(&req, 0);
    mw_buf_printf(&req, "%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n%s", method,
                  path, extra ? extra : "");
    if (body) mw_buf_printf(&req, "Content-Length: %zu\r\n", body_len);
    mw_buf_puts(&req, "\r\n");
    int rc = send_all(fd, req.data, req.len);
    if (rc == 0 && body) rc = send_all(fd, body, body_len);
    mw_buf_free(&req);
    mw_buf in;
    mw_buf_init(&in, 0);
    char chunk[16384];
    for (;;) {
        ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        mw_buf_append(&in, chunk, (size_t)n);
    }
    close(fd);
    size_t total;
    r->raw = mw_buf_steal(&in, &total);
    char *end = strstr(r->raw, "\r\n\r\n");
    if (strncmp(r->raw, "HTTP/1.1 ", 9) != 0 || !end) return -1;
    r->status = atoi(r->raw + 9);
    end[2] = '\0'; /* headers keep their last CRLF */
    r->headers = r->raw;
    r->body = end + 4;
    r->len = total - (size_t)(r->body - r->raw);
    return 0;
}

static int request(int port, const char *method, const char *path, const char *extra,
                   const char *body, size_t body_len, reply *r)
{
    return request6(AF_INET, port, method, path, extra, body, body_len, r);
}

/* Value of a response header (case-insensitive name), copied; NULL if absent. */
static const char *header(const reply *r, const char *name)
{
    static char value[512];
    size_t n = strlen(name);
    for (const char *p = strstr(r->headers, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
        const char *line = p + 2;
        if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
            const char *v = line + n + 1;
            while (*v == ' ')
                v++;
            size_t len = (size_t)(strstr(v, "\r\n") - v);
            if (len >= sizeof(value)) len = sizeof(value) - 1;
            memcpy(value, v, len);
            value[len] = '\0';
            return value;
        }
    }
    return NULL;
}

static void reply_free(reply *r)
{
    free(r->raw);
    memset(r, 0, sizeof(*r));
}

/* ---- handlers ---- */

static void hello(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    (void)cls;
    (void)req;
    mw_http_text(resp, 200, "hello\n");
}

static void echo(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    (void)cls;
    resp->status = 201;
    resp->content_type = "application/octet-stream";
    resp->body = malloc(req->body_len ? req->body_len : 1);
    memcpy(resp->body, req->body, req->body_len);
    resp->len = req->body_len;
}

static void describe(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    (void)cls;
    const char *name = mw_http_arg(req, "name");
    const char *hdr = mw_http_header(req, "X-Test");
    mw_http_text(resp, 200, "%s %s name=%s x-test=%s body=%zu\n", req->method, req->path,
                 name ? name : "(none)", hdr ? hdr : "(none)", req->body_len);
}

static const char static_page[] = "<p>static</p>\n";

static void static_body(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    (void)cls;
    (void)req;
    resp->content_type = "text/html";
    resp->body = (char *)static_page;
    resp->len = sizeof(static_page) - 1;
    resp->body_static = 1;
    for (int i = 0; i < MW_HTTP_MAX_HEADERS + 2; i++) /* two more than fit: dropped, not overrun */
        mw_http_add_header(resp, i % 2 ? "X-Odd" : "X-Even", i % 2 ? "odd" : "even");
}

static atomic_int freed;

static void count_free(void *cls)
{
    atomic_fetch_add(&freed, 1);
    free(cls);
}

static void custom_free(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    (void)cls;
    (void)req;
    char *body = strdup("custom\n");
    resp->body = body;
    resp->len = strlen(body);
    resp->free_fn = count_free;
    resp->free_cls = body;
}

static void teapot(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    (void)req;
    mw_http_text(resp, 418, "%s", (const char *)cls);
    mw_http_add_header(resp, "X-Prefix", "yes");
}

static mw_http_server *start(int *port)
{
    mw_http_server *s = mw_http_new(1024);
    mw_http_route(s, MW_ROLE_PUBLIC, "GET", "/hello", 0, hello, NULL);
    mw_http_route(s, MW_ROLE_PUBLIC, "POST", "/echo", 0, echo, NULL);
    mw_http_route(s, MW_ROLE_PUBLIC, "PUT", "/echo", 0, echo, NULL);
    mw_http_route(s, MW_ROLE_PUBLIC, NULL, "/any", 0, describe, NULL);
    mw_http_route(s, MW_ROLE_PUBLIC, "GET", "/static", 0, static_body, NULL);
    mw_http_route(s, MW_ROLE_PUBLIC, "GET", "/custom", 0, custom_free, NULL);
    mw_http_route(s, MW_ROLE_PUBLIC, "GET", "/tea/", 1, teapot, "short and stout\n");
    char err[256] = "";
    if (mw_http_start(s, "127.0.0.1:0", err, sizeof(err)) < 0) fail_msg("start: %s", err);
    *port = mw_http_port(s);
    assert_true(*port > 0 && *port < 65536);
    return s;
}

static void routes(void **state)
{
    (void)state;
    int port;
    mw_http_server *s = start(&port);
    reply r;

    assert_int_equal(request(port, "GET", "/hello", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(header(&r, "Content-Type"), "text/plain; charset=utf-8");
    assert_string_equal(header(&r, "Content-Length"), "6");
    assert_int_equal(r.len, 6);
    assert_memory_equal(r.body, "hello\n", 6);
    reply_free(&r);

    /* The query string is not part of the path; its arguments are readable. */
    assert_int_equal(
        request(port, "GET", "/any?name=x%20y&other=1", "X-Test: abc\r\n", NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "GET /any name=x y x-test=abc body=0\n");
    reply_free(&r);

    /* A route without a method takes any. */
    assert_int_equal(request(port, "DELETE", "/any", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "DELETE /any name=(none) x-test=(none) body=0\n");
    reply_free(&r);

    /* Prefix routes. */
    assert_int_equal(request(port, "GET", "/tea/pot/1", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 418);
    assert_string_equal(r.body, "short and stout\n");
    assert_string_equal(header(&r, "X-Prefix"), "yes");
    reply_free(&r);
    assert_int_equal(request(port, "GET", "/tea", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 404);
    reply_free(&r);

    /* Static bodies and the header limit. */
    assert_int_equal(request(port, "GET", "/static", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(header(&r, "Content-Type"), "text/html");
    assert_string_equal(r.body, static_page);
    assert_non_null(header(&r, "X-Even"));
    assert_non_null(header(&r, "X-Odd"));
    int count = 0;
    for (const char *p = r.headers; (p = strcasestr(p, "\r\nX-")); p += 2)
        count++;
    assert_int_equal(count, MW_HTTP_MAX_HEADERS);
    reply_free(&r);

    /* A custom free function runs exactly once per response. */
    atomic_store(&freed, 0);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(request(port, "GET", "/custom", NULL, NULL, 0, &r), 0);
        assert_string_equal(r.body, "custom\n");
        reply_free(&r);
    }
    mw_http_free(s); /* waits for the connections: every body is released */
    assert_int_equal(atomic_load(&freed), 5);
}

static void errors(void **state)
{
    (void)state;
    int port;
    mw_http_server *s = start(&port);
    reply r;

    assert_int_equal(request(port, "GET", "/nope/deeper", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 404);
    assert_string_equal(header(&r, "Content-Type"), "text/plain; charset=utf-8");
    assert_string_equal(r.body, "no such path: /nope/deeper\n");
    reply_free(&r);

    /* 405 names the method and the path, and lists what is allowed. */
    assert_int_equal(request(port, "POST", "/hello", NULL, "x", 1, &r), 0);
    assert_int_equal(r.status, 405);
    assert_string_equal(r.body, "method POST not allowed on /hello\n");
    assert_string_equal(header(&r, "Allow"), "GET, HEAD");
    reply_free(&r);
    assert_int_equal(request(port, "GET", "/echo", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 405);
    assert_string_equal(r.body, "method GET not allowed on /echo\n");
    assert_string_equal(header(&r, "Allow"), "POST, PUT");
    reply_free(&r);

    /* HEAD on a GET route: the headers of GET, no body. */
    assert_int_equal(request(port, "HEAD", "/hello", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(header(&r, "Content-Length"), "6");
    assert_int_equal(r.len, 0);
    reply_free(&r);

    /* Bodies: up to the bound they arrive whole; beyond it, 413. */
    char body[2048];
    for (size_t i = 0; i < sizeof(body); i++)
        body[i] = (char)(i * 7);
    assert_int_equal(request(port, "POST", "/echo", NULL, body, 1024, &r), 0);
    assert_int_equal(r.status, 201);
    assert_int_equal(r.len, 1024);
    assert_memory_equal(r.body, body, 1024);
    reply_free(&r);
    assert_int_equal(request(port, "POST", "/echo", NULL, body, 1025, &r), 0);
    assert_int_equal(r.status, 413);
    assert_string_equal(r.body, "request body larger than 1024 bytes\n");
    reply_free(&r);
    assert_int_equal(request(port, "PUT", "/echo", NULL, body, sizeof(body), &r), 0);
    assert_int_equal(r.status, 413);
    reply_free(&r);
    /* The server is still fine afterwards. */
    assert_int_equal(request(port, "POST", "/echo", NULL, "abc", 3, &r), 0);
    assert_int_equal(r.status, 201);
    assert_string_equal(r.body, "abc");
    reply_free(&r);
    mw_http_free(s);
}

static void start_errors(void **state)
{
    (void)state;
    char err[256];
    mw_http_server *s = mw_http_new(0);
    assert_int_equal(mw_http_start(s, "nonsense", err, sizeof(err)), -1);
    assert_string_equal(err, "invalid listen address 'nonsense'");
    assert_int_equal(mw_http_start(s, "127.0.0.1:99999", err, sizeof(err)), -1);
    assert_string_equal(err, "invalid listen address '127.0.0.1:99999'");
    mw_http_free(s);

    /* A port that is taken. */
    int port;
    mw_http_server *a = start(&port);
    char listen[64], want[256];
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
    mw_http_server *b = mw_http_new(0);
    assert_int_equal(mw_http_start(b, listen, err, sizeof(err)), -1);
    snprintf(want, sizeof(want), "cannot listen on %s (address in use or not available)", listen);
    assert_string_equal(err, want);
    mw_http_free(b);
    mw_http_free(a);
    mw_http_free(NULL);
}

static void ipv6_and_all_interfaces(void **state)
{
    (void)state;
    char err[256];
    reply r;
    /* Empty host: all interfaces (dual stack, or IPv4 only without IPv6). */
    mw_http_server *s = mw_http_new(0);
    mw_http_route(s, MW_ROLE_PUBLIC, "GET", "/hello", 0, hello, NULL);
    assert_int_equal(mw_http_start(s, ":0", err, sizeof(err)), 0);
    int port = mw_http_port(s);
    assert_true(port > 0);
    assert_int_equal(request(port, "GET", "/hello", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    reply_free(&r);
    mw_http_free(s);

    s = mw_http_new(0);
    mw_http_route(s, MW_ROLE_PUBLIC, "GET", "/hello", 0, hello, NULL);
    /* Debian's loopback has ::1 (CI's machine too): a machine without it
     * fails here rather than skipping the IPv6 half of the test. */
    if (mw_http_start(s, "[::1]:0", err, sizeof(err)) < 0) fail_msg("no IPv6 loopback: %s", err);
    port = mw_http_port(s);
    assert_int_equal(request6(AF_INET6, port, "GET", "/hello", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "hello\n");
    reply_free(&r);
    mw_http_free(s);
}

static int client_port;

/* GnuTLS comes with libmicrohttpd but is not started before main() (http.c):
 * its digests refuse to work until someone starts it, and a start asked for
 * after main() (as libcurl-gnutls does) is GnuTLS's own and works. GnuTLS
 * is found through the process, the way libcurl-gnutls finds it. */
static void gnutls_started_only_when_asked(void **state)
{
    (void)state;
    typedef int (*hash_fast_fn)(gnutls_digest_algorithm_t, const void *, size_t, void *);
    void *sym = dlsym(RTLD_DEFAULT, "gnutls_hash_fast");
    assert_non_null(sym);
    hash_fast_fn hash_fast;
    memcpy(&hash_fast, &sym, sizeof(hash_fast));
    unsigned char digest[32] = {0};
    assert_int_equal(hash_fast(GNUTLS_DIG_SHA256, "abc", 3, digest), GNUTLS_E_LIB_IN_ERROR_STATE);

    /* Looked up as libcurl-gnutls's call is bound: the executable's first. */
    int (*init)(void);
    sym = dlsym(RTLD_DEFAULT, "gnutls_global_init");
    assert_non_null(sym);
    memcpy(&init, &sym, sizeof(init));
    assert_int_equal(init(), 0);
    assert_int_equal(hash_fast(GNUTLS_DIG_SHA256, "abc", 3, digest), 0);
    /* SHA-256("abc"), FIPS 180-2 appendix B.1 */
    static const unsigned char want[32] = {0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea,
                                           0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
                                           0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c,
                                           0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};
    assert_memory_equal(digest, want, sizeof(want));
    void (*deinit)(void);
    sym = dlsym(RTLD_DEFAULT, "gnutls_global_deinit");
    assert_non_null(sym);
    memcpy(&deinit, &sym, sizeof(deinit));
    deinit();
}

static void *client(void *arg)
{
    long failures = 0;
    (void)arg;
    for (int i = 0; i < 100; i++) {
        reply r;
        if (request(client_port, "GET", i % 2 ? "/hello" : "/custom", NULL, NULL, 0, &r) < 0 ||
            r.status != 200 || strcmp(r.body, i % 2 ? "hello\n" : "custom\n") != 0)
            failures++;
        reply_free(&r);
    }
    return (void *)failures;
}

static void concurrent(void **state)
{
    (void)state;
    mw_http_server *s = start(&client_port);
    atomic_store(&freed, 0);
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, client, NULL);
    long failures = 0;
    for (int i = 0; i < 8; i++) {
        void *f;
        pthread_join(t[i], &f);
        failures += (long)f;
    }
    mw_http_free(s);
    assert_int_equal(failures, 0);
    assert_int_equal(atomic_load(&freed), 8 * 50);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(routes),       cmocka_unit_test(errors),
        cmocka_unit_test(start_errors), cmocka_unit_test(ipv6_and_all_interfaces),
        cmocka_unit_test(concurrent),   cmocka_unit_test(gnutls_started_only_when_asked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
