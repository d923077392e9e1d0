/* store_append.c - writes: validation, limits, out-of-order policy, WAL
 * records and the head, and the replay of those records on restart.
 *
 * A write is all or nothing: every series and sample is checked first
 * (labels, limits, order against what is stored), and only when all pass is
 * anything stored. That is Prometheus' remote-write behaviour: an
 * out-of-order sample gets the request a 400 and nothing of it is kept. */
#include "../core/arena.h"
#include "../core/buf.h"
#include "../core/log.h"
#include "../core/util.h"
#include "store_internal.h"
#include "varint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The length of a valid label name, else 0: any non-empty UTF-8, as
 * Prometheus 3 (its UTF8Validation, the default since 3.0). */
static size_t valid_name_len(const char *name)
{
    ptrdiff_t n = mw_utf8_len(name);
    return n > 0 ? (size_t)n : 0;
}

/* {a="b", c="d"} for messages, bounded. */
static void fmt_labels(const mw_label *l, size_t n, char *out, size_t size)
{
    mw_buf b;
    mw_buf_init(&b, 300);
    mw_buf_putc(&b, '{');
    for (size_t i = 0; i < n; i++)
        mw_buf_printf(&b, "%s%s=\"%.60s\"", i ? ", " : "", l[i].name, l[i].value);
    mw_buf_putc(&b, '}');
    snprintf(out, size, "%s%s", b.data ? b.data : "{}", b.overflow ? "..." : "");
    mw_buf_free(&b);
}

/* The cause of this thread's latest refusal, for the own-samples log. */
static _Thread_local mw_store_refusal last_refusal;

static int refuse(mw_store *s, mw_store_refusal why, int status, char *msg, size_t msgsize,
                  const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int refuse(mw_store *s, mw_store_refusal why, int status, char *msg, size_t msgsize,
                  const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, msgsize, fmt, ap);
    va_end(ap);
    atomic_fetch_add(&s->refused[why], 1);
    last_refusal = why;
    return status;
}

/* strcmp's order; label names of a series mostly differ in their first
 * byte, which spares the call (strcmp was 6 % of the CPU of ingest). */
static inline int name_cmp(const char *a, const char *b)
{
    if (a[0] != b[0]) return (unsigned char)a[0] < (unsigned char)b[0] ? -1 : 1;
    return strcmp(a, b);
}

/* Check and normalise one series' labels: drop empty values, sort by name,
 * refuse bad names, duplicates and anything over a limit. */
static int check_labels(mw_store *s, mw_store_ts *ts, size_t idx, char *msg, size_t msgsize)
{
    const mw_store_limits *lim = &s->opt.limits;
    size_t w = 0;
    for (size_t i = 0; i < ts->nlabels; i++)
        if (ts->labels[i].value && ts->labels[i].value[0]) ts->labels[w++] = ts->labels[i];
    ts->nlabels = w;
    if (w == 0)
        return refuse(s, MW_REFUSE_MALFORMED, 400, msg, msgsize,
                      "series %zu has no labels (or only empty values)", idx);
    size_t maxl = lim->max_labels && lim->max_labels < 255 ? lim->max_labels : 255;
    char l[320];
    if (w > maxl) {
        fmt_labels(ts->labels, w, l, sizeof(l));
        return refuse(s, MW_REFUSE_LABEL_LIMIT, 400, msg, msgsize,
                      "series %s has %zu labels, more than the limit of %zu", l, w, maxl);
    }
    int sorted = 1;
    for (size_t i = 0; i < w; i++) {
        const mw_label *lb = &ts->labels[i];
        size_t nl = lb->name ? valid_name_len(lb->name) : 0;
        if (nl == 0) {
            return refuse(s, MW_REFUSE_MALFORMED, 400, msg, msgsize,
                          "series %zu: invalid label name '%.100s' (must be non-empty UTF-8)", idx,
                          lb->name ? lb->name : "");
        }
        ptrdiff_t vlen = mw_utf8_len(lb->value);
        if (vlen < 0)
            return refuse(s, MW_REFUSE_MALFORMED, 400, msg, msgsize,
                          "series %zu: the value of label %s is not valid UTF-8", idx, lb->name);
        size_t vl = (size_t)vlen;
        if (lim->max_label_name_len && nl > lim->max_label_name_len)
            return refuse(s, MW_REFUSE_LABEL_LIMIT, 400, msg, msgsize,
                          "series %zu: label name '%.60s...' is %zu bytes long, more than the "
                          "limit of %u",
                          idx, lb->name, nl, lim->max_label_name_len);
        if (lim->max_label_value_len && vl > lim->max_label_value_len)
            return refuse(s, MW_REFUSE_LABEL_LIMIT, 400, msg, msgsize,
                          "series %zu: the value of label %s is %zu bytes long, more than the "
                          "limit of %u",
                          idx, lb->name, vl, lim->max_label_value_len);
        if (i && name_cmp(ts->labels[i - 1].name, lb->name) >= 0) sorted = 0;
    }
    if (!sorted) {
        /* Insertion sort: a series has a handful of labels, and qsort (glibc's
         * merge sort through a comparison callback) was 8.7 % of the CPU of
         * ingesting unsorted label sets. */
        for (size_t i = 1; i < w; i++) {
            mw_label x = ts->labels[i];
            size_t j = i;
            while (j > 0 && name_cmp(ts->labels[j - 1].name, x.name) > 0) {
                ts->labels[j] = ts->labels[j - 1];
                j--;
            }
            ts->labels[j] = x;
        }
        for (size_t i = 1; i < w; i++)
            if (name_cmp(ts->labels[i - 1].name, ts->labels[i].name) == 0) {
                fmt_labels(ts->labels, w, l, sizeof(l));
                return refuse(s, MW_REFUSE_MALFORMED, 400, msg, msgsize,
                              "series %s has label %s twice", l, ts->labels[i].name);
            }
    }
    return 0;
}

static int same_ts_labels(const mw_store_ts *a, const mw_store_ts *b)
{
    if (a->nlabels != b->nlabels) return 0;
    for (size_t i = 0; i < a->nlabels; i++)
        if (strcmp(a->labels[i].name, b->labels[i].name) != 0 ||
            strcmp(a->labels[i].value, b->labels[i].value) != 0)
            return 0;
    return 1;
}

/* Per-request state of one distinct series. */
typedef struct req_series {
    uint32_t id; /* UINT32_MAX until created */
    int has_last;
    int64_t last_t;
    uint64_t last_bits;
    const char *tenant; /* tenant label value of a new series, or NULL */
} req_series;

static const char *tenant_value(const mw_store *s, const mw_store_ts *ts)
{
    if (!s->opt.limits.tenant_label[0]) return NULL;
    for (size_t i = 0; i < ts->nlabels; i++)
        if (strcmp(ts->labels[i].name, s->opt.limits.tenant_label) == 0) return ts->labels[i].value;
    return NULL;
}

static int check_tenants(mw_store *s, req_series *rs, size_t nrs, char *msg, size_t msgsize)
{
    uint64_t lim = s->opt.limits.max_series_per_tenant;
    if (!lim || !s->opt.limits.tenant_label[0]) return 0;
    /* Count new series per tenant value in this request (small table). */
    size_t cap = 16;
    while (cap < nrs * 2)
        cap *= 2;
    const char **keys = mw_xcalloc(cap, sizeof(char *));
    uint64_t *cnt = mw_xcalloc(cap, sizeof(uint64_t));
    int rc = 0;
    for (size_t i = 0; i < nrs && rc == 0; i++) {
        if (rs[i].id != UINT32_MAX || !rs[i].tenant) continue;
        size_t k = mw_hash64(rs[i].tenant, strlen(rs[i].tenant), 7) & (cap - 1);
        while (keys[k] && strcmp(keys[k], rs[i].tenant) != 0)
            k = (k + 1) & (cap - 1);
        keys[k] = rs[i].tenant;
        cnt[k]++;
        uint64_t have = 0;
        uint32_t sym;
        const mw_head *h = &s->head;
        if (mw_sym_find(&h->sym, rs[i].tenant, strlen(rs[i].tenant), &sym) == 0 &&
            sym < h->tenant_cap)
            have = h->tenant_count[sym];
        if (have + cnt[k] > lim)
            rc = refuse(s, MW_REFUSE_TENANT_LIMIT, 429, msg, msgsize,
                        "series limit of %llu per %s reached for %s=\"%.100s\" (%llu active); "
                        "nothing of this request was stored",
                        (unsigned long long)lim, s->opt.limits.tenant_label,
                        s->opt.limits.tenant_label, rs[i].tenant, (unsigned long long)have);
    }
    free(keys);
    free(cnt);
    return rc;
}

/* A sample far ahead of the clock would make every later sample of its
 * series out of order until that time comes (a writer's sample ten years
 * ahead stopped the agent's own series for good). */
static int check_future(mw_store *s, const mw_store_ts *ts, int64_t horizon, char *msg,
                        size_t msgsize)
{
    for (size_t j = 0; j < ts->nsamples; j++) {
        if (ts->samples[j].t <= horizon) continue;
        char l[320];
        fmt_labels(ts->labels, ts->nlabels, l, sizeof(l));
        return refuse(s, MW_REFUSE_FUTURE, 400, msg, msgsize,
                      "sample too far in the future for series %s: timestamp %lld is more than "
                      "%lld ms after the store's clock; nothing of this request was stored",
                      l, (long long)ts->samples[j].t, (long long)s->opt.limits.max_future_ms);
    }
    return 0;
}

/* own: the agent's own samples, which mark their series MW_SERIES_OWN;
 * a remote write (own 0) into such a series is refused. */
/* known_hash: each series' mw_labels_hash when the caller has it (the
 * agent's own snapshot computes it for its staleness memory), else NULL. */
static int append(mw_store *s, mw_store_ts *ts, size_t n, int flags, int own,
                  const uint64_t *known_hash, char *msg, size_t msgsize)
{
    msg[0] = '\0';
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += ts[i].nsamples;
    uint64_t maxs = s->opt.limits.max_samples_per_request;
    if (maxs && total > maxs)
        return refuse(s, MW_REFUSE_SAMPLES_LIMIT, 400, msg, msgsize,
                      "request has %llu samples, more than the limit of %llu per request",
                      (unsigned long long)total, (unsigned long long)maxs);
    int64_t max_future = s->opt.limits.max_future_ms;
    int64_t horizon = max_future > 0 ? mw_now_ms() + max_future : INT64_MAX;
    for (size_t i = 0; i < n; i++) {
        int rc = check_labels(s, &ts[i], i, msg, msgsize);
        if (!rc) rc = check_future(s, &ts[i], horizon, msg, msgsize);
        if (rc) return rc;
    }
    int werr = mw_wal_status_of(s->wal).error;
    if (werr)
        return refuse(s, MW_REFUSE_DISK_FULL, 503, msg, msgsize,
                      "storage unavailable: cannot write the WAL in %s: %s; retry later", s->dir,
                      strerror(-werr));
    uint64_t *hash = mw_xmalloc((n ? n : 1) * sizeof(uint64_t));
    size_t *canon = mw_xmalloc((n ? n : 1) * sizeof(size_t));
    req_series *rs = mw_xmalloc((n ? n : 1) * sizeof(req_series));
    size_t nrs = 0, cap = 16;
    while (cap < n * 2)
        cap *= 2;
    size_t *map = mw_xcalloc(cap, sizeof(size_t)); /* ts index + 1 of each distinct series */
    for (size_t i = 0; i < n; i++)
        hash[i] = known_hash ? known_hash[i] : mw_labels_hash(ts[i].labels, ts[i].nlabels);
    mw_buf series_rec, samples_rec;
    mw_buf_init(&series_rec, 0);
    mw_buf_init(&samples_rec, 0);
    int status = 0;
    char l[320];

    pthread_rwlock_wrlock(&s->lock);
    mw_head *h = &s->head;
    uint64_t new_series = 0;
    for (size_t i = 0; i < n && !status; i++) {
        size_t k = hash[i] & (cap - 1);
        while (map[k] && !(hash[map[k] - 1] == hash[i] && same_ts_labels(&ts[map[k] - 1], &ts[i])))
            k = (k + 1) & (cap - 1);
        if (!map[k]) {
            map[k] = i + 1;
            req_series *r = &rs[nrs];
            canon[i] = nrs++;
            uint32_t id;
            if (mw_head_lookup(h, ts[i].labels, ts[i].nlabels, hash[i], &id) == 0) {
                const mw_series *se = mw_head_series(h, id);
                if (!own && (se->flags & MW_SERIES_OWN)) {
                    fmt_labels(ts[i].labels, ts[i].nlabels, l, sizeof(l));
                    status = refuse(s, MW_REFUSE_OWN_SERIES, 400, msg, msgsize,
                                    "series %s is the agent's own: remote writes may not add "
                                    "to it; nothing of this request was stored",
                                    l);
                    break;
                }
                *r = (req_series){id, (se->flags & MW_SERIES_HAS_LAST) != 0, se->enc.t,
                                  se->enc.vbits, NULL};
            } else {
                *r = (req_series){UINT32_MAX, 0, 0, 0, tenant_value(s, &ts[i])};
                new_series++;
            }
        } else {
            canon[i] = canon[map[k] - 1];
        }
        req_series *r = &rs[canon[i]];
        for (size_t j = 0; j < ts[i].nsamples; j++) {
            const mw_store_sample *sm = &ts[i].samples[j];
            uint64_t bits;
            memcpy(&bits, &sm->v, sizeof(bits));
            if (!r->has_last || sm->t > r->last_t) {
                r->has_last = 1;
                r->last_t = sm->t;
                r->last_bits = bits;
                continue;
            }
            if (sm->t == r->last_t && bits == r->last_bits) continue; /* duplicate: skipped */
            fmt_labels(ts[i].labels, ts[i].nlabels, l, sizeof(l));
            if (sm->t == r->last_t)
                status = refuse(s, MW_REFUSE_DUPLICATE, 400, msg, msgsize,
                                "duplicate sample for timestamp %lld with a different value for "
                                "series %s; nothing of this request was stored",
                                (long long)sm->t, l);
            else
                status = refuse(s, MW_REFUSE_OUT_OF_ORDER, 400, msg, msgsize,
                                "out of order sample for series %s: timestamp %lld is before the "
                                "newest stored or sent timestamp %lld; nothing of this request "
                                "was stored",
                                l, (long long)sm->t, (long long)r->last_t);
            break;
        }
    }
    uint64_t maxser = s->opt.limits.max_series;
    if (!status && maxser && h->nlive + new_series > maxser)
        status = refuse(s, MW_REFUSE_SERIES_LIMIT, 429, msg, msgsize,
                        "active series limit of %llu reached (%u active, this request adds "
                        "%llu); nothing of this request was stored",
                        (unsigned long long)maxser, h->nlive, (unsigned long long)new_series);
    if (!status) status = check_tenants(s, rs, nrs, msg, msgsize);
    uint64_t lsn = 0;
    if (!status) {
        /* Apply: create series, append samples, log both records. */
        uint64_t nsamp = 0, dups = 0;
        int64_t prev_t = 0;
        mw_buf_uvarint(&samples_rec, total);
        /* Each sample's record written in place: an id (at most 5 bytes), a
         * time delta (at most 10) and the value's 8 bytes, reserved at once
         * (three appends a sample, and the buffer's doublings, were 5 % of
         * the CPU of ingest). */
        if (mw_buf_reserve(&samples_rec, total * 23) < 0) abort();
        for (size_t i = 0; i < n; i++) {
            req_series *r = &rs[canon[i]];
            if (r->id == UINT32_MAX) {
                r->id = mw_head_create(h, ts[i].labels, ts[i].nlabels, hash[i], UINT32_MAX);
                mw_buf_uvarint(&series_rec, r->id);
                mw_buf_uvarint(&series_rec, ts[i].nlabels);
                for (size_t j = 0; j < ts[i].nlabels; j++) {
                    size_t nl = strlen(ts[i].labels[j].name), vl = strlen(ts[i].labels[j].value);
                    mw_buf_uvarint(&series_rec, nl);
                    mw_buf_append(&series_rec, ts[i].labels[j].name, nl);
                    mw_buf_uvarint(&series_rec, vl);
                    mw_buf_append(&series_rec, ts[i].labels[j].value, vl);
                }
                atomic_fetch_add(&s->series_created, 1);
            }
            mw_series *se = mw_head_series(h, r->id);
            if (own) se->flags |= MW_SERIES_OWN;
            for (size_t j = 0; j < ts[i].nsamples; j++) {
                const mw_store_sample *sm = &ts[i].samples[j];
                /* Duplicates are logged too (replay skips them the same
                 * way), so the record count stays the request's. */
                uint8_t *o = (uint8_t *)samples_rec.data + samples_rec.len;
                o += mw_uvarint_put(o, r->id);
                int64_t dt = (int64_t)((uint64_t)sm->t - (uint64_t)prev_t);
                o += mw_uvarint_put(o, ((uint64_t)dt << 1) ^ (dt < 0 ? UINT64_MAX : 0));
                uint64_t bits;
                memcpy(&bits, &sm->v, sizeof(bits));
                mw_put_le64(o, bits);
                samples_rec.len = (size_t)(o + 8 - (uint8_t *)samples_rec.data);
                prev_t = sm->t;
                if (mw_head_check(se, sm->t, sm->v) == 0) {
                    mw_head_append(h, r->id, sm->t, sm->v);
                    nsamp++;
                } else {
                    dups++;
                }
            }
        }
        samples_rec.data[samples_rec.len] = '\0';
        if (series_rec.len)
            lsn = mw_wal_append(s->wal, MW_REC_SERIES, series_rec.data, series_rec.len);
        if (total) lsn = mw_wal_append(s->wal, MW_REC_SAMPLES, samples_rec.data, samples_rec.len);
        atomic_fetch_add(&s->samples_appended, nsamp);
        atomic_fetch_add(&s->samples_duplicate, dups);
    }
    pthread_rwlock_unlock(&s->lock);
    mw_buf_free(&series_rec);
    mw_buf_free(&samples_rec);
    free(hash);
    free(canon);
    free(rs);
    free(map);
    if (status) return status;
    if ((flags & MW_STORE_WAIT) && lsn) {
        int rc = mw_wal_wait(s->wal, lsn);
        if (rc < 0) {
            return refuse(s, MW_REFUSE_DISK_FULL, 503, msg, msgsize,
                          "storage unavailable: cannot make the samples durable in %s: %s; "
                          "retry later",
                          s->dir, strerror(-rc));
        }
    } else if (lsn && mw_wal_status_of(s->wal).buffered >= MW_WAL_EARLY_FLUSH) {
        /* Samples that need not wait are made durable by the maintenance
         * thread every second; at short intervals and on large nodes that is
         * megabytes of buffer (twice: the WAL double-buffers). Wake it now. */
        mw_worker_kick(&s->maintainer);
    }
    return 0;
}

int mw_store_last_sample(mw_store *s, const mw_label *labels, size_t n, int64_t *t, uint64_t *bits)
{
    mw_label l[255];
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (!labels[i].value || !labels[i].value[0] || !labels[i].name) continue;
        if (w == 255) return -1; /* append refuses it anyway */
        size_t j = w++;
        while (j > 0 && name_cmp(l[j - 1].name, labels[i].name) > 0) {
            l[j] = l[j - 1];
            j--;
        }
        l[j] = labels[i];
    }
    if (!w) return -1;
    uint64_t hash = mw_labels_hash(l, w);
    int rc = -1;
    pthread_rwlock_rdlock(&s->lock);
    uint32_t id;
    if (mw_head_lookup(&s->head, l, w, hash, &id) == 0) {
        const mw_series *se = mw_head_series(&s->head, id);
        if (se->flags & MW_SERIES_HAS_LAST) {
            *t = se->enc.t;
            *bits = se->enc.vbits;
            rc = 0;
        }
    }
    pthread_rwlock_unlock(&s->lock);
    return rc;
}

int mw_store_append(mw_store *s, mw_store_ts *ts, size_t n, int flags, char *msg, size_t msgsize)
{
    return append(s, ts, n, flags, 0, NULL, msg, msgsize);
}

int mw_store_writable(mw_store *s, char *why, size_t size)
{
    int werr = mw_wal_status_of(s->wal).error;
    if (!werr) return 0;
    snprintf(why, size, "cannot write the WAL in %s: %s", s->dir, strerror(-werr));
    return -1;
}

/* Append n prepared series; one bad series (a collector bug) must not lose
 * the whole cycle: skip the series the store refuses, store the rest. The
 * log has one line per cause (not per series, whose message changes every
 * cycle with its timestamp) per quiet period, with a count. */
static int append_own(mw_store *s, mw_store_ts *ts, const uint64_t *hash, size_t n, char *msg,
                      size_t msgsize)
{
    int rc = append(s, ts, n, 0, 1, hash, msg, msgsize);
    if (rc == 400) {
        for (size_t i = 0; i < n; i++) {
            char m2[512];
            if (append(s, &ts[i], 1, 0, 1, hash ? &hash[i] : NULL, m2, sizeof(m2)) == 0) continue;
            char key[64];
            snprintf(key, sizeof(key), "own sample refused: %s",
                     mw_store_refusal_names[last_refusal]);
            mw_log_once(MW_LOG_WARN, "store", key, "own sample not stored: %s", m2);
        }
        rc = 0;
    }
    return rc;
}

/* Samples of a snapshot appended per call: the label copies and the
 * append's own tables for a whole cycle of a large node would be megabytes
 * of transient heap (1.3 MB for 7,300 samples) every cycle; 1,024 a call
 * still faulted in ~116 KB at every cycle of a 100-pod node, 256 ~8 KB (29
 * calls instead of 8: microseconds). */
#define OWN_BATCH 256
/* Labels of one own series, __name__ included: a collector emits at most
 * MW_MAX_LABELS and the agent adds the node's name. */
#define OWN_MAX_LABELS (2 * MW_MAX_LABELS)

typedef struct own_batch {
    mw_store *s;
    mw_arena a;
    mw_store_ts *ts;
    mw_store_sample *sm;
    uint64_t hash[OWN_BATCH]; /* mw_labels_hash of each series */
    size_t n;
    int64_t t;
    int rc;
    char *msg;
    size_t msgsize;
} own_batch;

static void own_flush(own_batch *b)
{
    if (!b->n) return;
    char m2[512]; /* the first error's message is the one returned */
    int r = b->rc ? append_own(b->s, b->ts, b->hash, b->n, m2, sizeof(m2))
                  : append_own(b->s, b->ts, b->hash, b->n, b->msg, b->msgsize);
    if (r && !b->rc) b->rc = r;
    b->n = 0;
    mw_arena_reset(&b->a);
}

/* labels (copied when copy is set: a staleness marker's key is freed right
 * after) and value into the batch, which is appended when full. */
static void own_add(own_batch *b, const mw_label *labels, size_t nl, uint64_t hash, double v,
                    int copy)
{
    mw_label *l = mw_arena_alloc(&b->a, nl * sizeof(mw_label));
    for (size_t i = 0; i < nl; i++)
        l[i] = copy ? (mw_label){mw_arena_strdup(&b->a, labels[i].name),
                                 mw_arena_strdup(&b->a, labels[i].value)}
                    : labels[i];
    b->hash[b->n] = hash;
    b->sm[b->n] = (mw_store_sample){b->t, v};
    b->ts[b->n] = (mw_store_ts){l, nl, &b->sm[b->n], 1};
    if (++b->n == OWN_BATCH) own_flush(b);
}

/* A series of the last snapshot that this one lacks: its staleness marker
 * (as a Prometheus scrape writes one), so that queries stop returning an
 * ended container or idle session now, not after the lookback. */
static void own_ended(void *arg, const char *key, size_t len)
{
    mw_label l[OWN_MAX_LABELS];
    size_t nl = mw_series_key_labels(key, len, l, OWN_MAX_LABELS);
    if (nl) own_add(arg, l, nl, mw_labels_hash(l, nl), mw_stale_nan(), 1);
}

int mw_store_append_snapshot(mw_store *s, const mw_snapshot *snap, char *msg, size_t msgsize)
{
    /* An empty snapshot is a round that collected nothing, not one in which
     * every series ended. */
    if (!snap->nsamples) return 0;
    own_batch b = {.s = s, .t = snap->timestamp_ms, .msg = msg, .msgsize = msgsize};
    mw_arena_init(&b.a, 32 * 1024);
    b.ts = mw_xmalloc(OWN_BATCH * sizeof(mw_store_ts));
    b.sm = mw_xmalloc(OWN_BATCH * sizeof(mw_store_sample));
    mw_label l[OWN_MAX_LABELS];
    for (const mw_family *f = snap->first; f; f = f->next)
        for (const mw_sample *x = f->first; x; x = x->next) {
            size_t nl = x->nlabels < OWN_MAX_LABELS - 1 ? x->nlabels : OWN_MAX_LABELS - 1;
            l[0] = (mw_label){"__name__", f->desc->name};
            memcpy(l + 1, x->labels, nl * sizeof(mw_label));
            uint64_t hash = mw_labels_hash(l, nl + 1);
            if (mw_series_memory_mark(&s->own_last, hash)) {
                mw_buf_clear(&s->own_key);
                for (size_t i = 0; i <= nl; i++)
                    mw_series_key_add(&s->own_key, l[i].name, l[i].value);
                mw_series_memory_keep_key(&s->own_last, s->own_key.data, s->own_key.len);
            }
            own_add(&b, l, nl + 1, hash, x->value, 0);
        }
    mw_series_memory_sweep(&s->own_last, own_ended, &b);
    own_flush(&b);
    mw_arena_free(&b.a);
    free(b.ts);
    free(b.sm);
    return b.rc;
}

/* ---- replay ---- */

int mw_store_replay_record(void *arg, uint8_t type, const uint8_t *p, size_t n)
{
    mw_store *s = arg;
    mw_head *h = &s->head;
    mw_rd r = {p, n, 0, 0};
    s->replayed_records++;
    if (type == MW_REC_SERIES) {
        while (r.off < r.n && !r.bad) {
            uint64_t id = mw_rd_uvarint(&r), nl = mw_rd_uvarint(&r);
            /* Ids are handed out one after the other: a record far ahead of
             * the last one is corrupt (and would allocate for every id
             * in between). */
            if (r.bad || nl == 0 || nl > 255 || id >= UINT32_MAX - 1 ||
                id >= (uint64_t)h->next_id + (1u << 20))
                return 1;
            mw_label labels[255];
            char *strs[510];
            size_t ns = 0;
            for (uint64_t i = 0; i < nl && !r.bad; i++) {
                for (int k = 0; k < 2; k++) {
                    uint64_t len = mw_rd_uvarint(&r);
                    const uint8_t *b = mw_rd_bytes(&r, len);
                    if (!b) break;
                    strs[ns] = mw_xmalloc(len + 1);
                    memcpy(strs[ns], b, len);
                    strs[ns][len] = '\0';
                    ns++;
                }
                if (!r.bad) labels[i] = (mw_label){strs[ns - 2], strs[ns - 1]};
            }
            if (!r.bad) {
                uint64_t hsh = mw_labels_hash(labels, nl);
                uint32_t have;
                if (!((uint32_t)id < h->next_id &&
                      (mw_head_series(h, (uint32_t)id)->flags & MW_SERIES_LIVE)) &&
                    mw_head_lookup(h, labels, nl, hsh, &have) < 0)
                    mw_head_create(h, labels, nl, hsh, (uint32_t)id);
            }
            for (size_t i = 0; i < ns; i++)
                free(strs[i]);
        }
        return r.bad;
    }
    if (type == MW_REC_SAMPLES) {
        uint64_t count = mw_rd_uvarint(&r);
        int64_t t = 0;
        for (uint64_t i = 0; i < count && !r.bad; i++) {
            uint64_t id = mw_rd_uvarint(&r);
            t = (int64_t)((uint64_t)t + (uint64_t)mw_rd_varint(&r));
            uint64_t bits = mw_rd_u64(&r);
            if (r.bad) break;
            double v;
            memcpy(&v, &bits, sizeof(v));
            if (id >= h->next_id || !(mw_head_series(h, (uint32_t)id)->flags & MW_SERIES_LIVE)) {
                s->unknown_series_samples++;
                continue;
            }
            /* Samples the snapshot already holds, and duplicates, fail the
             * check and are skipped: replay is idempotent. */
            if (mw_head_check(mw_head_series(h, (uint32_t)id), t, v) == 0) {
                mw_head_append(h, (uint32_t)id, t, v);
                atomic_fetch_add(&s->samples_appended, 1);
            }
        }
        return r.bad;
    }
    return 0; /* unknown record types are skipped: written by a newer version */
}
