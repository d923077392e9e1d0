/* remote_write.c - snappy + protobuf-c decoding of remote-write bodies. */
#include "remote_write.h"
#include "../core/util.h"
#include "remote.pb-c.h"

#include <snappy-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *arena_alloc(void *data, size_t size)
{
    return mw_arena_alloc(data, size ? size : 1);
}

static void arena_free(void *data, void *p)
{
    /* Released with the arena. */
    (void)data;
    (void)p;
}

int mw_rw_decode(const uint8_t *body, size_t len, mw_rw_request *out, char *err, size_t errsize)
{
    memset(out, 0, sizeof(*out));
    mw_arena_init(&out->arena, 256 * 1024);
    size_t raw_len;
    if (snappy_uncompressed_length((const char *)body, len, &raw_len) != SNAPPY_OK) {
        snprintf(err, errsize, "snappy: the body is not a snappy block (bad length header)");
        return -1;
    }
    if (raw_len > MW_RW_MAX_DECODED) {
        snprintf(err, errsize,
                 "snappy: the body would decompress to %zu bytes, more than the "
                 "limit of %u",
                 raw_len, MW_RW_MAX_DECODED);
        return -1;
    }
    char *raw = malloc(raw_len ? raw_len : 1);
    if (!raw) {
        snprintf(err, errsize, "out of memory");
        return -1;
    }
    size_t got = raw_len;
    if (snappy_uncompress((const char *)body, len, raw, &got) != SNAPPY_OK || got != raw_len) {
        free(raw);
        snprintf(err, errsize, "snappy: corrupt compressed data");
        return -1;
    }
    ProtobufCAllocator alloc = {arena_alloc, arena_free, &out->arena};
    Prometheus__WriteRequest *wr =
        prometheus__write_request__unpack(&alloc, raw_len, (const uint8_t *)raw);
    free(raw);
    if (!wr) {
        snprintf(err, errsize, "protobuf: the body is not a valid WriteRequest message");
        return -1;
    }
    out->n = wr->n_timeseries;
    out->ts = mw_arena_alloc(&out->arena, (out->n ? out->n : 1) * sizeof(mw_store_ts));
    for (size_t i = 0; i < wr->n_timeseries; i++) {
        const Prometheus__TimeSeries *t = wr->timeseries[i];
        mw_store_ts *o = &out->ts[i];
        o->nlabels = t->n_labels;
        o->labels = mw_arena_alloc(&out->arena, (t->n_labels ? t->n_labels : 1) * sizeof(mw_label));
        for (size_t j = 0; j < t->n_labels; j++)
            o->labels[j] = (mw_label){t->labels[j]->name, t->labels[j]->value};
        mw_store_sample *sm = mw_arena_alloc(&out->arena, (t->n_samples ? t->n_samples : 1) *
                                                              sizeof(mw_store_sample));
        for (size_t j = 0; j < t->n_samples; j++)
            sm[j] = (mw_store_sample){t->samples[j]->timestamp, t->samples[j]->value};
        o->samples = sm;
        o->nsamples = t->n_samples;
        out->nsamples += t->n_samples;
    }
    static const char *const mtypes[] = {"unknown",        "counter", "gauge", "histogram",
                                         "gaugehistogram", "summary", "info",  "stateset"};
    out->nmeta = wr->n_metadata;
    out->meta = mw_arena_alloc(&out->arena, (out->nmeta ? out->nmeta : 1) * sizeof(mw_rw_metadata));
    for (size_t i = 0; i < wr->n_metadata; i++) {
        const Prometheus__MetricMetadata *md = wr->metadata[i];
        out->meta[i] = (mw_rw_metadata){md->metric_family_name,
                                        (unsigned)md->type < 8 ? mtypes[md->type] : "unknown",
                                        md->help, md->unit};
    }
    /* The message itself lives in the arena too: nothing else to free. */
    return 0;
}

void mw_rw_request_free(mw_rw_request *r)
{
    mw_arena_free(&r->arena);
    memset(r, 0, sizeof(*r));
}
