/* remote_write.c - the remote-write shipper module (src/agent/module.h).
 *
 * Per endpoint: consume() runs on the agent's thread and only encodes: each
 * sample of the snapshot becomes a series (name, labels, external labels,
 * write_relabel_configs, sorted), assigned to a shard by a hash of its
 * labels so that one series always travels through one shard, in order.
 * The encoded records go to an in-memory inbox (bounded; when the writer is
 * far behind, new data is dropped and counted) and consume() returns.
 * A writer thread appends the inbox to the shards' on-disk queues
 * (queue.h), syncs them once per interval and wakes their senders; one
 * sender thread per shard reads its queue in order, batches by size
 * (max_samples_per_send) and time (batch_send_deadline), posts, and
 * acknowledges. Both are mw_workers (core/worker.h): their waits run on
 * CLOCK_MONOTONIC, so a step of the wall clock delays no batch or retry.
 *
 * Folders: DATA_DIR/remote-write/ENDPOINT/shard-N. When max_shards shrinks,
 * the extra shards' queues are still drained. */
#include "../agent/module.h"
#include "../core/hash.h"
#include "../core/log.h"
#include "../core/series_memory.h"
#include "../core/util.h"
#include "../core/worker.h"
#include "../proto/rw_encode.h"
#include "queue.h"
#include "rw_config.h"
#include "sender.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SHARDS 64
#define INBOX_MAX_BYTES (64u << 20)
#define BATCH_MAX_BYTES (32u << 20)

/* clang-format off */
MW_METRIC(SENT, MW_COUNTER, "mlwatch_remote_write_samples_sent_total", "", "Samples the remote-write receiver accepted (2xx).");
MW_METRIC(FAILED, MW_COUNTER, "mlwatch_remote_write_samples_failed_total", "", "Samples in batches the receiver refused with a 4xx other than 429 (not retried).");
MW_METRIC(RETRIED, MW_COUNTER, "mlwatch_remote_write_samples_retried_total", "", "Samples in requests that failed with 5xx, 429 or a transport error and were sent again.");
MW_METRIC(DROPPED, MW_COUNTER, "mlwatch_remote_write_samples_dropped_total", "", "Samples never sent: relabel (write_relabel_configs), queue_full (oldest data dropped for room), backlog (the disk writer fell behind), invalid (too many labels).");
MW_METRIC(PENDING, MW_GAUGE, "mlwatch_remote_write_samples_pending", "", "Samples queued on disk and not yet acknowledged.");
MW_METRIC(QBYTES, MW_GAUGE, "mlwatch_remote_write_queue_bytes", "bytes", "Size of the endpoint's on-disk queue.");
MW_METRIC(CORRUPT, MW_COUNTER, "mlwatch_remote_write_queue_corrupt_bytes_total", "bytes", "Bytes of damaged queue data cut off at start or skipped (torn writes, disk errors).");
MW_METRIC(HIGHEST, MW_GAUGE, "mlwatch_remote_write_highest_sent_timestamp_seconds", "seconds", "Newest sample timestamp the receiver accepted (0 before the first).");
MW_METRIC(STALE, MW_COUNTER, "mlwatch_remote_write_staleness_markers_total", "", "Staleness markers queued for series that ended (sent last round, absent from this one), as Prometheus forwards them; counted in the samples sent once accepted.");
MW_METRIC(SHARDS, MW_GAUGE, "mlwatch_remote_write_shards", "", "Sender shards (queues) of the endpoint.");
/* clang-format on */

typedef struct rec_ref {
    size_t shard, off, len;
    uint32_t nsamples;
} rec_ref;

typedef struct inbox_item {
    struct inbox_item *next;
    mw_buf data;
    rec_ref *recs;
    size_t nrecs;
    int64_t ts;
} inbox_item;

typedef struct endpoint endpoint;

typedef struct shard {
    endpoint *ep;
    int idx;
    mw_rwq *q;
    mw_worker sender; /* kicked by the writer when q grows */
    mw_rw_client *client;
    unsigned seed;
} shard;

struct endpoint {
    mw_rw_endpoint_cfg *cfg;
    const char *label; /* the endpoint label: name, else the display URL */
    shard shards[MAX_SHARDS];
    int nshards;      /* threads and queues (>= active) */
    int nactive;      /* shards new data goes to: max_shards */
    mw_worker writer; /* its mutex guards the inbox: head, tail, inbox_bytes */
    inbox_item *head, *tail;
    size_t inbox_bytes;
    volatile int stop; /* set first at shutdown; in-flight posts poll it and abort */
    atomic_uint_fast64_t sent, failed, retried, drop_relabel, drop_backlog, drop_invalid;
    _Atomic int64_t highest_ms;
    /* consume()'s scratch, agent thread only */
    mw_arena scratch;
    mw_buf cur[MAX_SHARDS];
    uint32_t cur_n[MAX_SHARDS];
    /* The series sent last round, known by their shard hash, so that each
     * one missing from this round gets a staleness marker, as Prometheus
     * forwards them: a receiver stops showing an ended container at once
     * instead of for its lookback (5 min). Each keeps its shard and its
     * labels as sent: the marker follows the series' samples through the
     * same queue, in order. */
    mw_series_memory sent_last;
    mw_buf key;
    atomic_uint_fast64_t stale_markers;
};

typedef struct rw_state {
    mw_rw_config rc;
    endpoint *eps;
    size_t n;
} rw_state;

/* ---- sender threads ---- */

static int64_t mono_ms(void)
{
    return mw_mono_ns() / 1000000;
}

static void *shard_main(void *arg)
{
    shard *sh = arg;
    endpoint *ep = sh->ep;
    const mw_rw_endpoint_cfg *cfg = ep->cfg;
    mw_buf batch, body;
    mw_buf_init(&batch, 0);
    mw_buf_init(&body, 0);
    int64_t last_send = 0; /* data left from before a restart goes at once */
    while (!ep->stop) {
        mw_rwq_batch b;
        size_t nrec = mw_rwq_peek(sh->q, cfg->max_samples_per_send, BATCH_MAX_BYTES, &batch, &b);
        if (!nrec) {
            mw_worker_sleep(&sh->sender, 1000);
            continue;
        }
        int64_t due = last_send + cfg->batch_send_deadline_ms;
        if (!b.full && b.samples < cfg->max_samples_per_send && mono_ms() < due) {
            mw_worker_sleep(&sh->sender, due - mono_ms());
            continue; /* peek again: more may have come */
        }
        if (mw_rw_snappy(batch.data, batch.len, &body) < 0) {
            mw_log(MW_LOG_ERROR, "remote-write", "%s: cannot compress a batch of %zu bytes",
                   ep->label, batch.len);
            atomic_fetch_add(&ep->failed, b.samples);
            mw_rwq_ack(sh->q, &b);
            continue;
        }
        unsigned attempt = 0;
        for (;;) {
            mw_rw_result res;
            mw_rw_post(sh->client, body.data, body.len, &res);
            if (res.outcome == MW_RW_OK) {
                mw_rwq_ack(sh->q, &b);
                atomic_fetch_add(&ep->sent, b.samples);
                int64_t prev = atomic_load(&ep->highest_ms);
                while (b.max_ts > prev &&
                       !atomic_compare_exchange_weak(&ep->highest_ms, &prev, b.max_ts)) {
                }
                if (attempt)
                    mw_log(MW_LOG_INFO, "remote-write", "%s: sending again after %u retries",
                           ep->label, attempt);
                break;
            }
            if (res.outcome == MW_RW_REJECTED) {
                mw_log(MW_LOG_WARN, "remote-write",
                       "%s: batch of %llu samples refused, dropped (not retried): %s", ep->label,
                       (unsigned long long)b.samples, res.detail);
                atomic_fetch_add(&ep->failed, b.samples);
                mw_rwq_ack(sh->q, &b);
                break;
            }
            if (ep->stop) break; /* stays queued for the next start */
            atomic_fetch_add(&ep->retried, b.samples);
            char key[160];
            snprintf(key, sizeof(key), "rw-retry-%s-%d", ep->label, sh->idx);
            mw_log_once(MW_LOG_WARN, "remote-write", key, "%s: shard %d: %s; retrying with backoff",
                        ep->label, sh->idx, res.detail);
            double r = (double)rand_r(&sh->seed) / ((double)RAND_MAX + 1.0);
            mw_worker_sleep(&sh->sender,
                            mw_rw_backoff_ms(attempt, cfg->min_backoff_ms, cfg->max_backoff_ms,
                                             res.retry_after_ms, r));
            if (attempt < 30) attempt++;
            if (ep->stop) break;
        }
        last_send = mono_ms();
    }
    mw_buf_free(&batch);
    mw_buf_free(&body);
    return NULL;
}

/* ---- writer thread ---- */

static void write_item(endpoint *ep, inbox_item *it)
{
    int touched[MAX_SHARDS] = {0};
    for (size_t i = 0; i < it->nrecs; i++) {
        rec_ref *r = &it->recs[i];
        char err[512];
        if (mw_rwq_append(ep->shards[r->shard].q, it->data.data + r->off, r->len, r->nsamples,
                          it->ts, err, sizeof(err)) < 0)
            mw_log_once(MW_LOG_ERROR, "remote-write", "rw-append", "%s: %s", ep->label, err);
        touched[r->shard] = 1;
    }
    for (int s = 0; s < ep->nshards; s++) {
        if (!touched[s]) continue;
        mw_rwq_sync(ep->shards[s].q);
        mw_worker_kick(&ep->shards[s].sender);
    }
}

static void item_free(inbox_item *it)
{
    mw_buf_free(&it->data);
    free(it->recs);
    free(it);
}

static void *writer_main(void *arg)
{
    endpoint *ep = arg;
    mw_worker *w = &ep->writer;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        /* consume() kicks; once stopping, what is left is drained. */
        while (!ep->head && mw_worker_wait_locked(w, MW_WORKER_NO_TIMEOUT)) {
        }
        inbox_item *it = ep->head;
        if (!it) break; /* stopping with an empty inbox */
        ep->head = it->next;
        if (!ep->head) ep->tail = NULL;
        ep->inbox_bytes -= it->data.len;
        pthread_mutex_unlock(&w->mu);
        write_item(ep, it);
        item_free(it);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* ---- consume: relabel and encode ---- */

static uint64_t series_hash(const mw_rl_labels *ls)
{
    uint64_t h = MW_FNV1A64_SEED;
    for (size_t i = 0; i < ls->n; i++) {
        h = mw_fnv1a64_byte(mw_fnv1a64_str(h, ls->l[i].name), 0xff);
        h = mw_fnv1a64_byte(mw_fnv1a64_str(h, ls->l[i].value), 0xfe);
    }
    return h;
}

static void close_record(endpoint *ep, inbox_item *it, int s, size_t *recs_cap)
{
    if (!ep->cur_n[s]) return;
    if (it->nrecs == *recs_cap) {
        *recs_cap = *recs_cap ? *recs_cap * 2 : 16;
        it->recs = mw_xrealloc(it->recs, *recs_cap * sizeof(rec_ref));
    }
    rec_ref *r = &it->recs[it->nrecs++];
    r->shard = (size_t)s;
    r->off = it->data.len;
    r->len = ep->cur[s].len;
    r->nsamples = ep->cur_n[s];
    mw_buf_append(&it->data, ep->cur[s].data, ep->cur[s].len);
    mw_buf_clear(&ep->cur[s]);
    ep->cur_n[s] = 0;
}

typedef struct stale_ctx {
    endpoint *ep;
    inbox_item *it;
    size_t *recs_cap;
    int64_t ts;
    uint64_t n;
} stale_ctx;

/* A series sent last round and not in this one: its staleness marker, at
 * this round's timestamp, through the shard its samples took. */
static void mark_stale(void *arg, const char *key, size_t len)
{
    stale_ctx *c = arg;
    endpoint *ep = c->ep;
    mw_label l[MW_RL_MAX_LABELS + 1];
    mw_rw_label out[MW_RL_MAX_LABELS + 1];
    int sh = (unsigned char)key[0];
    size_t n = mw_series_key_labels(key + 1, len - 1, l, MW_RL_MAX_LABELS + 1);
    for (size_t i = 0; i < n; i++)
        out[i] = (mw_rw_label){l[i].name, l[i].value};
    if (sh >= ep->nactive || mw_rw_append_series(&ep->cur[sh], out, n, mw_stale_nan(), c->ts) < 0)
        return;
    c->n++;
    atomic_fetch_add(&ep->stale_markers, 1);
    if (++ep->cur_n[sh] >= ep->cfg->max_samples_per_send) close_record(ep, c->it, sh, c->recs_cap);
}

static void consume_endpoint(endpoint *ep, const mw_snapshot *snap)
{
    const mw_rw_endpoint_cfg *cfg = ep->cfg;
    inbox_item *it = mw_xcalloc(1, sizeof(*it));
    mw_buf_init(&it->data, 0);
    it->ts = snap->timestamp_ms;
    size_t recs_cap = 0;
    uint64_t total = 0;
    mw_rl_labels ls;
    mw_rw_label out[MW_RL_MAX_LABELS];
    for (const mw_family *f = snap->first; f; f = f->next) {
        for (const mw_sample *s = f->first; s; s = s->next) {
            mw_arena_reset(&ep->scratch);
            ls.n = 0;
            ls.l[ls.n++] = (mw_rl_label){"__name__", f->desc->name};
            int bad = 0;
            for (uint32_t i = 0; i < s->nlabels; i++)
                if (s->labels[i].value && s->labels[i].value[0] &&
                    mw_rl_set(&ls, s->labels[i].name, s->labels[i].value) < 0)
                    bad = 1;
            for (size_t i = 0; i < cfg->next; i++)
                if (!mw_rl_get(&ls, cfg->ext_names[i]) &&
                    mw_rl_set(&ls, cfg->ext_names[i], cfg->ext_values[i]) < 0)
                    bad = 1;
            if (bad) {
                atomic_fetch_add(&ep->drop_invalid, 1);
                continue;
            }
            if (cfg->relabel.n && !mw_relabel_apply(&cfg->relabel, &ls, &ep->scratch)) {
                atomic_fetch_add(&ep->drop_relabel, 1);
                continue;
            }
            mw_rl_sort(&ls);
            size_t n = 0;
            for (size_t i = 0; i < ls.n; i++) {
                if (!ls.l[i].value[0]) continue; /* an empty value is no label */
                if (n && strcmp(out[n - 1].name, ls.l[i].name) == 0) continue;
                out[n++] = (mw_rw_label){ls.l[i].name, ls.l[i].value};
            }
            uint64_t hsh = series_hash(&ls);
            int sh = (int)(hsh % (uint64_t)ep->nactive);
            if (mw_rw_append_series(&ep->cur[sh], out, n, s->value, snap->timestamp_ms) < 0) {
                atomic_fetch_add(&ep->drop_invalid, 1);
                continue;
            }
            if (mw_series_memory_mark(&ep->sent_last, hsh)) { /* new: keep what its marker needs */
                mw_buf_clear(&ep->key);
                mw_buf_putc(&ep->key, (char)sh);
                for (size_t i = 0; i < n; i++)
                    mw_series_key_add(&ep->key, out[i].name, out[i].value);
                mw_series_memory_keep_key(&ep->sent_last, ep->key.data, ep->key.len);
            }
            total++;
            if (++ep->cur_n[sh] >= cfg->max_samples_per_send) close_record(ep, it, sh, &recs_cap);
        }
    }
    stale_ctx sc = {ep, it, &recs_cap, snap->timestamp_ms, 0};
    mw_series_memory_sweep(&ep->sent_last, mark_stale, &sc);
    total += sc.n;
    for (int s = 0; s < ep->nactive; s++)
        close_record(ep, it, s, &recs_cap);
    if (!it->nrecs) {
        item_free(it);
        return;
    }
    pthread_mutex_lock(&ep->writer.mu);
    if (ep->inbox_bytes + it->data.len > INBOX_MAX_BYTES) {
        pthread_mutex_unlock(&ep->writer.mu);
        atomic_fetch_add(&ep->drop_backlog, total);
        mw_log_once(MW_LOG_WARN, "remote-write", "rw-backlog",
                    "%s: the disk queue writer is behind by more than %u MiB; dropping new data",
                    ep->label, INBOX_MAX_BYTES >> 20);
        item_free(it);
        return;
    }
    ep->inbox_bytes += it->data.len;
    if (ep->tail)
        ep->tail->next = it;
    else
        ep->head = it;
    ep->tail = it;
    mw_worker_kick_locked(&ep->writer);
    pthread_mutex_unlock(&ep->writer.mu);
}

/* ---- module ---- */

static void endpoint_stop(endpoint *ep)
{
    pthread_mutex_lock(&ep->writer.mu);
    ep->stop = 1;
    pthread_mutex_unlock(&ep->writer.mu);
    for (int i = 0; i < ep->nshards; i++)
        mw_worker_stop(&ep->shards[i].sender);
    /* The writer drains the inbox to disk before it exits: nothing that
     * consume() accepted is lost by a clean stop. */
    mw_worker_stop(&ep->writer);
    for (int i = 0; i < ep->nshards; i++) {
        mw_rw_client_free(ep->shards[i].client);
        mw_rwq_close(ep->shards[i].q);
    }
    while (ep->head) {
        inbox_item *it = ep->head;
        ep->head = it->next;
        item_free(it);
    }
    for (int i = 0; i < MAX_SHARDS; i++)
        mw_buf_free(&ep->cur[i]);
    mw_arena_free(&ep->scratch);
    mw_series_memory_destroy(&ep->sent_last);
    mw_buf_free(&ep->key);
    for (int i = 0; i < MAX_SHARDS; i++)
        mw_worker_destroy(&ep->shards[i].sender);
    mw_worker_destroy(&ep->writer);
}

/* Shards already on disk (from a larger max_shards before). */
static int existing_shards(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int k;
        char extra;
        if (sscanf(e->d_name, "shard-%d%c", &k, &extra) == 1 && k >= 0 && k < MAX_SHARDS &&
            k + 1 > n)
            n = k + 1;
    }
    closedir(d);
    return n;
}

static int endpoint_start(endpoint *ep, mw_rw_endpoint_cfg *cfg, const char *data_dir)
{
    memset(ep, 0, sizeof(*ep));
    ep->cfg = cfg;
    ep->label = cfg->name[0] ? cfg->name : cfg->display_url;
    mw_worker_init(&ep->writer);
    mw_arena_init(&ep->scratch, 16384);
    mw_series_memory_init(&ep->sent_last);
    mw_buf_init(&ep->key, 0);
    for (int i = 0; i < MAX_SHARDS; i++) {
        mw_buf_init(&ep->cur[i], 0);
        mw_worker_init(&ep->shards[i].sender);
    }
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/remote-write/%s", data_dir, cfg->dirname);
    ep->nactive = cfg->max_shards;
    int have = existing_shards(dir);
    ep->nshards = have > ep->nactive ? have : ep->nactive;
    for (int i = 0; i < ep->nshards; i++) {
        shard *sh = &ep->shards[i];
        sh->ep = ep;
        sh->idx = i;
        sh->seed = (unsigned)(mw_now_ms() ^ (i * 7919));
        char sdir[4200], err[512];
        snprintf(sdir, sizeof(sdir), "%s/shard-%d", dir, i);
        if (mw_rwq_open(sdir, cfg->capacity / (uint64_t)ep->nshards, 0, &sh->q, err, sizeof(err)) <
            0) {
            mw_log(MW_LOG_ERROR, "remote-write", "%s: queue: %s", ep->label, err);
            ep->nshards = i;
            return -1;
        }
        sh->client = mw_rw_client_new(cfg, &ep->stop);
        if (!sh->client) {
            ep->nshards = i + 1;
            return -1;
        }
    }
    for (int i = 0; i < ep->nshards; i++)
        mw_worker_start(&ep->shards[i].sender, shard_main, &ep->shards[i]);
    int started = mw_worker_start(&ep->writer, writer_main, ep);
    mw_log(MW_LOG_INFO, "remote-write", "%s: shipping to %s with %d shard(s), queue in %s",
           ep->label, cfg->display_url, ep->nactive, dir);
    return started;
}

static void rw_destroy(void *state)
{
    rw_state *st = state;
    if (!st) return;
    for (size_t i = 0; i < st->n; i++)
        endpoint_stop(&st->eps[i]);
    free(st->eps);
    mw_rw_config_free(&st->rc);
    free(st);
}

static int rw_init(const mw_env *env, void **state)
{
    mw_rw_config rc;
    char err[512];
    if (mw_rw_config_build(env->cfg, &rc, err, sizeof(err)) < 0) {
        mw_log(MW_LOG_ERROR, "remote-write", "%s", err);
        return -EINVAL;
    }
    if (!rc.n) return MW_COLLECTOR_ABSENT;
    rw_state *st = mw_xcalloc(1, sizeof(*st));
    st->rc = rc;
    st->eps = mw_xcalloc(rc.n, sizeof(endpoint));
    for (size_t i = 0; i < rc.n; i++) {
        endpoint *ep = &st->eps[st->n++];
        if (endpoint_start(ep, &st->rc.ep[i], env->cfg->data_dir) < 0) {
            rw_destroy(st);
            return -EIO;
        }
    }
    *state = st;
    return 0;
}

static void emit_counter(mw_snapshot *snap, const mw_metric_desc *d, const endpoint *ep,
                         const char *reason, uint64_t v)
{
    if (reason)
        mw_emit(snap, d, (double)v, "endpoint", ep->label, "url", ep->cfg->display_url, "reason",
                reason, MW_END);
    else
        mw_emit(snap, d, (double)v, "endpoint", ep->label, "url", ep->cfg->display_url, MW_END);
}

static void rw_derive(void *state, mw_snapshot *snap)
{
    rw_state *st = state;
    for (size_t i = 0; i < st->n; i++) {
        endpoint *ep = &st->eps[i];
        mw_rwq_stats total = {0};
        for (int s = 0; s < ep->nshards; s++) {
            mw_rwq_stats q;
            mw_rwq_get_stats(ep->shards[s].q, &q);
            total.bytes += q.bytes;
            total.pending_samples += q.pending_samples;
            total.dropped_full += q.dropped_full;
            total.corrupt_bytes += q.corrupt_bytes;
        }
        emit_counter(snap, &SENT, ep, NULL, atomic_load(&ep->sent));
        emit_counter(snap, &FAILED, ep, NULL, atomic_load(&ep->failed));
        emit_counter(snap, &RETRIED, ep, NULL, atomic_load(&ep->retried));
        emit_counter(snap, &DROPPED, ep, "relabel", atomic_load(&ep->drop_relabel));
        emit_counter(snap, &DROPPED, ep, "queue_full", total.dropped_full);
        emit_counter(snap, &DROPPED, ep, "backlog", atomic_load(&ep->drop_backlog));
        emit_counter(snap, &DROPPED, ep, "invalid", atomic_load(&ep->drop_invalid));
        emit_counter(snap, &PENDING, ep, NULL, total.pending_samples);
        emit_counter(snap, &QBYTES, ep, NULL, total.bytes);
        emit_counter(snap, &CORRUPT, ep, NULL, total.corrupt_bytes);
        mw_emit(snap, &HIGHEST, (double)atomic_load(&ep->highest_ms) / 1000.0, "endpoint",
                ep->label, "url", ep->cfg->display_url, MW_END);
        emit_counter(snap, &STALE, ep, NULL, atomic_load(&ep->stale_markers));
        emit_counter(snap, &SHARDS, ep, NULL, (uint64_t)ep->nshards);
    }
}

static void rw_consume(void *state, const mw_snapshot *snap)
{
    rw_state *st = state;
    for (size_t i = 0; i < st->n; i++)
        consume_endpoint(&st->eps[i], snap);
}

const mw_module mw_module_remote_write = {
    .agent_only = 1,
    .name = "remote-write",
    .options = &mw_rw_options,
    .init = rw_init,
    .derive = rw_derive,
    .consume = rw_consume,
    .destroy = rw_destroy,
};
