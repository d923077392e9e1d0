/* hub_load.c - simulated node agents remote-writing to one receiver, for
 * bench/hub_ingest.sh (docs/benchmarks.md, "Hub ingest").
 *
 * Reads one agent's exposition (Prometheus text, `mlwatch metrics` or a
 * scrape of /metrics) and replays its series under NODES node names
 * (node="node-0000" ...; the agent's own node label is replaced), ROUNDS
 * samples per series, STEP_MS apart and ending now: each round, one
 * remote-write request per node (what an agent sends per interval), sent
 * by THREADS connections (node k on connection k % THREADS). Values: the exposition's, plus the
 * round number for counters (names ending in _total), so counters grow.
 *
 *   cc -O2 -o hub_load bench/hub_load.c -lsnappy -lcurl -lpthread
 *   hub_load URL EXPOSITION NODES ROUNDS STEP_MS [THREADS [END_MS]]
 *
 * END_MS: the last round's timestamp (default now, whole seconds): a first
 * call with one round before a second call's rounds creates the series, so
 * that the second measures the steady state.
 *
 * Prints series per node, samples sent, wall seconds; exit 1 when any
 * request is not answered 2xx. */
#include <curl/curl.h>
#include <pthread.h>
#include <snappy-c.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    unsigned char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        unsigned char *np = realloc(b->p, b->cap);
        if (!np) abort();
        b->p = np;
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

static void label(buf *out, const char *name, size_t nn, const char *value, size_t vn)
{
    buf one = {0};
    lenfield(&one, 1, name, nn);
    lenfield(&one, 2, value, vn);
    lenfield(out, 1, one.p, one.n);
    free(one.p);
}

/* One series of the exposition: its labels sorted by name (as the
 * remote-write specification wants), encoded in two parts, those before
 * "node" and those after, so that node goes in between; its value. */
typedef struct {
    buf labels, after;
    double value;
    int counter;
} series;

typedef struct {
    char *name, *value;
    size_t nn, vn;
} pair;

static int by_name(const void *a, const void *b)
{
    const pair *x = a, *y = b;
    size_t n = x->nn < y->nn ? x->nn : y->nn;
    int c = memcmp(x->name, y->name, n);
    return c ? c : (x->nn > y->nn) - (x->nn < y->nn);
}

static series *all;
static size_t nall;
static const char *url;
static long nodes, rounds, step_ms;
static int64_t end_ms;
static int threads;
static long failed;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* name{a="x",b="y"} value: labels other than node; 0 or -1 (skipped). */
static int parse_line(char *line, series *s)
{
    memset(s, 0, sizeof(*s));
    pair l[64];
    size_t n = 0;
    char *p = line;
    size_t nlen = strcspn(p, "{ ");
    if (!nlen) return -1;
    l[n++] = (pair){"__name__", p, 8, nlen};
    s->counter = nlen > 6 && memcmp(p + nlen - 6, "_total", 6) == 0;
    p += nlen;
    if (*p == '{') {
        p++;
        while (*p && *p != '}') {
            char *eq = strchr(p, '=');
            if (!eq || eq[1] != '"') return -1;
            char *name = p;
            size_t nn = (size_t)(eq - p);
            char *v = eq + 2, *w = v, *r = v;
            while (*r && *r != '"') {
                if (*r == '\\' && r[1]) r++;
                *w++ = *r++;
            }
            if (*r != '"') return -1;
            p = r + 1;
            if (!(nn == 4 && memcmp(name, "node", 4) == 0) && n < 64)
                l[n++] = (pair){name, v, nn, (size_t)(w - v)};
            if (*p == ',') p++;
        }
        if (*p != '}') return -1;
        p++;
    }
    s->value = strtod(p, NULL);
    qsort(l, n, sizeof(*l), by_name);
    for (size_t i = 0; i < n; i++) {
        pair node = {"node", "", 4, 0};
        label(by_name(&l[i], &node) < 0 ? &s->labels : &s->after, l[i].name, l[i].nn, l[i].value,
              l[i].vn);
    }
    return 0;
}

/* The answer's first bytes, for the error message. */
static size_t sink(void *d, size_t sz, size_t n, void *u)
{
    char *msg = u;
    size_t have = strlen(msg), add = sz * n;
    if (have + add > 300) add = have < 300 ? 300 - have : 0;
    memcpy(msg + have, d, add);
    msg[have + add] = '\0';
    return sz * n;
}

static void *worker(void *arg)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    h = curl_slist_append(h, "Content-Type: application/x-protobuf");
    h = curl_slist_append(h, "Content-Encoding: snappy");
    h = curl_slist_append(h, "X-Prometheus-Remote-Write-Version: 0.1.0");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    char answer[304];
    curl_easy_setopt(c, CURLOPT_WRITEDATA, answer);
    buf req = {0}, ts = {0}, smp = {0};
    char *z = NULL;
    size_t zcap = 0;
    /* A node's requests go in order through one connection (each node is
     * one thread's: rounds of one node never overtake each other). */
    long first = (long)(intptr_t)arg;
    for (long job = 0; job < rounds * nodes; job++) {
        long round = job / nodes, node = job % nodes;
        if (node % threads != first) continue;
        char name[32];
        int nl = snprintf(name, sizeof(name), "node-%04ld", node);
        int64_t t = end_ms - (int64_t)(rounds - 1 - round) * step_ms;
        req.n = 0;
        for (size_t i = 0; i < nall; i++) {
            ts.n = 0;
            put(&ts, all[i].labels.p, all[i].labels.n);
            label(&ts, "node", 4, name, (size_t)nl);
            put(&ts, all[i].after.p, all[i].after.n);
            smp.n = 0;
            double v = all[i].value + (all[i].counter ? (double)round : 0);
            unsigned char tag = 1 << 3 | 1;
            put(&smp, &tag, 1);
            put(&smp, &v, 8);
            tag = 2 << 3;
            put(&smp, &tag, 1);
            varint(&smp, (uint64_t)t);
            lenfield(&ts, 2, smp.p, smp.n);
            lenfield(&req, 1, ts.p, ts.n);
        }
        size_t zn = snappy_max_compressed_length(req.n);
        if (zn > zcap) {
            zcap = zn;
            char *nz = realloc(z, zcap);
            if (!nz) abort();
            z = nz;
        }
        snappy_compress((const char *)req.p, req.n, z, &zn);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, z);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)zn);
        long code = 0;
        answer[0] = '\0';
        if (curl_easy_perform(c) != CURLE_OK ||
            (curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code), code / 100 != 2)) {
            pthread_mutex_lock(&mu);
            if (failed++ < 3) fprintf(stderr, "hub_load: %s answered %ld %s\n", name, code, answer);
            pthread_mutex_unlock(&mu);
        }
    }
    free(req.p);
    free(ts.p);
    free(smp.p);
    free(z);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: hub_load URL EXPOSITION NODES ROUNDS STEP_MS [THREADS [END_MS]]\n");
        return 2;
    }
    url = argv[1];
    nodes = atol(argv[3]);
    rounds = atol(argv[4]);
    step_ms = atol(argv[5]);
    threads = argc > 6 ? atoi(argv[6]) : 4;
    FILE *f = fopen(argv[2], "r");
    if (!f) {
        perror(argv[2]);
        return 2;
    }
    char *line = NULL;
    size_t cap = 0, nalloc = 0;
    while (getline(&line, &cap, f) > 0) {
        if (line[0] == '#' || line[0] == '\n') continue;
        if (nall == nalloc) {
            nalloc = nalloc ? nalloc * 2 : 1024;
            series *na = realloc(all, nalloc * sizeof(*all));
            if (!na) abort();
            all = na;
        }
        if (parse_line(line, &all[nall]) == 0) nall++;
    }
    free(line);
    fclose(f);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    end_ms = argc > 7 ? atoll(argv[7]) : (int64_t)now.tv_sec * 1000;
    curl_global_init(CURL_GLOBAL_ALL);
    clock_gettime(CLOCK_MONOTONIC, &now);
    double t0 = (double)now.tv_sec + now.tv_nsec / 1e9;
    pthread_t th[64];
    if (threads < 1 || threads > 64) threads = 4;
    for (int i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &now);
    double wall = (double)now.tv_sec + now.tv_nsec / 1e9 - t0;
    printf("series_per_node %zu\nsamples %ld\nwall_seconds %.2f\nfailed_requests %ld\n", nall,
           (long)nall * nodes * rounds, wall, failed);
    return failed ? 1 : 0;
}
