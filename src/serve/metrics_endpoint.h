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
/* Takes ownership of snap. */
void mw_published_update(mw_published *p, mw_snapshot *snap);
/* Drop the published cycle before the next one is collected, so that two
 * cycles' snapshots are never in memory together (on a node of 100 pods
 * with 8 GPUs each is ~0.6 MB). Scrapes that arrive meanwhile wait for the
 * next mw_published_update (up to 5 s, then 503); those already answered
 * keep their bytes. */
void mw_published_retire(mw_published *p);
void mw_published_free(mw_published *p);

/* Handler for GET /metrics; cls is the mw_published. */
void mw_metrics_handler(void *cls, const mw_http_request *req, mw_http_response *resp);

/* gzip-compress (for tests as well). Returns 0 or -1. */
int mw_gzip(const char *in, size_t len, char **out, size_t *outlen);

#endif
