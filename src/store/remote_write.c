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
#include "histogram.h"
#include "../core/util.h"

#include <snappy-c.h>
#include <stdatomic.h>
#include <stddef.h>
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
    size_t series, labels, samples, meta, string_bytes, hists;
    size_t budget_left; /* bytes the items counted so far may still use */
    int over_budget;
} tally;

typedef struct fill {
    mw_rw_request *out;
    mw_label *labels;
    mw_store_sample *samples;
    uint8_t *raw; /* the decompressed body, where the strings are made C strings */
    const char *const *mtypes;
    const char *nul_what; /* the first string with a NUL byte (reported after the walk) */
} fill;

static int walk_histogram(wire w, tally *t, fill *f, mw_store_ts *out, char *err, size_t errsize);

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
static __attribute__((noinline)) int read_field(wire *w, uint32_t *field, int *type, wire *sub,
                                                uint64_t *value, char *err, size_t errsize)
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

/* A string field's bytes, NUL-terminated, in place: moved one byte back,
 * over the last byte of its length (already read; nothing before the walk's
 * position is read again), so that the NUL takes its last byte's place.
 * That spares a string pool per request (its copy and its fresh pages). */
static const char *copy_string(fill *f, wire s, const char *what)
{
    size_t n = (size_t)(s.end - s.p);
    /* Reported once the walk is over: a malformed field after it is what
     * the counting walk reports first. */
    if (!f->nul_what && memchr(s.p, 0, n)) f->nul_what = what;
    char *d = (char *)f->raw + (s.p - f->raw) - 1;
    memmove(d, s.p, n);
    d[n] = '\0';
    return d;
}

/* One field of a message, as next_field reads it. */
typedef struct pb_field {
    uint32_t num;
    int type;
    wire sub;   /* length-delimited: its bytes */
    uint64_t v; /* varint or fixed */
} pb_field;

/* The next field of w: 1, 0 at the end of w, -1 (err set) on a bad one.
 * Inline, with the common shapes read here: a one-byte key followed by a
 * one- or two-byte length (labels, strings, samples, series), a varint,
 * or a fixed64. Anything else (and every error) goes
 * through read_field, so the result is the same; the walker's calls were a
 * quarter of the CPU of ingesting 10k long series. */
static inline __attribute__((always_inline)) int next_field(wire *w, pb_field *fl, char *err,
                                                            size_t errsize)
{
    const uint8_t *p = w->p;
    if (p >= w->end) return 0;
    size_t left = (size_t)(w->end - p);
    if (left >= 2 && p[0] < 0x80 && p[0] >= 8) {
        uint8_t type = p[0] & 7;
        if (type == 2 && p[1] < 0x80 && p[1] <= left - 2) {
            fl->num = p[0] >> 3;
            fl->type = 2;
            fl->sub = (wire){p + 2, p + 2 + p[1]};
            w->p = p + 2 + p[1];
            return 1;
        }
        if (type == 2 && left >= 3 && p[1] >= 0x80 && p[2] < 0x80) { /* a two-byte length */
            size_t len = (size_t)(p[1] & 0x7f) | (size_t)p[2] << 7;
            if (len <= left - 3) {
                fl->num = p[0] >> 3;
                fl->type = 2;
                fl->sub = (wire){p + 3, p + 3 + len};
                w->p = p + 3 + len;
                return 1;
            }
        }
        if (type == 0) { /* read_varint's loop, inline (timestamps take 6 bytes) */
            uint64_t x = 0;
            const uint8_t *q = p + 1;
            for (int shift = 0; shift < 64 && q < w->end; shift += 7) {
                uint8_t b = *q++;
                x |= (uint64_t)(b & 0x7f) << shift;
                if (!(b & 0x80)) {
                    fl->num = p[0] >> 3;
                    fl->type = 0;
                    fl->sub = (wire){0};
                    fl->v = x;
                    w->p = q;
                    return 1;
                }
            }
        }
        if (type == 1 && left >= 9) {
            fl->num = p[0] >> 3;
            fl->type = 1;
            fl->sub = (wire){0};
            uint64_t x;
            memcpy(&x, p + 1, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
            x = __builtin_bswap64(x);
#endif
            fl->v = x;
            w->p = p + 9;
            return 1;
        }
    }
    fl->sub = (wire){0};
    return read_field(w, &fl->num, &fl->type, &fl->sub, &fl->v, err, errsize) < 0 ? -1 : 1;
}

/* An item of the first walk: counted and charged cost bytes. */
static int count_item(tally *t, size_t *count, size_t cost)
{
    (*count)++;
    return charge(t, cost);
}

/* A string field: counted (f NULL; it costs per_byte for each byte), or
 * copied into the pool and *dst pointed at it. */
static int take_string(tally *t, fill *f, wire sub, size_t per_byte, const char *what,
                       const char **dst)
{
    size_t n = (size_t)(sub.end - sub.p);
    if (!f) {
        t->string_bytes += n + 1;
        return charge(t, n * per_byte + 1);
    }
    *dst = copy_string(f, sub, what);
    return 0;
}

/* Label, Sample and MetricMetadata: t counts them (f NULL), or f fills
 * them. A string field seen twice keeps its last value (proto3), so each
 * is counted where it is seen: a repeated field costs its bytes twice. */
static int walk_label(wire w, tally *t, fill *f, mw_label *out, char *err, size_t errsize)
{
    pb_field fl;
    int r;
    while ((r = next_field(&w, &fl, err, errsize)) > 0) {
        if (fl.num != 1 && fl.num != 2) continue;
        if (expect_type(fl.num, fl.type, 2, "Label.name/value", err, errsize) < 0 ||
            take_string(t, f, fl.sub, 3, fl.num == 1 ? "a label name" : "a label value",
                        !f            ? NULL
                        : fl.num == 1 ? &out->name
                                      : &out->value) < 0)
            return -1;
    }
    return r;
}

static int walk_sample(wire w, mw_store_sample *out, char *err, size_t errsize)
{
    pb_field fl;
    int r;
    while ((r = next_field(&w, &fl, err, errsize)) > 0) {
        if (fl.num == 1) {
            if (expect_type(fl.num, fl.type, 1, "Sample.value", err, errsize) < 0) return -1;
            if (out) {
                memcpy(&out->v, &fl.v, sizeof(double));
                out->v = mw_hist_clean_float(out->v);
            }
        } else if (fl.num == 2) {
            if (expect_type(fl.num, fl.type, 0, "Sample.timestamp", err, errsize) < 0) return -1;
            if (out) out->t = (int64_t)fl.v;
        }
    }
    return r;
}

static int walk_series(wire w, tally *t, fill *f, mw_store_ts *out, char *err, size_t errsize)
{
    pb_field fl;
    int r;
    while ((r = next_field(&w, &fl, err, errsize)) > 0) {
        if (fl.num == 4) {
            if (expect_type(fl.num, fl.type, 2, "TimeSeries.histograms", err, errsize) < 0 ||
                walk_histogram(fl.sub, t, f, out, err, errsize) < 0)
                return -1;
            continue;
        }
        if (fl.num != 1 && fl.num != 2) continue;
        if (expect_type(fl.num, fl.type, 2,
                        fl.num == 1 ? "TimeSeries.labels" : "TimeSeries.samples", err, errsize) < 0)
            return -1;
        if (fl.num == 1) {
            mw_label *l = NULL;
            if (f) {
                l = f->labels++;
                *l = (mw_label){"", ""};
                out->nlabels++;
            } else if (count_item(t, &t->labels, LABEL_COST) < 0) {
                return -1;
            }
            if (walk_label(fl.sub, t, f, l, err, errsize) < 0) return -1;
        } else {
            mw_store_sample *sm = NULL;
            if (f) {
                sm = f->samples++;
                *sm = (mw_store_sample){0, 0};
                out->nsamples++;
            } else if (count_item(t, &t->samples, SAMPLE_COST) < 0) {
                return -1;
            }
            if (walk_sample(fl.sub, sm, err, errsize) < 0) return -1;
        }
    }
    return r;
}

static int walk_metadata(wire w, tally *t, fill *f, mw_rw_metadata *out, char *err, size_t errsize)
{
    pb_field fl;
    int r;
    while ((r = next_field(&w, &fl, err, errsize)) > 0) {
        if (fl.num == 1) {
            if (expect_type(fl.num, fl.type, 0, "MetricMetadata.type", err, errsize) < 0) return -1;
            if (f) out->type = fl.v < 8 ? f->mtypes[fl.v] : "unknown";
            continue;
        }
        if (fl.num != 2 && fl.num != 4 && fl.num != 5) continue;
        const char **dst = !f            ? NULL
                           : fl.num == 2 ? &out->name
                           : fl.num == 4 ? &out->help
                                         : &out->unit;
        if (expect_type(fl.num, fl.type, 2, "MetricMetadata strings", err, errsize) < 0 ||
            take_string(t, f, fl.sub, 1, "a metadata string", dst) < 0)
            return -1;
    }
    return r;
}

/* The WriteRequest: counts into t (f NULL) or fills through f. */
static int walk_request(wire w, tally *t, fill *f, char *err, size_t errsize)
{
    pb_field fl;
    int r;
    while ((r = next_field(&w, &fl, err, errsize)) > 0) {
        if (fl.num != 1 && fl.num != 3) continue;
        if (expect_type(fl.num, fl.type, 2,
                        fl.num == 1 ? "WriteRequest.timeseries" : "WriteRequest.metadata", err,
                        errsize) < 0)
            return -1;
        if (fl.num == 1) {
            mw_store_ts *ts = NULL;
            if (f) {
                ts = &f->out->ts[f->out->n++];
                *ts = (mw_store_ts){f->labels, 0, f->samples, 0};
            } else if (count_item(t, &t->series, SERIES_COST) < 0) {
                return -1;
            }
            if (walk_series(fl.sub, t, f, ts, err, errsize) < 0) return -1;
            if (f) f->out->nsamples += ts->nsamples;
        } else {
            mw_rw_metadata *md = NULL;
            if (f) {
                md = &f->out->meta[f->out->nmeta++];
                *md = (mw_rw_metadata){"", "unknown", "", ""};
            } else if (count_item(t, &t->meta, META_COST) < 0) {
                return -1;
            }
            if (walk_metadata(fl.sub, t, f, md, err, errsize) < 0) return -1;
        }
    }
    return r;
}

/* One decoding buffer kept from one request to the next: the body and the
 * arrays of a request of 5,000 series are about 1.5 MB, and mapping it
 * afresh each time (it is over malloc's mmap threshold) cost about a tenth
 * of the CPU of ingest in page faults and the kernel's clearing of the
 * pages. At most MW_RW_SPARE_MAX bytes are kept, and only while writes come:
 * the store's maintenance thread frees it after a second without one
 * (mw_rw_spare_trim), so an idle agent holds nothing more. */
#define MW_RW_SPARE_MAX (4u << 20)
#define ALIGN16(n) (((n) + 15) & ~(size_t)15)
typedef struct spare_buf {
    size_t cap;
    _Alignas(16) uint8_t data[];
} spare_buf;
static _Atomic(spare_buf *) spare;
static atomic_int spare_used;
static atomic_size_t spare_want; /* what the last request needed in all */

static void spare_take(mw_rw_request *out, size_t raw_len)
{
    size_t cap = atomic_load(&spare_want);
    if (cap < raw_len || cap > MW_RW_SPARE_MAX) cap = raw_len;
    cap = cap ? ALIGN16(cap) : 16;
    spare_buf *b = atomic_exchange(&spare, NULL);
    if (b && b->cap < cap) {
        free(b);
        b = NULL;
    }
    if (!b) {
        b = malloc(sizeof(spare_buf) + cap);
        if (!b) return;
        b->cap = cap;
    }
    out->spare = b;
    out->buf = b->data;
    out->buf_cap = b->cap;
}

static void spare_give(spare_buf *b)
{
    if (!b) return;
    if (b->cap > MW_RW_SPARE_MAX) {
        free(b);
        return;
    }
    atomic_store(&spare_used, 1);
    free(atomic_exchange(&spare, b));
}

/* The quick count: series, labels, samples and metadata counted from the
 * fields of the request and of its series alone (labels and samples are
 * not opened), with the bytes of the label and metadata messages in
 * string_bytes. -1 on anything the counting walk would look at more
 * closely (any field not of the usual shape). */
static int quick_count(wire w, tally *t)
{
    pb_field fl;
    int r;
    char err[8];
    while ((r = next_field(&w, &fl, err, sizeof(err))) > 0) {
        if (fl.num == 3 && fl.type == 2) {
            t->meta++;
            t->string_bytes += (size_t)(fl.sub.end - fl.sub.p);
            continue;
        }
        if (fl.num != 1 || fl.type != 2) return -1;
        t->series++;
        wire sw = fl.sub;
        pb_field sf;
        while ((r = next_field(&sw, &sf, err, sizeof(err))) > 0) {
            if (sf.type != 2) return -1;
            if (sf.num == 1) {
                t->labels++;
                t->string_bytes += 3 * (size_t)(sf.sub.end - sf.sub.p);
            } else if (sf.num == 2) {
                t->samples++;
            } else {
                return -1;
            }
        }
        if (r < 0) return -1;
    }
    return r;
}

/* Whether the counting walk could not have run out of budget: each string
 * of n bytes takes at least n + 2 bytes of its message (key and length),
 * and costs at most 3 n + 1 (labels) or n + 1 (metadata). */
static int quick_fits(const tally *t, size_t raw_len)
{
    size_t cost = raw_len + t->series * SERIES_COST + t->labels * LABEL_COST +
                  t->samples * SAMPLE_COST + t->meta * META_COST + t->string_bytes;
    return t->string_bytes <= MW_RW_BUDGET && cost <= MW_RW_BUDGET;
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
    spare_take(out, raw_len);
    if (!out->buf) {
        snprintf(err, errsize, "out of memory");
        return -1;
    }
    uint8_t *raw = out->buf;
    size_t got = raw_len;
    if (snappy_uncompress((const char *)body, len, (char *)raw, &got) != SNAPPY_OK ||
        got != raw_len) {
        snprintf(err, errsize, "snappy: corrupt compressed data");
        return -1;
    }
    wire w = {raw, raw + raw_len};
    /* The quick count, when it shows that the request fits the budget
     * whatever its labels hold, stands for the counting walk; else (and
     * on anything unusual) the counting walk counts and checks. */
    if (quick_count(w, &t) < 0 || !quick_fits(&t, raw_len)) {
        t = (tally){.budget_left = MW_RW_BUDGET - raw_len};
        if (walk_request(w, &t, NULL, err, errsize) < 0) {
            if (!t.over_budget) return -1;
            over_budget(&t, raw_len, err, errsize);
            return MW_RW_OVER_BUDGET;
        }
    }
    static const char *const mtypes[] = {"unknown",        "counter", "gauge", "histogram",
                                         "gaugehistogram", "summary", "info",  "stateset"};
    fill f = {out, NULL, NULL, raw, mtypes, NULL};
    /* Everything below was counted against the budget above: the arrays go
     * after the body in its buffer when they fit there, else into the
     * arena. */
    size_t sz[5] = {(t.series ? t.series : 1) * sizeof(mw_store_ts),
                    (t.labels ? t.labels : 1) * sizeof(mw_label),
                    (t.samples ? t.samples : 1) * sizeof(mw_store_sample),
                    (t.meta ? t.meta : 1) * sizeof(mw_rw_metadata),
                    (t.hists ? t.hists : 1) * sizeof(mw_histogram)};
    size_t off = ALIGN16(raw_len), need = off;
    for (int i = 0; i < 5; i++)
        need += ALIGN16(sz[i]);
    void *arr[5];
    for (int i = 0; i < 5; i++) {
        if (need <= out->buf_cap) {
            arr[i] = raw + off;
            off += ALIGN16(sz[i]);
        } else {
            arr[i] = mw_arena_alloc(&out->arena, sz[i]);
        }
    }
    out->ts = arr[0];
    f.labels = arr[1];
    f.samples = arr[2];
    out->meta = arr[3];
    out->hists = arr[4];
    atomic_store(&spare_want, need);
    int rc = walk_request(w, &t, &f, err, errsize);
    if (rc == 0 && f.nul_what) {
        snprintf(err, errsize, "protobuf: %s contains a NUL byte", f.nul_what);
        rc = -1;
    }
    return rc;
}

/* A histogram of a TimeSeries: counted and charged (its decoded size is
 * bounded by its bytes), or decoded into the request with a sample that
 * stands for it; the series' samples are kept in time order. */
static int walk_histogram(wire w, tally *t, fill *f, mw_store_ts *out, char *err, size_t errsize)
{
    size_t n = (size_t)(w.end - w.p);
    if (!f)
        return count_item(t, &t->hists, 0) < 0 ||
                       count_item(t, &t->samples,
                                  SAMPLE_COST + sizeof(mw_histogram) + 64 +
                                      n * MW_RW_HIST_COST_PER_BYTE) < 0
                   ? -1
                   : 0;
    size_t k = f->out->nhists;
    int64_t ts;
    if (mw_rw_histogram(w.p, n, &f->out->arena, &f->out->hists[k], &ts, err, errsize) < 0)
        return -1;
    f->out->nhists++;
    mw_store_sample *sm = f->samples++;
    *sm = (mw_store_sample){ts, mw_rw_pending(k)};
    out->nsamples++;
    /* Floats and histograms of one series in time order (insertion: each
     * list is sorted already, so this moves only what interleaves). */
    mw_store_sample *base = (mw_store_sample *)out->samples;
    for (size_t i = out->nsamples - 1; i > 0 && base[i - 1].t > base[i].t; i--) {
        mw_store_sample x = base[i];
        base[i] = base[i - 1];
        base[i - 1] = x;
    }
    return 0;
}

void mw_rw_request_free(mw_rw_request *r)
{
    spare_give(r->spare);
    mw_arena_free(&r->arena);
    memset(r, 0, sizeof(*r));
}

size_t mw_rw_spare_bytes(void)
{
    spare_buf *b = atomic_exchange(&spare, NULL);
    size_t n = b ? b->cap : 0;
    spare_give(b);
    return n;
}

void mw_rw_spare_trim(void)
{
    if (atomic_exchange(&spare_used, 0)) return;
    free(atomic_exchange(&spare, NULL));
}
