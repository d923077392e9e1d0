/* compact.c - chunk files into blocks, blocks into larger blocks, and
 * retention by age and by size.
 *
 * Level 1: the sealed chunk files that the head snapshot covers are
 * read, their chunks grouped by series, decoded and re-encoded into large
 * chunks, and written as one block; then the files are deleted. Level 2:
 * when several level-1 blocks have piled up, they are merged (series by
 * labels, samples by time) into one. A block is written under a temporary
 * name and renamed when complete, so a crash leaves either the old files or
 * the new block (and the chunk files a block already holds are dropped at
 * the next open, as are blocks a merged block lists as its sources). Raw
 * blocks past the retention are downsampled first when --downsample is set
 * (downsample.c); blocks of each resolution merge among themselves. */
#include "../core/log.h"
#include "../core/units.h"
#include "../core/util.h"
#include "downsample.h"
#include "store_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MERGE_AT 4                   /* level-1 blocks that trigger a merge */
#define MERGE_MAX_BYTES (1ull << 30) /* never merge into a block larger than this */
/* Downsampled blocks merge up to 16 GiB: a window costs 2.2 bytes in chunks
 * of 2880 windows and 5.2 in chunks of 145 (docs/benchmarks.md), so at
 * millions of series their chunks must span days. */
#define DS_MERGE_MAX_BYTES (16ull << 30)

typedef struct cref {
    uint32_t series;
    uint32_t file; /* index into the mapped files */
    uint64_t off;
} cref;

static int cmp_cref(const void *a, const void *b)
{
    const cref *x = a, *y = b;
    if (x->series != y->series) return x->series < y->series ? -1 : 1;
    if (x->file != y->file) return x->file < y->file ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

typedef struct lab_series {
    mw_label *labels;
    size_t n;
    uint32_t id;
    size_t first, count; /* range in the sorted crefs */
} lab_series;

static int cmp_lab(const void *a, const void *b)
{
    const lab_series *x = a, *y = b;
    return mw_labels_cmp(x->labels, x->n, y->labels, y->n);
}

void mw_store_add_block(mw_store *s, mw_block *b)
{
    pthread_mutex_lock(&s->blocks_mu);
    s->blocks = mw_xrealloc(s->blocks, (s->nblocks + 1) * sizeof(mw_block *));
    s->blocks[s->nblocks++] = b;
    pthread_mutex_unlock(&s->blocks_mu);
}

void mw_store_block_paths(mw_store *s, uint64_t seq, char *tmp, char *final, size_t size)
{
    snprintf(tmp, size, "%s/blocks/%010llu.blk.tmp", s->dir, (unsigned long long)seq);
    snprintf(final, size, "%s/blocks/%010llu.blk", s->dir, (unsigned long long)seq);
}

/* Compact chunk files [from, to] into a level-1 block. */
static int compact_files(mw_store *s, uint32_t from, uint32_t to)
{
    uint32_t nf = to - from + 1;
    const uint8_t **map = mw_xcalloc(nf, sizeof(uint8_t *));
    size_t *size = mw_xcalloc(nf, sizeof(size_t));
    cref *refs = NULL;
    size_t nrefs = 0, cap = 0;
    int rc = 0;
    for (uint32_t i = 0; i < nf; i++) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof(path), "%s/chunks/%08u", s->dir, from + i);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || st.st_size < 8) {
            if (fd >= 0) close(fd);
            continue;
        }
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (m == MAP_FAILED) continue;
        map[i] = m;
        size[i] = (size_t)st.st_size;
        for (size_t off = 8; off < size[i];) {
            mw_chunk_hdr h;
            if (mw_chunk_parse(map[i] + off, size[i] - off, &h) < 0) {
                mw_log(MW_LOG_WARN, "store",
                       "chunk file %s: bad record at offset %zu; the rest "
                       "of the file is skipped",
                       path, off);
                break;
            }
            if (nrefs == cap) {
                cap = cap ? cap * 2 : 4096;
                refs = mw_xrealloc(refs, cap * sizeof(cref));
            }
            refs[nrefs++] = (cref){h.series, i, off};
            off += MW_CHUNK_HDR_SIZE + h.nbytes + 4u;
        }
    }
    qsort(refs, nrefs, sizeof(cref), cmp_cref);
    /* Labels of each series, copied from the head under its read lock. */
    lab_series *ls = NULL;
    size_t nls = 0;
    mw_arena a;
    mw_arena_init(&a, 1 << 20);
    pthread_rwlock_rdlock(&s->lock);
    for (size_t i = 0; i < nrefs;) {
        size_t j = i;
        while (j < nrefs && refs[j].series == refs[i].series)
            j++;
        uint32_t id = refs[i].series;
        if (id < s->head.next_id && (mw_head_series(&s->head, id)->flags & MW_SERIES_LIVE)) {
            const mw_series *se = mw_head_series(&s->head, id);
            const uint32_t *pairs = mw_head_labels(&s->head, se);
            ls = mw_xrealloc(ls, (nls + 1) * sizeof(lab_series));
            lab_series *l = &ls[nls++];
            l->labels = mw_arena_alloc(&a, se->nlabels * sizeof(mw_label));
            l->n = se->nlabels;
            for (size_t k = 0; k < se->nlabels; k++) {
                const uint32_t *p = s->head.sym.pairs[pairs[k]];
                l->labels[k] = (mw_label){mw_arena_strdup(&a, s->head.sym.strs[p[0]]),
                                          mw_arena_strdup(&a, s->head.sym.strs[p[1]])};
            }
            l->id = id;
            l->first = i;
            l->count = j - i;
        }
        i = j;
    }
    pthread_rwlock_unlock(&s->lock);
    if (nls) qsort(ls, nls, sizeof(lab_series), cmp_lab);
    uint64_t seq = s->next_block_seq++;
    char tmp[PATH_MAX + 64], final[PATH_MAX + 64];
    mw_store_block_paths(s, seq, tmp, final, sizeof(tmp));
    mw_block_writer *w = mw_block_writer_new(tmp, &rc);
    mw_samples sm = {0};
    for (size_t i = 0; w && i < nls && rc == 0; i++) {
        sm.n = 0;
        for (size_t k = 0; k < ls[i].count; k++) {
            const cref *c = &refs[ls[i].first + k];
            mw_chunk_hdr h;
            const uint8_t *p = map[c->file] + c->off;
            if (mw_chunk_parse(p, size[c->file] - c->off, &h) < 0) continue;
            mw_gorilla_dec d;
            mw_gorilla_dec_init(&d, p + MW_CHUNK_HDR_SIZE, h.nbytes, h.n);
            int64_t t;
            double v;
            while (mw_gorilla_next(&d, &t, &v) == 1)
                if (sm.n == 0 || t > sm.t[sm.n - 1]) mw_samples_push(&sm, t, v);
        }
        rc = mw_block_writer_add(w, ls[i].labels, ls[i].n, sm.t, sm.v, sm.n);
    }
    free(sm.t);
    free(sm.v);
    mw_block_meta meta = {.seq = seq, .level = 1, .chunk_seq_min = from, .chunk_seq_max = to};
    if (w && rc == 0)
        rc = mw_block_writer_finish(w, &meta, final);
    else if (w)
        mw_block_writer_abort(w);
    for (uint32_t i = 0; i < nf; i++)
        if (map[i]) munmap((void *)map[i], size[i]);
    free(map);
    free(size);
    free(refs);
    free(ls);
    mw_arena_free(&a);
    if (rc < 0) {
        mw_log_once(MW_LOG_ERROR, "store", "compact",
                    "cannot write block %s: %s (the chunk "
                    "files are kept; compaction is retried later)",
                    final, strerror(-rc));
        return rc;
    }
    char err[256];
    mw_block *b = mw_block_open(final, err, sizeof(err));
    if (!b) {
        mw_log(MW_LOG_ERROR, "store", "block %s just written does not open: %s", final, err);
        return -EIO;
    }
    mw_store_add_block(s, b);
    /* The block holds the chunks now: the files go, and readers stop
     * following chains into them. */
    pthread_rwlock_wrlock(&s->lock);
    mw_head_forget_files_before(&s->head, to + 1);
    pthread_rwlock_unlock(&s->lock);
    for (uint32_t i = from; i <= to; i++) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof(path), "%s/chunks/%08u", s->dir, i);
        unlink(path);
    }
    mw_log(MW_LOG_DEBUG, "store",
           "compacted chunk files %u-%u into %s: %llu series, %llu "
           "samples, %llu bytes",
           from, to, final, (unsigned long long)meta.nseries, (unsigned long long)meta.nsamples,
           (unsigned long long)meta.size);
    return 0;
}

static const int raw_aggrs[] = {MW_AGGR_RAW};
static const int ds_aggrs[] = {MW_AGGR_COUNT, MW_AGGR_SUM, MW_AGGR_MIN, MW_AGGR_MAX,
                               MW_AGGR_SUBSET};

/* Merge blocks in[0, n) (oldest first, of one resolution) into one block of
 * the given level. */
static int merge_blocks(mw_store *s, mw_block **in, size_t n, uint32_t level)
{
    int64_t res = mw_block_get_meta(in[0])->resolution_ms;
    const int *aggrs = res ? ds_aggrs : raw_aggrs;
    size_t naggr = res ? 5 : 1;
    uint64_t seq = s->next_block_seq++;
    char tmp[PATH_MAX + 64], final[PATH_MAX + 64];
    mw_store_block_paths(s, seq, tmp, final, sizeof(tmp));
    int rc = 0;
    mw_block_writer *w = mw_block_writer_new(tmp, &rc);
    if (!w) return rc;
    size_t *pos = mw_xcalloc(n, sizeof(size_t));
    mw_label cur[256], lab[256];
    mw_samples sms[5] = {{0}};
    uint32_t cmin = UINT32_MAX, cmax = 0;
    for (size_t i = 0; i < n; i++) {
        const mw_block_meta *m = mw_block_get_meta(in[i]);
        if (m->chunk_seq_min && m->chunk_seq_min < cmin) cmin = m->chunk_seq_min;
        if (m->chunk_seq_max > cmax) cmax = m->chunk_seq_max;
    }
    for (;;) {
        /* The smallest label set among the blocks' next series. */
        size_t ncur = 0;
        int have = 0;
        for (size_t i = 0; i < n; i++) {
            size_t nl;
            if (pos[i] >= mw_block_get_meta(in[i])->nseries) continue;
            if (mw_block_labels(in[i], (uint32_t)pos[i], lab, 256, &nl) < 0) {
                pos[i]++;
                i--;
                continue;
            }
            if (!have || mw_labels_cmp(lab, nl, cur, ncur) < 0) {
                memcpy(cur, lab, nl * sizeof(mw_label));
                ncur = nl;
                have = 1;
            }
        }
        if (!have) break;
        for (size_t a = 0; a < naggr; a++)
            sms[a].n = 0;
        for (size_t i = 0; i < n; i++) {
            size_t nl;
            if (pos[i] >= mw_block_get_meta(in[i])->nseries) continue;
            if (mw_block_labels(in[i], (uint32_t)pos[i], lab, 256, &nl) < 0) continue;
            if (mw_labels_cmp(lab, nl, cur, ncur) != 0) continue;
            for (size_t a = 0; a < naggr; a++) {
                mw_samples part = {0}, *sm = &sms[a];
                mw_block_read_aggr(in[i], (uint32_t)pos[i], aggrs[a], INT64_MIN, INT64_MAX, &part);
                for (size_t k = 0; k < part.n; k++)
                    if (sm->n == 0 || part.t[k] > sm->t[sm->n - 1])
                        mw_samples_push(sm, part.t[k], part.v[k]);
                free(part.t);
                free(part.v);
            }
            pos[i]++;
        }
        mw_block_stream st[5];
        for (size_t a = 0; a < naggr; a++)
            st[a] = (mw_block_stream){aggrs[a], sms[a].t, sms[a].v, sms[a].n};
        rc = mw_block_writer_add_streams(w, cur, ncur, st, naggr);
        if (rc) break;
    }
    for (size_t a = 0; a < naggr; a++) {
        free(sms[a].t);
        free(sms[a].v);
    }
    free(pos);
    mw_block_meta meta = {.seq = seq,
                          .level = level,
                          .chunk_seq_min = cmin == UINT32_MAX ? 0 : cmin,
                          .chunk_seq_max = cmax,
                          .resolution_ms = res,
                          .nsources = (uint32_t)n};
    /* Its sources, so that a crash before they are deleted leaves nothing
     * counted twice (mw_store_drop_covered_blocks). */
    for (size_t i = 0; i < n && i < MW_BLOCK_MAX_SOURCES; i++)
        meta.sources[i] = mw_block_get_meta(in[i])->seq;
    if (rc == 0)
        rc = mw_block_writer_finish(w, &meta, final);
    else
        mw_block_writer_abort(w);
    if (rc < 0) return rc;
    char err[256];
    mw_block *b = mw_block_open(final, err, sizeof(err));
    if (!b) return -EIO;
    /* Swap the inputs for the merged block in one step for readers. */
    pthread_mutex_lock(&s->blocks_mu);
    size_t w2 = 0;
    for (size_t i = 0; i < s->nblocks; i++) {
        int merged = 0;
        for (size_t k = 0; k < n; k++)
            if (s->blocks[i] == in[k]) merged = 1;
        if (merged) {
            mw_block_doom(s->blocks[i]);
            mw_block_unref(s->blocks[i]);
        } else {
            s->blocks[w2++] = s->blocks[i];
        }
    }
    s->nblocks = w2;
    s->blocks = mw_xrealloc(s->blocks, (s->nblocks + 1) * sizeof(mw_block *));
    s->blocks[s->nblocks++] = b;
    pthread_mutex_unlock(&s->blocks_mu);
    return 0;
}

/* How long blocks of resolution res are kept (0: forever). */
static int64_t keep_of(const mw_store *s, int64_t res)
{
    for (size_t i = 0; i < s->opt.ndownsample; i++)
        if (s->opt.downsample[i].res_ms == res) return s->opt.downsample[i].keep_ms;
    return res ? 0 : s->opt.retention_ms;
}

static void drop_block(mw_store *s, size_t i, const char *why)
{
    mw_block *b = s->blocks[i];
    const mw_block_meta *m = mw_block_get_meta(b);
    char r[32] = "raw";
    if (m->resolution_ms) mw_format_duration(m->resolution_ms, r, sizeof(r));
    mw_log(MW_LOG_INFO, "store",
           "retention: deleting block %010llu (%s resolution, %s; %llu bytes)",
           (unsigned long long)m->seq, r, why, (unsigned long long)m->size);
    mw_block_doom(b);
    mw_block_unref(b);
    memmove(s->blocks + i, s->blocks + i + 1, (s->nblocks - i - 1) * sizeof(mw_block *));
    s->nblocks--;
}

/* By age, per resolution (raw blocks past --retention are downsampled and
 * deleted by mw_downsample_expired when there are resolutions); then by
 * size: while the folder is over the limit, the block whose newest sample
 * is oldest, of any resolution, never the newest raw block. */
static void retention(mw_store *s)
{
    int64_t now = mw_now_ms();
    uint64_t limit = s->opt.retention_bytes;
    uint64_t total = 0;
    if (limit) {
        mw_store_stats st;
        mw_store_get_stats(s, &st);
        total = st.bytes_on_disk;
    }
    pthread_mutex_lock(&s->blocks_mu);
    for (size_t i = 0; i < s->nblocks;) {
        const mw_block_meta *m = mw_block_get_meta(s->blocks[i]);
        int64_t keep = keep_of(s, m->resolution_ms);
        int raw_downsampled = m->resolution_ms == 0 && s->opt.ndownsample;
        if (keep && !raw_downsampled && m->maxt < now - keep) {
            total -= m->size < total ? m->size : total;
            drop_block(s, i, "older than its retention time");
            continue;
        }
        i++;
    }
    while (limit && total > limit && s->nblocks > 1) {
        /* Spared: the newest raw block (what was compacted last), else the
         * block with the newest samples. */
        size_t newest = 0, oldest = (size_t)-1;
        for (size_t i = 1; i < s->nblocks; i++) {
            const mw_block_meta *m = mw_block_get_meta(s->blocks[i]);
            const mw_block_meta *n = mw_block_get_meta(s->blocks[newest]);
            int raw = m->resolution_ms == 0, nraw = n->resolution_ms == 0;
            if ((raw && !nraw) || (raw == nraw && (raw ? m->seq > n->seq : m->maxt > n->maxt)))
                newest = i;
        }
        for (size_t i = 0; i < s->nblocks; i++) {
            if (i == newest) continue;
            if (oldest == (size_t)-1 ||
                mw_block_get_meta(s->blocks[i])->maxt < mw_block_get_meta(s->blocks[oldest])->maxt)
                oldest = i;
        }
        if (oldest == (size_t)-1) break;
        uint64_t size = mw_block_get_meta(s->blocks[oldest])->size;
        total -= size < total ? size : total;
        drop_block(s, oldest, "over the size limit");
    }
    pthread_mutex_unlock(&s->blocks_mu);
}

void mw_store_drop_covered_blocks(mw_store *s)
{
    for (size_t i = 0; i < s->nblocks;) {
        const mw_block_meta *m = mw_block_get_meta(s->blocks[i]);
        int covered = 0;
        for (size_t k = 0; k < s->nblocks && !covered; k++) {
            const mw_block_meta *b = mw_block_get_meta(s->blocks[k]);
            if (k == i || b->level <= m->level || b->resolution_ms != m->resolution_ms) continue;
            for (uint32_t j = 0; j < b->nsources; j++)
                if (b->sources[j] == m->seq) covered = 1;
        }
        if (!covered) {
            i++;
            continue;
        }
        mw_log(MW_LOG_INFO, "store",
               "block %010llu is a source of a merged block (a merge interrupted before "
               "deleting it): deleted",
               (unsigned long long)m->seq);
        mw_block_doom(s->blocks[i]);
        mw_block_unref(s->blocks[i]);
        memmove(s->blocks + i, s->blocks + i + 1, (s->nblocks - i - 1) * sizeof(mw_block *));
        s->nblocks--;
    }
}

int mw_store_compact(mw_store *s, int force)
{
    pthread_mutex_lock(&s->maint_mu);
    int rc = 0;
    if (force) {
        /* Everything the head holds goes into chunk files, a new file
         * starts, and a snapshot covers them: all of it can be compacted. */
        pthread_rwlock_wrlock(&s->lock);
        rc = mw_head_cut_all(&s->head);
        if (rc == 0) rc = mw_head_chunks_rotate(&s->head);
        pthread_rwlock_unlock(&s->lock);
        /* The snapshot also deletes the WAL it covers (snapshot.c). */
        if (rc == 0) rc = mw_snapshot_write(s);
        if (rc == 0) s->last_snapshot_ns = mw_mono_ns();
    } else {
        /* A chunk file older than two hours is sealed so that compaction
         * and retention keep up at low ingest rates. */
        pthread_rwlock_wrlock(&s->lock);
        struct stat st;
        if (s->head.fd >= 0 && fstat(s->head.fd, &st) == 0 && s->head.size > 8 &&
            mw_now_ms() / 1000 - st.st_ctime > 7200)
            mw_head_chunks_rotate(&s->head);
        pthread_rwlock_unlock(&s->lock);
    }
    uint32_t from = s->head.min_seq, to = s->snap_chunk_seq ? s->snap_chunk_seq - 1 : 0;
    if (rc == 0 && from && to >= from) rc = compact_files(s, from, to);
    /* Before any merge: a downsampled block's sources must still be its
     * own when a crash made it redo one (mw_downsample_expired). */
    if (rc == 0) rc = mw_downsample_expired(s);
    /* Merge blocks of one level once enough of them have piled up: level 1
     * into 2, 2 into 3 (each level of each resolution a consecutive run in
     * the list); downsampled blocks, fewer and smaller, up to level 5. */
    for (size_t r = 0; r <= s->opt.ndownsample && rc == 0; r++)
        for (uint32_t level = 1; level <= (r ? 4u : 2u) && rc == 0; level++) {
            int64_t res = r ? s->opt.downsample[r - 1].res_ms : 0;
            pthread_mutex_lock(&s->blocks_mu);
            mw_block *in[MERGE_AT * 4];
            size_t n = 0;
            uint64_t bytes = 0;
            for (size_t i = 0; i < s->nblocks && n < MERGE_AT * 4; i++) {
                const mw_block_meta *m = mw_block_get_meta(s->blocks[i]);
                if (m->resolution_ms != res) continue;
                if (m->level != level ||
                    bytes + m->size > (res ? DS_MERGE_MAX_BYTES : MERGE_MAX_BYTES)) {
                    if (n) break;
                    continue;
                }
                bytes += m->size;
                in[n++] = s->blocks[i];
                mw_block_ref(s->blocks[i]);
            }
            pthread_mutex_unlock(&s->blocks_mu);
            if (n >= MERGE_AT) rc = merge_blocks(s, in, n, level + 1);
            for (size_t i = 0; i < n; i++)
                mw_block_unref(in[i]);
        }
    retention(s);
    pthread_mutex_unlock(&s->maint_mu);
    return rc;
}
