/* snapshot.c - head snapshots for a fast restart.
 *
 * A snapshot is the whole head in one file: symbols, label pairs, and every
 * live series with its Gorilla state and open chunk, plus the WAL position
 * (LSN) and chunk-file position it reflects. Restarting loads it with no
 * string hashing (each series' hash is stored) and replays only the WAL
 * after it. Written to a temporary file, fsynced, renamed; the WAL segments
 * that it covers are deleted afterwards (see below). The
 * head is serialised under the store's read lock in pieces of 64 KiB, each
 * written to the file as it fills (bounded memory: the whole head in one
 * buffer was 150 MB at a million series; writers wait for the copies into
 * the page cache too, a fraction of a second per million series); the
 * fsyncs come after the lock is released.
 *
 * One generation is kept: the new snapshot is written beside the old one,
 * fsynced, renamed over it and the folder fsynced; only then are the WAL
 * segments before its LSN deleted (the WAL starts a new segment exactly
 * there, mw_wal_cut_at, so that none of them holds a record the snapshot
 * lacks). A crash at any point leaves either the old snapshot and the WAL
 * after it, or the new one and the WAL after it: the disk holds one head
 * and, for a moment, the one being written. (Two generations were kept
 * before, as a fallback for an unreadable latest snapshot: 41 % of the data
 * folder at a million series. A head.snapshot.prev left by such a version
 * is still used when head.snapshot is missing or unusable, and deleted by
 * the first snapshot written.)
 *
 * Layout (little-endian): "MWSNAP01", u64 lsn, u32 chunk seq, u64 chunk
 * size, u32 next id, u32 symbols {uvarint len, bytes}, u32 pairs {uvarint
 * name, uvarint value}, u32 series {uvarint id, u64 hash, u8 nlabels,
 * uvarint pair ids, u64 last ref, u64 t, u64 delta, u64 vbits, u32 nbits,
 * u16 n, u8 leading, u8 trailing, u8 flags, chunk bytes}, u32 crc32 of all
 * that precedes. */
#include "../core/bytes.h"
#include "../core/log.h"
#include "../core/util.h"
#include "store_internal.h"
#include "varint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static const char snap_magic[8] = {'M', 'W', 'S', 'N', 'A', 'P', '0', '1'};

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return k < 0 ? -errno : -ENOSPC;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The snapshot file as it is written: pieces of at most SNAP_PIECE bytes
 * (and one record), so that memory stays bounded whatever the head's size;
 * the first write error stops the writing. */
#define SNAP_PIECE (64u << 10)
typedef struct snap_out {
    int fd, rc;
    uLong crc;
    mw_buf b;
} snap_out;

static void out_flush(snap_out *o)
{
    if (o->rc == 0 && o->b.len) {
        o->crc = crc32(o->crc, (const Bytef *)o->b.data, (uInt)o->b.len);
        o->rc = write_all(o->fd, o->b.data, o->b.len);
    }
    mw_buf_clear(&o->b);
}

static int out_piece_done(snap_out *o)
{
    if (o->b.len >= SNAP_PIECE) out_flush(o);
    return o->rc;
}

int mw_snapshot_write(mw_store *s)
{
    char tmp[PATH_MAX + 32], final[PATH_MAX + 32], prev[PATH_MAX + 32];
    mw_store_path(s, "head.snapshot.tmp", tmp, sizeof(tmp));
    mw_store_path(s, MW_SNAPSHOT_FILE, final, sizeof(final));
    mw_store_path(s, MW_SNAPSHOT_PREV_FILE, prev, sizeof(prev));
    snap_out o = {.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
    o.rc = o.fd < 0 ? -errno : 0;
    o.crc = crc32(0, NULL, 0);
    mw_buf_init(&o.b, 0);
    mw_buf *b = &o.b;
    /* Written under the read lock, piece by piece: writers wait for the
     * copy into the page cache as well (the fsyncs come after the lock). */
    pthread_rwlock_rdlock(&s->lock);
    mw_head *h = &s->head;
    uint64_t lsn = mw_wal_status_of(s->wal).appended;
    /* Appends wait for the lock: the WAL's next segment starts exactly at
     * what the snapshot covers. */
    mw_wal_cut_at(s->wal, lsn);
    uint32_t seq = h->seq;
    uint64_t csize = h->size;
    /* The chunk file as it is now (a rotation may close h->fd meanwhile). */
    int chunk_fd = h->fd >= 0 && !s->opt.no_sync ? dup(h->fd) : -1;
    if (chunk_fd < 0 && h->fd >= 0 && !s->opt.no_sync) fdatasync(h->fd); /* no fd left to dup */
    mw_buf_append(b, snap_magic, sizeof(snap_magic));
    mw_buf_u64(b, lsn);
    mw_buf_u32(b, seq);
    mw_buf_u64(b, csize);
    mw_buf_u32(b, h->next_id);
    mw_buf_u32(b, h->sym.n);
    for (uint32_t i = 0; i < h->sym.n && out_piece_done(&o) == 0; i++) {
        mw_buf_uvarint(b, h->sym.lens[i]);
        mw_buf_append(b, h->sym.strs[i], h->sym.lens[i]);
    }
    mw_buf_u32(b, h->sym.npairs);
    for (uint32_t i = 0; i < h->sym.npairs && out_piece_done(&o) == 0; i++) {
        mw_buf_uvarint(b, h->sym.pairs[i][0]);
        mw_buf_uvarint(b, h->sym.pairs[i][1]);
    }
    mw_buf_u32(b, h->nlive);
    for (uint32_t id = 0; id < h->next_id && out_piece_done(&o) == 0; id++) {
        const mw_series *se = mw_head_series(h, id);
        if (!(se->flags & MW_SERIES_LIVE)) continue;
        mw_buf_uvarint(b, id);
        mw_buf_u64(b, mw_head_series_hash(h, se));
        uint8_t nl = se->nlabels;
        mw_buf_append(b, &nl, 1);
        const uint32_t *pairs = mw_head_labels(h, se);
        for (size_t i = 0; i < nl; i++)
            mw_buf_uvarint(b, pairs[i]);
        mw_buf_u64(b, se->last_ref);
        mw_buf_u64(b, (uint64_t)se->enc.t);
        mw_buf_u64(b, se->enc.delta);
        mw_buf_u64(b, se->enc.vbits);
        mw_buf_u32(b, se->enc.nbits);
        uint8_t tail[5] = {(uint8_t)se->enc.n, (uint8_t)(se->enc.n >> 8), se->enc.leading,
                           se->enc.trailing, se->flags};
        mw_buf_append(b, tail, sizeof(tail));
        if (se->enc.n) mw_buf_append(b, se->chunk, mw_gorilla_bytes(&se->enc));
    }
    out_flush(&o);
    pthread_rwlock_unlock(&s->lock);
    mw_buf_u32(b, (uint32_t)o.crc); /* of everything before it */
    if (o.rc == 0) o.rc = write_all(o.fd, b->data, b->len);
    mw_buf_free(b);

    /* The chunks the snapshot points at must be durable before it is. */
    if (chunk_fd >= 0) {
        fdatasync(chunk_fd);
        close(chunk_fd);
    }
    int rc = o.rc;
    if (rc == 0 && !s->opt.no_sync && fsync(o.fd) < 0) rc = -errno;
    if (o.fd >= 0) close(o.fd);
    /* Replaces the old snapshot in one step: a crash before it leaves the
     * old one, which the WAL still covers. */
    if (rc == 0 && rename(tmp, final) < 0) rc = -errno;
    if (rc < 0) {
        unlink(tmp);
        mw_log_once(MW_LOG_ERROR, "store", "snapshot",
                    "cannot write the head snapshot %s: %s "
                    "(the WAL is kept; restart takes longer)",
                    final, strerror(-rc));
        return rc;
    }
    /* The rename must be on disk before the WAL it replaces goes. */
    if (!s->opt.no_sync) rc = mw_sync_folder(s->dir);
    if (rc < 0) {
        mw_log_once(MW_LOG_ERROR, "store", "snapshot",
                    "cannot sync the data folder %s after writing %s: %s (the WAL is kept)", s->dir,
                    final, strerror(-rc));
        return rc;
    }
    unlink(prev); /* a previous generation of an older version, if any */
    s->snap_lsn = lsn;
    s->snap_chunk_seq = seq;
    /* Ends the WAL segment at lsn now if no flush did meanwhile. */
    mw_wal_flush(s->wal);
    mw_wal_truncate_before(s->wal, lsn);
    return 0;
}

int mw_snapshot_load(mw_store *s, const char *name, uint64_t *lsn, uint32_t *chunk_seq,
                     uint64_t *chunk_size)
{
    char path[PATH_MAX + 32];
    mw_store_path(s, name, path, sizeof(path));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 1;
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size < (off_t)(sizeof(snap_magic) + 4)) {
        close(fd);
        mw_log(MW_LOG_ERROR, "store", "head snapshot %s is truncated; ignored", path);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    uint8_t *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return -1;
    madvise(map, size, MADV_SEQUENTIAL);
    mw_rd r = {map, size - 4, 0, 0};
    mw_rd tail = {map + size - 4, 4, 0, 0};
    uint32_t crc = mw_rd_u32(&tail);
    int rc = 0;
    if (memcmp(map, snap_magic, sizeof(snap_magic)) != 0 ||
        crc != (uint32_t)crc32(0, map, (uInt)(size - 4))) {
        mw_log(MW_LOG_ERROR, "store",
               "head snapshot %s is corrupt (bad magic or checksum); ignored", path);
        munmap(map, size);
        return -1;
    }
    r.off = sizeof(snap_magic);
    mw_head *h = &s->head;
    *lsn = mw_rd_u64(&r);
    *chunk_seq = mw_rd_u32(&r);
    *chunk_size = mw_rd_u64(&r);
    uint32_t next_id = mw_rd_u32(&r);
    uint32_t nsym = mw_rd_u32(&r);
    for (uint32_t i = 0; i < nsym && !r.bad; i++) {
        uint64_t len = mw_rd_uvarint(&r);
        const uint8_t *p = mw_rd_bytes(&r, len);
        if (!p) break;
        if (mw_sym_intern(&h->sym, (const char *)p, len) != i) r.bad = 1;
    }
    uint32_t npairs = mw_rd_u32(&r);
    for (uint32_t i = 0; i < npairs && !r.bad; i++) {
        uint64_t a = mw_rd_uvarint(&r), b = mw_rd_uvarint(&r);
        if (a >= h->sym.n || b >= h->sym.n ||
            mw_pair_intern(&h->sym, (uint32_t)a, (uint32_t)b) != i)
            r.bad = 1;
    }
    uint32_t nser = mw_rd_u32(&r);
    /* Size the series index once instead of growing it step by step. */
    uint32_t want = 1024;
    while ((uint64_t)want * 3 < (uint64_t)nser * 4 + 4)
        want *= 2;
    if (want > h->nslots) {
        free(h->slots);
        h->slots = mw_xcalloc(want, sizeof(uint64_t));
        h->nslots = want;
    }
    mw_label lab[255];
    for (uint32_t k = 0; k < nser && !r.bad; k++) {
        uint64_t id = mw_rd_uvarint(&r);
        uint64_t hash = mw_rd_u64(&r);
        const uint8_t *nlp = mw_rd_bytes(&r, 1);
        if (!nlp || *nlp == 0 || id >= next_id) {
            r.bad = 1;
            break;
        }
        size_t nl = *nlp;
        for (size_t i = 0; i < nl; i++) {
            uint64_t pair = mw_rd_uvarint(&r);
            if (r.bad || pair >= h->sym.npairs) {
                r.bad = 1;
                break;
            }
            lab[i] =
                (mw_label){h->sym.strs[h->sym.pairs[pair][0]], h->sym.strs[h->sym.pairs[pair][1]]};
        }
        if (r.bad) break;
        uint32_t sid = mw_head_create(h, lab, nl, hash, (uint32_t)id);
        mw_series *se = mw_head_series(h, sid);
        se->last_ref = mw_rd_u64(&r);
        se->enc.t = (int64_t)mw_rd_u64(&r);
        se->enc.delta = mw_rd_u64(&r);
        se->enc.vbits = mw_rd_u64(&r);
        se->enc.nbits = mw_rd_u32(&r);
        const uint8_t *t5 = mw_rd_bytes(&r, 5);
        if (!t5) break;
        se->enc.n = mw_get_le16(t5);
        se->enc.leading = t5[2];
        se->enc.trailing = t5[3];
        se->flags = (uint8_t)(t5[4] | MW_SERIES_LIVE);
        if (se->enc.n) {
            size_t nb = mw_gorilla_bytes(&se->enc);
            const uint8_t *cb = mw_rd_bytes(&r, nb);
            if (!cb || nb > 65535 - 32) {
                r.bad = 1;
                break;
            }
            mw_head_chunk_resize(h, se, ((nb + 8 + 15) & ~(size_t)15) - 8);
            memcpy(se->chunk, cb, nb);
        }
    }
    if (r.bad) {
        /* The checksum matched, so this is a bug or a format change: start
         * from the WAL alone rather than trust half a head. */
        mw_log(MW_LOG_ERROR, "store", "head snapshot %s does not parse; ignored", path);
        rc = -1;
    } else if (next_id > h->next_id) {
        h->next_id = next_id; /* ids are never reused */
        while ((h->next_id >> 12) >= h->nslabs) {
            h->slabs = mw_xrealloc(h->slabs, (h->nslabs + 1) * sizeof(mw_series *));
            h->slabs[h->nslabs++] = mw_xcalloc(4096, sizeof(mw_series));
        }
    }
    munmap(map, size);
    return rc;
}
