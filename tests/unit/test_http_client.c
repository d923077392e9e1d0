/* test_http_client.c - the one outbound HTTP client (core/http_client.c)
 * against local servers: mlwatch's own HTTP server for plain HTTP, and
 * `openssl s_server` with a self-signed certificate for TLS. */
#include "core/http_client.h"
#include "serve/http.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

/* ---- a plain HTTP server: one path per behaviour ---- */

static void serve(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    (void)cls;
    const char *p = req->path;
    if (strcmp(p, "/big") == 0) {
        char *big = malloc(4096);
        memset(big, 'x', 4096);
        resp->status = 200;
        resp->body = big;
        resp->len = 4096;
    } else if (strcmp(p, "/slow") == 0) {
        usleep(1500 * 1000);
        mw_http_text(resp, 200, "late");
    } else if (strcmp(p, "/echo") == 0) {
        const char *auth = mw_http_header(req, "Authorization");
        const char *x = mw_http_header(req, "X-Test");
        mw_http_text(resp, 201, "%s %s auth=%s x=%s", req->method, req->body_len ? req->body : "-",
                     auth ? auth : "-", x ? x : "-");
        mw_http_add_header(resp, "Retry-After", "7");
    } else {
        mw_http_text(resp, 404, "no such path\n");
    }
}

static mw_http_server *server;
static int port;

static int start_server(void **st)
{
    (void)st;
    server = mw_http_new(1 << 20);
    mw_http_route(server, MW_ROLE_PUBLIC, NULL, "/", 1, serve, NULL);
    char err[256];
    if (mw_http_start(server, "127.0.0.1:0", err, sizeof(err)) < 0) return -1;
    port = mw_http_port(server);
    return 0;
}

static void stop_tls(void);

static int stop_server(void **st)
{
    (void)st;
    mw_http_free(server);
    stop_tls();
    return 0;
}

static void url(char *out, size_t n, const char *userinfo, const char *path)
{
    snprintf(out, n, "http://%s127.0.0.1:%d%s", userinfo, port, path);
}

/* An answer over max_body is an error that names the cap; the URL's
 * user:password@ and the bearer token appear nowhere in it. */
static void test_body_cap(void **st)
{
    (void)st;
    char u[128], want[256];
    url(u, sizeof(u), "bob:s3cret@", "/big");
    mw_http_call call = {.url = u, .bearer_token = "tok-abc-123", .max_body = 1024};
    assert_int_equal(mw_http_perform(NULL, &call), -1);
    assert_int_equal(call.failure, MW_HTTP_TOO_LARGE);
    snprintf(want, sizeof(want), "http://127.0.0.1:%d/big: answer larger than 1024 bytes", port);
    assert_string_equal(call.error, want);
    mw_http_call_free(&call);

    /* The same answer within a larger cap is whole. */
    call = (mw_http_call){.url = u, .max_body = 4096};
    assert_int_equal(mw_http_perform(NULL, &call), 0);
    assert_int_equal(call.status, 200);
    assert_int_equal(call.answer.len, 4096);
    assert_string_equal(call.error, "");
    mw_http_call_free(&call);

    /* truncate keeps the start and reads on; max_body 0 discards. */
    call = (mw_http_call){.url = u, .max_body = 10, .truncate = 1};
    assert_int_equal(mw_http_perform(NULL, &call), 0);
    assert_string_equal(call.answer.data, "xxxxxxxxxx");
    mw_http_call_free(&call);
    call = (mw_http_call){.url = u};
    assert_int_equal(mw_http_perform(NULL, &call), 0);
    assert_int_equal(call.status, 200);
    assert_int_equal(call.answer.len, 0);
    mw_http_call_free(&call);
}

static void test_timeout(void **st)
{
    (void)st;
    char u[128], want[256];
    url(u, sizeof(u), "", "/slow");
    mw_http_call call = {.url = u, .timeout_ms = 200, .connect_timeout_ms = 200, .max_body = 64};
    assert_int_equal(mw_http_perform(NULL, &call), -1);
    assert_int_equal(call.failure, MW_HTTP_TIMEOUT);
    /* libcurl's detail goes on with the milliseconds it waited. */
    snprintf(want, sizeof(want),
             "http://127.0.0.1:%d/slow: Timeout was reached: Operation timed out after ", port);
    assert_memory_equal(call.error, want, strlen(want));
    mw_http_call_free(&call);
}

/* POST with a body and headers, through a kept connection; the answer's
 * headers reach on_header. */
static void on_header(const char *line, size_t n, void *cls)
{
    if (n > 12 && strncmp(line, "Retry-After:", 12) == 0) snprintf(cls, 32, "%.*s", 3, line + 12);
}

static void test_post_headers(void **st)
{
    (void)st;
    char u[128], retry[32] = "";
    url(u, sizeof(u), "", "/echo");
    mw_http_client *c = mw_http_client_new();
    assert_non_null(c);
    for (int round = 0; round < 2; round++) {
        mw_http_call call = {.url = u,
                             .post = 1,
                             .body = "hello",
                             .body_len = 5,
                             .headers = {"X-Test: 1"},
                             .bearer_token = "tok",
                             .max_body = 1024,
                             .on_header = on_header,
                             .cls = retry};
        assert_int_equal(mw_http_perform(c, &call), 0);
        assert_int_equal(call.status, 201);
        assert_string_equal(call.answer.data, "POST hello auth=Bearer tok x=1");
        assert_string_equal(retry, " 7\r");
        mw_http_call_free(&call);
    }
    /* A GET on the same connection carries nothing of the POST. */
    mw_http_call call = {.url = u, .max_body = 1024};
    assert_int_equal(mw_http_perform(c, &call), 0);
    assert_string_equal(call.answer.data, "GET - auth=- x=-");
    mw_http_call_free(&call);
    mw_http_client_free(c);
}

static int refuse(const char *p, size_t n, void *cls)
{
    (void)p;
    (void)n;
    (void)cls;
    return -1;
}

static void test_on_data_stops(void **st)
{
    (void)st;
    char u[128];
    url(u, sizeof(u), "", "/big");
    mw_http_call call = {.url = u, .on_data = refuse};
    assert_int_equal(mw_http_perform(NULL, &call), -1);
    assert_int_equal(call.failure, MW_HTTP_WRITE);
    mw_http_call_free(&call);
}

static void test_connect_refused(void **st)
{
    (void)st;
    /* A port nothing listens on: the server's, once it is stopped. */
    mw_http_server *s = mw_http_new(0);
    char err[256];
    assert_int_equal(mw_http_start(s, "127.0.0.1:0", err, sizeof(err)), 0);
    int p = mw_http_port(s);
    mw_http_free(s);
    char u[128];
    snprintf(u, sizeof(u), "http://alice:pa55word@127.0.0.1:%d/", p);
    mw_http_call call = {.url = u, .password = "pa55word", .connect_timeout_ms = 2000};
    assert_int_equal(mw_http_perform(NULL, &call), -1);
    assert_int_equal(call.failure, MW_HTTP_CONNECT);
    assert_null(strstr(call.error, "pa55word"));
    assert_null(strstr(call.error, "alice"));
    char want[128];
    snprintf(want, sizeof(want), "http://127.0.0.1:%d/: Couldn't connect to server", p);
    assert_memory_equal(call.error, want, strlen(want));
    mw_http_call_free(&call);
}

static void test_redact(void **st)
{
    (void)st;
    char t[256] = "GET https://bob:hunter2@example.com:8443/x failed; Authorization: Bearer "
                  "abc.def sent; Basic Ym9iOmh1bnRlcjI= too; password pw-42 rejected";
    const char *secrets[] = {"pw-42", "", NULL};
    mw_http_redact(t, sizeof(t), secrets);
    assert_string_equal(t, "GET https://example.com:8443/x failed; Authorization: Bearer "
                           "[redacted] sent; Basic [redacted] too; password [redacted] rejected");
    /* Twice is the same as once. */
    mw_http_redact(t, sizeof(t), secrets);
    assert_string_equal(t, "GET https://example.com:8443/x failed; Authorization: Bearer "
                           "[redacted] sent; Basic [redacted] too; password [redacted] rejected");
    /* A password holding '@': up to the authority's last one. */
    char shown[128];
    mw_http_shown_url("http://u:p@ss@host:9090/api?x=a@b", shown, sizeof(shown));
    assert_string_equal(shown, "http://host:9090/api?x=a@b");
    mw_http_shown_url("http://host:9090", shown, sizeof(shown));
    assert_string_equal(shown, "http://host:9090");
    /* A short room truncates, never overflows. */
    char small[16] = "secret-value";
    const char *one[] = {"secret-value", NULL};
    mw_http_redact(small, sizeof(small), one);
    assert_string_equal(small, "[redacted]");
    char tiny[8] = "ab";
    const char *ab[] = {"ab", NULL};
    mw_http_redact(tiny, sizeof(tiny), ab);
    assert_string_equal(tiny, "[redact");
}

/* ---- TLS: openssl s_server with a self-signed certificate ---- */

static char tls_dir[] = "/tmp/mlwatch-httpc-XXXXXX";
static pid_t tls_pid;
static int tls_port;

static int start_tls(void)
{
    if (!mkdtemp(tls_dir)) return -1;
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 "
             "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 -keyout %s/key.pem "
             "-out %s/cert.pem >/dev/null 2>&1",
             tls_dir, tls_dir);
    if (system(cmd) != 0) return -1;
    /* It says its port on stdout ("ACCEPT 127.0.0.1:PORT"), into a file
     * read until it does (10 s at most). */
    char out[128];
    snprintf(out, sizeof(out), "%s/s_server.out", tls_dir);
    tls_pid = fork();
    if (tls_pid == 0) {
        if (!freopen(out, "w", stdout)) _exit(127);
        dup2(1, 2);
        char cert[128], key[128];
        snprintf(cert, sizeof(cert), "%s/cert.pem", tls_dir);
        snprintf(key, sizeof(key), "%s/key.pem", tls_dir);
        execlp("openssl", "openssl", "s_server", "-accept", "127.0.0.1:0", "-cert", cert, "-key",
               key, "-www", (char *)NULL);
        _exit(127);
    }
    tls_port = 0;
    for (int i = 0; i < 1000 && !tls_port; i++) {
        FILE *f = fopen(out, "r");
        char line[256];
        while (f && fgets(line, sizeof(line), f))
            if (sscanf(line, "ACCEPT 127.0.0.1:%d", &tls_port) == 1) break;
        if (f) fclose(f);
        if (!tls_port) usleep(10 * 1000);
    }
    return tls_port ? 0 : -1;
}

/* From the group's teardown too: a failed assertion leaves test_tls early. */
static void stop_tls(void)
{
    if (tls_pid > 0) {
        kill(tls_pid, SIGTERM);
        waitpid(tls_pid, NULL, 0);
        tls_pid = 0;
    }
    if (strstr(tls_dir, "XXXXXX")) return; /* never made */
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tls_dir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", tls_dir);
    strcpy(tls_dir + strlen(tls_dir) - 6, "XXXXXX");
}

static void test_tls(void **st)
{
    (void)st;
    /* scripts/install-deps.sh installs openssl: without it, fail, never skip. */
    if (system("command -v openssl >/dev/null 2>&1") != 0) fail_msg("openssl is not installed");
    assert_int_equal(start_tls(), 0);
    char u[128], want[512], ca[128];
    snprintf(u, sizeof(u), "https://127.0.0.1:%d/", tls_port);
    /* Not trusted: the message says so, in libcurl's and OpenSSL's words. */
    mw_http_call call = {.url = u, .timeout_ms = 10000, .max_body = 1 << 20};
    assert_int_equal(mw_http_perform(NULL, &call), -1);
    assert_int_equal(call.failure, MW_HTTP_TLS_VERIFY);
    snprintf(want, sizeof(want),
             "https://127.0.0.1:%d/: SSL peer certificate or SSH remote key was not OK: SSL "
             "certificate problem: self-signed certificate",
             tls_port);
    assert_string_equal(call.error, want);
    mw_http_call_free(&call);
    /* Trusted through ca_file. */
    snprintf(ca, sizeof(ca), "%s/cert.pem", tls_dir);
    call = (mw_http_call){.url = u, .timeout_ms = 10000, .max_body = 1 << 20, .tls.ca_file = ca};
    assert_int_equal(mw_http_perform(NULL, &call), 0);
    assert_int_equal(call.status, 200);
    mw_http_call_free(&call);
    /* Or not checked at all, where a caller offers that. */
    call = (mw_http_call){
        .url = u, .timeout_ms = 10000, .max_body = 1 << 20, .tls.insecure_skip_verify = 1};
    assert_int_equal(mw_http_perform(NULL, &call), 0);
    assert_int_equal(call.status, 200);
    mw_http_call_free(&call);
    stop_tls();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_body_cap),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_post_headers),
        cmocka_unit_test(test_on_data_stops),
        cmocka_unit_test(test_connect_refused),
        cmocka_unit_test(test_redact),
        cmocka_unit_test(test_tls),
    };
    return cmocka_run_group_tests(tests, start_server, stop_server);
}
