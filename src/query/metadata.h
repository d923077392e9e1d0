/* metadata.h - metric metadata (TYPE, HELP, UNIT) for /api/v1/metadata:
 * the agent's own metric families, noted from each collection snapshot,
 * and the metadata that remote-write senders (Prometheus, vmagent) send
 * in WriteRequest.metadata. Kept in memory only, bounded, thread-safe. */
#ifndef MW_QUERY_METADATA_H
#define MW_QUERY_METADATA_H

#include "../core/snapshot.h"

#include <jansson.h>

/* At most this many metric names; later new names are ignored. */
#define MW_METADATA_MAX 20000
/* HELP texts are cut at this many bytes. */
#define MW_METADATA_HELP_MAX 2048

typedef struct mw_metadata mw_metadata;

mw_metadata *mw_metadata_new(void);
void mw_metadata_free(mw_metadata *m);
/* Set (or replace) the metadata of one metric name. type is Prometheus'
 * lower-case name ("counter", "gauge", "info", "unknown", ...). */
void mw_metadata_set(mw_metadata *m, const char *name, const char *type, const char *help,
                     const char *unit);
/* The families of one snapshot, named as their samples are stored. */
void mw_metadata_note_snapshot(mw_metadata *m, const mw_snapshot *snap);
/* Prometheus' /api/v1/metadata data object: {"name": [{"type", "help",
 * "unit"}], ...} sorted by name, only `metric` when not NULL/empty, at most
 * limit names when limit >= 0. */
json_t *mw_metadata_json(mw_metadata *m, const char *metric, long limit);

#endif
