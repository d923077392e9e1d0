/* remote_write.h - decoding Prometheus remote-write 1.0 request bodies.
 *
 * A body is a snappy block (not the framed format) holding a protobuf
 * WriteRequest (src/proto/remote.proto). Decoding allocates from one arena
 * per request and is bounded: at most MW_RW_MAX_DECODED bytes once
 * uncompressed, and MW_RW_BUDGET bytes for those and everything decoded
 * from them plus what the store's append takes for it, counted before
 * anything is allocated (remote_write.c). With the HTTP layer's 16 MiB body
 * that keeps one request under the 64 MiB per HTTP thread docs/store.md
 * promises. The result points into the arena; the store may reorder its
 * labels. */
#ifndef MW_REMOTE_WRITE_H
#define MW_REMOTE_WRITE_H

#include "../core/arena.h"
#include "store.h"

#include <stddef.h>
#include <stdint.h>

#define MW_RW_MAX_DECODED (32u << 20)
#define MW_RW_BUDGET (48u << 20)

/* WriteRequest.metadata: type as Prometheus names it ("counter", ...). */
typedef struct mw_rw_metadata {
    const char *name, *type, *help, *unit;
} mw_rw_metadata;

typedef struct mw_rw_request {
    mw_arena arena;
    void *spare;  /* the block of buf (remote_write.c) */
    uint8_t *buf; /* the decompressed body (the strings point into it) and the arrays */
    size_t buf_cap;
    mw_store_ts *ts;
    size_t n;
    size_t nsamples;
    mw_rw_metadata *meta;
    size_t nmeta;
    /* TimeSeries.histograms: each one's sample in ts[] has the value
     * mw_rw_pending(i) until mw_rw_store_histograms puts hists[i] in the
     * store and gives the sample its reference. */
    struct mw_histogram *hists;
    size_t nhists;
} mw_rw_request;

/* 0, -1 with a one-line reason ("snappy: ...", "protobuf: ..."), or
 * MW_RW_OVER_BUDGET with one when the request needs more memory than the
 * budget. The request must be freed either way. */
enum { MW_RW_OVER_BUDGET = -2 };
int mw_rw_decode(const uint8_t *body, size_t len, mw_rw_request *out, char *err, size_t errsize);
void mw_rw_request_free(mw_rw_request *r);
/* Frees the decoding buffer kept between requests when none came since the
 * last call (the store's maintenance thread calls it every second). */
void mw_rw_spare_trim(void);
/* Bytes of the buffer kept (for tests; it counts as a use). */
size_t mw_rw_spare_bytes(void);

/* rw_histogram.c: one prometheus.Histogram message into h (its arrays in
 * the arena), validated; *ts its timestamp. 0, or -1 with why. A message
 * of n bytes takes at most n * MW_RW_HIST_COST_PER_BYTE of the arena. */
#define MW_RW_HIST_COST_PER_BYTE 40
struct mw_histogram;
int mw_rw_histogram(const uint8_t *p, size_t n, mw_arena *a, struct mw_histogram *h, int64_t *ts,
                    char *err, size_t errsize);
/* The pending value of histogram i of a request, and the store's
 * references in its place (histogram.c): 0, or -1 with why (nothing of
 * the request is stored then). */
double mw_rw_pending(size_t i);
int mw_rw_store_histograms(mw_store *s, mw_rw_request *r, int wait, char *err, size_t errsize);

#endif
