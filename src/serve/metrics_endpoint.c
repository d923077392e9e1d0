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

/* One published cycle. */
typedef struct entry {
    atomic_int refs;
    mw_snapshot *snap;
    pthread_mutex_t lock; /* guards out[] */
    rendered out[2][2];   /* [format][gzip] */
} entry;

struct mw_published {
    pthread_mutex_t lock;
    entry *current;
};

static void entry_release(entry *e)
{
    if (!e || atomic_fetch_sub(&e->refs, 1) != 1) return;
    for (int f = 0; f < 2; f++)
        for (int z = 0; z < 2; z++)
            free(e->out[f][z].data);
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

int mw_gzip(const char *in, size_t len, char **out, size_t *outlen)
{
    z_stream z;
    memset(&z, 0, sizeof(z));
    /* windowBits 15 + 16: a gzip wrapper rather than raw zlib. */
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 6, Z_DEFAULT_STRATEGY) != Z_OK) return -1;
    size_t cap = deflateBound(&z, (uLong)len);
    char *buf = mw_xmalloc(cap);
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)len;
    z.next_out = (Bytef *)buf;
    z.avail_out = (uInt)cap;
    int rc = deflate(&z, Z_FINISH);
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(buf);
        return -1;
    }
    *out = buf;
    *outlen = cap - z.avail_out;
    return 0;
}

static const rendered *render_once(entry *e, mw_format fmt, int gz)
{
    pthread_mutex_lock(&e->lock);
    rendered *r = &e->out[fmt][gz];
    if (!r->data) {
        rendered *plain = &e->out[fmt][0];
        if (!plain->data) {
            mw_buf b;
            mw_buf_init(&b, 0);
            mw_render(e->snap, fmt, &b);
            plain->data = mw_buf_steal(&b, &plain->len);
        }
        if (gz && mw_gzip(plain->data, plain->len, &r->data, &r->len) < 0) r = plain;
    }
    pthread_mutex_unlock(&e->lock);
    return r;
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
    const rendered *r = render_once(e, fmt, gz);
    resp->status = 200;
    resp->content_type =
        fmt == MW_FMT_OPENMETRICS ? MW_CONTENT_TYPE_OPENMETRICS : MW_CONTENT_TYPE_TEXT;
    resp->body = r->data;
    resp->len = r->len;
    resp->free_fn = release_cb; /* the entry owns the bytes; drop our reference */
    resp->free_cls = e;
    if (gz && r == &e->out[fmt][1]) mw_http_add_header(resp, "Content-Encoding", "gzip");
    mw_http_add_header(resp, "Vary", "Accept, Accept-Encoding");
}
