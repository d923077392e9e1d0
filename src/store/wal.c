/* wal.c - write-ahead log segments, group commit, replay. */
#include "wal.h"
#include "../core/bytes.h"
#include "../core/log.h"
#include "../core/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static const char wal_magic[8] = {'M', 'W', 'W', 'A', 'L', '0', '0', '1'};

struct mw_wal {
    char dir[PATH_MAX];
    int sync;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint8_t *buf, *spare;
    size_t len, cap, spare_cap;
    uint64_t appended; /* LSN past the last buffered record */
    uint64_t durable;  /* LSN up to which records are durable */
    uint64_t failed_upto;
    int err;
    int flushing;
    /* A new segment is to start at this LSN (0: none asked for): the
     * snapshot covering everything before it is written, so the segments
     * before it can go (mw_wal_cut_at). */
    uint64_t cut_at;
    /* current segment (touched by the flushing thread only) */
    int fd;
    uint64_t seg_start;
    uint64_t seg_size;
    uint64_t segment_max; /* rotate at this size */
    mw_wal_stats stats;
};

static void seg_name(const char *dir, uint64_t start, char *out, size_t size)
{
    snprintf(out, size, "%s/%016llx", dir, (unsigned long long)start);
}

static int open_segment(mw_wal *w, uint64_t start)
{
    char path[PATH_MAX + 32];
    seg_name(w->dir, start, path, sizeof(path));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    if (write(fd, wal_magic, sizeof(wal_magic)) != (ssize_t)sizeof(wal_magic)) {
        int e = errno ? errno : ENOSPC;
        close(fd);
        unlink(path);
        return -e;
    }
    if (w->sync && (fdatasync(fd) < 0 || mw_sync_folder(w->dir) < 0)) {
        int e = errno ? errno : EIO;
        close(fd);
        unlink(path);
        return -e;
    }
    if (w->fd >= 0) close(w->fd);
    w->fd = fd;
    w->seg_start = start;
    w->seg_size = sizeof(wal_magic);
    w->stats.segments++;
    return 0;
}

mw_wal *mw_wal_open(const char *dir, uint64_t start_lsn, int sync, uint64_t segment_bytes, int *err)
{
    mw_wal *w = mw_xcalloc(1, sizeof(*w));
    w->segment_max = segment_bytes ? segment_bytes : MW_WAL_SEGMENT_MAX;
    mw_strlcpy(w->dir, dir, sizeof(w->dir));
    w->sync = sync;
    w->fd = -1;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->appended = w->durable = start_lsn;
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        *err = -errno;
        mw_wal_close(w);
        return NULL;
    }
    int rc = open_segment(w, start_lsn);
    if (rc < 0) {
        *err = rc;
        mw_wal_close(w);
        return NULL;
    }
    return w;
}

uint64_t mw_wal_append(mw_wal *w, uint8_t type, const void *payload, size_t len)
{
    uint8_t hdr[9];
    mw_put_le32(hdr, (uint32_t)len);
    uint32_t crc = (uint32_t)crc32(0, &type, 1);
    crc = (uint32_t)crc32(crc, payload, (uInt)len);
    mw_put_le32(hdr + 4, crc);
    hdr[8] = type;
    pthread_mutex_lock(&w->mu);
    size_t need = w->len + sizeof(hdr) + len;
    if (need > w->cap) {
        size_t cap = w->cap ? w->cap : 1 << 16;
        while (cap < need)
            cap *= 2;
        w->buf = mw_xrealloc(w->buf, cap);
        w->cap = cap;
    }
    memcpy(w->buf + w->len, hdr, sizeof(hdr));
    memcpy(w->buf + w->len + sizeof(hdr), payload, len);
    w->len = need;
    w->appended += sizeof(hdr) + len;
    uint64_t lsn = w->appended;
    pthread_mutex_unlock(&w->mu);
    return lsn;
}

/* Write a batch to the current segment (rotating first when it is full) and
 * make it durable. On failure the segment is cut back to where it was. */
static int write_batch(mw_wal *w, const uint8_t *p, size_t n, uint64_t first_lsn)
{
    if (w->seg_size >= w->segment_max || w->fd < 0) {
        int rc = open_segment(w, first_lsn);
        if (rc < 0) return rc;
    }
    uint64_t before = w->seg_size;
    size_t off = 0;
    int rc = 0;
    while (off < n) {
        ssize_t k = pwrite(w->fd, p + off, n - off, (off_t)(before + off));
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            rc = k < 0 ? -errno : -ENOSPC;
            break;
        }
        off += (size_t)k;
    }
    if (rc == 0 && w->sync) {
        if (fdatasync(w->fd) < 0) rc = -errno;
        w->stats.fsyncs++;
    }
    if (rc < 0) {
        w->stats.write_errors++;
        if (ftruncate(w->fd, (off_t)before) < 0) {
            /* Nothing more to do: replay cuts a torn tail off anyway. */
        }
        return rc;
    }
    w->seg_size = before + n;
    w->stats.bytes += n;
    return 0;
}

/* Become the leader (w->mu held, not flushing) and flush the buffer. */
static int lead_flush(mw_wal *w)
{
    w->flushing = 1;
    uint8_t *data = w->buf;
    size_t n = w->len, cap = w->cap;
    uint64_t target = w->appended, first = w->durable;
    w->buf = w->spare;
    w->cap = w->spare_cap;
    w->len = 0;
    w->spare = NULL;
    w->spare_cap = 0;
    uint64_t cut = w->cut_at;
    w->cut_at = 0;
    pthread_mutex_unlock(&w->mu);
    int rc = 0;
    if (cut && cut >= first && cut <= target && w->seg_start < cut) {
        /* Records before the cut end the current segment; the rest start
         * the next one, so that truncation can delete whole segments. */
        size_t before = (size_t)(cut - first);
        rc = before ? write_batch(w, data, before, first) : 0;
        if (rc < 0) {
            pthread_mutex_lock(&w->mu);
            if (!w->cut_at) w->cut_at = cut; /* for the retry */
            pthread_mutex_unlock(&w->mu);
        } else {
            first = cut;
            if (before) memmove(data, data + before, n - before);
            n -= before;
            int orc = open_segment(w, cut);
            if (orc < 0)
                mw_log(MW_LOG_WARN, "store",
                       "cannot start a new WAL segment in %s: %s (the old segments are "
                       "deleted at a later snapshot)",
                       w->dir, strerror(-orc));
        }
    } else if (cut && cut > target) {
        pthread_mutex_lock(&w->mu);
        if (!w->cut_at) w->cut_at = cut; /* not reached yet: a later flush */
        pthread_mutex_unlock(&w->mu);
    }
    if (rc == 0 && n) rc = write_batch(w, data, n, first);
    pthread_mutex_lock(&w->mu);
    /* Log each change between failing and working once, not per write. */
    if (rc < 0 && w->err == 0)
        mw_log(MW_LOG_ERROR, "store",
               "cannot write the WAL in %s: %s; ingest is refused with "
               "503 until it works again (nothing stored is lost; retried every second)",
               w->dir, strerror(-rc));
    if (rc == 0 && w->err != 0)
        mw_log(MW_LOG_INFO, "store", "the WAL in %s is writable again; ingest resumes", w->dir);
    if (rc == 0) {
        w->durable = target;
        w->err = 0;
        if (cap > (128u << 10)) {
            /* Keep a small spare only: a large one (the first cycle's series
             * records, a remote-write batch, a second of a large node's
             * samples) would stay resident beside the buffer in use, and
             * growing a new one costs a few page faults per flush. */
            free(data);
        } else if (!w->spare || cap > w->spare_cap) {
            free(w->spare);
            w->spare = data;
            w->spare_cap = cap;
        } else {
            free(data);
        }
    } else {
        /* What went before a cut is durable; keep the rest, in order, ahead
         * of what was buffered meanwhile. */
        w->durable = first;
        size_t need = n + w->len;
        if (cap < need) {
            data = mw_xrealloc(data, need);
            cap = need;
        }
        /* Nothing may have been buffered meanwhile: no buffer at all then
         * (memcpy's source must not be NULL even for 0 bytes). */
        if (w->len) memcpy(data + n, w->buf, w->len);
        free(w->buf);
        w->buf = data;
        w->cap = cap;
        w->len = need;
        w->failed_upto = target;
        w->err = rc;
    }
    w->flushing = 0;
    pthread_cond_broadcast(&w->cv);
    return rc;
}

int mw_wal_wait(mw_wal *w, uint64_t lsn)
{
    int rc = 0;
    pthread_mutex_lock(&w->mu);
    while (w->durable < lsn) {
        if (w->flushing) {
            pthread_cond_wait(&w->cv, &w->mu);
            continue;
        }
        if (w->err && w->failed_upto >= lsn) {
            rc = w->err;
            break;
        }
        int r = lead_flush(w);
        if (r < 0 && w->durable < lsn) {
            rc = r;
            break;
        }
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

int mw_wal_flush(mw_wal *w)
{
    pthread_mutex_lock(&w->mu);
    uint64_t lsn = w->appended;
    while (w->flushing)
        pthread_cond_wait(&w->cv, &w->mu);
    int rc = w->durable < lsn || w->cut_at ? lead_flush(w) : 0;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void mw_wal_cut_at(mw_wal *w, uint64_t lsn)
{
    pthread_mutex_lock(&w->mu);
    w->cut_at = lsn;
    pthread_mutex_unlock(&w->mu);
}

mw_wal_status mw_wal_status_of(mw_wal *w)
{
    pthread_mutex_lock(&w->mu);
    mw_wal_status st = {.error = w->err, .appended = w->appended, .buffered = w->len};
    pthread_mutex_unlock(&w->mu);
    return st;
}

void mw_wal_close(mw_wal *w)
{
    if (!w) return;
    if (w->fd >= 0) {
        mw_wal_flush(w);
        close(w->fd);
    }
    free(w->buf);
    free(w->spare);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

/* ---- segments on disk ---- */

typedef struct seglist {
    uint64_t *start;
    size_t n;
} seglist;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int list_segments(const char *dir, seglist *out)
{
    out->start = NULL;
    out->n = 0;
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? 0 : -errno;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strlen(e->d_name) != 16) continue;
        char *end;
        unsigned long long v = strtoull(e->d_name, &end, 16);
        if (*end) continue;
        if (out->n == cap) {
            cap = cap ? cap * 2 : 16;
            out->start = mw_xrealloc(out->start, cap * sizeof(uint64_t));
        }
        out->start[out->n++] = v;
    }
    closedir(d);
    if (out->n) qsort(out->start, out->n, sizeof(uint64_t), cmp_u64);
    return 0;
}

void mw_wal_truncate_before(mw_wal *w, uint64_t lsn)
{
    seglist l;
    if (list_segments(w->dir, &l) < 0) return;
    pthread_mutex_lock(&w->mu);
    uint64_t current = w->seg_start;
    pthread_mutex_unlock(&w->mu);
    for (size_t i = 0; i + 1 < l.n; i++) {
        /* Segment i ends where segment i+1 starts. */
        if (l.start[i + 1] <= lsn && l.start[i] < current) {
            char path[PATH_MAX + 32];
            seg_name(w->dir, l.start[i], path, sizeof(path));
            unlink(path);
        }
    }
    free(l.start);
}

void mw_wal_get_stats(mw_wal *w, mw_wal_stats *out)
{
    pthread_mutex_lock(&w->mu);
    *out = w->stats;
    pthread_mutex_unlock(&w->mu);
    out->disk_bytes = 0;
    seglist l;
    if (list_segments(w->dir, &l) < 0) return;
    for (size_t i = 0; i < l.n; i++) {
        char path[PATH_MAX + 32];
        struct stat st;
        seg_name(w->dir, l.start[i], path, sizeof(path));
        if (stat(path, &st) == 0) out->disk_bytes += (uint64_t)st.st_size;
    }
    free(l.start);
}

size_t mw_wal_parse(const uint8_t *p, size_t n, mw_wal_record_fn fn, void *arg, uint64_t *records,
                    char *reason, size_t reasonsize)
{
    size_t off = 0;
    reason[0] = '\0';
    while (off < n) {
        if (n - off < 9) {
            snprintf(reason, reasonsize, "torn record header (%zu bytes)", n - off);
            break;
        }
        uint32_t len = mw_get_le32(p + off), crc = mw_get_le32(p + off + 4);
        if (len > MW_WAL_MAX_RECORD || len > n - off - 9) {
            snprintf(reason, reasonsize, "record length %u runs past the end", len);
            break;
        }
        uint32_t c = (uint32_t)crc32(0, p + off + 8, len + 1);
        if (c != crc) {
            snprintf(reason, reasonsize, "checksum mismatch");
            break;
        }
        if (fn && fn(arg, p[off + 8], p + off + 9, len) != 0) {
            snprintf(reason, reasonsize, "record rejected by its reader");
            break;
        }
        if (records) (*records)++;
        off += 9 + (size_t)len;
    }
    return off;
}

/* Where the record after the one at p[off] starts, when that record fails
 * its checksum but its length still leads exactly to a whole, valid record:
 * a flipped byte in its payload, checksum or type. Replay skips that record
 * only and goes on. 0 when the length leads nowhere valid (a torn tail, or
 * the length itself damaged): the rest of the segment cannot be framed. */
static size_t next_after_damaged(const uint8_t *p, size_t off, size_t n)
{
    if (n - off < 9) return 0;
    uint32_t len = mw_get_le32(p + off);
    if (len > MW_WAL_MAX_RECORD || len > n - off - 9) return 0;
    size_t next = off + 9 + (size_t)len;
    if (n - next < 9) return 0;
    uint32_t nlen = mw_get_le32(p + next);
    if (nlen > MW_WAL_MAX_RECORD || nlen > n - next - 9) return 0;
    return (uint32_t)crc32(0, p + next + 8, nlen + 1) == mw_get_le32(p + next + 4) ? next : 0;
}

typedef struct skip_ctx {
    mw_wal_record_fn fn;
    void *arg;
    uint64_t lsn, from;
} skip_ctx;

static int skip_before(void *arg, uint8_t type, const uint8_t *p, size_t n)
{
    skip_ctx *s = arg;
    uint64_t at = s->lsn;
    s->lsn += 9 + n;
    if (at < s->from) return 0;
    return s->fn ? s->fn(s->arg, type, p, n) : 0;
}

int mw_wal_replay(const char *dir, uint64_t from_lsn, mw_wal_record_fn fn, void *arg,
                  uint64_t *end_lsn, mw_wal_replay_report *rep)
{
    memset(rep, 0, sizeof(*rep));
    *end_lsn = from_lsn;
    seglist l;
    int rc = list_segments(dir, &l);
    if (rc < 0) return rc;
    for (size_t i = 0; i < l.n; i++) {
        uint64_t next = i + 1 < l.n ? l.start[i + 1] : UINT64_MAX;
        if (next <= from_lsn && i + 1 < l.n) continue; /* wholly before the snapshot */
        char path[PATH_MAX + 32];
        seg_name(dir, l.start[i], path, sizeof(path));
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat st;
        if (fstat(fd, &st) < 0) {
            close(fd);
            continue;
        }
        size_t size = (size_t)st.st_size;
        uint8_t *map = NULL;
        if (size > 0) {
            map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (map == MAP_FAILED) {
                close(fd);
                continue;
            }
            madvise(map, size, MADV_SEQUENTIAL);
        }
        rep->segments++;
        size_t good;
        char reason[128] = "";
        if (size < sizeof(wal_magic) || memcmp(map, wal_magic, sizeof(wal_magic)) != 0) {
            good = 0;
            snprintf(reason, sizeof(reason), "bad segment header");
        } else {
            skip_ctx s = {fn, arg, l.start[i], from_lsn};
            good = sizeof(wal_magic);
            for (;;) {
                good += mw_wal_parse(map + good, size - good, skip_before, &s, &rep->records,
                                     reason, sizeof(reason));
                if (good == size || strcmp(reason, "checksum mismatch") != 0) break;
                size_t resume = next_after_damaged(map, good, size);
                if (!resume) break;
                /* One damaged record loses itself, not the rest. */
                mw_log(MW_LOG_WARN, "store",
                       "WAL segment %s: checksum mismatch at offset %zu; skipped that record "
                       "(%zu bytes), the records after it are replayed",
                       path, good, resume - good);
                rep->skipped_records++;
                rep->skipped_bytes += resume - good;
                s.lsn = l.start[i] + (resume - sizeof(wal_magic));
                good = resume;
                reason[0] = '\0';
            }
        }
        if (map) munmap(map, size);
        rep->bytes += good;
        if (good < size) {
            rep->cut_bytes += size - good;
            snprintf(rep->cut_segment, sizeof(rep->cut_segment), "%016llx",
                     (unsigned long long)l.start[i]);
            rep->cut_offset = good;
            mw_strlcpy(rep->reason, reason, sizeof(rep->reason));
            mw_log(MW_LOG_WARN, "store",
                   "WAL segment %s: %s at offset %zu; cut off %zu bytes (records after it "
                   "were never acknowledged unless this is not the last segment)",
                   path, reason, good, size - good);
            if (good < sizeof(wal_magic)) {
                close(fd);
                unlink(path);
                if (i + 1 == l.n) *end_lsn = l.start[i] > from_lsn ? l.start[i] : from_lsn;
                continue;
            }
            if (ftruncate(fd, (off_t)good) < 0)
                mw_log(MW_LOG_ERROR, "store", "WAL segment %s: cannot cut the tail: %s", path,
                       strerror(errno));
        }
        close(fd);
        uint64_t seg_end = l.start[i] + (good - sizeof(wal_magic));
        if (seg_end > *end_lsn) *end_lsn = seg_end;
    }
    free(l.start);
    return 0;
}
