/* test_store_damaged_query.c - a query over stored chunks that fail their
 * checksum answers with a warning saying how many, not silently with fewer
 * samples (src/store/head_read.c, src/query/api.c).
 *
 * One series of 2000 samples is written (the head cuts it into chunk
 * records in its chunk file); one byte in the middle of the chunk file is
 * flipped; the store is opened again and queried over HTTP: the answer is
 * 200 with the samples of every other chunk, and "warnings" says that one
 * chunk failed its checksum. Undamaged, the same query has no warnings.
 * The same with the samples compacted into a block, one byte of its chunk
 * flipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "core/buf.h"
#include "query/api.h"
#include "serve/http.h"
#include "store/store.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define SAMPLES 2000

static char dir[256];

static mw_store *open_store(void)
{
    mw_store_options o = {.dir = dir, .background_ms = -1, .no_sync = 1};
    mw_store_default_limits(&o.limits);
    char err[256] = "";
    mw_store *s = mw_store_open(&o, err, sizeof(err));
    if (!s) fprintf(stderr, "open: %s\n", err);
    assert_non_null(s);
    return s;
}

/* GET path from the server on port; the body (malloc'd) and its status. */
static char *get(int port, const char *path, int *status)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    char req[512];
    int n =
        snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    assert_int_equal(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
    mw_buf in;
    mw_buf_init(&in, 0);
    char chunk[16384];
    ssize_t k;
    while ((k = recv(fd, chunk, sizeof(chunk), 0)) > 0 || (k < 0 && errno == EINTR))
        if (k > 0) mw_buf_append(&in, chunk, (size_t)k);
    close(fd);
    mw_buf_putc(&in, '\0');
    size_t len;
    char *raw = mw_buf_steal(&in, &len);
    assert_int_equal(strncmp(raw, "HTTP/1.1 ", 9), 0);
    *status = atoi(raw + 9);
    char *body = strstr(raw, "\r\n\r\n");
    assert_non_null(body);
    char *out = strdup(body + 4);
    free(raw);
    return out;
}

/* The samples of the query's one series, and its warnings (NULL: none). */
static size_t query_samples(int port, json_t **warnings)
{
    int status;
    char *body = get(port, "/api/v1/query?query=damaged%5B100d%5D&time=1700100000", &status);
    assert_int_equal(status, 200);
    json_error_t e;
    json_t *root = json_loads(body, 0, &e);
    if (!root) fail_msg("not JSON (%s): %s", e.text, body);
    free(body);
    json_t *result = json_object_get(json_object_get(root, "data"), "result");
    assert_true(json_array_size(result) <= 1); /* none: every sample lost */
    size_t n = json_array_size(json_object_get(json_array_get(result, 0), "values"));
    json_t *w = json_object_get(root, "warnings");
    *warnings = w ? json_incref(w) : NULL;
    json_decref(root);
    return n;
}

static void damaged_chunk_answers_with_a_warning(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/mlwatch-test-damagedq-XXXXXX");
    assert_non_null(mkdtemp(dir));
    mw_store *s = open_store();
    mw_label lab[1] = {{"__name__", "damaged"}};
    for (int i = 0; i < SAMPLES; i++) {
        mw_store_sample sm = {1700000000000 + (int64_t)i * 15000, 1e12 + i};
        mw_store_ts ts = {lab, 1, &sm, 1};
        char msg[512];
        assert_int_equal(mw_store_append(s, &ts, 1, 0, msg, sizeof(msg)), 0);
    }
    mw_store_close(s);

    s = open_store();
    mw_query_api api = {.store = s};
    pq_default_limits(&api.limits);
    mw_http_server *http = mw_http_new(0);
    mw_query_api_register(http, &api);
    char err[256];
    if (mw_http_start(http, "127.0.0.1:0", err, sizeof(err)) < 0) fail_msg("start: %s", err);
    json_t *w;
    assert_int_equal(query_samples(mw_http_port(http), &w), SAMPLES);
    assert_null(w);
    mw_http_free(http);
    mw_store_close(s);

    /* One byte in the middle of the (only) chunk file. */
    char path[300];
    snprintf(path, sizeof(path), "%s/chunks/00000001", dir);
    int fd = open(path, O_RDWR);
    if (fd < 0) fail_msg("no chunk file %s", path);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    unsigned char c;
    assert_int_equal(pread(fd, &c, 1, st.st_size / 2), 1);
    c ^= 0x40;
    assert_int_equal(pwrite(fd, &c, 1, st.st_size / 2), 1);
    close(fd);

    s = open_store();
    api.store = s;
    http = mw_http_new(0);
    mw_query_api_register(http, &api);
    if (mw_http_start(http, "127.0.0.1:0", err, sizeof(err)) < 0) fail_msg("start: %s", err);
    size_t n = query_samples(mw_http_port(http), &w);
    assert_true(n < SAMPLES && n > SAMPLES / 2); /* one chunk's samples missing */
    assert_non_null(w);
    assert_int_equal(json_array_size(w), 1);
    assert_string_equal(json_string_value(json_array_get(w, 0)),
                        "1 stored chunk failed its checksum: its samples are missing from this "
                        "answer (the agent's log names the files)");
    json_decref(w);
    mw_http_free(http);
    mw_store_close(s);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* The same over a compacted block (block.c): one byte of its chunk
 * flipped. */
static void damaged_block_chunk_answers_with_a_warning(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/mlwatch-test-damagedq-XXXXXX");
    assert_non_null(mkdtemp(dir));
    mw_store *s = open_store();
    mw_label lab[1] = {{"__name__", "damaged"}};
    for (int i = 0; i < SAMPLES; i++) {
        mw_store_sample sm = {1700000000000 + (int64_t)i * 15000, 1e12 + i};
        mw_store_ts ts = {lab, 1, &sm, 1};
        char msg[512];
        assert_int_equal(mw_store_append(s, &ts, 1, 0, msg, sizeof(msg)), 0);
    }
    assert_int_equal(mw_store_compact(s, 1), 0); /* everything into a block */
    mw_store_stats st0;
    mw_store_get_stats(s, &st0);
    assert_int_equal(st0.blocks, 1);
    mw_store_close(s);

    /* Chunks come first in a block, after its 8-byte header: byte 24 is in
     * the chunk's bytes. */
    char cmd[600];
    snprintf(cmd, sizeof(cmd),
             "f=$(ls '%s'/blocks/*.blk) && [ $(echo \"$f\" | wc -l) = 1 ] && "
             "printf '\\377' | dd of=\"$f\" bs=1 seek=24 conv=notrunc status=none",
             dir);
    assert_int_equal(system(cmd), 0);

    s = open_store();
    mw_query_api api = {.store = s};
    pq_default_limits(&api.limits);
    mw_http_server *http = mw_http_new(0);
    mw_query_api_register(http, &api);
    char err[256];
    if (mw_http_start(http, "127.0.0.1:0", err, sizeof(err)) < 0) fail_msg("start: %s", err);
    json_t *w;
    /* Compaction wrote the series' samples as one chunk: all are lost, and
     * the answer says so instead of looking like a series that never was. */
    assert_int_equal(query_samples(mw_http_port(http), &w), 0);
    assert_non_null(w);
    assert_int_equal(json_array_size(w), 1);
    assert_string_equal(json_string_value(json_array_get(w, 0)),
                        "1 stored chunk failed its checksum: its samples are missing from this "
                        "answer (the agent's log names the files)");
    json_decref(w);
    mw_http_free(http);
    mw_store_close(s);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(damaged_chunk_answers_with_a_warning),
        cmocka_unit_test(damaged_block_chunk_answers_with_a_warning),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
