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
    mw_store_ts *ts;
    size_t n;
    size_t nsamples;
    mw_rw_metadata *meta;
    size_t nmeta;
} mw_rw_request;

/* 0, -1 with a one-line reason ("snappy: ...", "protobuf: ..."), or
 * MW_RW_OVER_BUDGET with one when the request needs more memory than the
 * budget. The request must be freed either way. */
enum { MW_RW_OVER_BUDGET = -2 };
int mw_rw_decode(const uint8_t *body, size_t len, mw_rw_request *out, char *err, size_t errsize);
void mw_rw_request_free(mw_rw_request *r);

#endif
