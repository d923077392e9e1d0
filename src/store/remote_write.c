/* remote_write.c - snappy + protobuf decoding of remote-write bodies
 * against a memory budget (see remote_write.h).
 *
 * The protobuf is walked twice by one walker: the first walk allocates
 * nothing and counts what the request holds (series, labels, samples,
 * metadata, string bytes), stopping as soon as the count is over the
 * budget; only then are the arrays allocated, each at its exact size, and
 * the second walk fills them. A generic decoder (protobuf-c) allocates one
 * object per message as it goes, so a 3 MiB body of 32 M empty series grew
 * to gigabytes before anything could refuse it. */
#include "remote_write.h"
#include "../core/util.h"

#include <snappy-c.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a request costs beyond its decoded bytes, per item: the decoded
 * arrays (remote_write.h), the string copies (counted by length), and what
 * mw_store_append allocates for it (store_append.c: per series a hash, an
 * index, its request state and two map slots; per sample its WAL record;
 * per label its bytes again in the series record). */
#define SERIES_COST (sizeof(mw_store_ts) + 64)
#define LABEL_COST (sizeof(mw_label) + 2 * 2)
#define SAMPLE_COST (sizeof(mw_store_sample) + 20)
#define META_COST (sizeof(mw_rw_metadata) + 4)

typedef struct wire {
    const uint8_t *p, *end;
} wire;

/* The counts of the first walk, and the cursors of the second. */
typedef struct tally {
    size_t series, labels, samples, meta, string_bytes;
    size_t budget_left; /* bytes the items counted so far may still use */
    int over_budget;
} tally;

typedef struct fill {
    mw_rw_request *out;
    mw_label *labels;
    mw_store_sample *samples;
    char *strings;
    const char *const *mtypes;
} fill;

static int read_varint(wire *w, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64 && w->p < w->end; shift += 7) {
        uint8_t b = *w->p++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* One field's key and, for length-delimited fields, its bytes in *sub.
 * Other wire types are consumed; *value holds a varint or fixed64. */
static int read_field(wire *w, uint32_t *field, int *type, wire *sub, uint64_t *value, char *err,
                      size_t errsize)
{
    uint64_t key;
    if (read_varint(w, &key) < 0 || (key >> 3) == 0 || (key >> 3) > UINT32_MAX) {
        snprintf(err, errsize, "protobuf: invalid field key");
        return -1;
    }
    *field = (uint32_t)(key >> 3);
    *type = (int)(key & 7);
    switch (*type) {
    case 0:
        if (read_varint(w, value) == 0) return 0;
        break;
    case 1:
    case 5: {
        size_t n = *type == 1 ? 8 : 4;
        if ((size_t)(w->end - w->p) < n) break;
        uint64_t x = 0;
        for (size_t i = 0; i < n; i++)
            x |= (uint64_t)w->p[i] << (8 * i);
        w->p += n;
        *value = x;
        return 0;
    }
    case 2: {
        uint64_t len;
        if (read_varint(w, &len) < 0 || len > (uint64_t)(w->end - w->p)) break;
        *sub = (wire){w->p, w->p + len};
        w->p += len;
        return 0;
    }
    default:
        snprintf(err, errsize, "protobuf: field %u has the unsupported wire type %d", *field,
                 *type);
        return -1;
    }
    snprintf(err, errsize, "protobuf: field %u is truncated", *field);
    return -1;
}

static int expect_type(uint32_t field, int type, int want, const char *what, char *err,
                       size_t errsize)
{
    if (type == want) return 0;
    snprintf(err, errsize, "protobuf: %s (field %u) has wire type %d instead of %d", what, field,
             type, want);
    return -1;
}

/* Take cost bytes of the budget; 0, or -1 once it is spent. */
static int charge(tally *t, size_t cost)
{
    if (cost > t->budget_left) {
        t->over_budget = 1;
        return -1;
    }
    t->budget_left -= cost;
    return 0;
}

/* A string field's bytes, NUL-terminated, into the string pool. */
static const char *copy_string(fill *f, wire s, const char *what, char *err, size_t errsize)
{
    size_t n = (size_t)(s.end - s.p);
    if (memchr(s.p, 0, n)) {
        snprintf(err, errsize, "protobuf: %s contains a NUL byte", what);
        return NULL;
    }
    char *d = f->strings;
    memcpy(d, s.p, n);
    d[n] = '\0';
    f->strings += n + 1;
    return d;
}

/* Label, Sample and MetricMetadata: t counts them (f NULL), or f fills
 * them. A string field seen twice keeps its last value (proto3), so each
 * is counted where it is seen: a repeated field costs its bytes twice. */
static int walk_label(wire w, tally *t, fill *f, mw_label *out, char *err, size_t errsize)
{
    while (w.p < w.end) {
        uint32_t field;
        int type;
        wire sub = {0};
        uint64_t v;
        if (read_field(&w, &field, &type, &sub, &v, err, errsize) < 0) return -1;
        if (field != 1 && field != 2) continue;
        if (expect_type(field, type, 2, "Label.name/value", err, errsize) < 0) return -1;
        if (!f) {
            t->string_bytes += (size_t)(sub.end - sub.p) + 1;
            if (charge(t, (size_t)(sub.end - sub.p) * 3 + 1) < 0) return -1;
            continue;
        }
        const char *s =
            copy_string(f, sub, field == 1 ? "a label name" : "a label value", err, errsize);
        if (!s) return -1;
        if (field == 1)
            out->name = s;
        else
            out->value = s;
    }
    return 0;
}

static int walk_sample(wire w, mw_store_sample *out, char *err, size_t errsize)
{
    while (w.p < w.end) {
        uint32_t field;
        int type;
        wire sub = {0};
        uint64_t v;
        if (read_field(&w, &field, &type, &sub, &v, err, errsize) < 0) return -1;
        if (field == 1) {
            if (expect_type(field, type, 1, "Sample.value", err, errsize) < 0) return -1;
            if (out) memcpy(&out->v, &v, sizeof(double));
        } else if (field == 2) {
            if (expect_type(field, type, 0, "Sample.timestamp", err, errsize) < 0) return -1;
            if (out) out->t = (int64_t)v;
        }
    }
    return 0;
}

static int walk_series(wire w, tally *t, fill *f, mw_store_ts *out, char *err, size_t errsize)
{
    while (w.p < w.end) {
        uint32_t field;
        int type;
        wire sub = {0};
        uint64_t v;
        if (read_field(&w, &field, &type, &sub, &v, err, errsize) < 0) return -1;
        if (field != 1 && field != 2) continue;
        if (expect_type(field, type, 2, field == 1 ? "TimeSeries.labels" : "TimeSeries.samples",
                        err, errsize) < 0)
            return -1;
        if (field == 1) {
            mw_label *l = NULL;
            if (f) {
                l = &f->labels[0];
                *l = (mw_label){"", ""};
                f->labels++;
                out->nlabels++;
            } else {
                t->labels++;
                if (charge(t, LABEL_COST) < 0) return -1;
            }
            if (walk_label(sub, t, f, l, err, errsize) < 0) return -1;
        } else {
            mw_store_sample *sm = NULL;
            if (f) {
                sm = f->samples++;
                *sm = (mw_store_sample){0, 0};
                out->nsamples++;
            } else {
                t->samples++;
                if (charge(t, SAMPLE_COST) < 0) return -1;
            }
            if (walk_sample(sub, sm, err, errsize) < 0) return -1;
        }
    }
    return 0;
}

static int walk_metadata(wire w, tally *t, fill *f, mw_rw_metadata *out, char *err, size_t errsize)
{
    while (w.p < w.end) {
        uint32_t field;
        int type;
        wire sub = {0};
        uint64_t v;
        if (read_field(&w, &field, &type, &sub, &v, err, errsize) < 0) return -1;
        if (field == 1) {
            if (expect_type(field, type, 0, "MetricMetadata.type", err, errsize) < 0) return -1;
            if (f) out->type = v < 8 ? f->mtypes[v] : "unknown";
            continue;
        }
        if (field != 2 && field != 4 && field != 5) continue;
        if (expect_type(field, type, 2, "MetricMetadata strings", err, errsize) < 0) return -1;
        if (!f) {
            t->string_bytes += (size_t)(sub.end - sub.p) + 1;
            if (charge(t, (size_t)(sub.end - sub.p) + 1) < 0) return -1;
            continue;
        }
        const char *s = copy_string(f, sub, "a metadata string", err, errsize);
        if (!s) return -1;
        if (field == 2)
            out->name = s;
        else if (field == 4)
            out->help = s;
        else
            out->unit = s;
    }
    return 0;
}

/* The WriteRequest: counts into t (f NULL) or fills through f. */
static int walk_request(wire w, tally *t, fill *f, char *err, size_t errsize)
{
    while (w.p < w.end) {
        uint32_t field;
        int type;
        wire sub = {0};
        uint64_t v;
        if (read_field(&w, &field, &type, &sub, &v, err, errsize) < 0) return -1;
        if (field != 1 && field != 3) continue;
        if (expect_type(field, type, 2,
                        field == 1 ? "WriteRequest.timeseries" : "WriteRequest.metadata", err,
                        errsize) < 0)
            return -1;
        if (field == 1) {
            mw_store_ts *ts = NULL;
            if (f) {
                ts = &f->out->ts[f->out->n++];
                *ts = (mw_store_ts){f->labels, 0, f->samples, 0};
            } else {
                t->series++;
                if (charge(t, SERIES_COST) < 0) return -1;
            }
            if (walk_series(sub, t, f, ts, err, errsize) < 0) return -1;
            if (f) f->out->nsamples += ts->nsamples;
        } else {
            mw_rw_metadata *md = NULL;
            if (f) {
                md = &f->out->meta[f->out->nmeta++];
                *md = (mw_rw_metadata){"", "unknown", "", ""};
            } else {
                t->meta++;
                if (charge(t, META_COST) < 0) return -1;
            }
            if (walk_metadata(sub, t, f, md, err, errsize) < 0) return -1;
        }
    }
    return 0;
}

static void over_budget(const tally *t, size_t raw_len, char *err, size_t errsize)
{
    snprintf(err, errsize,
             "the request needs more than the decoding budget of %u bytes (%zu decompressed "
             "bytes; counted before the budget ran out: %zu series, %zu labels, %zu samples)",
             MW_RW_BUDGET, raw_len, t->series, t->labels, t->samples);
}

int mw_rw_decode(const uint8_t *body, size_t len, mw_rw_request *out, char *err, size_t errsize)
{
    memset(out, 0, sizeof(*out));
    mw_arena_init(&out->arena, 4096);
    size_t raw_len;
    if (snappy_uncompressed_length((const char *)body, len, &raw_len) != SNAPPY_OK) {
        snprintf(err, errsize, "snappy: the body is not a snappy block (bad length header)");
        return -1;
    }
    tally t = {.budget_left = MW_RW_BUDGET};
    if (raw_len > MW_RW_MAX_DECODED) {
        snprintf(err, errsize,
                 "snappy: the body would decompress to %zu bytes, more than the "
                 "limit of %u",
                 raw_len, MW_RW_MAX_DECODED);
        return MW_RW_OVER_BUDGET;
    }
    charge(&t, raw_len); /* cannot fail: MW_RW_MAX_DECODED < MW_RW_BUDGET */
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
    wire w = {(const uint8_t *)raw, (const uint8_t *)raw + raw_len};
    if (walk_request(w, &t, NULL, err, errsize) < 0) {
        free(raw);
        if (!t.over_budget) return -1;
        over_budget(&t, raw_len, err, errsize);
        return MW_RW_OVER_BUDGET;
    }
    static const char *const mtypes[] = {"unknown",        "counter", "gauge", "histogram",
                                         "gaugehistogram", "summary", "info",  "stateset"};
    fill f = {out, NULL, NULL, NULL, mtypes};
    /* Everything below was counted against the budget above. */
    out->ts = mw_arena_alloc(&out->arena, (t.series ? t.series : 1) * sizeof(mw_store_ts));
    f.labels = mw_arena_alloc(&out->arena, (t.labels ? t.labels : 1) * sizeof(mw_label));
    f.samples = mw_arena_alloc(&out->arena, (t.samples ? t.samples : 1) * sizeof(mw_store_sample));
    out->meta = mw_arena_alloc(&out->arena, (t.meta ? t.meta : 1) * sizeof(mw_rw_metadata));
    f.strings = mw_arena_alloc(&out->arena, t.string_bytes ? t.string_bytes : 1);
    int rc = walk_request(w, &t, &f, err, errsize);
    free(raw);
    return rc;
}

void mw_rw_request_free(mw_rw_request *r)
{
    mw_arena_free(&r->arena);
    memset(r, 0, sizeof(*r));
}
