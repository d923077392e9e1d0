/* metrics_endpoint.c - shared, lazily rendered exposition, see the header. */
#include "metrics_endpoint.h"
#include "../core/buf.h"
#include "../core/util.h"
#include "exposition.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef struct rendered {
    char *data;
    size_t len;
} rendered;

/* One published cycle. Only the gzip'd renderings are kept (Prometheus asks
 * for gzip; the text is ~17 times larger, 1.3 MB on a node of 100 pods with
 * 8 GPUs); an uncompressed scrape is rendered piece by piece as it is sent
 * (plain_next), so it never holds more than a piece. */
typedef struct entry {
    atomic_int refs;
    mw_snapshot *snap;
    pthread_mutex_t lock; /* guards gz[] */
    rendered gz[2];       /* [format] */
} entry;

/* The current cycle stays published while the next one is collected: a
 * scrape never waits for a collection round, however long a collector takes
 * (a hung file system, a slow GPU driver); it gets the last complete cycle,
 * and mlwatch_collector_duration_seconds of the next one says how long the
 * round took. The price is two snapshots alive during a round (the one
 * served and the one being built), docs/benchmarks.md. */
struct mw_published {
    pthread_mutex_t lock;
    entry *current;
};

/* Sizes of the last gzip'd renderings, to allocate the next one at once. */
static atomic_size_t last_gz[2];

static void entry_release(entry *e)
{
    if (!e || atomic_fetch_sub(&e->refs, 1) != 1) return;
    for (int f = 0; f < 2; f++)
        free(e->gz[f].data);
    mw_snapshot_free(e->snap);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

mw_published *mw_published_new(void)
{
    mw_published *p = mw_xcalloc(1, sizeof(*p));
    pthread_mutex_init(&p->lock, NULL);
    return p;
}

void mw_published_update(mw_published *p, mw_snapshot *snap)
{
    mw_snapshot_seal(snap);
    entry *e = mw_xcalloc(1, sizeof(*e));
    atomic_init(&e->refs, 1);
    e->snap = snap;
    pthread_mutex_init(&e->lock, NULL);
    pthread_mutex_lock(&p->lock);
    entry *old = p->current;
    p->current = e;
    pthread_mutex_unlock(&p->lock);
    entry_release(old);
}

void mw_published_free(mw_published *p)
{
    if (!p) return;
    entry_release(p->current);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* A gzip stream whose output grows as needed. */
typedef struct gz_out {
    z_stream z;
    char *buf;
    size_t cap;
} gz_out;

static int gz_begin(gz_out *g, size_t hint)
{
    memset(g, 0, sizeof(*g));
    /* A 4 KB window (windowBits 12; + 16: a gzip wrapper rather than raw
     * zlib) and memLevel 4: the exposition repeats itself from line to line
     * (names, label sets), so a longer window finds little more. On a node of
     * 100 pods with 8 GPUs (1.3 MB of text) this compresses 1.6 % smaller
     * and 40 % faster than a 32 KB window with memLevel 6, and deflate's
     * state is 24 KB instead of 160 (docs/benchmarks.md). */
    if (deflateInit2(&g->z, 6, Z_DEFLATED, 12 + 16, 4, Z_DEFAULT_STRATEGY) != Z_OK) return -1;
    g->cap = hint > 4096 ? hint : 4096;
    g->buf = mw_xmalloc(g->cap);
    g->z.next_out = (Bytef *)g->buf;
    g->z.avail_out = (uInt)g->cap;
    return 0;
}

/* Feed len bytes (flush: Z_NO_FLUSH or Z_FINISH); 0, or -1 on a zlib error. */
static int gz_feed(gz_out *g, const char *in, size_t len, int flush)
{
    g->z.next_in = (Bytef *)(uintptr_t)in;
    g->z.avail_in = (uInt)len;
    for (;;) {
        if (g->z.avail_out == 0) {
            size_t used = g->cap;
            g->cap *= 2;
            g->buf = mw_xrealloc(g->buf, g->cap);
            g->z.next_out = (Bytef *)g->buf + used;
            g->z.avail_out = (uInt)(g->cap - used);
        }
        int rc = deflate(&g->z, flush);
        if (rc == Z_STREAM_END) return 0;
        if (rc != Z_OK && rc != Z_BUF_ERROR) return -1;
        if (flush == Z_NO_FLUSH && g->z.avail_in == 0 && g->z.avail_out > 0) return 0;
    }
}

/* Ends the stream: 0 and the bytes (trimmed to size, the caller frees), or -1. */
static int gz_end(gz_out *g, int ok, char **out, size_t *outlen)
{
    if (ok && gz_feed(g, NULL, 0, Z_FINISH) < 0) ok = 0;
    size_t n = g->cap - g->z.avail_out;
    deflateEnd(&g->z);
    if (!ok) {
        free(g->buf);
        return -1;
    }
    *out = mw_xrealloc(g->buf, n ? n : 1);
    *outlen = n;
    return 0;
}

int mw_gzip(const char *in, size_t len, char **out, size_t *outlen)
{
    gz_out g;
    if (gz_begin(&g, len / 8 + 64) < 0) return -1;
    int ok = 1;
    /* zlib counts in uInt: feed very large inputs in pieces. */
    for (size_t off = 0; ok && off < len;) {
        size_t n = len - off > (1u << 30) ? (1u << 30) : len - off;
        ok = gz_feed(&g, in + off, n, Z_NO_FLUSH) == 0;
        off += n;
    }
    return gz_end(&g, ok, out, outlen);
}

static int gz_sink(void *ctx, const char *data, size_t len)
{
    return gz_feed(ctx, data, len, Z_NO_FLUSH);
}

/* An uncompressed response: the entry's text, rendered 16 KB at a time as
 * libmicrohttpd sends it (a slow client holds a piece, not 1.3 MB). */
typedef struct plain_stream {
    entry *e; /* a reference: the snapshot outlives the response */
    mw_render_cursor cur;
    mw_buf piece;
    size_t off; /* bytes of piece already sent */
} plain_stream;

static long plain_next(void *cls, char *buf, size_t max)
{
    plain_stream *ps = cls;
    while (ps->off == ps->piece.len) {
        if (ps->cur.done) return 0;
        mw_buf_clear(&ps->piece);
        ps->off = 0;
        mw_render_next(&ps->cur, &ps->piece, 16 * 1024);
    }
    size_t n = ps->piece.len - ps->off < max ? ps->piece.len - ps->off : max;
    memcpy(buf, ps->piece.data + ps->off, n);
    ps->off += n;
    return (long)n;
}

static void plain_free(void *cls)
{
    plain_stream *ps = cls;
    mw_buf_free(&ps->piece);
    entry_release(ps->e);
    free(ps);
}

/* The gzip'd rendering of e in fmt, made on the first request: rendered in
 * 32 KB pieces straight into the compressor. NULL when zlib fails. */
static const rendered *gz_once(entry *e, mw_format fmt)
{
    pthread_mutex_lock(&e->lock);
    rendered *r = &e->gz[fmt];
    if (!r->data) {
        gz_out g;
        if (gz_begin(&g, atomic_load(&last_gz[fmt]) + 4096) == 0) {
            mw_buf piece;
            mw_buf_init(&piece, 0);
            int ok = mw_render_stream(e->snap, fmt, &piece, 32 * 1024, gz_sink, &g) == 0;
            mw_buf_free(&piece);
            if (gz_end(&g, ok, &r->data, &r->len) == 0) atomic_store(&last_gz[fmt], r->len);
        }
    }
    pthread_mutex_unlock(&e->lock);
    return r->data ? r : NULL;
}

static void release_cb(void *cls)
{
    entry_release(cls);
}

void mw_metrics_handler(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    mw_published *p = cls;
    pthread_mutex_lock(&p->lock);
    entry *e = p->current;
    if (e) atomic_fetch_add(&e->refs, 1);
    pthread_mutex_unlock(&p->lock);
    if (!e) {
        mw_http_text(resp, 503, "no collection has completed yet; retry in a moment\n");
        mw_http_add_header(resp, "Retry-After", "1");
        return;
    }
    mw_format fmt = mw_negotiate_format(mw_http_header(req, "Accept"));
    int gz = mw_accepts_gzip(mw_http_header(req, "Accept-Encoding"));
    const rendered *r = gz ? gz_once(e, fmt) : NULL;
    resp->status = 200;
    resp->content_type =
        fmt == MW_FMT_OPENMETRICS ? MW_CONTENT_TYPE_OPENMETRICS : MW_CONTENT_TYPE_TEXT;
    if (r) {
        resp->body = r->data;
        resp->len = r->len;
        resp->free_fn = release_cb; /* the entry owns the bytes; drop our reference */
        resp->free_cls = e;
        mw_http_add_header(resp, "Content-Encoding", "gzip");
    } else {
        plain_stream *ps = mw_xcalloc(1, sizeof(*ps));
        ps->e = e; /* our reference, dropped by plain_free */
        mw_render_begin(&ps->cur, e->snap, fmt);
        mw_buf_init(&ps->piece, 0);
        resp->stream = plain_next;
        resp->free_fn = plain_free;
        resp->free_cls = ps;
    }
    mw_http_add_header(resp, "Vary", "Accept, Accept-Encoding");
}
