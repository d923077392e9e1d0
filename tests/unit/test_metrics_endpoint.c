/* test_metrics_endpoint.c - /metrics served from published snapshots
 * (src/serve/metrics_endpoint.c) through a real server on 127.0.0.1:0:
 * formats, gzip, reference counting across publications, and concurrent
 * scrapes while the collection loop publishes (run under ASan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/buf.h"
#include "core/snapshot.h"
#include "serve/exposition.h"
#include "serve/http.h"
#include "serve/metrics_endpoint.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

/* ---- a minimal HTTP/1.1 client: one request per connection ---- */

typedef struct reply {
    int status;
    int chunked; /* the body came with Transfer-Encoding: chunked (decoded) */
    char *raw;
    char *headers;
    char *body;
    size_t len;
} reply;

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

/* Decode a chunked body in place (RFC 9112 7.1): 0, or -1 when malformed. */
static int dechunk(reply *r)
{
    const char *in = r->body, *end = r->body + r->len;
    char *out = r->body;
    for (;;) {
        char *eol;
        unsigned long n = strtoul(in, &eol, 16);
        if (eol == in || end - eol < 2 || memcmp(eol, "\r\n", 2) != 0) return -1;
        in = eol + 2;
        if (n == 0) break;
        if ((size_t)(end - in) < n + 2 || memcmp(in + n, "\r\n", 2) != 0) return -1;
        memmove(out, in, n);
        out += n;
        in += n + 2;
    }
    r->len = (size_t)(out - r->body);
    *out = '\0';
    return 0;
}

static int get(int port, const char *path, const char *extra, reply *r)
{
    memset(r, 0, sizeof(*r));
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    char req[1024];
    int n = snprintf(req, sizeof(req),
                     "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n%s\r\n", path,
                     extra ? extra : "");
    if (send_all(fd, req, (size_t)n) < 0) {
        close(fd);
        return -1;
    }
    mw_buf in;
    mw_buf_init(&in, 0);
    char chunk[16384];
    for (;;) {
        ssize_t got = recv(fd, chunk, sizeof(chunk), 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        mw_buf_append(&in, chunk, (size_t)got);
    }
    close(fd);
    size_t total;
    r->raw = mw_buf_steal(&in, &total);
    char *end = strstr(r->raw, "\r\n\r\n");
    if (strncmp(r->raw, "HTTP/1.1 ", 9) != 0 || !end) return -1;
    r->status = atoi(r->raw + 9);
    end[2] = '\0';
    r->headers = r->raw;
    r->body = end + 4;
    r->len = total - (size_t)(r->body - r->raw);
    r->chunked = strcasestr(r->headers, "\r\nTransfer-Encoding: chunked\r\n") != NULL;
    return r->chunked ? dechunk(r) : 0;
}

/* A header's value copied into out; returns out, or NULL when absent. */
static const char *header(const reply *r, const char *name, char *out, size_t size)
{
    size_t n = strlen(name);
    for (const char *p = strstr(r->headers, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
        const char *line = p + 2;
        if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
            const char *v = line + n + 1;
            while (*v == ' ')
                v++;
            size_t len = (size_t)(strstr(v, "\r\n") - v);
            if (len >= size) len = size - 1;
            memcpy(out, v, len);
            out[len] = '\0';
            return out;
        }
    }
    return NULL;
}

static void reply_free(reply *r)
{
    free(r->raw);
    memset(r, 0, sizeof(*r));
}

/* gunzip; returns a malloc'd buffer (NUL-terminated) or NULL if not valid gzip. */
static char *gunzip(const char *in, size_t len, size_t *outlen)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (inflateInit2(&z, 15 + 16) != Z_OK) return NULL;
    size_t cap = len * 4 + 64, off = 0;
    char *out = malloc(cap);
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)len;
    int rc;
    do {
        if (cap - off < 4096) {
            char *bigger = realloc(out, cap *= 2);
            if (!bigger) break;
            out = bigger;
        }
        z.next_out = (Bytef *)out + off;
        z.avail_out = (uInt)(cap - off - 1);
        rc = inflate(&z, Z_NO_FLUSH);
        off = cap - 1 - z.avail_out;
    } while (rc == Z_OK);
    inflateEnd(&z);
    if (rc != Z_STREAM_END || z.avail_in != 0) {
        free(out);
        return NULL;
    }
    out[off] = '\0';
    *outlen = off;
    return out;
}

/* ---- snapshots ---- */

static const mw_metric_desc SEQ = {"mlwatch_test_sequence", "Publication number", "", MW_GAUGE};
static const mw_metric_desc BYTES = {"mlwatch_test_bytes_total", "Bytes \"moved\"", "bytes",
                                     MW_COUNTER};
static const mw_metric_desc INFO = {"mlwatch_test_info", "Identity", "", MW_INFO};

/* Snapshot number seq: a few hundred samples, its number last. */
static mw_snapshot *make_snapshot(int seq)
{
    mw_snapshot *s = mw_snapshot_new();
    mw_emit(s, &INFO, 1, "version", "0.1.0", MW_END);
    for (int i = 0; i < 300; i++) {
        char dev[16];
        snprintf(dev, sizeof(dev), "dev%d", i);
        mw_emit(s, &BYTES, (double)seq * 1000 + i, "device", dev, "path", "/a\\b\"c\n", MW_END);
    }
    mw_emit(s, &SEQ, seq, MW_END);
    return s;
}

static char *expected(int seq, mw_format fmt, size_t *len)
{
    mw_snapshot *s = make_snapshot(seq);
    mw_buf b;
    mw_buf_init(&b, 0);
    mw_render(s, fmt, &b);
    mw_snapshot_free(s);
    return mw_buf_steal(&b, len);
}

/* The publication number at the end of a rendered body, or -1. */
static int seq_of(const char *body, mw_format fmt)
{
    const char *p = strstr(body, "\nmlwatch_test_sequence ");
    if (!p) return -1;
    int seq = atoi(p + 23);
    const char *end = strchr(p + 1, '\n');
    if (!end) return -1;
    if (fmt == MW_FMT_OPENMETRICS ? strcmp(end, "\n# EOF\n") != 0 : end[1] != '\0') return -1;
    return seq;
}

/* ---- server ---- */

static void scrape_then_publish(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    mw_published *p = cls;
    mw_metrics_handler(p, req, resp);
    /* Two newer cycles are published before this response is sent: the
     * response is now the only holder of the bytes it points to. */
    mw_published_update(p, make_snapshot(1001));
    mw_published_update(p, make_snapshot(1002));
}

static mw_http_server *server(mw_published *pub, int *port)
{
    mw_http_server *s = mw_http_new(0);
    mw_http_route(s, MW_ROLE_METRICS, "GET", "/metrics", 0, mw_metrics_handler, pub);
    mw_http_route(s, MW_ROLE_PUBLIC, "GET", "/slow", 0, scrape_then_publish, pub);
    char err[256];
    if (mw_http_start(s, "127.0.0.1:0", err, sizeof(err)) < 0) fail_msg("%s", err);
    *port = mw_http_port(s);
    return s;
}

static void before_first_publish(void **state)
{
    (void)state;
    mw_published *pub = mw_published_new();
    int port;
    mw_http_server *s = server(pub, &port);
    reply r;
    char v[256];
    assert_int_equal(get(port, "/metrics", NULL, &r), 0);
    assert_int_equal(r.status, 503);
    assert_string_equal(r.body, "no collection has completed yet; retry in a moment\n");
    assert_string_equal(header(&r, "Retry-After", v, sizeof(v)), "1");
    assert_string_equal(header(&r, "Content-Type", v, sizeof(v)), "text/plain; charset=utf-8");
    reply_free(&r);

    mw_published_update(pub, make_snapshot(1));
    assert_int_equal(get(port, "/metrics", NULL, &r), 0);
    assert_int_equal(r.status, 200);
    reply_free(&r);
    mw_http_free(s);
    mw_published_free(pub);
    mw_published_free(NULL);
}

static void formats_and_gzip(void **state)
{
    (void)state;
    mw_published *pub = mw_published_new();
    int port;
    mw_http_server *s = server(pub, &port);
    mw_published_update(pub, make_snapshot(7));
    size_t tlen, olen;
    char *text = expected(7, MW_FMT_TEXT, &tlen);
    char *om = expected(7, MW_FMT_OPENMETRICS, &olen);
    const struct {
        const char *headers;
        mw_format fmt;
        int gz;
    } cases[] = {
        {NULL, MW_FMT_TEXT, 0},
        {"Accept: text/plain;version=0.0.4\r\n", MW_FMT_TEXT, 0},
        {"Accept: application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
         "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n",
         MW_FMT_OPENMETRICS, 0},
        {"Accept-Encoding: gzip\r\n", MW_FMT_TEXT, 1},
        {"Accept-Encoding: gzip;q=0\r\n", MW_FMT_TEXT, 0},
        {"Accept: application/openmetrics-text\r\nAccept-Encoding: deflate, gzip\r\n",
         MW_FMT_OPENMETRICS, 1},
        {"Accept: application/openmetrics-text; version=2.0.0\r\nAccept-Encoding: gzip\r\n",
         MW_FMT_TEXT, 1},
    };
    /* Twice: the second round is served from the bytes rendered by the first. */
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            reply r;
            char v[256];
            assert_int_equal(get(port, "/metrics", cases[i].headers, &r), 0);
            assert_int_equal(r.status, 200);
            assert_string_equal(header(&r, "Content-Type", v, sizeof(v)),
                                cases[i].fmt == MW_FMT_OPENMETRICS ? MW_CONTENT_TYPE_OPENMETRICS
                                                                   : MW_CONTENT_TYPE_TEXT);
            assert_string_equal(header(&r, "Vary", v, sizeof(v)), "Accept, Accept-Encoding");
            const char *want = cases[i].fmt == MW_FMT_OPENMETRICS ? om : text;
            size_t wlen = cases[i].fmt == MW_FMT_OPENMETRICS ? olen : tlen;
            if (cases[i].gz) {
                assert_string_equal(header(&r, "Content-Encoding", v, sizeof(v)), "gzip");
                assert_true(r.len < wlen / 4); /* really compressed */
                size_t plen;
                char *plain = gunzip(r.body, r.len, &plen);
                assert_non_null(plain);
                assert_int_equal(plen, wlen);
                assert_memory_equal(plain, want, wlen);
                free(plain);
            } else {
                assert_null(header(&r, "Content-Encoding", v, sizeof(v)));
                /* Streamed as it is rendered: no length known up front. */
                assert_true(r.chunked);
                assert_null(header(&r, "Content-Length", v, sizeof(v)));
                assert_int_equal(r.len, wlen);
                assert_memory_equal(r.body, want, wlen);
            }
            reply_free(&r);
        }
    }
    free(text);
    free(om);

    /* A newer publication replaces the bytes served. */
    mw_published_update(pub, make_snapshot(8));
    reply r;
    assert_int_equal(get(port, "/metrics", NULL, &r), 0);
    assert_int_equal(seq_of(r.body, MW_FMT_TEXT), 8);
    reply_free(&r);
    mw_http_free(s);
    mw_published_free(pub);
}

static void publish_during_request(void **state)
{
    (void)state;
    mw_published *pub = mw_published_new();
    int port;
    mw_http_server *s = server(pub, &port);
    const char *variants[] = {NULL, "Accept-Encoding: gzip\r\n",
                              "Accept: application/openmetrics-text\r\n"};
    for (int i = 0; i < 3; i++) {
        mw_published_update(pub, make_snapshot(500 + i));
        reply r;
        assert_int_equal(get(port, "/slow", variants[i], &r), 0);
        assert_int_equal(r.status, 200);
        mw_format fmt = i == 2 ? MW_FMT_OPENMETRICS : MW_FMT_TEXT;
        size_t wlen;
        char *want = expected(500 + i, fmt, &wlen);
        char *body = r.body;
        size_t blen = r.len, plen;
        char *plain = NULL;
        if (i == 1) {
            body = plain = gunzip(r.body, r.len, &plen);
            blen = plen;
        }
        assert_non_null(body);
        /* The bytes of the snapshot that was current when the request came,
         * intact although two newer ones replaced it before sending. */
        assert_int_equal(blen, wlen);
        assert_memory_equal(body, want, wlen);
        free(plain);
        free(want);
        reply_free(&r);
        assert_int_equal(get(port, "/metrics", NULL, &r), 0);
        assert_int_equal(seq_of(r.body, MW_FMT_TEXT), 1002);
        reply_free(&r);
    }
    mw_http_free(s);
    mw_published_free(pub);
}

/* ---- concurrent scrapes while publishing ---- */

enum { CLIENTS = 6, SCRAPES = 120 };
static int scrape_port;
static atomic_int clients_done;
static atomic_int published_seq;

static void *scraper(void *arg)
{
    long id = (long)arg, failures = 0;
    int last = 0;
    for (int i = 0; i < SCRAPES; i++) {
        int om = (i + id) % 2, gz = (i / 2 + id) % 2;
        char extra[256];
        snprintf(extra, sizeof(extra), "%s%s", om ? "Accept: application/openmetrics-text\r\n" : "",
                 gz ? "Accept-Encoding: gzip\r\n" : "");
        reply r;
        int floor_seq = atomic_load(&published_seq);
        if (get(scrape_port, "/metrics", extra, &r) < 0 || r.status != 200) {
            failures++;
            reply_free(&r);
            continue;
        }
        char v[64];
        int is_gz = header(&r, "Content-Encoding", v, sizeof(v)) != NULL;
        size_t blen = r.len;
        char *body = is_gz ? gunzip(r.body, r.len, &blen) : r.body;
        mw_format fmt = om ? MW_FMT_OPENMETRICS : MW_FMT_TEXT;
        int seq = body ? seq_of(body, fmt) : -1;
        /* Each scrape sees a whole rendering of one publication, no older
         * than the one before it or the one published when it started. */
        size_t wlen = 0;
        char *want = seq > 0 ? expected(seq, fmt, &wlen) : NULL;
        if (is_gz != gz || seq < last || seq < floor_seq || !want || blen != wlen ||
            memcmp(body, want, wlen) != 0)
            failures++;
        last = seq;
        free(want);
        if (is_gz) free(body);
        reply_free(&r);
    }
    atomic_fetch_add(&clients_done, 1);
    return (void *)failures;
}

static void concurrent_scrapes(void **state)
{
    (void)state;
    mw_published *pub = mw_published_new();
    mw_http_server *s = server(pub, &scrape_port);
    atomic_store(&clients_done, 0);
    int seq = 1;
    mw_published_update(pub, make_snapshot(seq));
    atomic_store(&published_seq, seq);
    pthread_t t[CLIENTS];
    for (long i = 0; i < CLIENTS; i++)
        pthread_create(&t[i], NULL, scraper, (void *)i);
    while (atomic_load(&clients_done) < CLIENTS) {
        mw_published_update(pub, make_snapshot(++seq));
        atomic_store(&published_seq, seq);
        usleep(500);
    }
    long failures = 0;
    for (int i = 0; i < CLIENTS; i++) {
        void *f;
        pthread_join(t[i], &f);
        failures += (long)f;
    }
    mw_http_free(s);
    mw_published_free(pub); /* ASan's leak check: every publication freed */
    assert_int_equal(failures, 0);
    assert_true(seq > 10); /* publications really interleaved with scrapes */
}

/* ---- the cycle served is the last one published ---- */

/* Each scrape gets the last cycle published, whichever renderings of the
 * cycle before were made: a gzip'd one is not served once it is replaced.
 * (That a scrape does not wait for a round under way is the agent loop's
 * part: integ_metrics_slow_collection.) */
static void scrape_gets_last_published(void **state)
{
    (void)state;
    mw_published *pub = mw_published_new();
    int port;
    mw_http_server *s = server(pub, &port);
    mw_published_update(pub, make_snapshot(41));
    const char *variants[] = {NULL, "Accept-Encoding: gzip\r\n"};
    for (int i = 0; i < 2; i++) {
        for (int round = 0; round < 2; round++) {
            reply r;
            assert_int_equal(get(port, "/metrics", variants[i], &r), 0);
            assert_int_equal(r.status, 200);
            size_t blen = r.len;
            char *body = i == 1 ? gunzip(r.body, r.len, &blen) : r.body;
            assert_non_null(body);
            assert_int_equal(seq_of(body, MW_FMT_TEXT), 41 + 2 * i + round);
            if (i == 1) free(body);
            reply_free(&r);
            mw_published_update(pub, make_snapshot(42 + 2 * i + round));
        }
    }
    mw_http_free(s);
    mw_published_free(pub);
}

static void gzip_round_trip(void **state)
{
    (void)state;
    char *out;
    size_t outlen, plen;
    assert_int_equal(mw_gzip("", 0, &out, &outlen), 0);
    assert_true(outlen >= 18 && (unsigned char)out[0] == 0x1f && (unsigned char)out[1] == 0x8b);
    char *plain = gunzip(out, outlen, &plen);
    assert_non_null(plain);
    assert_int_equal(plen, 0);
    free(plain);
    free(out);

    size_t n = 300000;
    char *in = malloc(n);
    uint32_t x = 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245 + 12345;
        in[i] = i < n / 2 ? (char)(x >> 24) : "metric{a=\"b\"} 1\n"[i % 16]; /* noise, then text */
    }
    assert_int_equal(mw_gzip(in, n, &out, &outlen), 0);
    plain = gunzip(out, outlen, &plen);
    assert_non_null(plain);
    assert_int_equal(plen, n);
    assert_memory_equal(plain, in, n);
    free(plain);
    free(out);
    free(in);
}

/* A client that goes away in the middle of an uncompressed (streamed)
 * scrape: the stream is dropped with its reference to the cycle (ASan's leak
 * check in the sanitizer run), and the endpoint goes on serving. */
static void client_gone_mid_stream(void **state)
{
    (void)state;
    mw_published *pub = mw_published_new();
    int port;
    mw_http_server *s = server(pub, &port);
    mw_snapshot *big = make_snapshot(60);
    for (int i = 0; i < 40000; i++) { /* ~3 MB of text: more than the sockets buffer */
        char dev[16];
        snprintf(dev, sizeof(dev), "big%d", i);
        mw_emit(big, &BYTES, i, "device", dev, "path", "/a/rather/long/path/to/fill/the/socket",
                MW_END);
    }
    mw_published_update(pub, big);
    for (int k = 0; k < 5; k++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        int small = 4096;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
        struct sockaddr_in a = {0};
        a.sin_family = AF_INET;
        a.sin_port = htons((uint16_t)port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        const char *req = "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n";
        assert_int_equal(send_all(fd, req, strlen(req)), 0);
        char head[1000];
        size_t got = 0;
        while (got < sizeof(head)) {
            ssize_t n = recv(fd, head + got, sizeof(head) - got, 0);
            assert_true(n > 0);
            got += (size_t)n;
        }
        assert_memory_equal(head, "HTTP/1.1 200", 12);
        struct linger hard = {1, 0}; /* close with a reset, mid-body */
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
        close(fd);
    }
    /* The next cycle replaces the big one; scrapes get it, whole. */
    mw_published_update(pub, make_snapshot(61));
    reply r;
    assert_int_equal(get(port, "/metrics", NULL, &r), 0);
    assert_int_equal(r.status, 200);
    assert_true(r.chunked);
    assert_int_equal(seq_of(r.body, MW_FMT_TEXT), 61);
    reply_free(&r);
    mw_http_free(s);
    mw_published_free(pub);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(before_first_publish),       cmocka_unit_test(formats_and_gzip),
        cmocka_unit_test(publish_during_request),     cmocka_unit_test(concurrent_scrapes),
        cmocka_unit_test(scrape_gets_last_published), cmocka_unit_test(gzip_round_trip),
        cmocka_unit_test(client_gone_mid_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
