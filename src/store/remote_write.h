/* remote_write.h - decoding Prometheus remote-write 1.0 request bodies.
 *
 * A body is a snappy block (not the framed format) holding a protobuf
 * WriteRequest (src/proto/remote.proto). Decoding allocates from one arena
 * per request and is bounded: at most MW_RW_MAX_DECODED bytes once
 * uncompressed. The result points into the arena; the store may reorder its
 * labels. */
#ifndef MW_REMOTE_WRITE_H
#define MW_REMOTE_WRITE_H

#include "../core/arena.h"
#include "store.h"

#include <stddef.h>
#include <stdint.h>

#define MW_RW_MAX_DECODED (64u << 20)

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

/* 0, or -1 with a one-line reason ("snappy: ...", "protobuf: ..."). The
 * request must be freed either way. */
int mw_rw_decode(const uint8_t *body, size_t len, mw_rw_request *out, char *err, size_t errsize);
void mw_rw_request_free(mw_rw_request *r);

#endif
