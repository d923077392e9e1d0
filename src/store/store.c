/* store.c - opening and recovering the store, its maintenance thread,
 * reads across head and blocks, and its statistics. */
#include "../core/log.h"
#include "../core/util.h"
#include "crc.h"
#include "histogram.h"
#include "downsample.h"
#include "remote_write.h"
#include "store_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *const mw_store_refusal_names[MW_REFUSE_COUNT] = {
    "malformed",     "out_of_order", "duplicate", "series_limit", "tenant_limit", "label_limit",
    "samples_limit", "disk_full",    "too_large", "future",       "own_series",
};

void mw_store_path(const mw_store *s, const char *name, char *out, size_t size)
{
    snprintf(out, size, "%s/%s", s->dir, name);
}

static int mkdir_p(const char *path)
{
    char tmp[PATH_MAX];
    if (mw_strlcpy(tmp, path, sizeof(tmp)) >= sizeof(tmp)) return -ENAMETOOLONG;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST) return -errno;
        *p = '/';
    }
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST) return -errno;
    return 0;
}

void mw_store_count_refusal(mw_store *s, mw_store_refusal r)
{
    atomic_fetch_add(&s->refused[r], 1);
}

/* ---- blocks on disk ---- */

static int cmp_block(const void *a, const void *b)
{
    uint64_t x = mw_block_get_meta(*(mw_block *const *)a)->seq;
    uint64_t y = mw_block_get_meta(*(mw_block *const *)b)->seq;
    return x < y ? -1 : x > y;
}

/* 0, or -1 with the reason in newer[] when a block is of a newer format. */
static int load_blocks(mw_store *s, char *newer, size_t newer_size)
{
    char bdir[PATH_MAX + 16];
    mw_store_path(s, "blocks", bdir, sizeof(bdir));
    mkdir(bdir, 0755);
    DIR *d = opendir(bdir);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        char path[PATH_MAX + 300];
        snprintf(path, sizeof(path), "%s/%s", bdir, e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".tmp") == 0) {
            unlink(path); /* a compaction that did not finish */
            continue;
        }
        if (len < 5 || strcmp(e->d_name + len - 4, ".blk") != 0) continue;
        char err[256];
        mw_block *b = mw_block_open(path, err, sizeof(err));
        if (!b && errno == ENOTSUP) {
            /* A newer build's block: not ours to set aside; the store does
             * not open (it would compact and retire around it). */
            snprintf(newer, newer_size, "block %s: %s", path, err);
            closedir(d);
            return -1;
        }
        if (!b) {
            /* Keep the file for inspection, out of the way. */
            char bad[PATH_MAX + 320];
            snprintf(bad, sizeof(bad), "%s.corrupt", path);
            rename(path, bad);
            mw_log(MW_LOG_ERROR, "store", "block %s: %s; renamed to %s", path, err, bad);
            continue;
        }
        s->blocks = mw_xrealloc(s->blocks, (s->nblocks + 1) * sizeof(mw_block *));
        s->blocks[s->nblocks++] = b;
        if (mw_block_get_meta(b)->seq >= s->next_block_seq)
            s->next_block_seq = mw_block_get_meta(b)->seq + 1;
    }
    closedir(d);
    if (s->nblocks) qsort(s->blocks, s->nblocks, sizeof(mw_block *), cmp_block);
    return 0;
}

/* Chunk files that a block already holds (a crash between writing the
 * block and deleting them) are deleted now, or their chunks would count
 * twice. Returns the lowest chunk seq not in a block. */
static uint32_t drop_compacted_chunk_files(mw_store *s)
{
    uint32_t covered = 0;
    for (size_t i = 0; i < s->nblocks; i++) {
        const mw_block_meta *m = mw_block_get_meta(s->blocks[i]);
        if (m->level >= 1 && m->chunk_seq_max > covered) covered = m->chunk_seq_max;
    }
    for (uint32_t seq = 1; seq <= covered; seq++) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof(path), "%s/chunks/%08u", s->dir, seq);
        unlink(path);
    }
    return covered + 1;
}

/* ---- open / close ---- */

static void reset_head(mw_store *s, const char *chunk_dir)
{
    mw_head_free(&s->head);
    mw_head_init(&s->head, chunk_dir, s->opt.limits.tenant_label);
}

/* The head from the snapshot, else empty with the whole WAL to replay. An
 * unusable snapshot is renamed head.snapshot.corrupt, for inspection. A
 * head.snapshot.prev left by an older version (which kept two generations
 * and the WAL back to the older one) is used when head.snapshot is missing
 * or unusable. */
static void restore_head(mw_store *s, const char *chunk_dir, uint64_t *lsn, uint32_t *cseq,
                         uint64_t *csize)
{
    char path[PATH_MAX + 32], aside[PATH_MAX + 32];
    mw_store_path(s, "head.snapshot.tmp", path, sizeof(path));
    unlink(path); /* one a crash interrupted: only the renamed one counts */
    int rc = mw_snapshot_load(s, MW_SNAPSHOT_FILE, lsn, cseq, csize);
    if (rc == 0) return;
    if (rc < 0) {
        s->restored_from_previous = 1; /* store.h: the latest snapshot was unusable */
        reset_head(s, chunk_dir);
        mw_store_path(s, MW_SNAPSHOT_FILE, path, sizeof(path));
        mw_store_path(s, "head.snapshot.corrupt", aside, sizeof(aside));
        /* If it cannot be set aside, the next snapshot replaces it. */
        if (rename(path, aside) < 0)
            mw_log(MW_LOG_ERROR, "store", "cannot set %s aside as %s: %s", path, aside,
                   strerror(errno));
        else
            mw_log(MW_LOG_ERROR, "store", "unusable head snapshot kept as %s for inspection",
                   aside);
    }
    int prc = mw_snapshot_load(s, MW_SNAPSHOT_PREV_FILE, lsn, cseq, csize);
    mw_store_path(s, MW_SNAPSHOT_PREV_FILE, path, sizeof(path));
    if (prc == 0) {
        mw_log(rc < 0 ? MW_LOG_WARN : MW_LOG_INFO, "store",
               "head restored from the previous snapshot %s (of an older version) and the WAL "
               "after it",
               path);
        return;
    }
    if (prc < 0) reset_head(s, chunk_dir);
    *lsn = 0;
    *cseq = 0;
    *csize = 0;
    if (rc < 0 || prc < 0)
        mw_log(MW_LOG_ERROR, "store",
               "no usable head snapshot: recovery uses the WAL alone (samples of series "
               "defined only in WAL segments already deleted cannot be restored)");
}

static void *maintenance(void *arg);

mw_store *mw_store_open(const mw_store_options *o, char *err, size_t errsize)
{
    mw_store *s = mw_xcalloc(1, sizeof(*s));
    s->opt = *o;
    s->lock_fd = -1;
    mw_series_memory_init(&s->own_last);
    mw_buf_init(&s->own_key, 0);
    if (!s->opt.snapshot_wal_bytes) s->opt.snapshot_wal_bytes = 128u << 20;
    if (!s->opt.background_ms) s->opt.background_ms = 1000;
    if (mw_strlcpy(s->dir, o->dir, sizeof(s->dir)) >= sizeof(s->dir) - 64) {
        snprintf(err, errsize, "data folder path is too long");
        free(s);
        return NULL;
    }
    s->opt.dir = s->dir;
    pthread_rwlock_init(&s->lock, NULL);
    pthread_mutex_init(&s->blocks_mu, NULL);
    pthread_mutex_init(&s->maint_mu, NULL);
    mw_worker_init(&s->maintainer);
    int rc = mkdir_p(s->dir);
    char path[PATH_MAX + 32];
    if (rc < 0) {
        snprintf(err, errsize, "cannot create data folder %s: %s", s->dir, strerror(-rc));
        goto fail;
    }
    mw_store_path(s, "lock", path, sizeof(path));
    s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (s->lock_fd < 0) {
        snprintf(err, errsize, "cannot open %s: %s", path, strerror(errno));
        goto fail;
    }
    if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
        snprintf(err, errsize, "data folder %s is in use by another process (lock %s held)", s->dir,
                 path);
        goto fail;
    }
    int64_t t0 = mw_mono_ns();
    mw_store_path(s, "chunks", path, sizeof(path));
    rc = mw_head_init(&s->head, path, s->opt.limits.tenant_label);
    if (rc < 0) {
        snprintf(err, errsize, "cannot create %s: %s", path, strerror(-rc));
        goto fail;
    }
    if (load_blocks(s, err, errsize) < 0) goto fail;
    mw_store_drop_covered_blocks(s);
    uint32_t first_live = drop_compacted_chunk_files(s);
    uint64_t lsn = 0, csize = 0;
    uint32_t cseq = 0;
    restore_head(s, path, &lsn, &cseq, &csize);
    uint64_t nsnap = s->head.nlive;
    rc = mw_head_chunks_open(&s->head, cseq, csize);
    if (rc < 0) {
        snprintf(err, errsize, "cannot open the chunk files in %s: %s", path, strerror(-rc));
        goto fail;
    }
    mw_head_forget_files_before(&s->head, first_live);
    s->snap_lsn = lsn;
    s->snap_chunk_seq = cseq;
    int64_t t1 = mw_mono_ns();
    mw_store_path(s, "wal", path, sizeof(path));
    mw_wal_replay_report rep;
    uint64_t end = lsn;
    rc = mw_wal_replay(path, lsn, mw_store_replay_record, s, &end, &rep);
    if (rc < 0) {
        snprintf(err, errsize, "cannot read the WAL in %s: %s", path, strerror(-rc));
        goto fail;
    }
    s->wal_bytes_cut = rep.cut_bytes + rep.skipped_bytes;
    s->wal = mw_wal_open(path, end, !s->opt.no_sync, s->opt.wal_segment_bytes, &rc);
    if (!s->wal) {
        snprintf(err, errsize, "cannot write the WAL in %s: %s", path, strerror(-rc));
        goto fail;
    }
    int64_t t2 = mw_mono_ns();
    mw_log(MW_LOG_INFO, "store",
           "opened %s: %llu series from the snapshot in %.2f s, %llu WAL records replayed in "
           "%.2f s (%llu series now), %zu blocks%s",
           s->dir, (unsigned long long)nsnap, (double)(t1 - t0) / 1e9,
           (unsigned long long)rep.records, (double)(t2 - t1) / 1e9,
           (unsigned long long)s->head.nlive, s->nblocks,
           rep.cut_bytes ? "; a torn WAL tail was cut off (see above)" : "");
    if (s->unknown_series_samples)
        mw_log(MW_LOG_WARN, "store", "WAL replay: %llu samples of undefined series skipped",
               (unsigned long long)s->unknown_series_samples);
    s->last_snapshot_ns = mw_mono_ns();
    if (s->opt.background_ms > 0) mw_worker_start(&s->maintainer, maintenance, s);
    return s;
fail:
    if (s->lock_fd >= 0) close(s->lock_fd);
    mw_wal_close(s->wal);
    mw_head_free(&s->head);
    for (size_t i = 0; i < s->nblocks; i++)
        mw_block_unref(s->blocks[i]);
    free(s->blocks);
    free(s);
    return NULL;
}

void mw_store_close(mw_store *s)
{
    if (!s) return;
    mw_worker_stop(&s->maintainer);
    mw_wal_flush(s->wal);
    /* A snapshot now makes the next start fast. */
    pthread_mutex_lock(&s->maint_mu);
    if (mw_wal_status_of(s->wal).appended != s->snap_lsn) mw_snapshot_write(s);
    pthread_mutex_unlock(&s->maint_mu);
    mw_wal_close(s->wal);
    mw_head_free(&s->head);
    for (size_t i = 0; i < s->nblocks; i++)
        mw_block_unref(s->blocks[i]);
    free(s->blocks);
    mw_series_memory_destroy(&s->own_last);
    mw_buf_free(&s->own_key);
    mw_hstore_close(s->hist);
    close(s->lock_fd);
    pthread_rwlock_destroy(&s->lock);
    pthread_mutex_destroy(&s->blocks_mu);
    pthread_mutex_destroy(&s->maint_mu);
    mw_worker_destroy(&s->maintainer);
    free(s);
}

int mw_store_snapshot(mw_store *s)
{
    pthread_mutex_lock(&s->maint_mu);
    int rc = mw_snapshot_write(s);
    if (rc == 0) s->last_snapshot_ns = mw_mono_ns();
    pthread_mutex_unlock(&s->maint_mu);
    return rc;
}

static void *maintenance(void *arg)
{
    mw_store *s = arg;
    /* Each background_ms, or sooner when an append kicks it. */
    while (mw_worker_sleep(&s->maintainer, s->opt.background_ms)) {
        /* Samples appended without waiting (the agent's own) become durable
         * here, and a WAL that failed (disk full) is retried. */
        int rc = mw_wal_flush(s->wal);
        if (rc == 0) {
            uint64_t grown = mw_wal_status_of(s->wal).appended - s->snap_lsn;
            if (grown >= s->opt.snapshot_wal_bytes ||
                (grown > 0 && mw_mono_ns() - s->last_snapshot_ns > 15 * 60 * 1000000000LL))
                mw_store_snapshot(s);
            mw_store_compact(s, 0);
        }
        mw_rw_spare_trim();
    }
    return NULL;
}

/* ---- reads ---- */

typedef struct sel_series {
    mw_series_data d;
    uint64_t hash;
    size_t cap;
    int unsorted; /* samples arrived out of time order (from several blocks) */
} sel_series;

typedef struct sel_priv {
    mw_arena arena;
    sel_series *all;
    size_t n, cap;
    uint32_t *slots; /* index + 1, by labels hash */
    size_t nslots;
} sel_priv;

static sel_series *sel_get(sel_priv *p, const mw_label *l, size_t n)
{
    uint64_t h = mw_labels_hash(l, n);
    if ((p->n + 1) * 2 > p->nslots) {
        size_t ns = p->nslots ? p->nslots * 2 : 256;
        uint32_t *sl = mw_xcalloc(ns, sizeof(uint32_t));
        for (size_t i = 0; i < p->n; i++) {
            size_t k = p->all[i].hash & (ns - 1);
            while (sl[k])
                k = (k + 1) & (ns - 1);
            sl[k] = (uint32_t)i + 1;
        }
        free(p->slots);
        p->slots = sl;
        p->nslots = ns;
    }
    size_t k = h & (p->nslots - 1);
    while (p->slots[k]) {
        sel_series *c = &p->all[p->slots[k] - 1];
        if (c->hash == h && mw_labels_cmp(c->d.labels, c->d.nlabels, l, n) == 0) return c;
        k = (k + 1) & (p->nslots - 1);
    }
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 64;
        p->all = mw_xrealloc(p->all, p->cap * sizeof(sel_series));
    }
    sel_series *c = &p->all[p->n];
    memset(c, 0, sizeof(*c));
    c->hash = h;
    c->d.labels = mw_arena_alloc(&p->arena, n * sizeof(mw_label));
    for (size_t i = 0; i < n; i++)
        c->d.labels[i] = (mw_label){mw_arena_strdup(&p->arena, l[i].name),
                                    mw_arena_strdup(&p->arena, l[i].value)};
    c->d.nlabels = n;
    p->slots[k] = (uint32_t)++p->n;
    return c;
}

typedef struct tv {
    int64_t t;
    double v, w;
} tv;

static int cmp_tv(const void *a, const void *b)
{
    const tv *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}

static void sel_sort(sel_series *c, size_t *total)
{
    tv *a = mw_xmalloc(c->d.n * sizeof(tv));
    for (size_t i = 0; i < c->d.n; i++)
        a[i] = (tv){c->d.t[i], c->d.v[i], c->d.w ? c->d.w[i] : 1};
    qsort(a, c->d.n, sizeof(tv), cmp_tv);
    size_t w = 0;
    for (size_t i = 0; i < c->d.n; i++) {
        if (w && a[i].t == c->d.t[w - 1]) continue;
        c->d.t[w] = a[i].t;
        c->d.v[w] = a[i].v;
        if (c->d.w) c->d.w[w] = a[i].w;
        w++;
    }
    *total -= c->d.n - w;
    c->d.n = w;
    free(a);
}

static int cmp_sel(const void *a, const void *b)
{
    const mw_series_data *x = a, *y = b;
    return mw_labels_cmp(x->labels, x->nlabels, y->labels, y->nlabels);
}

/* Append samples to a series' arrays. Blocks and the head hold disjoint
 * chunks, but a merged block can come after a newer one in the list: such a
 * series is sorted (and timestamps seen twice dropped) at the end. */
static int sel_add(sel_series *c, const mw_samples *sm, const double *wts, size_t *total,
                   size_t max)
{
    if (wts && !c->d.w && sm->n) { /* the first weighted samples: raw ones weigh 1 */
        c->d.w = mw_xmalloc((c->cap ? c->cap : 1) * sizeof(double));
        for (size_t i = 0; i < c->d.n; i++)
            c->d.w[i] = 1;
    }
    for (size_t i = 0; i < sm->n; i++) {
        if (c->d.n && sm->t[i] <= c->d.t[c->d.n - 1]) c->unsorted = 1;
        if (max && *total >= max) return -1;
        if (c->d.n == c->cap) {
            c->cap = c->cap ? c->cap * 2 : 8;
            c->d.t = mw_xrealloc(c->d.t, c->cap * sizeof(int64_t));
            c->d.v = mw_xrealloc(c->d.v, c->cap * sizeof(double));
            if (c->d.w) c->d.w = mw_xrealloc(c->d.w, c->cap * sizeof(double));
        }
        c->d.t[c->d.n] = sm->t[i];
        c->d.v[c->d.n] = sm->v[i];
        if (c->d.w) c->d.w[c->d.n] = wts ? wts[i] : 1;
        c->d.n++;
        (*total)++;
    }
    return 0;
}

/* Reading the head's series is most of a range query's time (reading,
 * checking and decoding every chunk), and each series is independent: a
 * large selection is read by two threads, each reading its half in
 * chunk-file order (mw_head_read_batch) into exact arrays per series, under
 * the caller's read lock. The sample budget is
 * shared, so together they stop once it is exceeded. */
typedef struct head_part {
    mw_head *h;
    const uint32_t *ids;
    size_t n;
    int64_t mint, maxt;
    size_t max, *total; /* shared, atomic */
    int64_t **t;
    double **v;
    size_t *cnt;
    size_t damaged;
    int rc;
} head_part;

enum { PARALLEL_MIN_SERIES = 512 };

static void *head_read_part(void *arg)
{
    head_part *hp = arg;
    hp->rc = mw_head_read_batch(hp->h, hp->ids, hp->n, hp->mint, hp->maxt, hp->max, hp->total,
                                hp->t, hp->v, hp->cnt, &hp->damaged);
    return NULL;
}

static void head_parts_free(head_part *hp)
{
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < hp[k].n; i++) {
            free(hp[k].t[i]);
            free(hp[k].v[i]);
        }
        free(hp[k].t);
        free(hp[k].v);
        free(hp[k].cnt);
    }
}

static int head_read_parallel(mw_head *h, const mw_ids *ids, int64_t mint, int64_t maxt, size_t max,
                              size_t already, head_part *hp)
{
    size_t *total = mw_xcalloc(1, sizeof(size_t));
    *total = already; /* samples of the blocks count against the same budget */
    size_t half = ids->n >= PARALLEL_MIN_SERIES ? ids->n / 2 : ids->n;
    for (int k = 0; k < 2; k++) {
        size_t n = k ? ids->n - half : half;
        hp[k] = (head_part){.h = h,
                            .ids = ids->v + (k ? half : 0),
                            .n = n,
                            .mint = mint,
                            .maxt = maxt,
                            .max = max,
                            .total = total,
                            .t = mw_xcalloc(n ? n : 1, sizeof(int64_t *)),
                            .v = mw_xcalloc(n ? n : 1, sizeof(double *)),
                            .cnt = mw_xcalloc(n ? n : 1, sizeof(size_t))};
    }
    pthread_t th;
    int threaded = hp[1].n > 0 && pthread_create(&th, NULL, head_read_part, &hp[1]) == 0;
    head_read_part(&hp[0]);
    if (threaded)
        pthread_join(th, NULL);
    else
        head_read_part(&hp[1]);
    free(total);
    return hp[0].rc < 0 || hp[1].rc < 0 ? -1 : 0;
}

/* The downsampled resolution a hinted selection reads (0: none): among
 * those with blocks in [mint, maxt], those whose blocks reach back to mint
 * are candidates; the coarsest candidate not coarser than want, else the
 * finest candidate, else the one reaching furthest back. */
static int64_t pick_resolution(const mw_store *s, mw_block **blocks, size_t nb, int64_t mint,
                               int64_t maxt, int64_t want)
{
    int64_t best = 0, finest = 0, furthest = 0, furthest_t = INT64_MAX;
    for (size_t r = 0; r < s->opt.ndownsample; r++) {
        int64_t res = s->opt.downsample[r].res_ms, cover = INT64_MAX;
        int have = 0;
        for (size_t b = 0; b < nb; b++) {
            const mw_block_meta *m = mw_block_get_meta(blocks[b]);
            if (m->resolution_ms != res) continue;
            if (m->mint < cover) cover = m->mint;
            if (m->maxt >= mint && m->mint <= maxt) have = 1;
        }
        if (!have) continue;
        if (cover < furthest_t) {
            furthest_t = cover;
            furthest = res;
        }
        if (cover > mint + res) continue; /* not a candidate */
        if (res <= want) best = res;      /* increasing: the last is the coarsest */
        if (!finest) finest = res;
    }
    return best ? best : finest ? finest : furthest;
}

/* 1 when raw block b is a source of a block at resolution res (both are
 * on disk for a moment while downsampling): its samples come from there. */
static int raw_source_of(mw_block **blocks, size_t nb, const mw_block *b, int64_t res)
{
    uint64_t seq = mw_block_get_meta(b)->seq;
    for (size_t i = 0; i < nb; i++) {
        const mw_block_meta *m = mw_block_get_meta(blocks[i]);
        if (m->resolution_ms != res) continue;
        for (uint32_t k = 0; k < m->nsources; k++)
            if (m->sources[k] == seq) return 1;
    }
    return 0;
}

int mw_store_select(mw_store *s, const mw_matcher *ms, size_t nm, int64_t mint, int64_t maxt,
                    size_t max_samples, mw_select_result *out, char *err, size_t errsize)
{
    return mw_store_select_ex(s, ms, nm, mint, maxt, max_samples, NULL, out, err, errsize);
}

int mw_store_select_ex(mw_store *s, const mw_matcher *ms, size_t nm, int64_t mint, int64_t maxt,
                       size_t max_samples, const mw_select_hint *hint, mw_select_result *out,
                       char *err, size_t errsize)
{
    memset(out, 0, sizeof(*out));
    mw_crc32_for_queries(); /* queries check many chunks: the fast CRC from now on */
    sel_priv *p = mw_xcalloc(1, sizeof(*p));
    mw_arena_init(&p->arena, 64 * 1024);
    size_t total = 0;
    int rc = 0;
    mw_ids ids = {0};
    mw_samples sm = {0};
    /* Blocks first (older), then the head. */
    pthread_mutex_lock(&s->blocks_mu);
    size_t nb = s->nblocks;
    mw_block **blocks = mw_xmalloc((nb ? nb : 1) * sizeof(mw_block *));
    for (size_t i = 0; i < nb; i++) {
        blocks[i] = s->blocks[i];
        mw_block_ref(blocks[i]);
    }
    pthread_mutex_unlock(&s->blocks_mu);
    int64_t res = hint && hint->want_ms > 0 && s->opt.ndownsample
                      ? pick_resolution(s, blocks, nb, mint, maxt, hint->want_ms)
                      : 0;
    double *wts = NULL;
    size_t wcap = 0;
    mw_label lab[256];
    for (size_t b = 0; b < nb && rc == 0; b++) {
        const mw_block_meta *m = mw_block_get_meta(blocks[b]);
        if (m->maxt < mint || m->mint > maxt) continue;
        if (m->resolution_ms != 0 && m->resolution_ms != res) continue;
        if (res && m->resolution_ms == 0 && raw_source_of(blocks, nb, blocks[b], res)) continue;
        mw_index_select(&mw_block_index_ops, blocks[b], ms, nm, &ids);
        for (size_t i = 0; i < ids.n && rc == 0; i++) {
            size_t nl;
            if (mw_block_labels(blocks[b], ids.v[i], lab, 256, &nl) < 0) continue;
            sm.n = 0;
            int r = m->resolution_ms
                        ? mw_ds_read(blocks[b], ids.v[i], hint->what, mint, maxt, &sm, &wts, &wcap)
                        : mw_block_read(blocks[b], ids.v[i], mint, maxt, &sm);
            if (r == -2) { /* the series' chunk list does not parse */
                sm.damaged++;
                continue;
            }
            if (sm.n == 0) continue;
            if (m->resolution_ms) out->resolution_ms = res;
            if (sel_add(sel_get(p, lab, nl), &sm, m->resolution_ms ? wts : NULL, &total,
                        max_samples) < 0)
                rc = -1;
        }
    }
    free(wts);
    if (rc == 0) {
        pthread_rwlock_rdlock(&s->lock);
        mw_head *h = &s->head;
        mw_index_select(&mw_head_index_ops, h, ms, nm, &ids);
        head_part hp[2];
        if (head_read_parallel(h, &ids, mint, maxt, max_samples, total, hp) < 0) rc = -1;
        sm.damaged += hp[0].damaged + hp[1].damaged;
        for (size_t i = 0; i < ids.n && rc == 0; i++) {
            const head_part *part = &hp[i >= hp[0].n];
            size_t j = i - (i >= hp[0].n ? hp[0].n : 0);
            if (part->cnt[j] == 0) continue;
            const mw_series *se = mw_head_series(h, ids.v[i]);
            const uint32_t *pairs = mw_head_labels(h, se);
            for (size_t k = 0; k < se->nlabels; k++)
                lab[k] = (mw_label){h->sym.strs[h->sym.pairs[pairs[k]][0]],
                                    h->sym.strs[h->sym.pairs[pairs[k]][1]]};
            sel_series *c = sel_get(p, lab, se->nlabels);
            if (c->cap == 0) { /* only in the head: take the arrays over */
                if (max_samples && total + part->cnt[j] > max_samples) {
                    rc = -1;
                    break;
                }
                c->d.t = part->t[j];
                c->d.v = part->v[j];
                c->d.n = c->cap = part->cnt[j];
                total += part->cnt[j];
                part->t[j] = NULL;
                part->v[j] = NULL;
                continue;
            }
            mw_samples one = {.t = part->t[j], .v = part->v[j], .n = part->cnt[j]};
            if (sel_add(c, &one, NULL, &total, max_samples) < 0) rc = -1;
        }
        pthread_rwlock_unlock(&s->lock);
        head_parts_free(hp);
    }
    for (size_t i = 0; i < nb; i++)
        mw_block_unref(blocks[i]);
    free(blocks);
    mw_ids_free(&ids);
    free(sm.t);
    free(sm.v);
    if (rc < 0) {
        snprintf(err, errsize, "the selection needs more than %zu samples", max_samples);
        out->priv = p;
        out->series = NULL;
        for (size_t i = 0; i < p->n; i++) {
            free(p->all[i].d.t);
            free(p->all[i].d.v);
            free(p->all[i].d.w);
        }
        p->n = 0;
        mw_select_result_free(out);
        return -1;
    }
    /* Hand the series over as a sorted array of mw_series_data. */
    mw_series_data *arr = mw_xmalloc((p->n ? p->n : 1) * sizeof(mw_series_data));
    for (size_t i = 0; i < p->n; i++) {
        if (p->all[i].unsorted) sel_sort(&p->all[i], &total);
        arr[i] = p->all[i].d;
    }
    qsort(arr, p->n, sizeof(mw_series_data), cmp_sel);
    out->series = arr;
    out->nseries = p->n;
    out->nsamples = total;
    out->damaged_chunks = sm.damaged;
    out->priv = p;
    free(p->all);
    p->all = NULL;
    free(p->slots);
    p->slots = NULL;
    return 0;
}

void mw_select_result_free(mw_select_result *r)
{
    sel_priv *p = r->priv;
    for (size_t i = 0; i < r->nseries; i++) {
        free(r->series[i].t);
        free(r->series[i].v);
        free(r->series[i].w);
    }
    free(r->series);
    if (p) {
        free(p->all);
        free(p->slots);
        mw_arena_free(&p->arena);
        free(p);
    }
    memset(r, 0, sizeof(*r));
}

void *mw_select_result_take_labels(mw_select_result *r)
{
    void *p = r->priv;
    r->priv = NULL;
    return p;
}

void mw_select_labels_free(void *labels)
{
    sel_priv *p = labels;
    if (!p) return;
    free(p->all);
    free(p->slots);
    mw_arena_free(&p->arena);
    free(p);
}

/* ---- statistics ---- */

static uint64_t dir_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    uint64_t total = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[PATH_MAX + 300];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) < 0) continue;
        if (S_ISDIR(st.st_mode))
            total += dir_bytes(path);
        else
            total += (uint64_t)st.st_blocks * 512;
    }
    closedir(d);
    return total;
}

void mw_store_get_stats(mw_store *s, mw_store_stats *o)
{
    memset(o, 0, sizeof(*o));
    pthread_rwlock_rdlock(&s->lock);
    o->series = s->head.nlive;
    o->head_memory_bytes = mw_head_memory(&s->head);
    pthread_rwlock_unlock(&s->lock);
    o->series_created = atomic_load(&s->series_created);
    o->samples_appended = atomic_load(&s->samples_appended);
    o->samples_duplicate = atomic_load(&s->samples_duplicate);
    for (int i = 0; i < MW_REFUSE_COUNT; i++)
        o->refused[i] = atomic_load(&s->refused[i]);
    mw_wal_stats ws;
    mw_wal_get_stats(s->wal, &ws);
    o->wal_fsyncs = ws.fsyncs;
    o->wal_write_errors = ws.write_errors;
    o->bytes_on_disk = dir_bytes(s->dir);
    pthread_mutex_lock(&s->blocks_mu);
    o->blocks = s->nblocks;
    pthread_mutex_unlock(&s->blocks_mu);
    o->wal_records_replayed = s->replayed_records;
    o->wal_bytes_cut = s->wal_bytes_cut;
    o->unknown_series_samples = s->unknown_series_samples;
    o->restored_from_previous = s->restored_from_previous;
    o->disk_full = mw_wal_status_of(s->wal).error != 0;
}
