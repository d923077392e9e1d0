/* metrics_endpoint.h - /metrics served from the latest published snapshot.
 *
 * The collection loop publishes each finished snapshot; a scrape never
 * collects. Each published snapshot is gzip'd at most once per format, on
 * the first scrape that asks for it, and those bytes are shared by every
 * gzip scrape of that cycle (reference counted, so a slow client keeps its
 * copy alive while newer cycles are published). Only the compressed bytes
 * are kept: the text is rendered in pieces straight into the compressor, and
 * a scrape without gzip gets a rendering of its own, freed once sent. */
#ifndef MW_METRICS_ENDPOINT_H
#define MW_METRICS_ENDPOINT_H

#include "../core/snapshot.h"
#include "http.h"

typedef struct mw_published mw_published;

mw_published *mw_published_new(void);
/* Takes ownership of snap. The cycle published stays served until the next
 * one replaces it: a scrape during a collection round, however slow, gets
 * the last complete cycle at once. */
void mw_published_update(mw_published *p, mw_snapshot *snap);
void mw_published_free(mw_published *p);

/* Handler for GET /metrics; cls is the mw_published. */
void mw_metrics_handler(void *cls, const mw_http_request *req, mw_http_response *resp);

/* gzip-compress (for tests as well). Returns 0 or -1. */
int mw_gzip(const char *in, size_t len, char **out, size_t *outlen);

#endif
