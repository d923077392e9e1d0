/* store_rw_client.c - remote-write client for tests/integration/store.sh
 * (compiled by the test: cc -o C store_rw_client.c -lsnappy -lcurl).
 *
 *   store_rw_client send URL SERIES ROUNDS BATCH T0_MS   series "crash_test"{s="00042"},
 *       value round*100000+s at T0 + round*1000; prints "ACK round first last" after each
 *       2xx (flushed), "FAIL code body" otherwise; stops at the first connection error.
 *   store_rw_client one URL NAME LABEL VALUE T V   one sample; prints "STATUS body".
 *   store_rw_client bomb URL N   a decompression bomb: N empty TimeSeries (2 bytes
 *       each, ~48:1 once snappy-compressed); prints "STATUS body".
 * Encodes the protobuf by hand (field numbers of src/proto/remote.proto) so
 * that the test does not share the receiver's encoder. */
#include <curl/curl.h>
#include <snappy-c.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct buf {
    unsigned char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void varint(buf *b, uint64_t v)
{
    unsigned char t[10];
    int i = 0;
    do {
        t[i] = v & 0x7f;
        v >>= 7;
        if (v) t[i] |= 0x80;
        i++;
    } while (v);
    put(b, t, (size_t)i);
}

static void lenfield(buf *b, int tag, const void *d, size_t n)
{
    unsigned char t = (unsigned char)(tag << 3 | 2);
    put(b, &t, 1);
    varint(b, n);
    put(b, d, n);
}

static void label(buf *ts, const char *n, const char *v)
{
    buf one = {0};
    lenfield(&one, 1, n, strlen(n));
    lenfield(&one, 2, v, strlen(v));
    lenfield(ts, 1, one.p, one.n);
    free(one.p);
}

static void sample(buf *ts, int64_t t, double v)
{
    buf s = {0};
    unsigned char tag = 0x09;
    put(&s, &tag, 1);
    put(&s, &v, 8);
    tag = 0x10;
    put(&s, &tag, 1);
    varint(&s, (uint64_t)t);
    lenfield(ts, 2, s.p, s.n);
    free(s.p);
}

static size_t collect(char *p, size_t sz, size_t n, void *arg)
{
    put(arg, p, sz * n);
    return sz * n;
}

/* POST the request; returns the status (0 = no connection), body in out. */
static long post(CURL *c, const char *url, const buf *req, buf *out)
{
    size_t zl = snappy_max_compressed_length(req->n);
    char *z = malloc(zl);
    snappy_compress((const char *)req->p, req->n, z, &zl);
    struct curl_slist *h = NULL;
    h = curl_slist_append(h, "Content-Type: application/x-protobuf");
    h = curl_slist_append(h, "Content-Encoding: snappy");
    h = curl_slist_append(h, "X-Prometheus-Remote-Write-Version: 0.1.0");
    /* RW_AUTHORIZATION: an Authorization header value (integ_auth). */
    const char *auth = getenv("RW_AUTHORIZATION");
    char auth_header[512];
    if (auth) {
        snprintf(auth_header, sizeof(auth_header), "Authorization: %s", auth);
        h = curl_slist_append(h, auth_header);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, z);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)zl);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    out->n = 0;
    long code = 0;
    if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(h);
    free(z);
    put(out, "", 1);
    return code;
}

int main(int argc, char **argv)
{
    curl_global_init(CURL_GLOBAL_ALL);
    CURL *c = curl_easy_init();
    buf req = {0}, ts = {0}, out = {0};
    if (argc == 7 && strcmp(argv[1], "send") == 0) {
        long nseries = atol(argv[3]), rounds = atol(argv[4]), batch = atol(argv[5]);
        int64_t t0 = atoll(argv[6]);
        for (long r = 0; r < rounds; r++)
            for (long s0 = 0; s0 < nseries; s0 += batch) {
                long s1 = s0 + batch < nseries ? s0 + batch : nseries;
                req.n = 0;
                for (long s = s0; s < s1; s++) {
                    char v[16];
                    snprintf(v, sizeof(v), "%05ld", s);
                    ts.n = 0;
                    label(&ts, "__name__", "crash_test");
                    label(&ts, "s", v);
                    sample(&ts, t0 + r * 1000, (double)(r * 100000 + s));
                    lenfield(&req, 1, ts.p, ts.n);
                }
                long code = post(c, argv[2], &req, &out);
                if (code == 0) return 0; /* the server is gone */
                if (code / 100 == 2)
                    printf("ACK %ld %ld %ld\n", r, s0, s1 - 1);
                else
                    printf("FAIL %ld %s", code, (char *)out.p);
                fflush(stdout);
            }
        return 0;
    }
    if (argc == 8 && strcmp(argv[1], "one") == 0) {
        label(&ts, "__name__", argv[3]);
        label(&ts, argv[4], argv[5]);
        sample(&ts, atoll(argv[6]), atof(argv[7]));
        lenfield(&req, 1, ts.p, ts.n);
        long code = post(c, argv[2], &req, &out);
        printf("%ld %s", code, (char *)out.p);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "bomb") == 0) {
        long n = atol(argv[3]);
        for (long i = 0; i < n; i++)
            lenfield(&req, 1, "", 0);
        long code = post(c, argv[2], &req, &out);
        printf("%ld %s", code, (char *)out.p);
        return 0;
    }
    fprintf(stderr, "usage: store_rw_client send URL SERIES ROUNDS BATCH T0_MS | one URL NAME "
                    "LABEL VALUE T V | bomb URL N\n");
    return 2;
}
