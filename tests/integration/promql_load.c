/* promql_load.c - remote-write loader for tests/integration/promql_compare.sh
 * (compiled by the test: cc -o L promql_load.c -lsnappy -lcurl).
 *
 *   promql_load URL FILE   FILE has lines `name{a="b",...} T_MS VALUE` (VALUE
 *                          a number, NaN, +Inf, -Inf or `stale` for the
 *                          staleness marker), grouped by series, in time order;
 *                          all go in one WriteRequest. Prints the HTTP status.
 *                          A native histogram's VALUE is
 *                          H|schema|hint|zero_threshold|zero_count|count|sum|POS|NEG|CUSTOM
 *                          with POS and NEG `offset,c,c,...` (one span, float
 *                          counts; empty: none) and CUSTOM `b,b,...`; it goes
 *                          in TimeSeries.histograms (field 4).
 *                          A line `#meta NAME TYPE UNIT HELP...` adds a
 *                          MetricMetadata (TYPE a number of its MetricType
 *                          enum, UNIT `-` for none).
 * Encodes the protobuf by hand (field numbers of src/proto/remote.proto) so
 * that the test does not share the receiver's decoder. */
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
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void varint(buf *b, uint64_t v)
{
    unsigned char c;
    do {
        c = v & 0x7f;
        v >>= 7;
        if (v) c |= 0x80;
        put(b, &c, 1);
    } while (v);
}

static void lenfield(buf *b, int tag, const void *d, size_t n)
{
    varint(b, (uint64_t)(tag << 3 | 2));
    varint(b, n);
    put(b, d, n);
}

static void label(buf *ts, const char *n, size_t nl, const char *v, size_t vl)
{
    buf l = {0};
    lenfield(&l, 1, n, nl);
    lenfield(&l, 2, v, vl);
    lenfield(ts, 1, l.p, l.n);
    free(l.p);
}

static void sample(buf *ts, int64_t t, double v)
{
    buf s = {0};
    unsigned char tag = 1 << 3 | 1;
    put(&s, &tag, 1);
    put(&s, &v, 8); /* little-endian hosts */
    varint(&s, 2 << 3 | 0);
    varint(&s, (uint64_t)t);
    lenfield(ts, 2, s.p, s.n);
    free(s.p);
}

static void fixed(buf *b, int tag, double v)
{
    varint(b, (uint64_t)(tag << 3 | 1));
    put(b, &v, 8); /* little-endian hosts */
}

static uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (v < 0 ? UINT64_MAX : 0);
}

/* A side `offset,c,c,...` as a span (tag span_tag) and packed counts. */
static void hist_side(buf *h, char *text, int span_tag, int counts_tag)
{
    if (!*text) return;
    char *save = NULL, *tok = strtok_r(text, ",", &save);
    long off = strtol(tok, NULL, 10);
    buf counts = {0};
    uint32_t n = 0;
    while ((tok = strtok_r(NULL, ",", &save))) {
        double c = strtod(tok, NULL);
        put(&counts, &c, 8);
        n++;
    }
    if (n) {
        buf sp = {0};
        varint(&sp, 1 << 3 | 0);
        varint(&sp, zigzag(off));
        varint(&sp, 2 << 3 | 0);
        varint(&sp, n);
        lenfield(h, span_tag, sp.p, sp.n);
        free(sp.p);
        lenfield(h, counts_tag, counts.p, counts.n);
    }
    free(counts.p);
}

static void histogram(buf *ts, int64_t t, char *val)
{
    char *f[9] = {0};
    char *p = val + 2;
    for (int i = 0; i < 9; i++) {
        f[i] = p;
        p = strchr(p, '|');
        if (!p) {
            for (int j = i + 1; j < 9; j++)
                f[j] = "";
            break;
        }
        *p++ = 0;
    }
    buf h = {0};
    fixed(&h, 2, strtod(f[4], NULL));
    fixed(&h, 3, strtod(f[5], NULL));
    varint(&h, 4 << 3 | 0);
    varint(&h, zigzag(strtol(f[0], NULL, 10)));
    fixed(&h, 5, strtod(f[2], NULL));
    fixed(&h, 7, strtod(f[3], NULL));
    hist_side(&h, f[7], 8, 10);
    hist_side(&h, f[6], 11, 13);
    varint(&h, 14 << 3 | 0);
    varint(&h, (uint64_t)strtol(f[1], NULL, 10));
    varint(&h, 15 << 3 | 0);
    varint(&h, (uint64_t)t);
    if (*f[8]) {
        buf cv = {0};
        char *save = NULL;
        for (char *tok = strtok_r(f[8], ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            double c = strtod(tok, NULL);
            put(&cv, &c, 8);
        }
        lenfield(&h, 16, cv.p, cv.n);
        free(cv.p);
    }
    lenfield(ts, 4, h.p, h.n);
    free(h.p);
}

/* Labels of a series text `name{a="b",c="d"}`; values may hold spaces and
 * the escapes \" \\ \n. */
static void labels(buf *ts, const char *s)
{
    const char *br = strchr(s, '{');
    size_t nl = br ? (size_t)(br - s) : strlen(s);
    if (nl) label(ts, "__name__", 8, s, nl);
    if (!br) return;
    const char *p = br + 1;
    char value[4096];
    while (*p && *p != '}') {
        const char *eq = strchr(p, '=');
        if (!eq || eq[1] != '"') abort();
        const char *q = eq + 2;
        size_t vn = 0;
        for (; *q && *q != '"' && vn < sizeof(value); q++) {
            if (*q == '\\' && q[1]) {
                q++;
                value[vn++] = *q == 'n' ? '\n' : *q;
            } else {
                value[vn++] = *q;
            }
        }
        if (*q != '"') abort();
        label(ts, p, (size_t)(eq - p), value, vn);
        p = q + 1;
        if (*p == ',') p++;
    }
}

/* `SERIES T VALUE`: the last two fields are the time and the value, the
 * series is all before them (its label values may hold spaces). */
static int split_line(char *line, char *series, size_t cap, long long *t, char *val)
{
    size_t n = strcspn(line, "\n");
    line[n] = 0;
    char *sp2 = strrchr(line, ' ');
    if (!sp2) return 0;
    *sp2 = 0;
    char *sp1 = strrchr(line, ' ');
    if (!sp1 || (size_t)(sp1 - line) >= cap || strlen(sp2 + 1) >= 16384) return 0;
    *sp1 = 0;
    memcpy(series, line, (size_t)(sp1 - line) + 1);
    snprintf(val, 16384, "%s", sp2 + 1);
    char *end;
    *t = strtoll(sp1 + 1, &end, 10);
    return *end == 0;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: promql_load URL FILE\n");
        return 2;
    }
    FILE *f = fopen(argv[2], "r");
    if (!f) return 2;
    buf req = {0}, ts = {0}, meta = {0};
    static char line[20480], cur[4096] = "", val[16384];
    while (fgets(line, sizeof(line), f)) {
        char series[4096];
        long long t;
        int mtype, hoff = 0;
        char mname[256], munit[64];
        if (sscanf(line, "#meta %255s %d %63s %n", mname, &mtype, munit, &hoff) == 3 && hoff) {
            buf md = {0};
            varint(&md, 1 << 3 | 0);
            varint(&md, (uint64_t)mtype);
            lenfield(&md, 2, mname, strlen(mname));
            size_t hl = strcspn(line + hoff, "\n");
            lenfield(&md, 4, line + hoff, hl);
            if (strcmp(munit, "-")) lenfield(&md, 5, munit, strlen(munit));
            lenfield(&meta, 3, md.p, md.n);
            free(md.p);
            continue;
        }
        if (line[0] == '#' || !split_line(line, series, sizeof(series), &t, val)) continue;
        if (strcmp(series, cur) != 0) {
            if (ts.n) lenfield(&req, 1, ts.p, ts.n);
            ts.n = 0;
            labels(&ts, series);
            snprintf(cur, sizeof(cur), "%s", series);
        }
        double v;
        if (!strncmp(val, "H|", 2)) {
            histogram(&ts, t, val);
            continue;
        }
        if (!strcmp(val, "stale")) {
            uint64_t bits = 0x7ff0000000000002ULL;
            memcpy(&v, &bits, 8);
        } else {
            v = strtod(val, NULL);
        }
        sample(&ts, t, v);
    }
    if (ts.n) lenfield(&req, 1, ts.p, ts.n);
    if (meta.n) put(&req, meta.p, meta.n);
    fclose(f);
    size_t clen = snappy_max_compressed_length(req.n);
    char *comp = malloc(clen);
    if (!comp || snappy_compress((const char *)req.p, req.n, comp, &clen) != SNAPPY_OK) return 2;
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    h = curl_slist_append(h, "Content-Type: application/x-protobuf");
    h = curl_slist_append(h, "Content-Encoding: snappy");
    h = curl_slist_append(h, "X-Prometheus-Remote-Write-Version: 0.1.0");
    curl_easy_setopt(c, CURLOPT_URL, argv[1]);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, comp);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)clen);
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    printf("%ld\n", rc == CURLE_OK ? code : 0L);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    free(comp);
    free(req.p);
    free(ts.p);
    free(meta.p);
    return 0;
}
